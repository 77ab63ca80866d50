/**
 * The job orchestration (one Durable instance per start of a job, id `job-<jobId>`, `job-<jobId>.<n>`
 * for a start made again: intake/startSteps.ts): plan -> steps -> aggregate.
 *
 * Flow control: the plan activity stages the items and sends the first window of chunks; then each
 * step activity (a long poll of a few seconds, see dispatch/ChunkDispatcher.ts) counts the results
 * that landed, sends again the chunks whose worker died or never claimed them, and tops the window up
 * (dispatch/DispatchLedger.ts has the rules); the next step starts as soon as one answers. The
 * step (or the plan, for a job small enough to finish while it waits) that sees the last result
 * aggregates and records the final summary itself; a cancelled job is aggregated by its own activity.
 * So a job keeps at most `JOB_DISPATCH_WINDOW` chunks queued or running, other jobs' chunks get
 * through between its own (fair share by per-job windows on one FIFO queue), and a cancel stops
 * dispatch at once: the `cancel` event wins the wait, or the next step sees the cancel marker.
 *
 * Guarantees: the history stays bounded whatever the job's size: the ledger holds only the window,
 * chunks never appear as history events, and each execution runs at most `STEPS_PER_GENERATION`
 * steps (4 history events each) before continuing as new with its state. No durable timer: a timer
 * message is held by whichever instance received it, and comes back only a minute after that
 * instance dies (the control queue's visibility), where a step's activity message comes back in
 * `workItemQueueVisibilityTimeout` (10 s, host.json). The custom status carries phase, progress and the
 * leader's epoch. The output is a small `JobSummary`; the full result is in a blob (or, when small and
 * without errors, in the summary). The summary is recorded once (`final.json`): by the activity
 * that aggregates the job, or, for a job that fails before it aggregates (its plan refused it, an
 * activity kept failing), by the finish activity; each answers the recorded one. A plan step that stands down
 * (the job already finished, or this run is not the job's current start: see intake/startSteps.ts) ends the run
 * at once with the recorded summary, or a superseded marker, having done nothing.
 *
 * Stalls: each activity's answer comes back as a control-queue message, and an instance that received
 * it and died before its episode committed leaves it invisible for the control queue's visibility
 * (1 minute), with nothing else to wake the run. So every activity call also waits on a `resume`
 * event, which the leader raises for a run that has not moved for 15 s (StalledJobs.ts), and calls
 * the activity again when one comes (every activity is idempotent; the held answer is ignored).
 *
 * Deterministic, as Durable replay requires: time comes from `currentUtcDateTime`, all I/O is in
 * activities, and the state carried across continue-as-new is plain JSON.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 4.
 */
import * as df from 'durable-functions';
import { type OrchestrationContext, type OrchestrationHandler, type Task } from 'durable-functions';

import { publicMessage } from '../../errors';
import { type StepInput } from '../dispatch/ChunkDispatcher';
import { type DispatchLedger, isLedgerDone } from '../dispatch/DispatchLedger';
import { type JobErrorInfo } from '../JobError';
import { type JobRun } from '../JobRun';
import { type FinalStatus, isSuperseded, type JobCustomStatus, type JobProgress, type JobSummary } from '../JobSummary';
import { type AggregateInput } from './aggregation';
import {
  type DeliverInput,
  dispatchJobOf,
  type JobStepOutcome,
  type PlanInput,
  type PlanOutcome,
  type StagedCounts,
} from './JobActivities';

export const JOB_ORCHESTRATOR = 'jobOrchestrator';
export const JOB_ACTIVITIES = {
  plan: 'jobPlan',
  step: 'jobStep',
  aggregate: 'jobAggregate',
  finish: 'jobFinish',
  deliver: 'jobDeliver',
} as const;
export const CANCEL_EVENT = 'cancel';
/** Asks the run to call its current activity again; the leader raises it for a run that stopped moving (StalledJobs.ts). */
export const RESUME_EVENT = 'resume';

/** A `resume` event's payload: the call the leader saw stalled, as the run's custom status named it (for the record). */
export interface ResumeRequest {
  readonly generation: number;
  readonly wait: number;
}

/** What `call` answers when the cancel event won. */
const CANCELLED = Symbol('cancelled');

/** Steps per execution before continue-as-new; a generation's history stays under ~100 events. */
export const STEPS_PER_GENERATION = 20;

/** Activities are retried on infrastructure errors (bad input is an outcome, not an error). */
const ACTIVITY_RETRY = { firstRetryMs: 2_000, attempts: 4 } as const;

