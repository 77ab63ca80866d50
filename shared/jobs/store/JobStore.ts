/**
 * Everything the job pipeline keeps in blobs, in the results container (default `job-results`):
 *
 *   records/<jobId>.json              a submission by HTTP, pending (accepted, kept once started:
 *                                     the start record speaks for the job from then on, and
 *                                     deleting it would cost a blob delete per job), or a
 *                                     rejected submission (with its error)
 *   jobs/<jobId>/cancel.json          the cancel marker (workers skip the job's chunks)
 *   jobs/<jobId>/chunks/<n>.json      a chunk's items when they do not fit a queue message
 *   jobs/<jobId>/results/<n>.json     a chunk's result, created once (If-None-Match: *)
 *   jobs/<jobId>/claims/<n>-<d>.json  a worker's claim on chunk n's dispatch-d message, overwritten
 *                                     by each delivery of it (claim time in metadata): the chunk's
 *                                     deadline runs from its latest claim, not from its enqueue
 *   jobs/<jobId>/input/...            the job's staged items (segments and their manifest, see
 *                                     input/InputStore.ts), written once by the plan step
 *   jobs/<jobId>/result.json          the job's full result (none for a small result without errors:
 *                                     the final summary holds all of it, aggregation.ts)
 *   jobs/<jobId>/start.json           the start record: which start (id, epoch, instance generation)
 *                                     may run the job; created once, then changed only with If-Match.
 *                                     The job id's claim too: which submission (fingerprint) holds the
 *                                     id (a different one under it is refused: DUPLICATE_JOB_ID)
 *   jobs/<jobId>/final.json           the job's final summary, created once by the run that finished
 *                                     it; any later run of the job returns it instead of running
 *   unconfirmed-starts/<jobId>.<startId>  (empty) a start not yet seen past its plan step, in a store
 *                                     without a job index; with one, a row of the index's table
 *                                     (StartMarks.ts says why); the leader's pass checks each
 *   jobs/<jobId>/delivery.json        where the job's outcome went (replyTo, callback), for its status
 *   deliveries-due/<jobId>            an outcome delivery that failed, for the leader's pass to retry
 *
 * Guarantees (the chunks' own: ChunkBlobs.ts): start records and the final summary are created once; a start record
 * or a record is replaced only over the version read (`Versioned` carries its etag), so a writer
 * that read an older version loses instead of overwriting.
 * The job index (JobIndex, when the store has one) is written here, where a job's status changes:
 * a record created or replaced (pending by HTTP, rejected), a start record created (pending) or
 * retired (its row goes), the run past its plan's fence (`confirmStart`: running), the final summary
 * (its status), and a purge (the row goes). Best effort: a failed index write is logged and never
 * fails the write it follows; the leader's repair corrects the row.
 * Callers validate job ids before they get here (`isValidJobId`); this module checks again, since
 * a job id becomes part of a blob name.
 */
import { type BlobServiceClient } from '@azure/storage-blob';

import { type BlobRef } from '../input/BlobRef';
import { type JobRun } from '../JobRun';
import { isSuperseded, type JobSummary } from '../JobSummary';
import { BlobDocuments, checkJobId, isStatus, type JsonDocuments } from './BlobDocuments';
import { CancelMarkers } from './CancelMarkers';
import { ChunkBlobs } from './ChunkBlobs';
import { DeliveryBlobs } from './DeliveryBlobs';
import { type JobRecord, type StartRecord, type Versioned } from './jobDocuments';
import { type IndexEntry, type JobIndex } from './JobIndex';
import { BlobStartMarks, type StartMark, type StartMarks, TableStartMarks } from './StartMarks';

export { checkJobId, isStatus } from './BlobDocuments';
export type {
  ChunkClaimEntry,
  ChunkResult,
  ChunkResultEntry,
  JobListing,
  JobRecord,
  RecordStatus,
  StartRecord,
  Versioned,
} from './jobDocuments';

/** The size of a blob elsewhere in the account, undefined when it does not exist. */
export type ExternalSize = (ref: BlobRef, signal?: AbortSignal) => Promise<number | undefined>;

/** Jobs `finalRecordedAt` remembers (a few bursts' worth; an entry is a job id and a number). */
const FINALS_REMEMBERED = 20_000;

export class JobStore {
  /** Blobs elsewhere in the account (a job's itemsBlob), checked at submission: their size, or undefined when missing. */
  readonly #externalSize: ExternalSize;
  /** The cancel markers as this process last read them (at most 5 s old: CancelMarkers). */
  readonly #cancels: CancelMarkers;
  /** The jobs whose final summary this process saw recorded, and when (oldest first: `finalRecordedAt`). */
  readonly #finals = new Map<string, number>();
  /** The job's chunks, their results and claims (the dispatcher's and the workers' store). */
  readonly chunks: ChunkBlobs;
  /** Where each job's outcome went, and the deliveries the leader's pass retries. */
  readonly deliveries: DeliveryBlobs;
  /** The starts not yet seen past their plan step (StartMarks.ts): in the index's table, or in blobs without an index. */
  readonly #marks: StartMarks;

