/**
 * What the HTTP API does with one job, free of HTTP types: submit (validate and enqueue exactly the
 * message a queue client would send), its status (JobStatusReader), cancel, the submission it ran,
 * its full result. The functions in functions/jobsApi.ts call this; the list is JobList's, a purge
 * Retention's.
 *
 * Guarantees: a submission is validated by the same contract as the queue path before anything
 * is written; the enqueued message is the submission with its (possibly generated) jobId, base64
 * JSON; a job id already used by a different submission is refused (DUPLICATE_JOB_ID) and an
 * identical resubmission answers with the same job. Only a pending or running job is cancelled
 * (JOB_ALREADY_FINISHED), its cancel marker written before the run is told. Job ids are validated
 * before they touch storage.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 1 and 8.
 */
import { randomUUID } from 'node:crypto';

import { type Logger } from '../../observability/log';
import { type Json } from '../../worktypes/WorkType';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { type DeliveryTargets } from '../delivery/DeliveryTargets';
import { type InputContainers } from '../input/InputContainers';
import { JobError } from '../JobError';
import { assertJobId, instanceIdFor, isBatchInstanceId } from '../jobIds';
import { JOB_LIMITS } from '../jobLimits';
import { validateSubmission } from '../JobSubmission';
import { resultDocumentOf } from '../JobSummary';
import { decodeUtf8, encodeQueueMessage, parseJsonText } from '../messageCodec';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { fingerprintOf, jobViewOf, type OrchestrationClient, runOf } from '../run/OrchestrationClient';
import { type JobRecord, type JobStore } from '../store/JobStore';
import { type SubmissionQueue } from '../SubmissionQueue';
import { type Now, nowOf } from '../wallClock';
import { JobStatusReader } from './JobStatusReader';
import { indexEntryOf, type JobView } from './jobViews';

export interface JobServiceDeps {
  readonly jobsQueue: SubmissionQueue;
  readonly store: JobStore;
  readonly registry: WorkTypeRegistry;
  readonly inputContainers: InputContainers;
  readonly logger: Logger;
  /** The reply queues and callback hosts a submission may name (absent: `replyTo` and `callbackUrl` are refused). */
  readonly delivery?: DeliveryTargets;
  /** Builds the status route for a job (Location header, resultUrl). */
  readonly statusPath: (jobId: string) => string;
  readonly now?: Now;
}

export interface Submitted {
  readonly jobId: string;
  readonly location: string;
  /** False when an identical submission with this id has already started (nothing enqueued again). */
  readonly enqueued: boolean;
}

export class JobService {
  private readonly now: Now;
  private readonly reader: JobStatusReader;

  constructor(private readonly deps: JobServiceDeps) {
    this.now = nowOf(deps);
    this.reader = new JobStatusReader(deps);
  }

