/**
 * One job's status, read from where its state is (`current`): its start record, which carries a
 * finished job's outcome and names the instance of an unfinished one (its own, or a shared run);
 * that instance; else the HTTP submission's pending record (pending or rejected).
 *
 * Guarantees: at most two storage reads for a job that exists, one for a finished one (plus the
 * delivery record of a finished job that asked for a reply; and a third for a job that went on
 * alone from a shared run, whose own run shows its progress); once a job is accepted (202) a read
 * never answers JOB_NOT_FOUND (`current` says why); a run that stood down is never shown as the
 * job's outcome; a running job whose outcome is already recorded shows that outcome (it is in the
 * start record, read first); a job that asked for a reply shows where its outcome went. Job ids
 * are validated before they touch storage.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 8.
 */
import { hasReply, type JobReply } from '../delivery/DeliveryTargets';
import { type DeliveryRecord, deliveryView, waitingView } from '../delivery/OutcomeDelivery';
import { startInstanceId } from '../intake/startSteps';
import { JobError } from '../JobError';
import { assertJobId, instanceIdFor, isBatchInstanceId } from '../jobIds';
import { isSuperseded, type JobCustomStatus, type JobSummary } from '../JobSummary';
import { type BatchCustomStatus, type BatchOutput } from '../run/batchOrchestration';
import { jobViewOf, type OrchestrationClient, type OrchestrationSnapshot, runOf } from '../run/OrchestrationClient';
import { type JobRecord, type JobStore, type StartRecord } from '../store/JobStore';
import { finishedLast, fromRecord, fromSnapshot, fromStart, type JobView } from './jobViews';

export interface JobStatusDeps {
  readonly store: JobStore;
  /** Builds the status route for a job (resultUrl). */
  readonly statusPath: (jobId: string) => string;
}

/** Where a job's state is (see JobStatusReader.current). */
export interface JobState {
  readonly snapshot?: OrchestrationSnapshot;
  readonly start?: StartRecord;
  readonly record?: JobRecord;
  readonly stoodDown?: OrchestrationSnapshot;
}

export class JobStatusReader {
  constructor(private readonly deps: JobStatusDeps) {}

  /** A job's view; once the job is accepted (202) never JOB_NOT_FOUND (see `current`). */
  async get(jobId: string, orchestrations: OrchestrationClient): Promise<JobView> {
    assertJobId(jobId);
    const current = await this.current(jobId, orchestrations);
    if (current.snapshot !== undefined) {
      return this.withDelivery(this.fromSnapshot(jobId, current.snapshot), runOf(current.snapshot)?.reply);
    }
    if (current.start !== undefined) return this.withDelivery(fromStart(current.start), current.start.run.reply);
    if (current.record !== undefined) return this.withDelivery(fromRecord(current.record), current.record.reply);
    if (current.stoodDown !== undefined) return this.fromSnapshot(jobId, current.stoodDown);
    const hint = 'A queue submission shows up here once the leader has read it (within a few seconds).';
    throw new JobError('JOB_NOT_FOUND', `No job "${jobId}". ${hint}`);
  }

  /**
   * Where the job's state is, in at most two reads for a job that exists (a third only to find one
   * that does not, or one left in an old layout):
   * 1. its start record: a finished job's carries its outcome (`StartRecord.outcome`, copied there
   *    when it is recorded): one read; an unfinished one names its instance;
   * 2. that instance (its own `job-<jobId>[.<n>]`, or the shared run it is in), for its phase and
   *    progress (and, for a job that went on alone from its shared run, its own run after it); or,
   *    with no start record yet, the HTTP submission's pending record.
   * Never JOB_NOT_FOUND once the job is accepted, whatever happens between the reads: each document
   * read is never deleted once written (the pending record stays once the job is started, the start
   * record until the job is purged), and a start record is created before its instance, so a read
   * that misses one finds what came before it. `start` is set when the job is accepted and no
   * instance of it shows its state yet.
   */
  async current(jobId: string, orchestrations: OrchestrationClient): Promise<JobState> {
    const start = (await this.deps.store.readStart(jobId))?.value;
    if (start !== undefined && start.state === 'active') {
      if (start.outcome !== undefined && !isSuperseded(start.outcome)) return { snapshot: recordedSnapshot(start, start.outcome) };
      const shown = await orchestrations.getStatus(startInstanceId(start));
      // A job that went on alone from its shared run: its own run (`job-<jobId>`) has its phase and
      // progress, the shared run only that it waits (a third read, for such a job only; until its
      // own run exists the shared run's view stands).
      const own = goneAlone(shown, jobId) ? await orchestrations.getStatus(instanceIdFor(jobId)) : undefined;
      const named = own ?? jobViewOf(shown, jobId);
      if (named !== undefined && !isSuperseded(named.output)) return { snapshot: named };
      // A shared run purged with another of its jobs (Retention): the outcome recorded shows.
      const final = start.instance !== undefined && named === undefined ? await this.deps.store.readFinal(jobId) : undefined;
      return final === undefined ? { start } : { snapshot: recordedSnapshot(start, final) };
    }
    const record = await this.deps.store.readRecord(jobId);
    if (record !== undefined) return { record };
    // No start record and no submission: a job of an older layout, or a run started by hand, whose
    // outcome may be recorded before its run hears of it (`settled`: one more read while it runs).
    const first = await orchestrations.getStatus(instanceIdFor(jobId));
    if (first === undefined) return {};
    return isSuperseded(first.output) ? { stoodDown: first } : { snapshot: await this.settled(jobId, first) };
  }

