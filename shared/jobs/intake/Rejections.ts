/**
 * A submission's rejection: its record, the original on `<jobsQueue>-poison`, its outcome if one is
 * wanted, then the message's delete (`reject`); and the last delivery of a submission whose start
 * kept failing, rejected with START_FAILED once its start record is retired (`giveUp`).
 *
 * Rejection records are created once and changed only with If-Match; a poison copy whose record
 * update loses that race is deleted again. A record lives under the submitted job id when that id is
 * free, else under `m-<message id>`; a different submission under a used job id is rejected
 * (DUPLICATE_JOB_ID) and the job under that id is left untouched.
 * Guaranteed: a rejected submission is deleted only after its rejection is recorded with the
 * original in `<jobsQueue>-poison`.
 * Not guaranteed: a single poison copy when a leader dies between sending it and recording it.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3.
 */
import { type Logger } from '../../observability/log';
import { type JobReply } from '../delivery/DeliveryTargets';
import { outcomeOfRejection } from '../delivery/JobOutcome';
import { type OutcomeDelivery } from '../delivery/OutcomeDelivery';
import { JobError, type JobErrorInfo } from '../JobError';
import { instanceIdFor } from '../jobIds';
import { type AcceptedJob } from '../JobSubmission';
import { jobViewOf, type OrchestrationClient, runOf } from '../run/OrchestrationClient';
import { type JobRecord, type JobStore, type StartRecord, type Versioned } from '../store/JobStore';
import { type ReceivedSubmission, type SubmissionQueue } from '../SubmissionQueue';
import { type Now } from '../wallClock';
import { INTAKE, type IntakeContext, type IntakeOutcome, isAbort } from './intakeTerms';
import { startInstanceId } from './startSteps';

/** A submission to reject: its message, why, and what it asked for as far as it could be read. */
export interface Rejection {
  readonly message: ReceivedSubmission;
  readonly error: JobErrorInfo;
  /** The job id the submission asked for, when it named a valid one. */
  readonly submittedJobId?: string | undefined;
  /** The submission's fingerprint, when it was valid enough to have one. */
  readonly fingerprint?: string | undefined;
  /** Where its outcome goes, when its reply fields were valid on their own. */
  readonly reply?: JobReply | undefined;
}

/** What a valid submission asked for, for its rejection record. */
export function askedBy(job: AcceptedJob): Pick<Rejection, 'submittedJobId' | 'fingerprint' | 'reply'> {
  return { submittedJobId: job.jobId, fingerprint: job.fingerprint, reply: job.reply };
}

export interface RejectionDeps {
  readonly poisonQueue: SubmissionQueue;
  readonly store: JobStore;
  readonly logger: Logger;
  readonly now: Now;
  /** The delivery of a rejection's outcome (absent: nothing sent). */
  readonly outcomes?: OutcomeDelivery | undefined;
  /** Deletes the message from the jobs queue (a delete that finds it gone or received again counts as done). */
  deleteMessage(message: ReceivedSubmission, ctx: IntakeContext): Promise<void>;
  /** A submission whose start is recorded after all: the start checks see it through. */
  alreadyAccepted(message: ReceivedSubmission, job: AcceptedJob, startId: string, ctx: IntakeContext): Promise<IntakeOutcome>;
}

export class Rejections {
  private readonly now: Now;

  constructor(private readonly deps: RejectionDeps) {
    this.now = deps.now;
  }