export interface OrchestrationState {
  readonly run: JobRun;
  /** The input the intake staged before it started this run (absent: the plan reads or stages it). */
  readonly prestaged?: StagedCounts;
  readonly plan?: { readonly chunkCount: number; readonly itemCount: number };
  /** The chunks in flight and the counts of finished ones (absent before the plan step). */
  readonly ledger?: DispatchLedger;
  /** Executions so far, counting this one from 1. */
  readonly generation: number;
  /** Steps per execution (absent: `STEPS_PER_GENERATION`); tests of continue-as-new on a real backend set fewer. */
  readonly stepsPerGeneration?: number;
}

export function initialState(run: JobRun, stepsPerGeneration?: number, prestaged?: StagedCounts): OrchestrationState {
  return {
    run,
    generation: 1,
    ...(stepsPerGeneration === undefined ? {} : { stepsPerGeneration }),
    ...(prestaged === undefined ? {} : { prestaged }),
  };
}

const EMPTY_PROGRESS: JobProgress = { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } };

/**
 * The job's run, then the delivery of its outcome (the deliver activity: reply queue, outcome stream,
 * callback; see delivery/OutcomeDelivery.ts) when the run asks for it (`run.deliver`). The outcome is
 * delivered only once it is recorded (`final.json`): a run that ended without recording it (storage
 * failing too) delivers nothing, and a superseded run never does. Durable runs the activity again if
 * its worker dies, so a kill between the record and the send still sends; a delivery that keeps
 * failing leaves the job's outcome as it is (the leader's pass retries what was recorded as due).
 */
export const jobOrchestration: OrchestrationHandler = function* (
  context: OrchestrationContext,
): Generator<Task, JobSummary | undefined, unknown> {
  const outcome = { recorded: true };
  const summary = yield* runJob(context, outcome);
  const { run } = context.df.getInput<OrchestrationState>();
  if (summary === undefined || !outcome.recorded || isSuperseded(summary) || run.deliver !== true) return summary;
  const input: DeliverInput = { summary, createdAt: run.submittedAt, ...(run.reply === undefined ? {} : { reply: run.reply }) };
  try {
    const retry = new df.RetryOptions(ACTIVITY_RETRY.firstRetryMs, ACTIVITY_RETRY.attempts);
    yield context.df.callActivityWithRetry(JOB_ACTIVITIES.deliver, retry, input);
  } catch {
    // The outcome stands; the activity logged why its delivery could not be recorded.
  }
  return summary;
};