  /** The job's current run as Durable shows it (the instance its start record names, else `job-<jobId>`), whatever outcome is recorded. */
  async run(jobId: string, orchestrations: OrchestrationClient): Promise<OrchestrationSnapshot | undefined> {
    const start = (await this.deps.store.readStart(jobId))?.value;
    if (start === undefined || start.state !== 'active') return orchestrations.getStatus(instanceIdFor(jobId));
    return jobViewOf(await orchestrations.getStatus(startInstanceId(start)), jobId);
  }

  /**
   * A job that asked for a reply shows its delivery: what its record says once the outcome went out
   * (one blob read, only for such jobs), else `waiting`. A read that fails shows `waiting` too.
   */
  private async withDelivery(view: JobView, reply: JobReply | undefined): Promise<JobView> {
    const withCorrelation = reply?.correlationId === undefined ? view : { ...view, correlationId: reply.correlationId };
    if (!hasReply(reply) || reply === undefined) return withCorrelation;
    const ended = view.status !== 'pending' && view.status !== 'running';
    const record = ended ? await this.deps.store.deliveries.readDelivery<DeliveryRecord>(view.jobId).catch(() => undefined) : undefined;
    return { ...withCorrelation, delivery: record === undefined ? waitingView(reply) : deliveryView(record) };
  }

  /**
   * A running job whose outcome is already recorded shows it: `final.json` is written once, by the
   * activity that aggregates the job, before the run hears of it (a Durable hop later), and a run
   * whose call was repeated after a resume (StalledJobs) stays Running in Durable until the held
   * answer comes back (up to the control queue's 1 minute: Durable completes an instance only once
   * every activity it started has answered). Costs one blob read per status read of a running job,
   * none once the run is Pending or finished.
   */
  async settled(jobId: string, s: OrchestrationSnapshot): Promise<OrchestrationSnapshot> {
    // A shared run's output for a job can be its own stand-in (a call of the job it no longer waited
    // for: batchOrchestration.ts): the recorded outcome is read for it whatever the run's status.
    if (s.runtimeStatus !== 'Running' && s.runtimeStatus !== 'ContinuedAsNew' && !isBatchInstanceId(s.instanceId)) return s;
    const custom = s.customStatus as Partial<JobCustomStatus> | null | undefined;
    // Unreadable now (a storage fault): Durable's own view stands; the outcome shows on a later read.
    const final = await this.deps.store.readFinal(jobId).catch(() => undefined);
    if (final === undefined || isSuperseded(final)) return s;
    // Its last change is when the outcome was recorded (the run's last update may be older).
    const lastUpdatedTime = finishedLast(s.lastUpdatedTime, final);
    return { ...s, runtimeStatus: 'Completed', output: final, customStatus: { ...custom, phase: 'done' }, lastUpdatedTime };
  }

  /** The view a snapshot shows (its `resultUrl` on this app's status route). */
  fromSnapshot(jobId: string, s: OrchestrationSnapshot): JobView {
    return fromSnapshot(jobId, s, this.deps.statusPath);
  }
}

/** Whether a shared run's snapshot says the job went on alone and has no outcome in it yet. */
function goneAlone(shared: OrchestrationSnapshot | undefined, jobId: string): boolean {
  if (shared === undefined || !isBatchInstanceId(shared.instanceId)) return false;
  const alone = (shared.customStatus as Partial<BatchCustomStatus> | null | undefined)?.alone;
  const output = (shared.output as BatchOutput | null | undefined)?.[jobId];
  return alone?.includes(jobId) === true && output === undefined;
}

/** What a finished run would show of a job whose outcome is recorded and whose shared run is gone. */
function recordedSnapshot(start: StartRecord, final: JobSummary): OrchestrationSnapshot {
  const at = new Date(final.finishedAt);
  return {
    instanceId: startInstanceId(start),
    runtimeStatus: 'Completed',
    input: { run: start.run },
    output: final,
    customStatus: { phase: 'done' },
    createdTime: new Date(start.at),
    lastUpdatedTime: at,
  };
}