  /** The store over a results container of the account (`blobs`), which also holds the jobs' itemsBlobs. */
  static onBlobs(blobs: BlobServiceClient, containerName: string, index?: JobIndex): JobStore {
    const externalSize = async (ref: BlobRef, signal?: AbortSignal): Promise<number | undefined> => {
      try {
        const properties = await blobs.getContainerClient(ref.container).getBlobClient(ref.blob).getProperties({ abortSignal: signal });
        return properties.contentLength ?? 0;
      } catch (err) {
        if (isStatus(err, 404)) return undefined;
        throw err;
      }
    };
    return new JobStore(new BlobDocuments(blobs.getContainerClient(containerName)), containerName, externalSize, index);
  }

  constructor(
    private readonly docs: JsonDocuments,
    /** The results container (other stores keep their blobs there too). */
    readonly containerName: string,
    externalSize: ExternalSize,
    /** The job index this store keeps up to date (none: tests of the pipeline alone). */
    readonly index?: JobIndex,
  ) {
    this.#externalSize = externalSize;
    this.#cancels = new CancelMarkers((jobId, signal) => this.docs.exists(JobStore.cancelBlob(jobId), signal));
    this.chunks = new ChunkBlobs(this.docs, this.#cancels);
    this.deliveries = new DeliveryBlobs(this.docs);
    // A connection the table client refuses (no table endpoint) leaves the index failing, best effort, and the marks in blobs.
    this.#marks = index?.clientBuilds() === true ? new TableStartMarks(index) : new BlobStartMarks(docs);
  }

  static recordBlob(jobId: string): string {
    return `records/${checkJobId(jobId)}.json`;
  }
  static cancelBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/cancel.json`;
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

  /** Creates the results container once per store; a concurrent create (409) is success. */
  ensureContainer(signal?: AbortSignal): Promise<unknown> {
    return this.docs.ensureContainer(signal);
  }

  // --- records ---

  async readRecord(jobId: string, signal?: AbortSignal): Promise<JobRecord | undefined> {
    return this.docs.get<JobRecord>(JobStore.recordBlob(jobId), signal);
  }

  async readRecordVersioned(jobId: string, signal?: AbortSignal): Promise<Versioned<JobRecord> | undefined> {
    return this.docs.getVersioned<JobRecord>(JobStore.recordBlob(jobId), signal);
  }

  /** Creates the record unless one exists; answers which. */
  async createRecord(record: JobRecord, signal?: AbortSignal): Promise<'written' | 'exists'> {
    const outcome = await this.createRecordOnly(record, signal);
    if (outcome === 'written') await this.noteRecord(record);
    return outcome;
  }

  /** The record alone, create-once; its index row is the caller's (`noteRecord`), when it knows the row may go. */
  createRecordOnly(record: JobRecord, signal?: AbortSignal): Promise<'written' | 'exists'> {
    return this.docs.put(JobStore.recordBlob(record.jobId), record, { ifNoneMatch: true, metadata: recordMetadata(record), signal });
  }

  /** The index row of a record just created (best effort, like every index write). */
  async noteRecord(record: JobRecord): Promise<void> {
    await this.index?.note(recordEntry(record), 'record');
  }

  /** Like `createRecord`, answering the new record's etag. */
  async createRecordVersioned(record: JobRecord, signal?: AbortSignal): Promise<{ etag: string } | 'exists'> {
    const options = { ifNoneMatch: true, metadata: recordMetadata(record), signal };
    const outcome = await this.docs.putVersioned(JobStore.recordBlob(record.jobId), record, options);
    if (typeof outcome === 'object') await this.index?.note(recordEntry(record), 'record');
    return outcome === 'conflict' ? 'exists' : outcome;
  }

  /** Replaces the record only if it is still the version read (`ifMatch`): the new etag, or `conflict`. */
  async replaceRecordIf(record: JobRecord, ifMatch: string, signal?: AbortSignal): Promise<{ etag: string } | 'conflict'> {
    const options = { ifMatch, metadata: recordMetadata(record), signal };
    const outcome = await this.docs.putVersioned(JobStore.recordBlob(record.jobId), record, options);
    if (typeof outcome === 'object') await this.index?.note(recordEntry(record), 'record');
    return outcome === 'exists' ? 'conflict' : outcome;
  }

  async deleteRecord(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.delete(JobStore.recordBlob(jobId), signal);
  }

  /** Every record's id, status and times, from one listing (no reads). */
  async listRecords(signal?: AbortSignal): Promise<Array<Pick<JobRecord, 'jobId' | 'status' | 'createdAt' | 'updatedAt' | 'workType'>>> {
    const out: Array<Pick<JobRecord, 'jobId' | 'status' | 'createdAt' | 'updatedAt' | 'workType'>> = [];
    for await (const blob of this.docs.list('records/', true, signal)) {
      const jobId = blob.name.slice('records/'.length, -'.json'.length);
      const meta = blob.metadata;
      const status = meta.status === 'rejected' ? 'rejected' : 'pending';
      out.push({
        jobId,
        status,
        createdAt: meta.createdat ?? '',
        updatedAt: meta.updatedat ?? '',
        ...(meta.worktype === undefined ? {} : { workType: meta.worktype }),
      });
    }
    return out;
  }

  // --- starts ---

  async readStart(jobId: string, signal?: AbortSignal): Promise<Versioned<StartRecord> | undefined> {
    return this.docs.getVersioned<StartRecord>(JobStore.startBlob(jobId), signal);
  }

  /** Creates the job's start record unless one exists: its etag, or `exists`. */
  async createStart(record: StartRecord, signal?: AbortSignal): Promise<{ etag: string } | 'exists'> {
    const outcome = await this.docs.putVersioned(JobStore.startBlob(record.jobId), record, { ifNoneMatch: true, signal });
    // An HTTP submission's row says pending since its POST (its record): the same status, not written again.
    const indexed = record.state === 'active' && record.run.via !== 'http';
    if (typeof outcome === 'object' && indexed) await this.index?.note(startEntry(record), 'start');
    return outcome === 'conflict' ? 'exists' : outcome;
  }

  /** Replaces the start record only if it is still the version read: the new etag, or `conflict`. */
  async replaceStart(record: StartRecord, ifMatch: string, signal?: AbortSignal): Promise<{ etag: string } | 'conflict'> {
    const outcome = await this.docs.putVersioned(JobStore.startBlob(record.jobId), record, { ifMatch, signal });
    // A start given up (START_FAILED): the job id shows no job now (its rejection is recorded next, with its own row).
    if (typeof outcome === 'object' && record.state === 'rejected') {
      await this.index?.forget(record.jobId, record.run.submittedAt, 'start_rejected');
    }
    return outcome === 'exists' ? 'conflict' : outcome;
  }

  /** Puts this start of the job on the list of starts the leader's pass checks. */
  async markUnconfirmed(jobId: string, startId: string, signal?: AbortSignal): Promise<void> {
    await this.#marks.mark(jobId, startId, signal);
  }

  /** Removes this start's mark (another start's of the same job stays). */
  async clearUnconfirmed(jobId: string, startId: string, signal?: AbortSignal): Promise<void> {
    await this.#marks.clear(jobId, startId, signal);
  }

  /**
   * A start whose run got past its plan's fence has landed: its mark goes (the intake checks only
   * marked starts), and only its own: a start that replaced it since keeps its mark. Called by that
   * plan, so the leader's pass does not re-read every fresh start until it sees it past planning.
   * The index row says running once the plan hands the job to its steps (`noteRunning`): a job its
   * plan finishes goes from pending to its final row, one write fewer.
   */
  async confirmStart(run: JobRun, signal?: AbortSignal): Promise<void> {
    await this.clearUnconfirmed(run.jobId, run.startId, signal);
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

  /**
   * Deletes everything stored for a job: its blobs under jobs/<jobId>/ (its start record, the id's
   * claim, after the others, so a purge cut short leaves the id held until the next one finishes
   * it), its record and its start marks.
   * Answers how many of the job's blobs it deleted (its start marks, rows or blobs, are not counted).
   */
  async purgeJob(jobId: string, signal?: AbortSignal): Promise<number> {
    const prefix = `jobs/${checkJobId(jobId)}/`;
    // The index row's key is the job's creation time: read it while the records that hold it exist.
    const created =
      this.index === undefined
        ? []
        : [(await this.readStart(jobId, signal))?.value.run.submittedAt, (await this.readRecord(jobId, signal))?.createdAt];
    const claim = JobStore.startBlob(jobId);
    const names: string[] = [];
    let claimed = false;
    for await (const blob of this.docs.list(prefix, false, signal)) {
      if (blob.name === claim) claimed = true;
      else names.push(blob.name);
    }
    if (claimed) names.push(claim);
    names.push(JobStore.recordBlob(jobId), DeliveryBlobs.dueBlob(jobId));
    await this.#marks.clearJob(jobId, signal);
    let deleted = 0;
    for (const name of names) {
      if (await this.docs.delete(name, signal)) deleted += 1;
    }
    for (const createdAt of new Set(created)) if (createdAt !== undefined) await this.index?.forget(jobId, createdAt, 'purge');
    return deleted;
  }

  /** Every unconfirmed start: its job id and start id (one request per 1,000 in a table, per 5,000 in blobs). */
  async listUnconfirmed(signal?: AbortSignal): Promise<StartMark[]> {
    return this.#marks.list(signal);
  }

  async readFinal(jobId: string, signal?: AbortSignal): Promise<JobSummary | undefined> {
    return this.docs.get<JobSummary>(JobStore.finalBlob(jobId), signal);
  }

  /**
   * Records the job's final summary once; answers the stored one (an earlier run's, if it finished
   * first). A recorded outcome is then copied into the job's start record (`StartRecord.outcome`),
   * so a status read finds a finished job in one read; a failure there throws (the activity is
   * retried, and the retry copies it, finding the summary recorded).
   */
  async writeFinal(summary: JobSummary, signal?: AbortSignal, createdAt?: string): Promise<JobSummary> {
    const written = (await this.docs.put(JobStore.finalBlob(summary.jobId), summary, { ifNoneMatch: true, signal })) === 'written';
    const recorded = written ? summary : ((await this.readFinal(summary.jobId, signal)) ?? summary);
    if (isSuperseded(recorded)) return recorded;
    this.#noteFinal(recorded.jobId);
    const folded = await this.#foldOutcome(recorded, signal);
    // The index row once per outcome: when it was recorded here, or when an earlier try recorded it
    // and failed before its copy (and so before its row).
    if (written || folded.changed) await this.indexFinal(recorded, createdAt ?? folded.submittedAt);
    return recorded;
  }

  /** Copies the outcome into the start record (over the version read; a writer in between is read again). */
  async #foldOutcome(outcome: JobSummary, signal?: AbortSignal): Promise<{ changed: boolean; submittedAt?: string }> {
    for (let attempt = 1; ; attempt++) {
      const start = await this.readStart(outcome.jobId, signal);
      if (start === undefined) return { changed: false };
      const submittedAt = start.value.run.submittedAt;
      if (start.value.outcome !== undefined) return { changed: false, submittedAt };
      const replaced = await this.replaceStart({ ...start.value, outcome }, start.etag, signal);
      if (replaced !== 'conflict') return { changed: true, submittedAt };
      if (attempt >= 5) throw new Error(`the start record of ${outcome.jobId} kept changing while its outcome was copied into it`);
    }
  }

  /**
   * When this process last saw the job's final summary recorded (written here, or found written by
   * `writeFinal`), as Date.now(); undefined when it has not (or forgot: the newest `FINALS_REMEMBERED`
   * are kept). The leader's stall check stops following such a job's runs without reading them.
   */
  finalRecordedAt(jobId: string): number | undefined {
    return this.#finals.get(jobId);
  }

  #noteFinal(jobId: string): void {
    this.#finals.delete(jobId);
    this.#finals.set(jobId, Date.now());
    if (this.#finals.size > FINALS_REMEMBERED) {
      const oldest = this.#finals.keys().next();
      if (oldest.done !== true) this.#finals.delete(oldest.value);
    }
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
    await this.docs.put(JobStore.cancelBlob(jobId), { jobId, reason, at: new Date().toISOString() }, { ifNoneMatch: true, signal });
    this.#cancels.noteCancelled(jobId);
  }

  /** The cancel marker, as read at most 5 s ago by this process (CancelMarkers says why that is enough). */
  async isCancelled(jobId: string, signal?: AbortSignal): Promise<boolean> {
    return this.#cancels.isCancelled(jobId, signal);
  }


  // --- the job's result ---

  async writeJobResult(jobId: string, value: unknown, signal?: AbortSignal): Promise<{ blob: string; bytes: number }> {
    const name = JobStore.resultBlob(jobId);
    await this.docs.put(name, value, { signal });
    return { blob: name, bytes: Buffer.byteLength(JSON.stringify(value)) };
  }

  async readJobResultText(jobId: string, signal?: AbortSignal): Promise<string | undefined> {
    return this.docs.getText(JobStore.resultBlob(jobId), signal);
  }

  /** Whether a blob elsewhere in the account exists (a job's itemsBlob). */
  async externalExists(ref: BlobRef, signal?: AbortSignal): Promise<boolean> {
    return (await this.externalSize(ref, signal)) !== undefined;
  }

  /** The size in bytes of a blob elsewhere in the account (a job's itemsBlob), undefined when it does not exist. */
  async externalSize(ref: BlobRef, signal?: AbortSignal): Promise<number | undefined> {
    return this.#externalSize(ref, signal);
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
