/**
 * The job orchestration (one Durable instance per job, id `job-<jobId>`): plan -> poll progress ->
 * (re-dispatch chunks past their deadline) -> aggregate.
 *
 * Guarantees: the history stays bounded whatever the job's size: chunks, not items, are the unit,
 * and they never appear as history events (fan-out is one activity that sends the queue messages);
 * each execution polls at most `POLL.pollsPerGeneration` times and then continues as new with its
 * state. Polls use durable timers at an interval growing from `POLL.initialMs` by `POLL.factor` to
 * `POLL.maxMs`, reset after a re-dispatch. A chunk is late when a worker claimed its latest
 * dispatch `deadlineSeconds` ago or more and it still has no result (a chunk waiting unclaimed in
 * the queue is never late, however long the backlog); each poll reports the late chunks and a
 * re-dispatch activity sends them again, up to `attempts` dispatches per chunk, then records them
 * as failed, so the job always finishes (see JobActivities for the rule). A `cancel` event (or the cancel marker seen by a progress poll) ends the job as
 * cancelled with what was done. The custom status carries phase, progress and the leader's epoch.
 * The output is a small `JobSummary`; the full result is in a blob. Every ending goes through the
 * finish activity, which records the summary once (`final.json`) and answers the recorded one.
 * A plan step that stands down (the job already finished, or this run is not the job's current
 * start: see JobIntake) ends the run at once with the recorded summary, or a superseded marker,
 * having done nothing.
 *
 * Deterministic, as Durable replay requires: time comes from `currentUtcDateTime`, all I/O is in
 * activities, and the state carried across continue-as-new is plain JSON.
 */
import * as df from 'durable-functions';
import { type OrchestrationContext, type OrchestrationHandler, type Task } from 'durable-functions';

import { publicMessage } from '../errors';
import { type AggregateInput, type PlanOutcome, type ProgressInput, type ProgressOutcome, type RedispatchInput, type RedispatchOutcome } from './JobActivities';
import { type JobErrorInfo } from './JobError';
import { type FinalStatus, type JobCustomStatus, type JobProgress, type JobRun, type JobSummary } from './JobRun';

export const JOB_ORCHESTRATOR = 'jobOrchestrator';
export const JOB_ACTIVITIES = {
  plan: 'jobPlan',
  progress: 'jobProgress',
  redispatch: 'jobRedispatch',
  aggregate: 'jobAggregate',
  finish: 'jobFinish',
} as const;
export const CANCEL_EVENT = 'cancel';

export interface PollPolicy {
  readonly initialMs: number;
  readonly maxMs: number;
  readonly factor: number;
  /** Polls per execution before continue-as-new; 8 history events each. */
  readonly pollsPerGeneration: number;
}

/** The polling every job uses; a state may carry another (tests of continue-as-new on a real backend). */
export const POLL: PollPolicy = {
  initialMs: 500,
  maxMs: 15_000,
  factor: 1.5,
  pollsPerGeneration: 20,
};

/** Activities are retried on infrastructure errors (bad input is an outcome, not an error). */
const ACTIVITY_RETRY = { firstRetryMs: 2_000, attempts: 4 } as const;

export interface OrchestrationState {
  readonly run: JobRun;
  readonly plan?: { readonly chunkCount: number; readonly itemCount: number };
  /** The highest dispatch round any chunk has reached (1 after planning, 2 after a chunk's first re-dispatch, ...). */
  readonly dispatch: number;
  readonly pollMs: number;
  /** Executions so far, counting this one from 1. */
  readonly generation: number;
  readonly progress?: JobProgress;
  /** Absent: `POLL`. */
  readonly poll?: PollPolicy;
}

export function initialState(run: JobRun, poll?: PollPolicy): OrchestrationState {
  return { run, dispatch: 0, pollMs: (poll ?? POLL).initialMs, generation: 1, ...(poll === undefined ? {} : { poll }) };
}

const EMPTY_PROGRESS: JobProgress = { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } };

