/**
 * A recorded start's next step, from what Durable shows of its instance (`nextStartStep`), and the
 * Durable start of a recorded run (`startRecorded`), shared by a first start and its repair.
 *
 * An instance past its plan step (or finished with the job's outcome) confirms the start; one that
 * is missing, ended without doing the job (it stood down), or Pending for longer than
 * `stuckPendingSeconds` (its start message never came) is started again. Every start again is a
 * new start (new start id, the pass's epoch) under the next generation's instance id, never under
 * an id another start used: Durable refuses a start over a Pending or Running instance, and over a
 * finished one it replaces the history, so a late landing of the earlier start (a leader frozen
 * while its `startNew` was in flight) would wipe the run that did the work.
 * Fencing: a run's plan step (JobActivities) does work only if the job has no final summary, the
 * start record names the run's start id, and the run's epoch is the lease's current one; otherwise
 * it stands down and ends with the recorded summary (or a superseded marker).
 * Guaranteed: a finished job is never started again; a start that lands late lands on its own
 * instance id only, where its run stands down at its plan step (the start record names another start).
 * Not guaranteed: a single run when a healthy instance stays Pending past `stuckPendingSeconds`
 * (both work, results stay exact).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3.
 */
import { instanceIdFor } from '../jobIds';
import { isSuperseded, type JobCustomStatus } from '../JobSummary';
import { type StagedCounts } from '../run/JobActivities';
import { initialState } from '../run/jobOrchestration';
import { isFinished, type OrchestrationClient, type OrchestrationSnapshot, runOf } from '../run/OrchestrationClient';
import { type StartRecord } from '../store/JobStore';
import { INTAKE } from './intakeTerms';

/** The next step for a recorded start, from what Durable shows (see the module comment). */
export type StartStep =
  | { readonly kind: 'confirmed' }
  | { readonly kind: 'wait' }
  /** Take the record over (new start id, this epoch, the next instance generation) and start it. */
  | { readonly kind: 'take_over'; readonly reason: string };

const PAST_PLAN: ReadonlySet<string> = new Set<JobCustomStatus['phase']>(['running', 'aggregating']);

export function nextStartStep(
  instance: OrchestrationSnapshot | undefined,
  start: StartRecord,
  epoch: number,
  now: Date,
  /** How long a Pending instance may wait for its start message (the intake's `stuckAfterMs`). */
  stuckAfterMs: number = INTAKE.stuckPendingSeconds * 1000,
): StartStep {
  const olderEpoch = start.epoch < epoch;
  // Every start again is a new start (new start id, this epoch) under an instance id of its own (the
  // next generation): the earlier start may still land late (a leader frozen while its start was in
  // flight), and on a finished instance Durable would replace the history of the run that did the work.
  const again = (reason: string): StartStep => ({ kind: 'take_over', reason });
  if (instance === undefined) return again('no instance');
  const status = instance.runtimeStatus;
  // Ended: with the job's outcome (whichever start's run produced or answered it), or having stood down.
  if (isFinished(status)) return isSuperseded(instance.output) ? again('its run stood down') : { kind: 'confirmed' };
  const stuck = status === 'Pending' && now.getTime() - instance.createdTime.getTime() > stuckAfterMs;
  if (runOf(instance)?.startId === start.startId) {
    const custom = instance.customStatus as Partial<JobCustomStatus> | null | undefined;
    // Its plan stood down as superseded (a newer leader's epoch), and Durable keeps it Running until
    // the calls it made answer (a plan held by a dead instance: 20 s or more): this newer leader takes
    // the start over in the next generation now. (A leader of the run's own epoch that sees this has
    // lost the lease: it waits, as before.)
    if (custom?.superseded === true && olderEpoch) return { kind: 'take_over', reason: 'its run stood down' };
    const phase = custom?.phase;
    if (status === 'ContinuedAsNew' || (phase !== undefined && PAST_PLAN.has(phase))) return { kind: 'confirmed' };
    // A Pending instance may never get its start message; Durable refuses to start over it.
    if (status === 'Pending' && (stuck || olderEpoch)) {
      return { kind: 'take_over', reason: stuck ? 'stuck Pending' : 'Pending under an older epoch' };
    }
    return { kind: 'wait' };
  }
  // Another start holds the instance id (a stale or superseded one): it stands down at its plan step.
  if (stuck) return { kind: 'take_over', reason: 'another start is stuck Pending there' };
  return { kind: 'wait' };
}

/** The instance a recorded start runs in: its shared run's, else `job-<jobId>[.<generation>]`. */
export function startInstanceId(start: StartRecord): string {
  return start.instance ?? instanceIdFor(start.jobId, start.generation);
}

/** Starts the record's run; an instance already running this very start counts as success. */
export async function startRecorded(start: StartRecord, orchestrations: OrchestrationClient, prestaged?: StagedCounts): Promise<void> {
  const instanceId = instanceIdFor(start.jobId, start.generation);
  try {
    await orchestrations.start(instanceId, initialState(start.run, undefined, prestaged));
  } catch (err) {
    const existing = await orchestrations.getStatus(instanceId);
    if (existing !== undefined && runOf(existing)?.startId === start.startId) return;
    throw err;
  }
}