function* runJob(context: OrchestrationContext, outcome: { recorded: boolean }): Generator<Task, JobSummary | undefined, unknown> {
  let state = context.df.getInput<OrchestrationState>();
  const { run } = state;
  const steps = state.stepsPerGeneration ?? STEPS_PER_GENERATION;
  const now = (): Date => context.df.currentUtcDateTime;
  const retry = new df.RetryOptions(ACTIVITY_RETRY.firstRetryMs, ACTIVITY_RETRY.attempts);
  let phase: JobCustomStatus['phase'] = 'planning';
  /** This execution's activity calls so far (published: the leader's stall check tells calls apart by it). */
  let wait = 0;
  /** How many times the current call was made again after a resume (published: the stall check backs off by it). */
  let repeated = 0;
  const publish = (next: JobCustomStatus['phase'], superseded = false): void => {
    phase = next;
    const status: JobCustomStatus = {
      ...(superseded ? { superseded: true as const } : {}),
      phase,
      epoch: run.epoch,
      progress: state.ledger?.progress ?? EMPTY_PROGRESS,
      dispatch: state.ledger?.highestDispatch ?? 0,
      generation: state.generation,
      wait,
      ...(repeated === 0 ? {} : { repeat: repeated }),
      updatedAt: now().toISOString(),
    };
    context.df.setCustomStatus(status);
  };
  const summaryOf = (status: FinalStatus, error?: JobErrorInfo): JobSummary => {
    return {
      jobId: run.jobId,
      workType: run.workType,
      status,
      progress: state.ledger?.progress ?? EMPTY_PROGRESS,
      ...(error === undefined ? {} : { error }),
      epoch: run.epoch,
      finishedAt: now().toISOString(),
    };
  };
  // Replaced each time one arrives; a resume nobody waits for yet is buffered by Durable until one does.
  let resumeEvent = context.df.waitForExternalEvent(RESUME_EVENT);

  try {
    if (state.plan === undefined) {
      publish('planning');
      const input: PlanInput = { run, at: now().toISOString(), ...(state.prestaged === undefined ? {} : { prestaged: state.prestaged }) };
      const planned = (yield* call(JOB_ACTIVITIES.plan, input)) as PlanOutcome;
      if (!planned.ok && 'standDown' in planned) {
        // Not this run's to do: it answers what is recorded and records nothing itself. A superseded
        // run says so in its status: the intake need not wait for Durable to finish it.
        publish('done', isSuperseded(planned.standDown));
        return planned.standDown;
      }
      if (!planned.ok) return yield* finish(summaryOf('failed', planned.error));
      state = { ...state, plan: { chunkCount: planned.chunkCount, itemCount: planned.itemCount }, ledger: planned.ledger };
      if (planned.summary !== undefined) return recorded(planned.summary);
      if (planned.cancelled) return yield* aggregate(true);
    }
    const plan = state.plan;
    if (plan === undefined) throw new Error('unreachable: planned state without a plan');

    // One event task per execution: Task.any below may pick it up during any step.
    const cancelEvent = context.df.waitForExternalEvent(CANCEL_EVENT);
    for (let n = 0; n < steps; n++) {
      const ledger = state.ledger;
      if (ledger === undefined) throw new Error('unreachable: planned state without a ledger');
      publish('running');
      if (isLedgerDone(ledger)) return yield* aggregate(false);

      const input: StepInput = {
        job: dispatchJobOf(run),
        chunkCount: plan.chunkCount,
        itemCount: plan.itemCount,
        ledger,
        at: now().toISOString(),
      };
      const answered = yield* call(JOB_ACTIVITIES.step, input, cancelEvent);
      // A cancel wins at once; the step still running sees the cancel marker and sends nothing more.
      if (answered === CANCELLED) return yield* aggregate(true);
      const step = answered as JobStepOutcome;
      state = { ...state, ledger: step.ledger };
      if (step.summary !== undefined) return recorded(step.summary);
      if (step.cancelled) {
        publish('running');
        return yield* aggregate(true);
      }
    }

    context.df.continueAsNew({ ...state, generation: state.generation + 1 });
    return undefined;
  } catch (err) {
    // An activity failed after its retries: the job fails visibly rather than hanging.
    // The job's record is public: the message only, never the activity's stack or the server's paths.
    const message = `An activity kept failing after its retries: ${publicMessage(err instanceof Error ? err.message : String(err))}`;
    const failed = summaryOf('failed', { code: 'INTERNAL', message });
    try {
      return yield* finish(failed);
    } catch {
      // Storage fails too: the job still ends visibly, without its summary recorded.
      publish('done');
      outcome.recorded = false;
      return failed;
    }
  }

  /**
   * Calls an activity (with retries) and answers its result, or CANCELLED when `cancel` is given and
   * wins. A `resume` event calls the activity again: the leader raises one for a run that stopped
   * moving and whose call holds no lease (see the module comment), so its answer may be held by an
   * instance that died. Activities are idempotent, so a second call is safe; its answer is used, the
   * earlier call's ignored, and it runs only once no earlier call of the job runs (CallClaims).
   * Every resume calls again, even one raised for an earlier call: waiting on the same activity
   * task again would make the SDK schedule it again anyway (a Task.any re-yields its children's
   * actions), and a spare call costs one more pass. A failure after the retries throws.
   */
  function* call(name: string, input: object, cancel?: Task): Generator<Task, unknown, unknown> {
    for (repeated = 0; ; repeated++) {
      wait += 1;
      publish(phase);
      // A repeat says so: it takes the job's call lease before any work, waiting while an earlier
      // call that is still alive holds it (CallClaims), so calls of the job never run side by side.
      // (finish's input is the summary it records, and finish is one idempotent write: left as it is.)
      const asked = repeated === 0 || name === JOB_ACTIVITIES.finish ? input : { ...input, repeat: repeated };
      const task = context.df.callActivityWithRetry(name, retry, asked);
      const winner = yield context.df.Task.any(cancel === undefined ? [task, resumeEvent] : [task, cancel, resumeEvent]);
      if (winner === task) {
        // Task.any does not throw for a failed task: the error (after its retries) fails the job.
        if (task.isFaulted) throw task.result instanceof Error ? task.result : new Error(String(task.result));
        return task.result;
      }
      if (winner === cancel) return CANCELLED;
      resumeEvent = context.df.waitForExternalEvent(RESUME_EVENT);
    }
  }

  function* finish(summary: JobSummary): Generator<Task, JobSummary, unknown> {
    return recorded((yield* call(JOB_ACTIVITIES.finish, summary)) as JobSummary);
  }

  function* aggregate(cancelledJob: boolean): Generator<Task, JobSummary, unknown> {
    const plan = state.plan ?? { chunkCount: 0, itemCount: 0 };
    publish('aggregating');
    const input: AggregateInput = {
      run: dispatchJobOf(run),
      chunkCount: plan.chunkCount,
      itemCount: plan.itemCount,
      cancelled: cancelledJob,
    };
    // Aggregation records the final summary itself and answers the recorded one.
    return recorded((yield* call(JOB_ACTIVITIES.aggregate, input)) as JobSummary);
  }

  /** The job's recorded final summary (from the last step, the aggregate activity or finish) ends the run. */
  function recorded(stored: JobSummary): JobSummary {
    state = { ...state, ledger: { ...(state.ledger ?? { next: 0, inFlight: [], highestDispatch: 0 }), progress: stored.progress } };
    publish('done');
    return stored;
  }
}
