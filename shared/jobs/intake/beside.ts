/**
 * Work a leader pass starts and waits for only so long: what is still running then goes on beside
 * the next passes, which do not start it again until it has ended (one at a time). The stall check's
 * listing of the unfinished runs (a new leadership's first) and the index upkeep's status reads take
 * seconds under a burst (6-18 s for a listing of 1,000 HTTP jobs' runs on Azurite, when the check
 * listed every 5 s), and a pass that waited for them held the intake's
 * next batch and the watchdog's view of progress behind them. Route: docs/architecture.md, "A
 * submission from POST to result blob", step 3.
 */
export type BesideOutcome = 'ended' | 'still_running';

/**
 * Waits for `work` (which must not reject) at most `ms` (Infinity: until it ends): whether it ended.
 * The one bounded wait of the leader's pass: Beside's, the intake's for the starts under way and for
 * room (JobIntake).
 */
export async function waitAtMost(work: Promise<unknown>, ms: number): Promise<boolean> {
  if (ms === Number.POSITIVE_INFINITY) {
    await work;
    return true;
  }
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, ms))));
  try {
    return await Promise.race([work.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}

export class Beside {
  #running: Promise<void> | undefined;

  /** `waitMs`: how long a pass waits for the work (Infinity: until it ends, as tests that read its effects at once want). */
  constructor(private readonly waitMs: number) {}

  /** Whether the work a pass started is still running. */
  get running(): boolean {
    return this.#running !== undefined;
  }

  /**
   * Starts `work` unless the one started before still runs, then waits for it (the new one or the
   * one still running) at most `waitMs` (the constructor's unless given). `work` must not reject: it
   * reports its own failures.
   */
  async run(work: () => Promise<void>, waitMs: number = this.waitMs): Promise<BesideOutcome> {
    if (this.#running === undefined) {
      const started: Promise<void> = work().finally(() => {
        if (this.#running === started) this.#running = undefined;
      });
      this.#running = started;
    }
    return (await waitAtMost(this.#running, waitMs)) ? 'ended' : 'still_running';
  }
}
