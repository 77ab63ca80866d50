/**
 * Everything the job pipeline keeps in blobs, in the results container (default `job-results`):
 *
 *   records/<jobId>.json              a submission that has no orchestration: pending (accepted by
 *                                     HTTP, not yet started) or rejected (with its error)
 *   jobs/<jobId>/job.json             the job id's claim: which submission (fingerprint) holds the id
 *                                     (a different one under it is refused: DUPLICATE_JOB_ID)
 *   jobs/<jobId>/cancel.json          the cancel marker (workers skip the job's chunks)
 *   jobs/<jobId>/chunks/<n>.json      a chunk's items when they do not fit a queue message
 *   jobs/<jobId>/results/<n>.json     a chunk's result, created once (If-None-Match: *)
 *   jobs/<jobId>/claims/<n>-<d>.json  a worker's claim on chunk n's dispatch-d message, overwritten
 *                                     by each delivery of it (claim time in metadata): the chunk's
 *                                     deadline runs from its latest claim, not from its enqueue
 *   jobs/<jobId>/input/...            the job's staged items (segments and their manifest, see
 *                                     input/InputStore.ts), written once by the plan step
 *   jobs/<jobId>/result.json          the job's full result
 *   jobs/<jobId>/start.json           the start record: which start (id, epoch, instance generation)
 *                                     may run the job; created once, then changed only with If-Match
 *   jobs/<jobId>/final.json           the job's final summary, created once by the run that finished
 *                                     it; any later run of the job returns it instead of running
 *   unconfirmed-starts/<jobId>        (empty) a start not yet seen past its plan step; the leader's
 *                                     pass checks each and completes or repairs it
 *   jobs/<jobId>/delivery.json        where the job's outcome went (replyTo, callback), for its status
 *   deliveries-due/<jobId>            an outcome delivery that failed, for the leader's pass to retry
 *
 * Guarantees: a chunk result is written at most once, whoever writes first (a worker, a
 * redelivered copy, or the orchestration expiring the chunk) wins, and every reader sees that one.
 * Its status, counts and (when small) its partial are also in the blob's metadata, so progress and
 * most aggregations cost one listing per 5,000 chunks instead of one read per chunk. Claims and
 * re-dispatch marks are in the same listing (metadata only), so progress stays one listing per
 * 5,000 results-or-claims. Start records and the final summary are created once; a start record
 * or a record is replaced only over the version read (`Versioned` carries its etag), so a writer
 * that read an older version loses instead of overwriting.
 * The job index (JobIndex, when the store has one) is written here, where a job's status changes:
 * a record created or replaced (pending by HTTP, rejected), a start record created (pending) or
 * retired (its row goes), the run past its plan's fence (`confirmStart`: running), the final summary
 * (its status), and a purge (the row goes). Best effort: a failed index write is logged and never
 * fails the write it follows; the leader's repair corrects the row.
 * Not guaranteed: claim times are the claiming worker's clock (compared with the orchestration's).
 * Callers validate job ids before they get here (`isValidJobId`); this module checks again, since
 * a job id becomes part of a blob name.
 */
import { type BlobServiceClient, type ContainerClient, RestError } from '@azure/storage-blob';

import { downloadWhole } from '../../storage/blobText';
import { type Json } from '../../worktypes/WorkType';
import { isSuperseded, type JobSummary } from '../api/JobSummary';
import { type JobReply } from '../delivery/DeliveryTargets';
import { type ChunkObservation } from '../dispatch/DispatchLedger';
import { type ChunkStore } from '../dispatch/PipelineStore';
import { type BlobRef } from '../input/BlobRef';
import { type JobErrorInfo } from '../JobError';
import { isValidJobId } from '../jobIds';
import { type JobRun } from '../JobRun';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { CancelMarkers } from './CancelMarkers';
import { type IndexEntry, type JobIndex } from './JobIndex';

export type RecordStatus = 'pending' | 'rejected';

export interface JobRecord {
  readonly jobId: string;
  readonly status: RecordStatus;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Fingerprint of the submission, when it could be parsed. */
  readonly fingerprint?: string;
  readonly error?: JobErrorInfo;
  /** The leader epoch that rejected it. */
  readonly epoch?: number;
  /** For a rejection stored under a derived id: the job id the submission asked for. */
  readonly submittedJobId?: string;
  readonly messageId?: string;
  /** Set once the original message is in the poison queue, so a redelivery does not copy it twice. */
  readonly poisonMessageId?: string;
  readonly via: 'http' | 'queue';
  /** The submission's work type, when it named a known one (a pending submission shows it). */
  readonly workType?: string;
  /** Where the submission asked its outcome to go (a pending one; a rejection's, when its reply fields were valid). */
  readonly reply?: JobReply;
}

