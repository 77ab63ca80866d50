/**
 * A job's cancel marker (`jobs/<jobId>/cancel.json`) as one process sees it: read at most once per
 * `maxAgeMs` per job, concurrent askers sharing the read in flight, a marker once found kept (a
 * cancel is final), a failed read forgotten (the next asker reads again), and a cancel this process
 * made itself seen at once. Every reader of the marker (the intake's checks, the plan, the dispatch
 * passes, the workers) tolerates a cancel seen up to `maxAgeMs` late: the cancel also raises an event
 * that wakes the run (its steps stop at once), and a chunk worked after its job was cancelled is
 * discarded at aggregation. What the delay can cost: a window of chunks worked for nothing, and a
 * job cancelled within `maxAgeMs` of its start that finishes from its first window ends `completed`
 * (its work was on the queue already). A job not yet started reads the marker afresh: nothing here
 * read it before.
 * Under a burst of small jobs this is one read per job per process instead of one per reader: a
 * 1,000-job burst's job lives 3-5 s from its intake to its aggregation, and 1 s here cost 2.9
 * reads a job (jobs-scale, docs/figures.md), 3% of the burst's storage requests each.
 */
import { type Now } from '../wallClock';

/** A job's cancel marker is read at most this often per process. */
export const CANCEL_CHECK_MS = 5_000;
/** Jobs remembered before the stale entries are dropped. */
const MAX_REMEMBERED = 1_000;

interface Check {
  readonly at: number;
  readonly cancelled: Promise<boolean>;
  /** Set once the read found the marker. */
  final: boolean;
}

export class CancelMarkers {
  readonly #checks = new Map<string, Check>();

  constructor(
    private readonly read: (jobId: string, signal?: AbortSignal) => Promise<boolean>,
    private readonly now: Now = () => new Date(),
    private readonly maxAgeMs: number = CANCEL_CHECK_MS,
  ) {}

  isCancelled(jobId: string, signal?: AbortSignal): Promise<boolean> {
    const at = this.now().getTime();
    const known = this.#checks.get(jobId);
    if (known !== undefined && (known.final || at - known.at < this.maxAgeMs)) return known.cancelled;
    const check: Check = { at, final: false, cancelled: this.read(jobId, signal) };
    this.#checks.set(jobId, check);
    check.cancelled.then(
      (cancelled) => (check.final = cancelled),
      () => this.#checks.get(jobId) === check && this.#checks.delete(jobId),
    );
    if (this.#checks.size > MAX_REMEMBERED) {
      for (const [id, c] of this.#checks) if (!c.final && at - c.at >= this.maxAgeMs) this.#checks.delete(id);
    }
    return check.cancelled;
  }

  /** A cancel this process recorded: seen by its next asker, without a read. */
  noteCancelled(jobId: string): void {
    this.#checks.set(jobId, { at: this.now().getTime(), final: true, cancelled: Promise.resolve(true) });
  }
}
