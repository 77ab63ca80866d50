/**
 * The leader's side reads while nothing happens. Beside its jobs-queue receive, an idle pass read
 * three things that change only when jobs come and go: the start marks (made by this leader's intake
 * alone), the index rows that say pending or running (every such job came through an intake) and the
 * deliveries due (a delivery fails at a job's end). With no job anywhere those reads find nothing
 * pass after pass: 12 of an idle leader's storage transactions a minute at the 15 s idle interval.
 *
 * So the pass notes what shows activity (`active`: a submission received or waiting, a mark listed,
 * an open index row, a delivery due, a run the stall check follows, a new term), and once none has
 * for `QUIET.afterMs` the cluster is quiet: each of those reads then runs at most every
 * `QUIET.readEveryMs` (`allow`), as a safety net for what no pass can see coming (a row missing from
 * the index whose job writes it later, a previous leader's start landing late). The first activity
 * ends the quiet at once, and the first submission is itself seen by the receive, which quiet never
 * skips.
 *
 * Guarantees: while not quiet, `allow` always says yes (the reads keep their own schedules); while
 * quiet, each named read runs at least every `readEveryMs` (on the first pass due after that).
 * `afterMs` is longer than a job's end takes to show as a delivery due (the deliver activity follows
 * the final record; a callback gives up after 10 s) and than a previous leader's write in flight can
 * land after this term began.
 * Not guaranteed: that a change written by another instance during the quiet is seen before the
 * next such read (up to `readEveryMs`), when no submission came with it.
 */
export const QUIET = {
  /** No activity for this long: the cluster is quiet. */
  afterMs: 60_000,
  /** While quiet, each side read runs at most this often. */
  readEveryMs: 300_000,
} as const;

export class QuietReads {
  #activeAt: number;
  #epoch: number | undefined;
  readonly #readAt = new Map<string, number>();

  constructor(
    private readonly clock: () => number,
    private readonly terms: { readonly afterMs: number; readonly readEveryMs: number } = QUIET,
  ) {
    this.#activeAt = clock();
  }

  /** Something shows jobs come or go: the side reads keep their own schedules for `afterMs` from now. */
  active(): void {
    this.#activeAt = this.clock();
  }

  /** A pass of `epoch`: a new term counts as activity (it takes over its predecessors' marks and starts). */
  term(epoch: number): void {
    if (this.#epoch !== epoch) this.active();
    this.#epoch = epoch;
  }

  get quiet(): boolean {
    return this.clock() - this.#activeAt >= this.terms.afterMs;
  }

  /**
   * Whether the side read `what` runs in this pass: yes while not quiet, and while quiet once every
   * `readEveryMs`. A yes counts as that read done now.
   */
  allow(what: string): boolean {
    const now = this.clock();
    const last = this.#readAt.get(what);
    if (this.quiet && last !== undefined && now - last < this.terms.readEveryMs) return false;
    this.#readAt.set(what, now);
    return true;
  }
}
