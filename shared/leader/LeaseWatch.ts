/**
 * What an instance that does not campaign does about a leader that died: it watches the lease and,
 * once nobody holds it, rings the work-items doorbell, so that some instance's worker is handed a
 * Durable client by that invocation and campaigns (AppRoot.offer).
 *
 * Why: an instance campaigns only once an invocation hands it a Durable client, which its passes
 * need (docs/leader-election.md). In an app with nothing to do, only the instance its timer fires on
 * has one (the host fires a timer on one instance at a time, under a listener lock). When that
 * instance dies, the timer moves only when its listener lock lapses and another instance's
 * recovery poll takes it: 74-79 s at the host's defaults, 20-26 s at their shortest (host.json
 * `singleton`, 15 s each; `idle-failover`, extensions host). The lease itself lapses within L of
 * the last renewal; the watch sees that within its period, and the doorbell is taken at the next
 * poll of the work-items queue (host.json `queues.maxPollingInterval`).
 *
 * Guarantees: it watches only while `idle()` says the instance neither campaigns nor leads; it reads
 * nothing else, writes nothing but the doorbell (one message, at most every `ringEveryMs` while the
 * lease stays free), and never takes the lease itself (a leader without a Durable client could not
 * act). Its timers never keep a process alive. Failed reads and sends are logged and retried at the
 * next period.
 */
import { type Logger } from '../observability/log';

export interface LeaseWatchOptions {
  /** The lease's state as storage answers it (`leased`, `available`, `expired`, `breaking`, `broken`). */
  readonly leaseState: (signal: AbortSignal) => Promise<string>;
  /** Rings the work-items doorbell (JobComponents.ringWorkers). */
  readonly ring: (signal: AbortSignal) => Promise<void>;
  /** True while this instance neither campaigns nor leads: the watch reads only then. */
  readonly idle: () => boolean;
  readonly logger: Logger;
  readonly periodMs?: number;
  readonly ringEveryMs?: number;
  readonly requestTimeoutMs?: number;
  readonly now?: () => number;
}

export const LEASE_WATCH = { periodMs: 2_000, ringEveryMs: 10_000, requestTimeoutMs: 2_000 } as const;

export class LeaseWatch {
  readonly #o: LeaseWatchOptions;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  #rangAt = Number.NEGATIVE_INFINITY;
  #rings = 0;

  constructor(options: LeaseWatchOptions) {
    this.#o = options;
  }

  /** How many doorbells this watch has rung (for tests and the cluster view). */
  get rings(): number {
    return this.#rings;
  }

  start(): void {
    if (this.#stopped || this.#timer !== undefined) return;
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** One look: reads the lease when idle, rings when nobody holds it (and it has not rung lately). */
  async look(): Promise<void> {
    if (!this.#o.idle()) return;
    const timeout = this.#o.requestTimeoutMs ?? LEASE_WATCH.requestTimeoutMs;
    let state: string;
    try {
      state = await this.#o.leaseState(AbortSignal.timeout(timeout));
    } catch (err) {
      this.#o.logger.debug('leader.watch_failed', { error: err });
      return;
    }
    const now = (this.#o.now ?? Date.now)();
    if (state === 'leased' || !this.#o.idle() || now - this.#rangAt < (this.#o.ringEveryMs ?? LEASE_WATCH.ringEveryMs)) return;
    this.#rangAt = now;
    try {
      await this.#o.ring(AbortSignal.timeout(timeout));
      this.#rings += 1;
      this.#o.logger.info('leader.watch_rang', { leaseState: state });
    } catch (err) {
      this.#o.logger.warn('leader.watch_failed', { error: err });
    }
  }

  #schedule(): void {
    this.#timer = setTimeout(() => {
      void this.look().finally(() => {
        if (!this.#stopped) this.#schedule();
      });
    }, this.#o.periodMs ?? LEASE_WATCH.periodMs);
    this.#timer.unref();
  }
}
