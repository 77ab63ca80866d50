/**
 * The leader's intake of job submissions from the jobs queue (the body of the coordination pass).
 *
 * Guarantees:
 * - Nothing is dropped silently: a message is deleted only after its job's orchestration exists
 *   (started now or found started), or after it was recorded as a rejected job (reason visible
 *   through the status API) and its original text was copied to `<jobsQueue>-poison`.
 * - Starting is idempotent: the instance id derives from the job id and its status is checked
 *   first; the same submission delivered again (same fingerprint) is a no-op; a different
 *   submission reusing an existing job id is rejected (DUPLICATE_JOB_ID) without touching the job.
 * - A submission without a job id gets `q-<queue message id>`, stable across redeliveries.
 * - Every side effect carries the leader's epoch (orchestration input and custom status,
 *   rejection records). The pass stops between messages once `signal` aborts and reports
 *   `progress()` after each message, for the leader's watchdog.
 * Not guaranteed: exclusion between two leaders racing on the same message (check-then-start);
 * leader election keeps one epoch acting, and a stale leader's pass is aborted by its signal.
 */
import { type DequeuedMessageItem, type QueueClient } from '@azure/storage-queue';

import { type Logger } from '../observability/log';
import { type WorkTypeRegistry } from '../worktypes/WorkTypeRegistry';
import { type InputContainers } from './InputContainers';
import { JobError, type JobErrorInfo } from './JobError';
import { initialState, type OrchestrationState } from './jobOrchestration';
import { type JobOrchestrations, type OrchestrationSnapshot } from './JobOrchestrations';
import { instanceIdFor, type JobRun } from './JobRun';
import { type JobRecord, type JobStore } from './JobStore';
import { type AcceptedJob, decodeQueueMessage, isValidJobId, validateSubmission } from './JobSubmission';
import { onceUntilSuccess } from './onceUntilSuccess';

export interface IntakeContext {
  readonly epoch: number;
  readonly holder: string;
  readonly signal: AbortSignal;
  progress(): void;
}

export interface IntakeDeps {
  readonly jobsQueue: QueueClient;
  readonly poisonQueue: QueueClient;
  readonly store: JobStore;
  readonly registry: WorkTypeRegistry;
  readonly inputContainers: InputContainers;
  readonly logger: Logger;
  readonly now?: () => Date;
}

export type IntakeOutcome = 'started' | 'already_started' | 'rejected' | 'retry_later';

export interface IntakeReport {
  readonly received: number;
  readonly started: number;
  readonly alreadyStarted: number;
  readonly rejected: number;
  readonly retryLater: number;
}

export const INTAKE = {
  batchSize: 32,
  maxBatchesPerPass: 8,
  /** Long enough to start one batch; a message whose start failed comes back after this. */
  visibilityTimeoutSeconds: 60,
  /** A valid submission whose start keeps failing is rejected (START_FAILED) at this delivery. */
  maxStartAttempts: 10,
} as const;

export class JobIntake {

  constructor(private readonly deps: IntakeDeps) {}

  private now(): Date {
    return this.deps.now?.() ?? new Date();
  }

  private readonly ensureQueues = onceUntilSuccess((signal) =>
    Promise.all([
      this.deps.jobsQueue.createIfNotExists({ abortSignal: signal }),
      this.deps.poisonQueue.createIfNotExists({ abortSignal: signal }),
      this.deps.store.ensureContainer(signal),
    ]),
  );

  /** Reads the jobs queue in batches until it is empty, the pass budget is spent, or `signal` aborts. */
  async runPass(ctx: IntakeContext, orchestrations: JobOrchestrations): Promise<IntakeReport> {
    const counts = { received: 0, started: 0, alreadyStarted: 0, rejected: 0, retryLater: 0 };
    await this.ensureQueues(ctx.signal);
    for (let batch = 0; batch < INTAKE.maxBatchesPerPass && !ctx.signal.aborted; batch++) {
      const received = await this.deps.jobsQueue.receiveMessages({
        numberOfMessages: INTAKE.batchSize,
        visibilityTimeout: INTAKE.visibilityTimeoutSeconds,
        abortSignal: ctx.signal,
      });
      ctx.progress();
      if (received.receivedMessageItems.length === 0) break;
      for (const message of received.receivedMessageItems) {
        // Stop between messages: an unhandled one simply becomes visible again for the next leader.
        if (ctx.signal.aborted) break;
        counts.received += 1;
        const outcome = await this.handleMessage(message, ctx, orchestrations);
        if (outcome === 'started') counts.started += 1;
        else if (outcome === 'already_started') counts.alreadyStarted += 1;
        else if (outcome === 'rejected') counts.rejected += 1;
        else counts.retryLater += 1;
        ctx.progress();
      }
    }
    if (counts.received > 0) this.deps.logger.info('intake.pass', { ...counts, epoch: ctx.epoch });
    return counts;
  }