  /** Validates and enqueues a submission given as the request body's bytes (UTF-8 JSON). */
  async submit(body: Uint8Array, orchestrations: OrchestrationClient): Promise<Submitted> {
    const { store } = this.deps;
    if (body.byteLength > JOB_LIMITS.maxMessageJsonBytes) {
      throw new JobError(
        'PAYLOAD_TOO_LARGE',
        `The body is over ${JOB_LIMITS.maxMessageJsonBytes} bytes, more than a queue message can carry: ` +
          `put the items in a blob and submit { "itemsBlob": "<container>/<blob>" }.`,
      );
    }
    const value = parseJsonText(decodeUtf8(body));
    let generated = false;
    const job = validateSubmission(value, {
      registry: this.deps.registry,
      generateJobId: () => ((generated = true), `j-${randomUUID()}`),
      inputContainers: this.deps.inputContainers,
      delivery: this.deps.delivery,
    });
    if (job.source.kind === 'blob' && !(await store.externalExists(job.source))) {
      throw new JobError('ITEMS_BLOB_NOT_FOUND', `itemsBlob ${job.source.container}/${job.source.blob} does not exist.`);
    }
    // validateSubmission accepted an object; the message is that object with its job id filled in.
    const message = { ...(value as Record<string, unknown>), jobId: job.jobId };
    const encoded = encodeQueueMessage(message);
    if (Buffer.byteLength(JSON.stringify(message), 'utf8') > JOB_LIMITS.maxMessageJsonBytes) {
      throw new JobError('PAYLOAD_TOO_LARGE', 'With its generated jobId the submission no longer fits a queue message: use itemsBlob.');
    }
    const location = this.deps.statusPath(job.jobId);

    // A job id made here just now (random) names nothing yet: no reads (the record's create-once
    // write would still catch a clash). Otherwise what the id holds (whatTheIdHolds), read while the
    // pending record is created: a POST waits for two storage round trips, not four, one after the
    // other (the record and what the id holds at once, then the index row beside the send). Its
    // index row waits for the read: a row of a job already under way must not go back to pending.
    const at = this.now().toISOString();
    const record: JobRecord = {
      jobId: job.jobId,
      status: 'pending',
      createdAt: at,
      updatedAt: at,
      fingerprint: job.fingerprint,
      via: 'http',
      workType: job.workType,
      ...(job.reply === undefined ? {} : { reply: job.reply }),
    };
    const began = performance.now();
    const [[existing, startRead], outcome] = await Promise.all([
      generated ? Promise.resolve([undefined, undefined] as const) : this.whatTheIdHolds(job.jobId, orchestrations),
      store.createRecordOnly(record),
    ]);
    const created = outcome === 'written';
    const readAt = performance.now();
    // The id is taken already (a job started from the queue, or an earlier start): the record made
    // just now speaks for nothing, so it goes; the answer is the id's.
    const taken = (): Promise<void> => (created ? store.deleteRecord(job.jobId).catch(() => undefined) : Promise.resolve());
    if (existing !== undefined) {
      await taken();
      if (fingerprintOf(existing) === job.fingerprint) return { jobId: job.jobId, location, enqueued: false };
      throw duplicate(job.jobId);
    }
    // Accepted by the leader, its start under way: nothing to send again.
    const accepted = startRead?.value;
    if (accepted !== undefined && (accepted.fingerprint !== job.fingerprint || accepted.state === 'active')) {
      await taken();
      if (accepted.fingerprint !== job.fingerprint) throw duplicate(job.jobId);
      return { jobId: job.jobId, location, enqueued: false };
    }
    if (!created) {
      const current = await store.readRecord(job.jobId);
      if (current?.status !== 'pending' || current.fingerprint !== job.fingerprint) throw duplicate(job.jobId);
      // Pending with this very submission: its first send may have failed after the record was made
      // (a storage fault, a recycled process), and nothing else would ever send it. Send it again;
      // the leader's intake starts a job once however many identical messages arrive.
    }
    const noted = created ? store.noteRecord(record) : Promise.resolve();
    try {
      await this.ensureQueue();
      await this.deps.jobsQueue.sendMessage(encoded);
    } catch (err) {
      // Only our own new record goes (and its index row); an earlier identical submission's record stays pending.
      await noted;
      if (created) {
        await store.deleteRecord(job.jobId).catch(() => undefined);
        await store.index?.forget(job.jobId, record.createdAt, 'submit_undone');
      }
      throw new JobError('SERVICE_UNAVAILABLE', 'The jobs queue could not be reached; nothing was submitted. Try again.', { cause: err });
    }
    await noted;
    // Where a slow POST's time went: what the id holds with the record, then the index row with the send.
    const ms = { readAndRecord: Math.round(readAt - began), indexAndSend: Math.round(performance.now() - readAt) };
    this.deps.logger.info('job.submitted', { jobId: job.jobId, workType: job.workType, via: 'http', ms });
    return { jobId: job.jobId, location, enqueued: true };
  }

  private readonly ensureQueue = onceUntilSuccess(() => this.deps.jobsQueue.createIfNotExists());

  /**
   * What a job id holds (a POST is on every burst's path): its start record, and its Durable instance
   * only when the instance may say more, read after: when the start record is no longer active (a
   * start given up after its run began). A job's run is started only after its start record is
   * created, so no start record means no instance: one read a POST fewer.
   */
  private async whatTheIdHolds(
    jobId: string,
    orchestrations: OrchestrationClient,
  ): Promise<[Awaited<ReturnType<OrchestrationClient['getStatus']>>, Awaited<ReturnType<JobStore['readStart']>>]> {
    const startRead = await this.deps.store.readStart(jobId);
    if (startRead === undefined || startRead.value.state === 'active') return [undefined, startRead];
    // A start given up after its run began: that run's instance (a shared run's, seen as the job's own).
    const shared = startRead.value.instance;
    const instance = jobViewOf(await orchestrations.getStatus(shared ?? instanceIdFor(jobId)), jobId);
    return [instance, startRead];
  }

