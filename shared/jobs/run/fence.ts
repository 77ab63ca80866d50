/**
 * The plan's fence, checked against storage before any work (see intake/startSteps.ts for the start
 * rules it enforces): a finished job answers its final summary; a run the job's start record no
 * longer names, or started under a leader epoch older than the lease's, stands down with a
 * superseded marker. The epoch is checked on the plan's first pass only: a retried plan whose start
 * already staged goes on, as the run's steps do (docs/jobs.md, "Fencing", says why).
 * Route: docs/architecture.md, "The lease epoch from the elector to the fence", step 6.
 */
import { type JobRun } from '../JobRun';
import { type JobSummary } from '../JobSummary';
import { type JobStore } from '../store/JobStore';
import { type Now } from '../wallClock';

export interface FenceDeps {
  readonly store: JobStore;
  /** The leader lease's current epoch (undefined: no leader yet); without it the check is skipped. */
  readonly leaseEpoch?: () => Promise<number | undefined>;
  readonly now: Now;
}

/**
 * Checked against storage before any work: a finished job answers its final summary; a run the
 * start record no longer names, or started under an epoch older than the lease's, is superseded.
 * The epoch is checked only before the run's first staging (`resumed` false): once a plan of this
 * start got past it and staged, a retry of that plan (its instance died, the lease moved with it)
 * is the same start's work going on, as its steps are.
 *
 * `fresh`: a call of the run's plan that is not a repeat after a resume and not late (a redelivery
 * comes back only after the activity queue's visibility timeout, `LATE_CALL_MS`). Such a call of the
 * job's first start (generation 1, named by its start record) cannot find the job finished, with one
 * exception: a retry (2 s after an attempt that failed) whose failed attempt had recorded the summary.
 * That retry finds its input staged and every result landed, aggregates again from them and answers
 * the recorded summary (the summary is created once): it sends nothing. So the final summary is read
 * only when the start record says otherwise: one read a job fewer under a burst.
 */
export async function fence(
  deps: FenceDeps,
  run: JobRun,
  resumedRead: Promise<boolean>,
  readEpoch = true,
  fresh = false,
): Promise<JobSummary | undefined> {
  // A fresh call reads the final summary only after its start record says it must.
  const finalAfterStart = fresh;
  const [early, startRead, leaseEpoch, resumed] = await Promise.all([
    finalAfterStart ? undefined : deps.store.readFinal(run.jobId),
    deps.store.readStart(run.jobId),
    readEpoch ? deps.leaseEpoch?.() : undefined,
    resumedRead,
  ]);
  const start = startRead?.value;
  const firstStart = start !== undefined && start.startId === run.startId && start.state === 'active' && start.generation === 1;
  const final = early ?? (finalAfterStart && !firstStart ? await deps.store.readFinal(run.jobId) : undefined);
  if (final !== undefined) return final;
  const superseded = (reason: string): JobSummary => ({
    jobId: run.jobId,
    workType: run.workType,
    status: 'failed',
    progress: { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } },
    error: { code: 'SUPERSEDED', message: `This start of the job stood down (${reason}); the job's current start runs it.` },
    epoch: run.epoch,
    finishedAt: deps.now().toISOString(),
    superseded: { reason },
  });
  if (start !== undefined && (start.startId !== run.startId || start.state !== 'active')) {
    const named = `the start record names start ${start.startId} of epoch ${start.epoch}`;
    return superseded(start.state === 'active' ? named : 'the submission was rejected');
  }
  if (resumed) return undefined;
  if (leaseEpoch !== undefined && leaseEpoch > run.epoch) {
    return superseded(`leader epoch ${leaseEpoch} is newer than the run's ${run.epoch}`);
  }
  return undefined;
}