/**
 * Which start of a job may run it (see JobIntake). Created once per job id before its first start;
 * after that only replaced with If-Match, by a leader whose epoch is at least the record's.
 */
export interface StartRecord {
  readonly v: 1;
  readonly jobId: string;
  readonly fingerprint: string;
  /** `rejected`: the submission was refused after all (START_FAILED); no run may do work. */
  readonly state: 'active' | 'rejected';
  /** The start a run must carry (`run.startId`) to do work. */
  readonly startId: string;
  /** Instance generation: 1 is `job-<jobId>`, n is `job-<jobId>.<n>` (a stuck instance was left behind). */
  readonly generation: number;
  /** The leader epoch that decided this start (created the record or took it over). */
  readonly epoch: number;
  readonly holder: string;
  readonly at: string;
  /** The orchestration input's run, carrying `startId` and `epoch`. */
  readonly run: JobRun;
  /** Why the record last changed hands (absent for the first start). */
  readonly reason?: string;
  /** Earlier starts, oldest first, at most a few (for people reading the record). */
  readonly previous?: ReadonlyArray<{ readonly startId: string; readonly generation: number; readonly epoch: number; readonly at: string }>;
}

/** A stored document with the etag to write it back with. */
export interface Versioned<T> {
  readonly value: T;
  readonly etag: string;
}

export interface ItemError {
  /** Index of the item in the job. */
  readonly index: number;
  readonly code: string;
  readonly message: string;
}

export interface ChunkResult {
  readonly jobId: string;
  readonly chunk: number;
  readonly status: 'ok' | 'failed';
  readonly itemCount: number;
  readonly itemsFailed: number;
  /** The work type's partial over the chunk's good items (null when the chunk failed). */
  readonly partial: Json;
  readonly itemErrors: readonly ItemError[];
  readonly error?: JobErrorInfo;
  /** The queue delivery (dequeueCount) that wrote it. */
  readonly attempt: number;
  /** The dispatch round of the message that wrote it (1 first, 2 after a deadline re-dispatch, ...). */
  readonly dispatch: number;
  readonly writtenBy: string;
  readonly writtenAt: string;
}

/** What a listing tells about a chunk result without reading it. */
export interface ChunkResultEntry {
  readonly chunk: number;
  readonly status: 'ok' | 'failed';
  readonly itemCount: number;
  readonly itemsFailed: number;
  /** Present when the partial was small enough for metadata. */
  readonly partial?: Json;
  readonly errorCode?: string;
}

/** A worker's latest claim on one dispatch of a chunk. */
export interface ChunkClaimEntry {
  readonly chunk: number;
  readonly dispatch: number;
  /** ISO time of the latest delivery of that dispatch's message to a worker. */
  readonly claimedAt: string;
  /** ISO time of the claiming worker's latest heartbeat (absent: a claim written without heartbeats). */
  readonly beatAt?: string;
}

export interface JobListing {
  readonly cancelled: boolean;
  readonly results: ChunkResultEntry[];
  readonly claims: ChunkClaimEntry[];
}

/** Partials up to this size ride in metadata (Azure allows 8 KiB of metadata per blob). */
const MAX_METADATA_PARTIAL = 6 * 1024;
const CHUNK_DIGITS = 5;
const UNCONFIRMED_PREFIX = 'unconfirmed-starts/';
const DELIVERY_DUE_PREFIX = 'deliveries-due/';

function pad(chunk: number): string {
  return String(chunk).padStart(CHUNK_DIGITS, '0');
}

export function checkJobId(jobId: string): string {
  if (!isValidJobId(jobId)) throw new Error(`Refusing a blob path for invalid job id ${JSON.stringify(jobId).slice(0, 80)}`);
  return jobId;
}

export function isStatus(err: unknown, ...codes: number[]): boolean {
  return err instanceof RestError && err.statusCode !== undefined && codes.includes(err.statusCode);
}

export class JobStore implements ChunkStore {
  readonly container: ContainerClient;

  /** The cancel markers as this process last read them (at most a second old: CancelMarkers). */
  readonly #cancels = new CancelMarkers((jobId, signal) => this.exists(JobStore.cancelBlob(jobId), signal));

