/**
 * One storage read shared by every caller for a short time: `get()` answers from the last outcome
 * while it is younger than `ttlMs`, and concurrent callers of an expired entry wait for one read.
 * Failures are kept for the same time, so an outage does not turn each anonymous request into a
 * read that waits for its timeout. Bounds the cost of GET /api/leader and /api/health at one blob
 * read per ttl per instance, however many requests arrive.
 *
 * Not guaranteed: freshness. An answer may be up to `ttlMs` old (plus the read's own duration).
 */
import { type Clock, systemClock } from './Clock';

type Outcome<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: unknown };

export class CachedRead<T> {
  private last: { readonly outcome: Outcome<T>; readonly at: number } | undefined;
  private inFlight: Promise<Outcome<T>> | undefined;
  private readsCount = 0;

  constructor(
    private readonly read: () => Promise<T>,
    readonly ttlMs: number,
    private readonly clock: Pick<Clock, 'now'> = systemClock,
  ) {
    if (!Number.isFinite(ttlMs) || ttlMs < 0) throw new RangeError(`ttlMs must be a number >= 0, not ${ttlMs}`);
  }

  /** How many reads went to storage (for tests and the benchmark of the leader routes). */
  get reads(): number {
    return this.readsCount;
  }

  async get(): Promise<T> {
    const last = this.last;
    const outcome = last !== undefined && this.clock.now() - last.at < this.ttlMs ? last.outcome : await this.refresh();
    if (outcome.ok) return outcome.value;
    throw outcome.error;
  }

  private refresh(): Promise<Outcome<T>> {
    this.inFlight ??= (async (): Promise<Outcome<T>> => {
      this.readsCount += 1;
      let outcome: Outcome<T>;
      try {
        outcome = { ok: true, value: await this.read() };
      } catch (error) {
        outcome = { ok: false, error };
      }
      // Stamped when the answer arrived: a slow read is not counted as old the moment it lands.
      this.last = { outcome, at: this.clock.now() };
      this.inFlight = undefined;
      return outcome;
    })();
    return this.inFlight;
  }
}