  /** A job's view; once the job is accepted (202) never JOB_NOT_FOUND (JobStatusReader.get). */
  get(jobId: string, orchestrations: OrchestrationClient): Promise<JobView> {
    return this.reader.get(jobId, orchestrations);
  }

  /** Cancels a pending or running job: the marker makes workers skip its chunks, the event wakes the orchestration. */
  async cancel(jobId: string, orchestrations: OrchestrationClient): Promise<JobView> {
    assertJobId(jobId);
    const { snapshot } = await this.reader.current(jobId, orchestrations);
    const view = snapshot === undefined ? await this.reader.get(jobId, orchestrations) : this.reader.fromSnapshot(jobId, snapshot);
    if (view.status !== 'pending' && view.status !== 'running') {
      throw new JobError('JOB_ALREADY_FINISHED', `Job "${jobId}" is ${view.status}; only pending or running jobs can be cancelled.`);
    }
    // The marker first: a job not started yet sees it when it plans, a running one at its next poll.
    await this.deps.store.markCancelled(jobId, 'cancelled through the API');
    // A shared run waits for no cancel (its plans see the marker): only a job's own run is told.
    if (snapshot !== undefined && !isBatchInstanceId(snapshot.instanceId)) {
      await orchestrations.raiseCancel(snapshot.instanceId, 'cancelled through the API');
    }
    // The row shows the job as it stands (its outcome, cancelled, is indexed when the run records it).
    const entry = indexEntryOf(view);
    if (entry !== undefined) await this.deps.store.index?.note(entry, 'cancel');
    this.deps.logger.info('job.cancel_requested', { jobId, started: snapshot !== undefined });
    return view;
  }

  /**
   * The submission a started job ran, without its job id: what to POST again to run it anew
   * (resubmit). Rebuilt from the orchestration's input (items inline, or the itemsBlob reference,
   * the options with their defaults filled in, and its `replyTo` and `correlationId`, so the new
   * job's outcome goes where the first one's went). Never its `callbackUrl`, which may carry a token
   * and is never shown: a resubmit that wants the callback names it again. A job that never started has none.
   */
  async submission(jobId: string, orchestrations: OrchestrationClient): Promise<Record<string, Json>> {
    assertJobId(jobId);
    const snapshot = await orchestrations.getStatus(instanceIdFor(jobId));
    // A job started in a shared run (and finished there) has its run in its start record.
    const run = runOf(snapshot) ?? (await this.deps.store.readStart(jobId))?.value.run;
    if (run === undefined) {
      throw new JobError(
        'JOB_NOT_FOUND',
        `Job "${jobId}" has no started run to resubmit (a pending or rejected submission keeps no items).`,
      );
    }
    const items: Record<string, Json> =
      run.source.kind === 'inline' ? { items: run.source.items } : { itemsBlob: `${run.source.container}/${run.source.blob}` };
    const reply = run.reply;
    return {
      workType: run.workType,
      ...items,
      options: { ...run.options },
      ...(reply?.replyTo === undefined ? {} : { replyTo: reply.replyTo }),
      ...(reply?.correlationId === undefined ? {} : { correlationId: reply.correlationId }),
    };
  }

  async resultText(jobId: string): Promise<string> {
    assertJobId(jobId);
    // The recorded outcome decides: a small result without errors is kept in the summary alone
    // (aggregation.ts), and a result blob a run that lost the race to record its summary wrote
    // beside it is not the job's. No summary: no result yet (the blob is written before it).
    const notYet = (): JobError => new JobError('JOB_NOT_FOUND', `Job "${jobId}" has no stored result (yet).`);
    const summary = await this.deps.store.readFinal(jobId);
    if (summary === undefined) throw notYet();
    const built = resultDocumentOf(summary);
    if (built !== undefined) return JSON.stringify(built);
    const text = await this.deps.store.readJobResultText(jobId);
    if (text === undefined) throw notYet();
    return text;
  }
}

function duplicate(jobId: string): JobError {
  return new JobError(
    'DUPLICATE_JOB_ID',
    `Job id "${jobId}" is already used by a different submission; submit with a new jobId (or none, to get one generated).`,
  );
}