  constructor(
    readonly blobs: BlobServiceClient,
    containerName: string,
    /** The job index this store keeps up to date (none: tests of the pipeline alone). */
    readonly index?: JobIndex,
  ) {
    this.container = blobs.getContainerClient(containerName);
  }

  static recordBlob(jobId: string): string {
    return `records/${checkJobId(jobId)}.json`;
  }
  static cancelBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/cancel.json`;
  }
  static chunkItemsBlob(jobId: string, chunk: number): string {
    return `jobs/${checkJobId(jobId)}/chunks/${pad(chunk)}.json`;
  }
  static chunkResultBlob(jobId: string, chunk: number): string {
    return `jobs/${checkJobId(jobId)}/results/${pad(chunk)}.json`;
  }
  static chunkClaimBlob(jobId: string, chunk: number, dispatch: number): string {
    return `jobs/${checkJobId(jobId)}/claims/${pad(chunk)}-${dispatch}.json`;
  }
  static jobBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/job.json`;
  }
  static resultBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/result.json`;
  }
  static startBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/start.json`;
  }
  static finalBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/final.json`;
  }
  static unconfirmedBlob(jobId: string): string {
    return `${UNCONFIRMED_PREFIX}${checkJobId(jobId)}`;
  }
  /** The job's outcome delivery (shared/jobs/delivery): what was sent where, and the callback's retries. */
  static deliveryBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/delivery.json`;
  }
  static deliveryDueBlob(jobId: string): string {
    return `${DELIVERY_DUE_PREFIX}${checkJobId(jobId)}`;
  }

  /** Creates the container once per store; a concurrent create (409) is success. */
  readonly ensureContainer = onceUntilSuccess((signal) => this.container.createIfNotExists({ abortSignal: signal }));

  private async putJson(
    name: string,
    value: unknown,
    options: { ifNoneMatch?: boolean; metadata?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<'written' | 'exists'> {
    const outcome = await this.putJsonVersioned(name, value, options);
    return typeof outcome === 'object' ? 'written' : 'exists';
  }

  /** Writes a JSON blob; with `ifNoneMatch` (create once) or `ifMatch` (replace that version) it may lose. */
  private async putJsonVersioned(
    name: string,
    value: unknown,
    options: { ifNoneMatch?: boolean; ifMatch?: string; metadata?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<{ etag: string } | 'exists' | 'conflict'> {
    const body = Buffer.from(JSON.stringify(value), 'utf8');
    const conditions =
      options.ifNoneMatch === true ? { ifNoneMatch: '*' } : options.ifMatch === undefined ? undefined : { ifMatch: options.ifMatch };
    const upload = () =>
      this.container.getBlockBlobClient(name).uploadData(body, {
        blobHTTPHeaders: { blobContentType: 'application/json' },
        ...(options.metadata === undefined ? {} : { metadata: options.metadata }),
        ...(conditions === undefined ? {} : { conditions }),
        abortSignal: options.signal,
      });
    // 409 (BlobAlreadyExists) or 412: someone wrote it first (or since our read); that write is the one that counts.
    const lost = (err: unknown): 'exists' | 'conflict' | undefined =>
      conditions === undefined || !isStatus(err, 409, 412) ? undefined : options.ifNoneMatch === true ? 'exists' : 'conflict';
    try {
      return { etag: (await upload()).etag ?? '' };
    } catch (err) {
      const outcome = lost(err);
      if (outcome !== undefined) return outcome;
      if (!isStatus(err, 404)) throw err;
      // The container is missing, or (for a replace) the blob is gone: a lost race, not something to create.
      if (options.ifMatch !== undefined) return 'conflict';
      await this.ensureContainer(options.signal);
      try {
        return { etag: (await upload()).etag ?? '' };
      } catch (retryErr) {
        const retried = lost(retryErr);
        if (retried !== undefined) return retried;
        throw retryErr;
      }
    }
  }

  private async getJsonVersioned<T>(name: string, signal?: AbortSignal): Promise<Versioned<T> | undefined> {
    try {
      const { body, etag } = await downloadWhole(this.container.getBlobClient(name), signal);
      return { value: JSON.parse(body.toString('utf8')) as T, etag };
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  private async getJson<T>(name: string, signal?: AbortSignal): Promise<T | undefined> {
    try {
      return JSON.parse((await downloadWhole(this.container.getBlobClient(name), signal)).body.toString('utf8')) as T;
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  async getText(name: string, signal?: AbortSignal): Promise<string | undefined> {
    try {
      return (await downloadWhole(this.container.getBlobClient(name), signal)).body.toString('utf8');
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  // --- records ---

  /**
   * Claims `jobs/<jobId>/` for one submission (create-once, by fingerprint): true when it is this
   * submission's, false when an earlier, different job with this id left its results there (its
   * Durable instance purged, or the task hub changed), which must never be reused as this job's.
   */
  async claimJobId(jobId: string, fingerprint: string, signal?: AbortSignal): Promise<boolean> {
    const name = JobStore.jobBlob(jobId);
    const at = new Date().toISOString();
    if ((await this.putJson(name, { jobId, fingerprint, at }, { ifNoneMatch: true, signal })) === 'written') return true;
    const owner = await this.getJson<{ fingerprint?: string }>(name, signal);
    return owner?.fingerprint === fingerprint;
  }

  async readRecord(jobId: string, signal?: AbortSignal): Promise<JobRecord | undefined> {
    return this.getJson<JobRecord>(JobStore.recordBlob(jobId), signal);
  }

  async readRecordVersioned(jobId: string, signal?: AbortSignal): Promise<Versioned<JobRecord> | undefined> {
    return this.getJsonVersioned<JobRecord>(JobStore.recordBlob(jobId), signal);
  }

  /** Creates the record unless one exists; answers which. */
  async createRecord(record: JobRecord, signal?: AbortSignal): Promise<'written' | 'exists'> {
    const options = { ifNoneMatch: true, metadata: recordMetadata(record), signal };
    const outcome = await this.putJson(JobStore.recordBlob(record.jobId), record, options);
    if (outcome === 'written') await this.index?.note(recordEntry(record), 'record');
    return outcome;
  }

  /** Like `createRecord`, answering the new record's etag. */
  async createRecordVersioned(record: JobRecord, signal?: AbortSignal): Promise<{ etag: string } | 'exists'> {
    const options = { ifNoneMatch: true, metadata: recordMetadata(record), signal };
    const outcome = await this.putJsonVersioned(JobStore.recordBlob(record.jobId), record, options);
    if (typeof outcome === 'object') await this.index?.note(recordEntry(record), 'record');
    return outcome === 'conflict' ? 'exists' : outcome;
  }

  async replaceRecord(record: JobRecord, signal?: AbortSignal): Promise<void> {
    await this.putJson(JobStore.recordBlob(record.jobId), record, { metadata: recordMetadata(record), signal });
    await this.index?.note(recordEntry(record), 'record');
  }

  /** Replaces the record only if it is still the version read (`ifMatch`): the new etag, or `conflict`. */
  async replaceRecordIf(record: JobRecord, ifMatch: string, signal?: AbortSignal): Promise<{ etag: string } | 'conflict'> {
    const options = { ifMatch, metadata: recordMetadata(record), signal };
    const outcome = await this.putJsonVersioned(JobStore.recordBlob(record.jobId), record, options);
    if (typeof outcome === 'object') await this.index?.note(recordEntry(record), 'record');
    return outcome === 'exists' ? 'conflict' : outcome;
  }

  async deleteRecord(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.container.getBlobClient(JobStore.recordBlob(jobId)).deleteIfExists({ abortSignal: signal });
  }

  /** Every record's id, status and times, from one listing (no reads). */
  async listRecords(signal?: AbortSignal): Promise<Array<Pick<JobRecord, 'jobId' | 'status' | 'createdAt' | 'updatedAt' | 'workType'>>> {
    const out: Array<Pick<JobRecord, 'jobId' | 'status' | 'createdAt' | 'updatedAt' | 'workType'>> = [];
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix: 'records/', includeMetadata: true, abortSignal: signal })) {
        const jobId = blob.name.slice('records/'.length, -'.json'.length);
        const meta = blob.metadata ?? {};
        const status = meta.status === 'rejected' ? 'rejected' : 'pending';
        out.push({
          jobId,
          status,
          createdAt: meta.createdat ?? '',
          updatedAt: meta.updatedat ?? '',
          ...(meta.worktype === undefined ? {} : { workType: meta.worktype }),
        });
      }
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    return out;
  }

  // --- starts ---

  async readStart(jobId: string, signal?: AbortSignal): Promise<Versioned<StartRecord> | undefined> {
    return this.getJsonVersioned<StartRecord>(JobStore.startBlob(jobId), signal);
  }

  /** Creates the job's start record unless one exists: its etag, or `exists`. */
  async createStart(record: StartRecord, signal?: AbortSignal): Promise<{ etag: string } | 'exists'> {
    const outcome = await this.putJsonVersioned(JobStore.startBlob(record.jobId), record, { ifNoneMatch: true, signal });
    // An HTTP submission's row says pending since its POST (its record): the same status, not written again.
    const indexed = record.state === 'active' && record.run.via !== 'http';
    if (typeof outcome === 'object' && indexed) await this.index?.note(startEntry(record), 'start');
    return outcome === 'conflict' ? 'exists' : outcome;
  }

  /** Replaces the start record only if it is still the version read: the new etag, or `conflict`. */
  async replaceStart(record: StartRecord, ifMatch: string, signal?: AbortSignal): Promise<{ etag: string } | 'conflict'> {
    const outcome = await this.putJsonVersioned(JobStore.startBlob(record.jobId), record, { ifMatch, signal });
    // A start given up (START_FAILED): the job id shows no job now (its rejection is recorded next, with its own row).
    if (typeof outcome === 'object' && record.state === 'rejected') {
      await this.index?.forget(record.jobId, record.run.submittedAt, 'start_rejected');
    }
    return outcome === 'exists' ? 'conflict' : outcome;
  }

  /** Puts the job on the list of starts the leader's pass checks. */
  async markUnconfirmed(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.putJson(JobStore.unconfirmedBlob(jobId), {}, { metadata: { since: new Date().toISOString() }, signal });
  }

  async clearUnconfirmed(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.container.getBlobClient(JobStore.unconfirmedBlob(jobId)).deleteIfExists({ abortSignal: signal });
  }

  /**
   * A start whose run got past its plan's fence has landed: its mark goes (the intake checks only
   * marked starts) and an HTTP submission's pending record goes, if a leader died before deleting
   * it. Called by that plan, so the leader's pass no longer re-reads every fresh start until it sees
   * it past planning. The index row says running once the plan hands the job to its steps
   * (`noteRunning`): a job its plan finishes goes from pending to its final row, one write fewer.
   */
  async confirmStart(run: JobRun, signal?: AbortSignal): Promise<void> {
    const { jobId, via } = run;
    await Promise.all([this.clearUnconfirmed(jobId, signal), via === 'http' ? this.dropPendingRecord(jobId, signal) : undefined]);
  }

  /** The index row of a job whose run goes on past its plan: running (best effort, as every index write). */
  async noteRunning(run: JobRun): Promise<void> {
    const updatedAt = new Date().toISOString();
    await this.index?.note(
      {
        jobId: run.jobId,
        status: 'running',
        workType: run.workType,
        progress: null,
        errorCode: null,
        createdAt: run.submittedAt,
        updatedAt,
      },
      'run',
    );
  }

  /** An HTTP submission's pending record, once its start has landed (the status follows the start record then). */
  async dropPendingRecord(jobId: string, signal?: AbortSignal): Promise<void> {
    if ((await this.readRecord(jobId, signal))?.status === 'pending') await this.deleteRecord(jobId, signal);
  }

  /**
   * Deletes everything stored for a job: its blobs under jobs/<jobId>/ (the id claim, job.json,
   * last, so a purge cut short is finished by the next one), its record and its start mark.
   * Answers how many blobs it deleted.
   */
  async purgeJob(jobId: string, signal?: AbortSignal): Promise<number> {
    const prefix = `jobs/${checkJobId(jobId)}/`;
    // The index row's key is the job's creation time: read it while the records that hold it exist.
    const created =
      this.index === undefined
        ? []
        : [(await this.readStart(jobId, signal))?.value.run.submittedAt, (await this.readRecord(jobId, signal))?.createdAt];
    const claim = JobStore.jobBlob(jobId);
    const names: string[] = [];
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix, abortSignal: signal })) {
        if (blob.name !== claim) names.push(blob.name);
      }
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    names.push(JobStore.recordBlob(jobId), JobStore.unconfirmedBlob(jobId), JobStore.deliveryDueBlob(jobId), claim);
    let deleted = 0;
    for (const name of names) {
      if ((await this.container.getBlobClient(name).deleteIfExists({ abortSignal: signal })).succeeded) deleted += 1;
    }
    for (const createdAt of new Set(created)) if (createdAt !== undefined) await this.index?.forget(jobId, createdAt, 'purge');
    return deleted;
  }

  /** Every unconfirmed start: its job id and when it was last marked (one listing per 5,000). */
  async listUnconfirmed(signal?: AbortSignal): Promise<Array<{ readonly jobId: string; readonly markedAt: number }>> {
    const out: Array<{ readonly jobId: string; readonly markedAt: number }> = [];
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix: UNCONFIRMED_PREFIX, abortSignal: signal })) {
        const jobId = blob.name.slice(UNCONFIRMED_PREFIX.length);
        if (isValidJobId(jobId)) out.push({ jobId, markedAt: blob.properties.lastModified.getTime() });
      }
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    return out;
  }

  // --- outcome delivery (shared/jobs/delivery/OutcomeDelivery.ts) ---

  async readDelivery<T>(jobId: string, signal?: AbortSignal): Promise<T | undefined> {
    return this.getJson<T>(JobStore.deliveryBlob(jobId), signal);
  }

  async writeDelivery(jobId: string, value: unknown, signal?: AbortSignal): Promise<void> {
    await this.putJson(JobStore.deliveryBlob(jobId), value, { signal });
  }

  /** Puts the job on the list of deliveries the leader's pass retries (a callback not delivered yet). */
  async markDeliveryDue(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.putJson(JobStore.deliveryDueBlob(jobId), {}, { signal });
  }

  async clearDeliveryDue(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.container.getBlobClient(JobStore.deliveryDueBlob(jobId)).deleteIfExists({ abortSignal: signal });
  }

  /** Every job with a delivery still due (one listing per 5,000). */
  async listDeliveriesDue(signal?: AbortSignal): Promise<string[]> {
    const out: string[] = [];
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix: DELIVERY_DUE_PREFIX, abortSignal: signal })) {
        const jobId = blob.name.slice(DELIVERY_DUE_PREFIX.length);
        if (isValidJobId(jobId)) out.push(jobId);
      }
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    return out;
  }

  async readFinal(jobId: string, signal?: AbortSignal): Promise<JobSummary | undefined> {
    return this.getJson<JobSummary>(JobStore.finalBlob(jobId), signal);
  }

  /** Records the job's final summary once; answers the stored one (an earlier run's, if it finished first). */
  async writeFinal(summary: JobSummary, signal?: AbortSignal, createdAt?: string): Promise<JobSummary> {
    if ((await this.putJson(JobStore.finalBlob(summary.jobId), summary, { ifNoneMatch: true, signal })) === 'written') {
      if (!isSuperseded(summary)) await this.indexFinal(summary, createdAt);
      return summary;
    }
    return (await this.readFinal(summary.jobId, signal)) ?? summary;
  }

  // --- the job index (best effort: JobIndex.note logs its own failures; so do these reads) ---

  /**
   * The job's row shows its outcome. Its key is the job's creation time: given by the run that
   * aggregated, else read from the start record (a run without one is left to the repair).
   */
  private async indexFinal(summary: JobSummary, createdAt?: string): Promise<void> {
    const index = this.index;
    if (index === undefined) return;
    const submittedAt = createdAt ?? (await this.readStart(summary.jobId).catch(() => undefined))?.value.run.submittedAt;
    if (submittedAt === undefined) return;
    const entry: IndexEntry = {
      jobId: summary.jobId,
      status: summary.status,
      workType: summary.workType,
      progress: summary.progress,
      errorCode: summary.error?.code ?? null,
      createdAt: submittedAt,
      updatedAt: summary.finishedAt,
    };
    await index.note(entry, 'final');
  }

  // --- cancel ---

  async markCancelled(jobId: string, reason: string, signal?: AbortSignal): Promise<void> {
    await this.putJson(JobStore.cancelBlob(jobId), { jobId, reason, at: new Date().toISOString() }, { ifNoneMatch: true, signal });
    this.#cancels.noteCancelled(jobId);
  }

  /** The cancel marker, as read at most a second ago by this process (CancelMarkers says why that is enough). */
  async isCancelled(jobId: string, signal?: AbortSignal): Promise<boolean> {
    return this.#cancels.isCancelled(jobId, signal);
  }

  // --- chunks ---

  async writeChunkItems(jobId: string, chunk: number, items: readonly Json[], signal?: AbortSignal): Promise<string> {
    const name = JobStore.chunkItemsBlob(jobId, chunk);
    await this.putJson(name, items, { signal });
    return name;
  }

  async readChunkItems(name: string, signal?: AbortSignal): Promise<Json[] | undefined> {
    return this.getJson<Json[]>(name, signal);
  }

  async chunkResultExists(jobId: string, chunk: number, signal?: AbortSignal): Promise<boolean> {
    return this.exists(JobStore.chunkResultBlob(jobId, chunk), signal);
  }

  /** The conditional create: 'exists' means another writer won and this result was discarded. */
  async writeChunkResult(result: ChunkResult, signal?: AbortSignal): Promise<'written' | 'exists'> {
    const metadata: Record<string, string> = {
      status: result.status,
      items: String(result.itemCount),
      itemsfailed: String(result.itemsFailed),
    };
    if (result.error !== undefined) metadata.errorcode = result.error.code;
    const partial = Buffer.from(JSON.stringify(result.partial), 'utf8').toString('base64url');
    if (partial.length <= MAX_METADATA_PARTIAL) metadata.partial = partial;
    return this.putJson(JobStore.chunkResultBlob(result.jobId, result.chunk), result, { ifNoneMatch: true, metadata, signal });
  }

  async readChunkResult(jobId: string, chunk: number, signal?: AbortSignal): Promise<ChunkResult | undefined> {
    return this.getJson<ChunkResult>(JobStore.chunkResultBlob(jobId, chunk), signal);
  }

  /** Records that a worker took a delivery of the chunk's dispatch-`dispatch` message (one write, overwriting the previous delivery's). */
  async claimChunk(
    jobId: string,
    chunk: number,
    dispatch: number,
    claim: { readonly claimedAt: string; readonly claimedBy: string; readonly dequeueCount: number; readonly beatAt?: string },
    signal?: AbortSignal,
  ): Promise<void> {
    await this.putJson(
      JobStore.chunkClaimBlob(jobId, chunk, dispatch),
      { jobId, chunk, dispatch, ...claim },
      { metadata: claimMetadata(claim), signal },
    );
  }

  /** The claiming worker is alive: one metadata write on its claim (the listing sees it). */
  async beatClaim(
    jobId: string,
    chunk: number,
    dispatch: number,
    claim: { readonly claimedAt: string; readonly dequeueCount: number; readonly beatAt: string },
    signal?: AbortSignal,
  ): Promise<void> {
    await this.container
      .getBlockBlobClient(JobStore.chunkClaimBlob(jobId, chunk, dispatch))
      .setMetadata(claimMetadata(claim), { abortSignal: signal });
  }


  /** The job's chunk results (from metadata), claims and its cancel marker, in one listing. */
  async listJob(jobId: string, signal?: AbortSignal): Promise<JobListing> {
    const prefix = `jobs/${checkJobId(jobId)}/`;
    const listing: JobListing = { cancelled: false, results: [], claims: [] };
    const cancelled = await this.collectEntries(prefix, '', listing, signal);
    return { ...listing, cancelled };
  }

  /**
   * The results and claims of the named chunks (and of their neighbours: one listing of results and,
   * `withClaims`, one of claims per group of 100 chunk numbers), and the cancel marker. The dispatcher's view of a
   * window, at a cost that does not grow with the job.
   */
  async observeChunks(jobId: string, chunks: readonly number[], withClaims: boolean, signal?: AbortSignal): Promise<ChunkObservation> {
    const prefix = `jobs/${checkJobId(jobId)}/`;
    const groups = [...new Set(chunks.map((c) => pad(c).slice(0, CHUNK_DIGITS - 2)))];
    const found: Pick<JobListing, 'results' | 'claims'> = { results: [], claims: [] };
    const [cancelled] = await Promise.all([
      this.isCancelled(jobId, signal),
      ...groups.flatMap((g) => [
        this.collectEntries(prefix, `results/${g}`, found, signal),
        ...(withClaims ? [this.collectEntries(prefix, `claims/${g}`, found, signal)] : []),
      ]),
    ]);
    return { cancelled, ...found };
  }

  /**
   * Adds the results and claims among the blobs under `<jobPrefix><sub>` (read from their metadata)
   * to `into`; true when the job's cancel marker was among them. A missing container lists nothing.
   */
  private async collectEntries(
    jobPrefix: string,
    sub: string,
    into: Pick<JobListing, 'results' | 'claims'>,
    signal: AbortSignal | undefined,
  ): Promise<boolean> {
    let cancelled = false;
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix: `${jobPrefix}${sub}`, includeMetadata: true, abortSignal: signal })) {
        const rest = blob.name.slice(jobPrefix.length);
        if (rest === 'cancel.json') {
          cancelled = true;
          continue;
        }
        const meta = blob.metadata ?? {};
        const claim = claimEntry(rest, meta);
        if (claim !== undefined) into.claims.push(claim);
        const result = resultEntry(rest, meta);
        if (result !== undefined) into.results.push(result);
      }
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
    return cancelled;
  }

  // --- the job's result ---

  async writeJobResult(jobId: string, value: unknown, signal?: AbortSignal): Promise<{ blob: string; bytes: number }> {
    const name = JobStore.resultBlob(jobId);
    await this.putJson(name, value, { signal });
    return { blob: name, bytes: Buffer.byteLength(JSON.stringify(value)) };
  }

  async readJobResultText(jobId: string, signal?: AbortSignal): Promise<string | undefined> {
    return this.getText(JobStore.resultBlob(jobId), signal);
  }

  // --- generic ---

  async exists(name: string, signal?: AbortSignal): Promise<boolean> {
    return this.container.getBlobClient(name).exists({ abortSignal: signal });
  }

  /** Whether a blob elsewhere in the account exists (a job's itemsBlob). */
  async externalExists(ref: BlobRef, signal?: AbortSignal): Promise<boolean> {
    return (await this.externalSize(ref, signal)) !== undefined;
  }

  /** The size in bytes of a blob elsewhere in the account (a job's itemsBlob), undefined when it does not exist. */
  async externalSize(ref: BlobRef, signal?: AbortSignal): Promise<number | undefined> {
    try {
      const properties = await this.blobs.getContainerClient(ref.container).getBlobClient(ref.blob).getProperties({ abortSignal: signal });
      return properties.contentLength ?? 0;
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }
}