  async handleMessage(message: DequeuedMessageItem, ctx: IntakeContext, orchestrations: JobOrchestrations): Promise<IntakeOutcome> {
    const { logger } = this.deps;
    let parsed: unknown;
    let job: AcceptedJob;
    try {
      parsed = decodeQueueMessage(message.messageText);
      job = validateSubmission(parsed, {
        registry: this.deps.registry,
        generateJobId: () => `q-${message.messageId}`,
        inputContainers: this.deps.inputContainers,
      });
      if (job.source.kind === 'blob' && !(await this.deps.store.externalExists(job.source, ctx.signal))) {
        throw new JobError('ITEMS_BLOB_NOT_FOUND', `itemsBlob ${job.source.container}/${job.source.blob} does not exist.`);
      }
    } catch (err) {
      if (err instanceof Error && err.name === 'AbortError') throw err;
      let reason: JobError;
      if (err instanceof JobError) reason = err;
      else if (message.dequeueCount < INTAKE.maxStartAttempts) {
        // Not a verdict on the submission (a storage fault reading itemsBlob, a work type that threw):
        // leave it for a later pass, like a failed start, rather than abort this pass for the rest.
        logger.warn('intake.validation_failed', { messageId: message.messageId, dequeueCount: message.dequeueCount, error: err, epoch: ctx.epoch });
        return 'retry_later';
      } else {
        reason = new JobError('VALIDATION_FAILED', `The submission could not be checked after ${message.dequeueCount} tries: ${err instanceof Error ? err.message : String(err)}`);
      }
      const asked = parsed !== null && typeof parsed === 'object' && 'jobId' in parsed ? (parsed).jobId : undefined;
      return this.reject(message, reason, isValidJobId(asked) ? asked : undefined, undefined, ctx, orchestrations);
    }

    const instanceId = instanceIdFor(job.jobId);
    try {
      const existing = await orchestrations.getStatus(instanceId);
      if (existing !== undefined) {
        if (fingerprintOf(existing) === job.fingerprint) {
          await this.deleteMessage(message, ctx);
          logger.info('intake.already_started', { jobId: job.jobId, messageId: message.messageId, epoch: ctx.epoch });
          return 'already_started';
        }
        return this.reject(message, duplicateError(job.jobId, existing.createdTime.toISOString()), job.jobId, job.fingerprint, ctx, orchestrations);
      }
      const record = await this.deps.store.readRecord(job.jobId, ctx.signal);
      if (record !== undefined && (record.status === 'rejected' ? record.messageId !== message.messageId : record.fingerprint !== job.fingerprint)) {
        return this.reject(message, duplicateError(job.jobId, record.createdAt), job.jobId, job.fingerprint, ctx, orchestrations);
      }
      if (record?.status === 'rejected') {
        // This very message was rejected before and came back (crash before its delete): finish that.
        return this.reject(message, record.error ?? { code: 'SCHEMA_VIOLATION', message: 'rejected' }, job.jobId, job.fingerprint, ctx, orchestrations);
      }

      const run: JobRun = {
        jobId: job.jobId,
        workType: job.workType,
        fingerprint: job.fingerprint,
        options: job.options,
        source: job.source,
        epoch: ctx.epoch,
        holder: ctx.holder,
        submittedAt: record?.createdAt ?? message.insertedOn.toISOString(),
        via: record === undefined ? 'queue' : record.via,
      };
      await this.start(instanceId, initialState(run), job, orchestrations);
      await this.deleteMessage(message, ctx);
      if (record !== undefined) await this.deps.store.deleteRecord(job.jobId, ctx.signal);
      logger.info('intake.started', { jobId: job.jobId, instanceId, workType: job.workType, epoch: ctx.epoch });
      return 'started';
    } catch (err) {
      if (err instanceof Error && err.name === 'AbortError') throw err;
      if (message.dequeueCount >= INTAKE.maxStartAttempts) {
        const reason = new JobError('START_FAILED', `The job could not be started after ${message.dequeueCount} tries: ${err instanceof Error ? err.message : String(err)}`);
        return this.reject(message, reason, job.jobId, job.fingerprint, ctx, orchestrations);
      }
      // Left on the queue: it comes back after the visibility timeout and the next pass retries.
      logger.warn('intake.start_failed', { jobId: job.jobId, messageId: message.messageId, dequeueCount: message.dequeueCount, error: err, epoch: ctx.epoch });
      return 'retry_later';
    }
  }

