/**
 * Dispatches orchestration episodes (EpisodeDispatcher, the control queues) and activities
 * (ActivityDispatcher, the work-item queue) from the task hub's queues, with the Azure Storage
 * provider's concurrency, polling, visibility and discard rules (host.json durableTask, see
 * DispatcherTuning). This class owns what the two sides share: one poller per queue, starting and
 * stopping them together, and a bounded drain at stop after which what is left reappears on the
 * queues for another host.
 *
 * Not guaranteed: exactly-once activity execution (the real extension does not promise it either).
 * Not reproduced: partition leases (every process that registers an orchestration polls every
 * control queue; the etag on the instance keeps two processes from applying one episode twice). A
 * process polls only the queues of the functions it registers (DispatcherDeps.dispatch), as the
 * extension starts a listener per trigger: an HTTP front with a Durable client runs no episode.
 */
import { ActivityDispatcher } from './ActivityDispatcher';
import { type DispatchContext, type DispatcherDeps } from './DispatchContext';
import { EpisodeDispatcher } from './EpisodeDispatcher';
import { QueuePoller } from './QueuePoller';

export class DurableDispatcher {
  readonly #deps: DispatcherDeps;
  readonly #episodes: EpisodeDispatcher;
  readonly #activities: ActivityDispatcher;
  readonly #pollers: QueuePoller[] = [];
  readonly #runningWork = new Set<Promise<void>>();
  #slotWaiters: Array<() => void> = [];
  #loops: Array<Promise<void>> = [];
  #stopping = false;
  #abandon = new AbortController();

  constructor(deps: DispatcherDeps) {
    this.#deps = deps;
    const ctx: DispatchContext = {
      deps,
      clock: deps.clock ?? (() => new Date()),
      isStopping: () => this.#stopping,
      isAbandoned: () => this.#abandon.signal.aborted,
      track: (work) => this.#track(work),
      waitForSlot: () => this.#waitForSlot(),
      wakeSlots: () => this.#wakeSlots(),
    };
    this.#episodes = new EpisodeDispatcher(ctx);
    this.#activities = new ActivityDispatcher(ctx);
  }

  start(): void {
    if (this.#loops.length > 0) return;
    this.#stopping = false;
    this.#abandon = new AbortController();
    const { tuning, queues } = this.#deps;
    this.#pollers.length = 0;
    const loops: Array<Promise<void>> = [];
    const dispatch = this.#deps.dispatch ?? { episodes: true, activities: true };
    const controlPollers: Array<QueuePoller | undefined> = [];
    for (let partition = 0; partition < queues.controlQueueCount; partition += 1) {
      if (!dispatch.episodes) break;
      const poller = new QueuePoller(tuning.minPollIntervalMs, tuning.maxPollIntervalMs);
      this.#pollers.push(poller);
      controlPollers.push(poller);
      loops.push(this.#episodes.pollControlQueue(partition, poller));
    }
    const workPoller = dispatch.activities ? new QueuePoller(tuning.minPollIntervalMs, tuning.maxPollIntervalMs) : undefined;
    if (workPoller !== undefined) {
      this.#pollers.push(workPoller);
      loops.push(this.#activities.pollWorkQueue(workPoller));
    }
    this.#loops = loops;
    // A message this process adds wakes its own poller of that queue (TaskHubQueue.AddMessageAsync
    // resets the queue's BackoffPollingHelper). Every process here polls every control queue (no
    // partition leases); on Azure only the partition's owner polls it, so only a send by the owner wakes it.
    if (tuning.wakeOnSend !== false) queues.onSent((to) => (to.kind === 'work' ? workPoller : controlPollers[to.partition])?.reset());
  }

  /** Stops receiving; waits (bounded) for running work; whatever is left reappears on the queues for another host. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const poller of this.#pollers) poller.interrupt();
    this.#wakeSlots();
    this.#episodes.releaseHeldTimers();
    const drained = Promise.all([...this.#loops, ...this.#runningWork]).then(() => true);
    const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), this.#deps.tuning.drainTimeoutMs).unref());
    if (!(await Promise.race([drained, timeout]))) {
      this.#deps.logger.warn('durable.stop.abandoned', { running: this.#runningWork.size });
      this.#abandon.abort();
    }
    this.#loops = [];
  }

  #track(work: Promise<void>): void {
    const tracked = work.finally(() => this.#runningWork.delete(tracked));
    this.#runningWork.add(tracked);
  }

  #waitForSlot(): Promise<void> {
    return new Promise((resolve) => this.#slotWaiters.push(resolve));
  }

  #wakeSlots(): void {
    const waiters = this.#slotWaiters;
    this.#slotWaiters = [];
    for (const wake of waiters) wake();
  }
}
