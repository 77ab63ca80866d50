/**
 * One term of one elector as storage sees it (the part client-go leaves to its resource lock, plus
 * the epoch): claiming a term by bumping the epoch through a freshly acquired lease, then the
 * term's own calls through the lease (renew, write, release).
 *
 * Guarantees: a term's calls run one at a time in call order, so a renewal never races the term's
 * own write or release; each is bounded by a timeout on the elector's clock, and a renewal or write
 * never outlives the renew deadline. A renewal that finds the blob's etag other than the term's own
 * last write left it answers LeaseLostError, like "not your lease" from the service.
 * Not decided here: what a lost lease or a passed deadline means; the elector acts on both.
 */
import { type Clock, withTimeout } from './Clock';
import { LeaseLostError } from './errors';
import { type ElectorTiming } from './leaderTiming';
import { type LeaseRecord, type LeaseStore, recordMetadata } from './LeaseStore';

/** The lease a term lives in: the store, this elector's lease id, its clock and timing. */
export interface LeaseContext {
  readonly store: LeaseStore;
  readonly leaseId: string;
  readonly clock: Clock;
  readonly timing: ElectorTiming;
}

export class LeaseTerm {
  readonly controller = new AbortController();
  readonly startedAt: number;
  /** Monotonic time the last successful acquire/renew request was sent: the renew deadline counts from it. */
  lastSentAt: number;
  /** When the next renewal is due after a failed one; undefined after a success. */
  retryAt: number | undefined = undefined;
  /** The leader work onStartedLeading returned. */
  work: Promise<void> = Promise.resolve();
  private queue: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly record: LeaseRecord,
    /** The record this term's epoch replaced (who led before), if any. */
    readonly previous: LeaseRecord | undefined,
    sentAt: number,
    private etag: string,
    private readonly lease: LeaseContext,
  ) {
    this.startedAt = lease.clock.now();
    this.lastSentAt = sentAt;
  }

  /**
   * Announces a term through a lease this elector just acquired (the acquire request was sent at
   * `sentAt`): reads the record and writes epoch + 1 under the lease, only if the blob is unchanged.
   * A LeaseLostError means another instance's announcement raced ours.
   */
  static async claim(lease: LeaseContext, holder: string, sentAt: number): Promise<LeaseTerm> {
    const { store, leaseId, clock, timing } = lease;
    const snap = await withTimeout(clock, 'read', timing.requestTimeoutMs, (signal) => store.read(signal));
    const record: LeaseRecord = { epoch: (snap.record?.epoch ?? 0) + 1, holder, acquiredAt: clock.wallNow().toISOString() };
    const write = (signal: AbortSignal): Promise<{ etag: string }> => store.write(leaseId, recordMetadata(record), snap.etag, signal);
    const { etag } = await withTimeout(clock, 'write', timing.requestTimeoutMs, write);
    return new LeaseTerm(record, snap.record, sentAt, etag, lease);
  }

  get epoch(): number {
    return this.record.epoch;
  }

  /** This term stops believing it leads at this instant unless a renewal sent before it succeeds. */
  get deadline(): number {
    return this.lastSentAt + this.lease.timing.renewDeadlineMs;
  }

  /** One renewal; on success the deadline counts from when it was sent. Resolves with its latency. */
  renew(): Promise<number> {
    return this.serialized('renew', true, async (signal) => {
      const sentAt = this.lease.clock.now();
      const { etag } = await this.lease.store.renew(this.lease.leaseId, signal);
      // Lease operations leave the etag alone, and only the holder can write, so the etag should be
      // the one our last write returned. If not, the blob changed in a way this term cannot account
      // for (another holder in between, or a write of ours that timed out yet landed): step down
      // rather than guess; the next campaign starts a clean term.
      if (etag !== '' && etag !== this.etag) throw new LeaseLostError('BlobChangedByAnotherHolder');
      this.lastSentAt = sentAt;
      this.retryAt = undefined;
      return this.lease.clock.now() - sentAt;
    });
  }

  /** Writes extra metadata fields through the lease, only over the term's own last write (etag). */
  write(fields: Readonly<Record<string, string>>): Promise<void> {
    return this.serialized('write', true, async (signal) => {
      this.etag = (await this.lease.store.write(this.lease.leaseId, recordMetadata(this.record, fields), this.etag, signal)).etag;
    });
  }

  /** Gives the lease back; bounded by the request timeout only, as it may come after the deadline. */
  release(): Promise<void> {
    return this.serialized('release', false, (signal) => this.lease.store.release(this.lease.leaseId, signal));
  }

  private serialized<T>(operation: string, withinDeadline: boolean, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const run = (): Promise<T> => {
      const { clock, timing } = this.lease;
      const timeout = withinDeadline ? Math.min(timing.requestTimeoutMs, this.deadline - clock.now()) : timing.requestTimeoutMs;
      return withTimeout(clock, operation, timeout, fn);
    };
    const next = this.queue.then(run, run);
    this.queue = next.catch(() => undefined);
    return next;
  }
}