export const jobOrchestration: OrchestrationHandler = function* (context: OrchestrationContext): Generator<Task, JobSummary | undefined, unknown> {
  let state = context.df.getInput<OrchestrationState>();
  const { run } = state;
  const policy = state.poll ?? POLL;
  const now = (): Date => context.df.currentUtcDateTime;
  const retry = new df.RetryOptions(ACTIVITY_RETRY.firstRetryMs, ACTIVITY_RETRY.attempts);
  const publish = (phase: JobCustomStatus['phase']): void => {
    const status: JobCustomStatus = {
      phase,
      epoch: run.epoch,
      progress: state.progress ?? EMPTY_PROGRESS,
      dispatch: state.dispatch,
      generation: state.generation,
      updatedAt: now().toISOString(),
    };
    context.df.setCustomStatus(status);
  };
  const summaryOf = (status: FinalStatus, error?: JobErrorInfo): JobSummary => {
    return {
      jobId: run.jobId,
      workType: run.workType,
      status,
      progress: state.progress ?? EMPTY_PROGRESS,
      ...(error === undefined ? {} : { error }),
      epoch: run.epoch,
      finishedAt: now().toISOString(),
    };
  };

  try {
    if (state.plan === undefined) {
      publish('planning');
      const planned = (yield context.df.callActivityWithRetry(JOB_ACTIVITIES.plan, retry, run)) as PlanOutcome;
      if (!planned.ok && 'standDown' in planned) {
        // Not this run's to do: it answers what is recorded and records nothing itself.
        publish('done');
        return planned.standDown;
      }
      if (!planned.ok) return yield* finish(summaryOf('failed', planned.error));
      if (planned.cancelled) return yield* finish(summaryOf('cancelled'));
      state = {
        ...state,
        plan: { chunkCount: planned.chunkCount, itemCount: planned.itemCount },
        dispatch: 1,
        pollMs: policy.initialMs,
        progress: { chunks: { total: planned.chunkCount, done: 0, failed: 0 }, items: { total: planned.itemCount, done: 0, failed: 0 } },
      };
    }
    const plan = state.plan;
    if (plan === undefined) throw new Error('unreachable: planned state without a plan');

    // One event task per execution: Task.any below may pick it up on any poll.
    const cancelEvent = context.df.waitForExternalEvent(CANCEL_EVENT);
    let cancelled = false;
    for (let poll = 0; poll < policy.pollsPerGeneration && !cancelled; poll++) {
      const progressInput: ProgressInput = { jobId: run.jobId, chunkCount: plan.chunkCount, itemCount: plan.itemCount, at: now().toISOString(), deadlineSeconds: run.options.deadlineSeconds };
      const progress = (yield context.df.callActivityWithRetry(JOB_ACTIVITIES.progress, retry, progressInput)) as ProgressOutcome;
      state = { ...state, progress: { chunks: progress.chunks, items: progress.items } };
      publish('running');
      if (progress.cancelled) {
        cancelled = true;
        break;
      }
      if (progress.chunks.done + progress.chunks.failed >= plan.chunkCount) return yield* aggregate(false);

      if (progress.late > 0) {
        const input: RedispatchInput = { run, chunkCount: plan.chunkCount, itemCount: plan.itemCount, at: now().toISOString() };
        const outcome = (yield context.df.callActivityWithRetry(JOB_ACTIVITIES.redispatch, retry, input)) as RedispatchOutcome;
        // The next poll comes soon: expired chunks may have finished the job, re-sent ones are quick.
        state = { ...state, dispatch: Math.max(state.dispatch, outcome.highestDispatch), pollMs: policy.initialMs };
      }

      const timer = context.df.createTimer(new Date(now().getTime() + state.pollMs));
      const winner = yield context.df.Task.any([timer, cancelEvent]);
      if (winner === cancelEvent) {
        timer.cancel();
        cancelled = true;
      } else {
        state = { ...state, pollMs: Math.min(Math.round(state.pollMs * policy.factor), policy.maxMs) };
      }
    }
    if (cancelled) return yield* aggregate(true);

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
      return failed;
    }
  }

  function* finish(summary: JobSummary): Generator<Task, JobSummary, unknown> {
    const stored = (yield context.df.callActivityWithRetry(JOB_ACTIVITIES.finish, retry, summary)) as JobSummary;
    state = { ...state, progress: stored.progress };
    publish('done');
    return stored;
  }

  function* aggregate(cancelledJob: boolean): Generator<Task, JobSummary, unknown> {
    const plan = state.plan ?? { chunkCount: 0, itemCount: 0 };
    publish('aggregating');
    const input: AggregateInput = { run, chunkCount: plan.chunkCount, itemCount: plan.itemCount, cancelled: cancelledJob };
    const summary = (yield context.df.callActivityWithRetry(JOB_ACTIVITIES.aggregate, retry, input)) as JobSummary;
    return yield* finish(summary);
  }
};
