/**
 * A shared run: several small jobs the leader's intake starts together, planned by one Durable
 * instance (id `batch-<epoch>-<n>`: jobIds.ts), so a burst of small jobs pays Durable's cost of an
 * instance (its history, its control-queue messages, the activity message) once a batch instead of
 * once a job. Each job keeps its own start (start record, start id, mark, fence): its record names
 * the shared instance (`StartRecord.instance`), and the plan activity is each job's own plan, run
 * side by side in one call (`JOB_BATCH_PLAN`): a job whose fence refuses it stands down alone, a job
 * its plan refuses is finished here, and a job its plan does not finish (its chunks still out when
 * the plan's wait ends) goes on alone as an ordinary job run, a sub-orchestration `job-<jobId>`,
 * from the ledger its plan left. A job whose run delivers its outcome has it delivered here once
 * recorded. The output is each job's summary by job id (`BatchOutput`): `jobViewOf` (OrchestrationClient.ts)
 * shows a shared instance as one job's, for the status reader and the start checks.
 *
 * Stalls: the plan call waits on a `resume` event as a job run's calls do (jobOrchestration.ts), and
 * the leader's stall check follows shared runs too (its custom status carries the same call count).
 * Cancel: a cancel marker written while the shared plan runs is seen by the plan's passes, the
 * workers, or the steps of the job's own run once it goes on alone; no cancel event reaches a shared
 * instance (nothing waits for one there).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 4.
 */
import * as df from 'durable-functions';
import { type OrchestrationContext, type OrchestrationHandler, type Task } from 'durable-functions';

import { publicMessage } from '../../errors';
import { isSuperseded, type JobCustomStatus, type JobSummary } from '../api/JobSummary';
import { instanceIdFor } from '../jobIds';
import { type JobRun } from '../JobRun';
import { type DeliverInput, type PlanInput, type PlanOutcome, type StagedCounts } from './JobActivities';
import { JOB_ACTIVITIES, JOB_ORCHESTRATOR, type OrchestrationState, RESUME_EVENT } from './jobOrchestration';

export const JOB_BATCH_ORCHESTRATOR = 'jobBatchOrchestrator';
/** The plans of a shared run's jobs, side by side in one call (JobActivities.plan each). */
export const JOB_BATCH_PLAN = 'jobBatchPlan';

export interface BatchState {
  readonly runs: ReadonlyArray<{ readonly run: JobRun; readonly prestaged?: StagedCounts }>;
}

/**
 * A shared run's custom status: a job run's call count (the stall check's rule is the same), and
 * once the plans answered, the jobs that went on alone (the stall check follows their runs).
 */
export interface BatchCustomStatus extends Pick<JobCustomStatus, 'phase' | 'epoch' | 'generation' | 'wait' | 'repeat' | 'updatedAt'> {
  readonly alone?: readonly string[];
  /**
   * The jobs whose plans stood down as superseded (a newer leader's epoch, or another start of the
   * job): each shows as its own run that stood down (`jobViewOf`), which the start checks take over
   * at once, without waiting for the shared run to end.
   */
  readonly stoodDown?: readonly string[];
}

/** Each job's summary by job id: recorded, a stand-down's (superseded, or the recorded one), or its own run's. */
export type BatchOutput = Readonly<Record<string, JobSummary>>;

const RETRY = { firstRetryMs: 2_000, attempts: 4 } as const;
const NO_PROGRESS = { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } };

