/**
 * A shared run: several small jobs the leader's intake starts together, planned by one Durable
 * instance (id `batch-<uuid>`: jobIds.ts), so a burst of small jobs pays Durable's cost of an
 * instance (its history, its control-queue messages, the activity message) once a batch instead of
 * once a job. Each job keeps its own start (start record, start id, mark, fence): its record names
 * the shared instance (`StartRecord.instance`), and the plan activity is each job's own plan, run
 * side by side in one call (`JOB_BATCH_PLAN`): a job whose fence refuses it stands down alone, a job
 * its plan refuses is finished here, a job found cancelled is aggregated as cancelled here, and a
 * job its plan does not finish (its chunks still out when the plan's wait ends) goes on alone as an
 * ordinary job run, a sub-orchestration `job-<jobId>`, from the ledger its plan left. A job whose
 * plan threw (or all of them, when the shared call kept failing) goes on alone from its start: its
 * own run plans it again, fenced, rather than a failure being recorded here for a start that may
 * not be the job's current one. Outcomes recorded here are delivered here (a job run alone delivers
 * its own): those the plans recorded go out with the calls that follow the plans; one recorded by a
 * finish or an aggregation here once those calls have ended (a sibling's own run included: a
 * refused job's reply can wait for it). The output is each job's summary by job id (`BatchOutput`):
 * `jobViewOf` (OrchestrationClient.ts) shows a shared instance as one job's, for the status reader
 * and the start checks.
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

import { instanceIdFor } from '../jobIds';
import { type JobRun } from '../JobRun';
import { isSuperseded, type JobCustomStatus, type JobSummary } from '../JobSummary';
import { type AggregateInput } from './aggregation';
import { type DeliverInput, dispatchJobOf, type PlanInput, type SharedPlanOutcome, type StagedCounts } from './JobActivities';
import { initialState, JOB_ACTIVITIES, JOB_ORCHESTRATOR, type OrchestrationState, RESUME_EVENT } from './jobOrchestration';

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
  const alone: string[] = [];
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
  /** Each job's plan outcome; undefined: its plan could not be called (it goes on alone, below). */
  let outcomes: ReadonlyArray<SharedPlanOutcome | undefined>;
  try {
    let answered: SharedPlanOutcome[] | undefined;
    for (repeated = 0; answered === undefined; repeated++) {
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
      answered = task.result as SharedPlanOutcome[];
    }
    outcomes = answered;
  } catch {
    // The shared call kept failing (its activity could not run at all): each job goes on alone, its
    // own run planning it again (fenced, retried) as a job run alone would. Nothing is finished
    // here for a job no plan answered for: another start of it may be the one doing the work.
    outcomes = runs.map(() => undefined);
  }
  repeated = 0;

  /** The calls out after the plans: each job's finish, aggregation or own run, and the deliveries. */
  const out: Task[] = [];
  /** Read once the calls ended: each job's outcome from its own call. */
  const reads: Array<(recorded: (run: JobRun, summary: JobSummary) => void) => void> = [];
  /** Outcomes recorded here are delivered here; one that could not be recorded is not, as a job run's is not. */
  const delivery = (run: JobRun, summary: JobSummary): Task[] => {
    if (run.deliver !== true || isSuperseded(summary) || summary.jobId !== run.jobId) return [];
    const input: DeliverInput = { summary, createdAt: run.submittedAt, ...(run.reply === undefined ? {} : { reply: run.reply }) };
    return [context.df.callActivityWithRetry(JOB_ACTIVITIES.deliver, retry, input)];
  };
  /** The job's outcome from a call of it (a call that did not end well: `failure`, not recorded). */
  const outcomeOf = (run: JobRun, task: Task, failure: string, recorded: (run: JobRun, summary: JobSummary) => void): void => {
    const summary = task.isCompleted && !task.isFaulted ? (task.result as JobSummary | undefined) : undefined;
    output[run.jobId] = summary ?? failedSummary(run, failure);
    if (summary !== undefined) recorded(run, summary);
  };
  /** A call that records the job's outcome (finish, or the aggregation of a cancelled job), delivered once recorded. */
  const records = (run: JobRun, task: Task, failure: string): void => {
    out.push(task);
    reads.push((recorded) => outcomeOf(run, task, failure, recorded));
  };
  /** The job's own run, `job-<jobId>`: from its plan's ledger, or (no plan answered) from its start. It delivers its own outcome. */
  const goAlone = (run: JobRun, state: OrchestrationState): void => {
    alone.push(run.jobId);
    const task = context.df.callSubOrchestrator(JOB_ORCHESTRATOR, state, instanceIdFor(run.jobId));
    out.push(task);
    reads.push(() => outcomeOf(run, task, 'Its run failed.', () => undefined));
  };
  runs.forEach(({ run, prestaged }, i) => {
    const outcome = outcomes[i];
    if (outcome === undefined || (!outcome.ok && 'retryAlone' in outcome)) {
      goAlone(run, initialState(run, undefined, prestaged));
    } else if (!outcome.ok && 'standDown' in outcome) {
      output[run.jobId] = outcome.standDown;
      // The job's recorded outcome (its plan found it finished: an earlier call of this very plan
      // recorded it and died before answering) is delivered, as a job run delivers it; a superseded
      // stand-down is not (`delivery` leaves it out). The delivery is idempotent.
      out.push(...delivery(run, outcome.standDown));
    } else if (!outcome.ok) {
      const failed: JobSummary = { ...failedSummary(run, ''), error: outcome.error };
      records(run, context.df.callActivityWithRetry(JOB_ACTIVITIES.finish, retry, failed), 'Its failure could not be recorded.');
    } else if (outcome.summary !== undefined) {
      output[run.jobId] = outcome.summary;
      out.push(...delivery(run, outcome.summary));
    } else if (outcome.cancelled) {
      // Cancelled before it finished: aggregated as cancelled, as a job run's plan that saw the cancel is.
      const { chunkCount, itemCount } = outcome;
      const input: AggregateInput = { run: dispatchJobOf(run), chunkCount, itemCount, cancelled: true };
      records(run, context.df.callActivityWithRetry(JOB_ACTIVITIES.aggregate, retry, input), 'Its cancellation could not be recorded.');
    } else {
      // Still running: its own run goes on from the plan's ledger.
      const plan = { chunkCount: outcome.chunkCount, itemCount: outcome.itemCount };
      goAlone(run, { run, generation: 1, plan, ledger: outcome.ledger });
    }
  });
  stoodDown = runs.map((r) => r.run.jobId).filter((jobId) => isSuperseded(output[jobId]));
  wait += 1;
  publish('running');
  // All at once (a task is scheduled when yielded, and yielded again it would be called again: no
  // waiting on each in turn). Task.all stops at the first failure; a call still out then goes on by
  // itself (an activity, a job's own run) and is read as not ended well here: its job's status reads
  // its own records. The deliveries of the outcomes the plans recorded go out with the rest, not after it.
  try {
    if (out.length > 0) yield context.df.Task.all(out);
  } catch {
    // Read call by call below.
  }
  const later: Task[] = [];
  for (const read of reads) read((run, summary) => later.push(...delivery(run, summary)));
  if (later.length > 0) {
    try {
      yield context.df.Task.all(later);
    } catch {
      // The outcomes stand; each delivery logged why it could not be recorded (the leader's sweep retries).
    }
  }
  wait += 1;
  publish('done');
  return output;
};