/** A record's index row (pending by HTTP, or rejected). */
function recordEntry(record: JobRecord): IndexEntry {
  return {
    jobId: record.jobId,
    status: record.status,
    workType: record.workType ?? null,
    progress: null,
    errorCode: record.error?.code ?? null,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
  };
}

/** A start record's index row: accepted, its start under way (pending). */
function startEntry(start: StartRecord): IndexEntry {
  const { jobId, run } = start;
  const { submittedAt: createdAt, workType } = run;
  return { jobId, status: 'pending', workType, progress: null, errorCode: null, createdAt, updatedAt: start.at };
}

function recordMetadata(record: JobRecord): Record<string, string> {
  return {
    status: record.status,
    createdat: record.createdAt,
    updatedat: record.updatedAt,
    ...(record.error === undefined ? {} : { code: record.error.code }),
    // Metadata values are HTTP header text: a work type name is letters, digits, '-' and '_' (WorkTypeRegistry).
    ...(record.workType === undefined || !/^[A-Za-z0-9_-]{1,64}$/.test(record.workType) ? {} : { worktype: record.workType }),
  };
}

function claimEntry(rest: string, meta: Record<string, string>): ChunkClaimEntry | undefined {
  const claim = /^claims\/(\d+)-(\d+)\.json$/.exec(rest);
  if (claim?.[1] === undefined || claim[2] === undefined) return undefined;
  return {
    chunk: Number(claim[1]),
    dispatch: Number(claim[2]),
    claimedAt: meta.claimedat ?? '',
    ...(meta.beat === undefined ? {} : { beatAt: meta.beat }),
  };
}

function resultEntry(rest: string, meta: Record<string, string>): ChunkResultEntry | undefined {
  const match = /^results\/(\d+)\.json$/.exec(rest);
  if (match?.[1] === undefined) return undefined;
  return {
    chunk: Number(match[1]),
    status: meta.status === 'failed' ? 'failed' : 'ok',
    itemCount: Number(meta.items ?? 0),
    itemsFailed: Number(meta.itemsfailed ?? 0),
    ...(meta.partial === undefined ? {} : { partial: JSON.parse(Buffer.from(meta.partial, 'base64url').toString('utf8')) as Json }),
    ...(meta.errorcode === undefined ? {} : { errorCode: meta.errorcode }),
  };
}

function claimMetadata(claim: {
  readonly claimedAt: string;
  readonly dequeueCount: number;
  readonly beatAt?: string;
}): Record<string, string> {
  return {
    claimedat: claim.claimedAt,
    dequeuecount: String(claim.dequeueCount),
    ...(claim.beatAt === undefined ? {} : { beat: claim.beatAt }),
  };
}