  /**
   * The last delivery of a submission whose start kept failing: rejected with START_FAILED, its start
   * record retired first (so no late start of it does work), unless its start went through after all.
   */
  async giveUp(
    message: ReceivedSubmission,
    job: AcceptedJob,
    cause: unknown,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<IntakeOutcome> {
    const { store } = this.deps;
    const found = await store.readStart(job.jobId, ctx.signal);
    if (found !== undefined && found.value.state === 'active' && found.value.fingerprint === job.fingerprint) {
      // A newer leader's start (it took the record over): not this one's to give up. Left for that leader.
      if (found.value.epoch > ctx.epoch) {
        this.deps.logger.warn('intake.start_failed', {
          jobId: job.jobId,
          messageId: message.messageId,
          dequeueCount: message.dequeueCount,
          error: cause,
          epoch: ctx.epoch,
          hint: `the start record belongs to epoch ${found.value.epoch}; left to that leader`,
        });
        return 'retry_later';
      }
      const instance = jobViewOf(await orchestrations.getStatus(startInstanceId(found.value)), job.jobId);
      const { startId } = found.value;
      if (instance !== undefined && runOf(instance)?.startId === startId) return this.deps.alreadyAccepted(message, job, startId, ctx);
      const given: StartRecord = { ...found.value, state: 'rejected', epoch: ctx.epoch, holder: ctx.holder, at: this.now().toISOString() };
      const retired = await store.replaceStart(given, found.etag, ctx.signal);
      if (retired === 'conflict') throw new Error(`The start record of job ${job.jobId} changed while its start was being given up.`);
      await store.clearUnconfirmed(job.jobId, found.value.startId, ctx.signal);
    }
    const reason = startFailed(message.dequeueCount, cause instanceof Error ? cause.message : String(cause));
    return this.reject({ message, error: reason, ...askedBy(job) }, ctx, orchestrations);
  }

  /**
   * Records the rejection, copies the original message to the poison queue (once), then deletes it.
   * The record lives under the submitted job id when that id is free, else under `m-<message id>`.
   */
  async reject(rejection: Rejection, ctx: IntakeContext, orchestrations: OrchestrationClient): Promise<IntakeOutcome> {
    const { logger } = this.deps;
    const { message, error, submittedJobId, fingerprint, reply } = rejection;
    let recordId = `m-${message.messageId}`;
    const mayUseJobId = submittedJobId !== undefined && error.code !== 'DUPLICATE_JOB_ID';
    if (mayUseJobId && !(await this.idTaken(submittedJobId, fingerprint, ctx, orchestrations))) recordId = submittedJobId;
    const at = this.now().toISOString();
    const record: JobRecord = {
      jobId: recordId,
      status: 'rejected',
      createdAt: at,
      updatedAt: at,
      error: { code: error.code, message: error.message },
      epoch: ctx.epoch,
      messageId: message.messageId,
      via: 'queue',
      ...(fingerprint === undefined ? {} : { fingerprint }),
      ...(submittedJobId === undefined ? {} : { submittedJobId }),
      ...(reply === undefined ? {} : { reply }),
    };
    let stored = await this.recordRejection(record, message, ctx);
    if (stored.value.poisonMessageId === undefined) stored = await this.copyToPoison(message, stored, ctx);
    // The outcome goes out after the rejection is recorded and before the message is deleted: a leader
    // killed in between leaves the message, whose next delivery finds the record and sends again.
    if (!(await this.deliverRejection(stored.value, reply, message, ctx))) return 'retry_later';
    await this.deps.deleteMessage(message, ctx);
    logger.warn('intake.rejected', {
      jobId: stored.value.jobId,
      submittedJobId,
      code: error.code,
      reason: error.message,
      messageId: message.messageId,
      epoch: ctx.epoch,
    });
    return 'rejected';
  }

  /**
   * Sends a rejection's outcome (its reply queue, the outcome stream, its callback). False when the
   * delivery's record could not be written: the message stays for a later pass, until its last
   * delivery (then the rejection stands without its reply, logged as `delivery.abandoned`).
   */
  private async deliverRejection(
    record: JobRecord,
    reply: JobReply | undefined,
    message: ReceivedSubmission,
    ctx: IntakeContext,
  ): Promise<boolean> {
    const outcomes = this.deps.outcomes;
    if (outcomes === undefined || !outcomes.wanted(reply)) return true;
    try {
      await outcomes.deliver(outcomeOfRejection(record, reply), reply, ctx.signal);
      return true;
    } catch (err) {
      if (isAbort(err)) throw err;
      const last = message.dequeueCount >= INTAKE.maxStartAttempts;
      const fields = { jobId: record.jobId, messageId: message.messageId, error: err, epoch: ctx.epoch };
      this.deps.logger.warn(last ? 'delivery.abandoned' : 'delivery.record_failed', fields);
      return last;
    }
  }

  /** Whether a job id belongs to something else already (an instance, or another submission's start record). */
  private async idTaken(
    jobId: string,
    fingerprint: string | undefined,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<boolean> {
    if ((await orchestrations.getStatus(instanceIdFor(jobId))) !== undefined) return true;
    const start = await this.deps.store.readStart(jobId, ctx.signal);
    if (start === undefined) return false;
    if (start.value.fingerprint !== fingerprint) return true;
    // A start in a shared run holds the id as its own instance would.
    const shared = start.value.instance;
    return shared !== undefined && jobViewOf(await orchestrations.getStatus(shared), jobId) !== undefined;
  }

  /** Creates the rejection record once, or finds the one an earlier delivery of this message made. */
  private async recordRejection(record: JobRecord, message: ReceivedSubmission, ctx: IntakeContext): Promise<Versioned<JobRecord>> {
    const { store } = this.deps;
    const created = await store.createRecordVersioned(record, ctx.signal);
    if (created !== 'exists') return { value: record, etag: created.etag };
    const existing = await store.readRecordVersioned(record.jobId, ctx.signal);
    if (existing?.value.messageId === message.messageId) return existing;
    const pendingByHttp = existing?.value.status === 'pending' && existing.value.fingerprint === record.fingerprint;
    if (existing !== undefined && pendingByHttp && record.jobId === record.submittedJobId) {
      // The HTTP API accepted this submission and it turned out invalid later (e.g. its blob vanished).
      const replaced: JobRecord = { ...record, createdAt: existing.value.createdAt, via: existing.value.via };
      const written = await store.replaceRecordIf(replaced, existing.etag, ctx.signal);
      if (written === 'conflict') throw new Error(`The record of job ${record.jobId} changed while it was being rejected.`);
      return { value: replaced, etag: written.etag };
    }
    const moved: JobRecord = { ...record, jobId: `m-${message.messageId}` };
    const again = await store.createRecordVersioned(moved, ctx.signal);
    if (again !== 'exists') return { value: moved, etag: again.etag };
    const earlier = await store.readRecordVersioned(moved.jobId, ctx.signal);
    if (earlier === undefined) throw new Error(`The rejection record ${moved.jobId} vanished while it was being read.`);
    return earlier;
  }

  /**
   * Copies the original to the poison queue and records the copy with If-Match; a copy whose record
   * update loses (another leader recorded its own copy first) is deleted again, so one copy stays.
   */
  private async copyToPoison(
    message: ReceivedSubmission,
    stored: Versioned<JobRecord>,
    ctx: IntakeContext,
  ): Promise<Versioned<JobRecord>> {
    const { store, poisonQueue, logger } = this.deps;
    const sent = await poisonQueue.sendMessage(message.messageText, { abortSignal: ctx.signal, messageTimeToLive: -1 });
    const updated: JobRecord = { ...stored.value, poisonMessageId: sent.messageId, updatedAt: this.now().toISOString() };
    const written = await store.replaceRecordIf(updated, stored.etag, ctx.signal);
    if (written !== 'conflict') return { value: updated, etag: written.etag };
    // No abort signal: the undo must happen even if this leader has just stepped down.
    await poisonQueue.deleteMessage(sent.messageId, sent.popReceipt);
    logger.warn('intake.poison_copy_undone', { jobId: stored.value.jobId, messageId: message.messageId, epoch: ctx.epoch });
    const latest = await store.readRecordVersioned(stored.value.jobId, ctx.signal);
    if (latest?.value.poisonMessageId === undefined) {
      throw new Error(`The record of ${stored.value.jobId} changed while its poison copy was being recorded.`);
    }
    return latest;
  }
}

export function startFailed(deliveries: number, why: string): JobError {
  return new JobError('START_FAILED', `The job could not be started after ${deliveries} tries: ${why}`);
}

export function duplicateError(jobId: string, since: string): JobError {
  return new JobError(
    'DUPLICATE_JOB_ID',
    `Job id "${jobId}" is already used by a different submission (since ${since}); the existing job was left untouched. ` +
      `Submit with a new jobId.`,
  );
}