  /** Starts the orchestration; a concurrent or earlier start of the same submission counts as success. */
  private async start(instanceId: string, input: OrchestrationState, job: AcceptedJob, orchestrations: JobOrchestrations): Promise<void> {
    try {
      await orchestrations.start(instanceId, input);
    } catch (err) {
      const existing = await orchestrations.getStatus(instanceId);
      if (existing !== undefined && fingerprintOf(existing) === job.fingerprint) return;
      throw err;
    }
  }

  private async deleteMessage(message: DequeuedMessageItem, ctx: IntakeContext): Promise<void> {
    try {
      await this.deps.jobsQueue.deleteMessage(message.messageId, message.popReceipt, { abortSignal: ctx.signal });
    } catch (err) {
      // 404 (already deleted) or 400 PopReceiptMismatch (our visibility lapsed during a slow batch and
      // the message was received again): the work it asked for is done here and any redelivery is a
      // no-op, so this is not a failure to retry or to reject.
      const { statusCode, code } = err as { statusCode?: number; code?: string };
      if (statusCode !== 404 && code !== 'PopReceiptMismatch') throw err;
      this.deps.logger.info('intake.delete_missed', { messageId: message.messageId, epoch: ctx.epoch });
    }
  }

  /**
   * Records the rejection, copies the original message to the poison queue (once), then deletes it.
   * The record lives under the submitted job id when that id is free, else under `m-<message id>`.
   */
  private async reject(
    message: DequeuedMessageItem,
    error: JobErrorInfo,
    submittedJobId: string | undefined,
    fingerprint: string | undefined,
    ctx: IntakeContext,
    orchestrations: JobOrchestrations,
  ): Promise<IntakeOutcome> {
    const { store, logger } = this.deps;
    const derivedId = `m-${message.messageId}`;
    let recordId = derivedId;
    if (submittedJobId !== undefined && error.code !== 'DUPLICATE_JOB_ID') {
      const taken = (await orchestrations.getStatus(instanceIdFor(submittedJobId))) !== undefined;
      if (!taken) recordId = submittedJobId;
    }
    const at = this.now().toISOString();
    const info: JobErrorInfo = { code: error.code, message: error.message };
    let record: JobRecord = {
      jobId: recordId,
      status: 'rejected',
      createdAt: at,
      updatedAt: at,
      error: info,
      epoch: ctx.epoch,
      messageId: message.messageId,
      via: 'queue',
      ...(fingerprint === undefined ? {} : { fingerprint }),
      ...(submittedJobId === undefined ? {} : { submittedJobId }),
    };
    if ((await store.createRecord(record, ctx.signal)) === 'exists') {
      const existing = await store.readRecord(recordId, ctx.signal);
      if (existing?.messageId === message.messageId) {
        record = existing;
      } else if (existing?.status === 'pending' && existing.fingerprint === fingerprint && recordId === submittedJobId) {
        // The HTTP API accepted this submission and it turned out invalid later (e.g. its blob vanished).
        record = { ...record, createdAt: existing.createdAt, via: existing.via };
        await store.replaceRecord(record, ctx.signal);
      } else {
        record = { ...record, jobId: derivedId };
        if ((await store.createRecord(record, ctx.signal)) === 'exists') record = (await store.readRecord(derivedId, ctx.signal)) ?? record;
      }
    }
    if (record.poisonMessageId === undefined) {
      const poisonQueue = this.deps.poisonQueue;
      const sent = await poisonQueue.sendMessage(message.messageText, { abortSignal: ctx.signal, messageTimeToLive: -1 });
      record = { ...record, poisonMessageId: sent.messageId, updatedAt: this.now().toISOString() };
      await store.replaceRecord(record, ctx.signal);
    }
    await this.deleteMessage(message, ctx);
    logger.warn('intake.rejected', { jobId: record.jobId, submittedJobId, code: error.code, reason: error.message, messageId: message.messageId, epoch: ctx.epoch });
    return 'rejected';
  }
}

function fingerprintOf(snapshot: OrchestrationSnapshot): string | undefined {
  const input = snapshot.input as Partial<OrchestrationState> | undefined;
  return input?.run?.fingerprint;
}

function duplicateError(jobId: string, since: string): JobError {
  return new JobError('DUPLICATE_JOB_ID', `Job id "${jobId}" is already used by a different submission (since ${since}); the existing job was left untouched. Submit with a new jobId.`);
}
