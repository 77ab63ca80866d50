/**
 * How DurableTask.AzureStorage waits between polls of an empty queue (Azure/durabletask
 * src/DurableTask.AzureStorage/BackoffPollingHelper.cs, with the minimum of 50 ms from
 * Messaging/TaskHubQueue.cs): a randomized exponential backoff from the minimum up to
 * maxQueuePollingInterval. `reset()` is the helper's Reset (an AsyncAutoResetEvent set): it ends a
 * wait in progress at once, or makes the next wait end at once, and restarts the backoff from the
 * minimum. The provider calls it when a poll found messages and when this process adds a message to
 * the queue (TaskHubQueue.AddMessageAsync: "Wake up the queue polling thread"), so a message sent by
 * this very process is polled at once; one sent by another process waits for the next poll.
 */
const RANDOMIZATION_FACTOR = 0.2;

export class QueuePoller {
  #current = 0;
  #exponent = 0;
  #signaled = false;
  #timer: NodeJS.Timeout | undefined;
  #release: (() => void) | undefined;

  constructor(
    private readonly minimumMs: number,
    private readonly maximumMs: number,
    private readonly random: () => number = Math.random,
  ) {}

  /** The wait the next empty poll will take (for tests and logs). */
  get currentIntervalMs(): number {
    return this.#current;
  }

  /** A poll found messages, or this process sent a message to the queue (BackoffPollingHelper.Reset). */
  reset(): void {
    this.#signaled = true;
    if (this.#release !== undefined) this.interrupt();
  }

  /** Waits before polling an empty queue again; `interrupt()` ends the wait (a stop). */
  async wait(): Promise<void> {
    if (this.#signaled) {
      this.#signaled = false;
      this.#current = this.minimumMs;
      this.#exponent = 1;
      return;
    }
    await new Promise<void>((resolve) => {
      this.#release = resolve;
      this.#timer = setTimeout(resolve, this.#current);
    });
    this.#timer = undefined;
    this.#release = undefined;
    if (this.#signaled) {
      // Woken by reset() mid-wait: UpdateDelay(signaled: true).
      this.#signaled = false;
      this.#current = this.minimumMs;
      this.#exponent = 1;
      return;
    }
    this.#grow();
  }

  interrupt(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#release?.();
  }

  // RandomizedExponentialBackoffStrategy.UpdateDelay(executionSucceeded: false).
  #grow(): void {
    if (this.#current === this.maximumMs) return;
    let next = this.minimumMs;
    if (this.#exponent > 0) {
      const factor = 1 - RANDOMIZATION_FACTOR + this.random() * 2 * RANDOMIZATION_FACTOR;
      next += factor * Math.pow(2, this.#exponent - 1) * this.minimumMs;
    }
    if (next < this.maximumMs) {
      this.#current = next;
      this.#exponent += 1;
    } else {
      this.#current = this.maximumMs;
    }
  }
}
