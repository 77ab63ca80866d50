/**
 * How DurableTask.AzureStorage waits between polls of an empty queue (Azure/durabletask
 * src/DurableTask.AzureStorage/BackoffPollingHelper.cs, with the minimum of 50 ms from
 * Messaging/TaskHubQueue.cs): a randomized exponential backoff from the minimum up to
 * maxQueuePollingInterval; a poll that found messages makes the next wait end at once and restarts
 * the backoff from the minimum. Nothing else wakes a poller: a message sent by this very process
 * waits for the next poll, as on Azure.
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

  /** A poll found messages (BackoffPollingHelper.Reset). */
  reset(): void {
    this.#signaled = true;
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