export const jobBatchOrchestration: OrchestrationHandler = function* (
  context: OrchestrationContext,
): Generator<Task, BatchOutput, unknown> {
  const { runs } = context.df.getInput<BatchState>();
  const now = (): string => context.df.currentUtcDateTime.toISOString();
  const retry = new df.RetryOptions(RETRY.firstRetryMs, RETRY.attempts);
  const epoch = runs[0]?.run.epoch ?? 0;
  let wait = 0;
  let repeated = 0;
  let alone: string[] = [];
  let stoodDown: string[] = [];
  const publish = (phase: JobCustomStatus['phase']): void => {
    const status: BatchCustomStatus = {
      phase,
      ...(alone.length === 0 ? {} : { alone }),
      ...(stoodDown.length === 0 ? {} : { stoodDown }),
      epoch,
      generation: 1,
      wait,
      ...(repeated === 0 ? {} : { repeat: repeated }),
      updatedAt: now(),
    };
    context.df.setCustomStatus(status);
  };
  const output: Record<string, JobSummary> = {};
  const failedSummary = (run: JobRun, message: string): JobSummary => ({
    jobId: run.jobId,
    workType: run.workType,
    status: 'failed',
    progress: NO_PROGRESS,
    error: { code: 'INTERNAL', message },
    epoch: run.epoch,
    finishedAt: now(),
  });

  // The plans, called again on a `resume` (each plan is idempotent, and a repeat takes its job's call lease first).
  const at = now();
  let outcomes: PlanOutcome[] | undefined;
  try {
    for (repeated = 0; outcomes === undefined; repeated++) {
      wait += 1;
      publish('planning');
      const inputs: PlanInput[] = runs.map((r) => ({
        run: r.run,
        at,
        ...(r.prestaged === undefined ? {} : { prestaged: r.prestaged }),
        ...(repeated === 0 ? {} : { repeat: repeated }),
      }));
      const task = context.df.callActivityWithRetry(JOB_BATCH_PLAN, retry, inputs);
      const resume = context.df.waitForExternalEvent(RESUME_EVENT);
      const winner = yield context.df.Task.any([task, resume]);
      if (winner !== task) continue;
      if (task.isFaulted) throw task.result instanceof Error ? task.result : new Error(String(task.result));
      outcomes = task.result as PlanOutcome[];
    }
  } catch (err) {
    // The plans kept failing: each job ends failed (finished below), as a job run's would.
    const message = `An activity kept failing after its retries: ${publicMessage(err instanceof Error ? err.message : String(err))}`;
    outcomes = runs.map(() => ({ ok: false, error: { code: 'INTERNAL', message } }));
  }
  repeated = 0;

  const rest: Array<{ readonly run: JobRun; readonly task: Task; readonly kind: 'finish' | 'alone' }> = [];
  /** Jobs whose outcome here is not the recorded one (their finish, or their own run, failed). */
  const unrecorded = new Set<string>();
  outcomes.forEach((outcome, i) => {
    const run = runs[i]?.run;
    if (run === undefined) return;
    if (!outcome.ok && 'standDown' in outcome) output[run.jobId] = outcome.standDown;
    else if (!outcome.ok) {
      const failed: JobSummary = { ...failedSummary(run, ''), error: outcome.error };
      rest.push({ run, kind: 'finish', task: context.df.callActivityWithRetry(JOB_ACTIVITIES.finish, retry, failed) });
    } else if (outcome.summary !== undefined) output[run.jobId] = outcome.summary;
    else {
      // Still running (or cancelled before it finished): its own run goes on from the plan's ledger.
      const state: OrchestrationState = {
        run,
        generation: 1,
        plan: { chunkCount: outcome.chunkCount, itemCount: outcome.itemCount },
        ledger: outcome.ledger,
      };
      rest.push({ run, kind: 'alone', task: context.df.callSubOrchestrator(JOB_ORCHESTRATOR, state, instanceIdFor(run.jobId)) });
    }
  });
  alone = rest.filter((r) => r.kind === 'alone').map((r) => r.run.jobId);
  stoodDown = runs.map((r) => r.run.jobId).filter((jobId) => isSuperseded(output[jobId]));
  wait += 1;
  publish('running');
  if (rest.length > 0) {
    try {
      yield context.df.Task.all(rest.map((r) => r.task));
    } catch {
      // Task.all fails at the first failure; each task's own outcome is read below.
    }
    for (const { run, task, kind } of rest) {
      const summary = task.isCompleted && !task.isFaulted ? (task.result as JobSummary | undefined) : undefined;
      if (summary === undefined) unrecorded.add(run.jobId);
      output[run.jobId] = summary ?? failedSummary(run, kind === 'finish' ? 'Its failure could not be recorded.' : 'Its run failed.');
    }
  }
  // Outcomes recorded here are delivered here (a job that went on alone delivers from its own run;
  // an outcome that could not be recorded is not delivered, as a job run's is not).
  const deliveries = runs
    .filter(({ run }) => run.deliver === true && !unrecorded.has(run.jobId))
    .filter(({ run }) => !rest.some((r) => r.kind === 'alone' && r.run.jobId === run.jobId))
    .flatMap(({ run }) => {
      const summary = output[run.jobId];
      if (summary === undefined || isSuperseded(summary) || summary.jobId !== run.jobId) return [];
      const input: DeliverInput = { summary, createdAt: run.submittedAt, ...(run.reply === undefined ? {} : { reply: run.reply }) };
      return [context.df.callActivityWithRetry(JOB_ACTIVITIES.deliver, retry, input)];
    });
  if (deliveries.length > 0) {
    try {
      yield context.df.Task.all(deliveries);
    } catch {
      // The outcomes stand; each delivery logged why it could not be recorded (the leader's sweep retries).
    }
  }
  wait += 1;
  publish('done');
  return output;
};
