/**
 * The marks of starts not yet seen past their plan step: made with the start record, followed by
 * the leader's start checks (intake/StartRepair.ts), removed by the run's plan once past its fence.
 * A mark names one start (`<jobId>.<startId>`), so a plan can only ever remove its own start's mark:
 * a superseded plan that passed its fence just before a take-over cannot remove the mark of the
 * start that replaced it. Every job makes one and removes it, so where they live decides a cost
 * paid per job:
 *
 * - `TableStartMarks` (the app: wherever it has its job index): rows of the job index's table in a
 *   partition of their own, `starts`. The index's readers ask for the `jobs` partition only, so marks
 *   are never listed as jobs.
 * - `BlobStartMarks` (a store without an index: a connection with no table endpoint, and the tests of
 *   the pipeline alone): empty blobs `unconfirmed-starts/<jobId>.<startId>` in the results container.
 *
 * Why a table where there is one: a mark's write or delete is one request either way, but rows of
 * one partition written at once go together (TableWrites.ts: up to 100 in one entity group
 * transaction, one transaction on the bill), and a burst marks and clears hundreds of starts a
 * second; a listing is one query per 1,000 marks.
 *
 * A mark carries no time: the service's clock is not this process's, and the start checks judge a
 * mark's age from when they first saw it (StartRepair.ts).
 *
 * Guarantees (both): `mark` is an upsert, `clear` of a missing mark is success, `list` answers every
 * mark, in job id order. Failures throw: a start whose mark was not written is not made (Submissions.ts).
 */
import { odata } from '@azure/data-tables';

import { isValidJobId } from '../jobIds';
import { checkJobId, type JsonDocuments } from './BlobDocuments';
import { type TableWrites, type WritesTable } from './TableWrites';

/** A marked start: its job and which of the job's starts. */
export interface StartMark {
  readonly jobId: string;
  readonly startId: string;
}

export interface StartMarks {
  mark(jobId: string, startId: string, signal?: AbortSignal): Promise<void>;
  /** Removes one start's mark. */
  clear(jobId: string, startId: string, signal?: AbortSignal): Promise<void>;
  /** Removes every mark of the job (a purge). */
  clearJob(jobId: string, signal?: AbortSignal): Promise<void>;
  list(signal?: AbortSignal): Promise<StartMark[]>;
}

/** A start id as the app makes them (a UUID) or a test names them: it becomes part of a blob name or row key. */
const START_ID = /^[A-Za-z0-9-]{1,64}$/;

/** `<jobId>.<startId>`: '.' is in neither. */
function markKey(jobId: string, startId: string): string {
  if (!START_ID.test(startId)) throw new Error(`invalid start id: ${JSON.stringify(startId).slice(0, 80)}`);
  return `${checkJobId(jobId)}.${startId}`;
}

function markOf(key: string): StartMark | undefined {
  const dot = key.indexOf('.');
  const jobId = key.slice(0, dot);
  const startId = key.slice(dot + 1);
  return dot > 0 && isValidJobId(jobId) && START_ID.test(startId) ? { jobId, startId } : undefined;
}

function inJobOrder(marks: StartMark[]): StartMark[] {
  return marks.sort((a, b) => (a.jobId === b.jobId ? a.startId.localeCompare(b.startId) : a.jobId < b.jobId ? -1 : 1));
}

const UNCONFIRMED_PREFIX = 'unconfirmed-starts/';

export class BlobStartMarks implements StartMarks {
  constructor(private readonly docs: JsonDocuments) {}

  static blobName(jobId: string, startId: string): string {
    return `${UNCONFIRMED_PREFIX}${markKey(jobId, startId)}`;
  }

  async mark(jobId: string, startId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.put(BlobStartMarks.blobName(jobId, startId), {}, { signal });
  }

  async clear(jobId: string, startId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.delete(BlobStartMarks.blobName(jobId, startId), signal);
  }

  async clearJob(jobId: string, signal?: AbortSignal): Promise<void> {
    const marks = await this.#list(`${UNCONFIRMED_PREFIX}${checkJobId(jobId)}.`, signal);
    for (const { startId } of marks) await this.clear(jobId, startId, signal);
  }

  list(signal?: AbortSignal): Promise<StartMark[]> {
    return this.#list(UNCONFIRMED_PREFIX, signal);
  }

  async #list(prefix: string, signal?: AbortSignal): Promise<StartMark[]> {
    const out: StartMark[] = [];
    for await (const blob of this.docs.list(prefix, false, signal)) {
      const mark = markOf(blob.name.slice(UNCONFIRMED_PREFIX.length));
      if (mark !== undefined) out.push(mark);
    }
    return inJobOrder(out);
  }
}

export const MARKS_PARTITION = 'starts';

/** The table the marks share (the job index's), its calls' guard (the table is created when missing) and its coalesced row writes. */
export interface MarksTable extends WritesTable {
  readonly writes: TableWrites;
}

export class TableStartMarks implements StartMarks {
  constructor(private readonly host: MarksTable) {}

  async mark(jobId: string, startId: string, signal?: AbortSignal): Promise<void> {
    await this.host.writes.upsert({ partitionKey: MARKS_PARTITION, rowKey: markKey(jobId, startId) }, signal);
  }

  async clear(jobId: string, startId: string, signal?: AbortSignal): Promise<void> {
    await this.host.writes.delete(MARKS_PARTITION, markKey(jobId, startId), signal);
  }

  async clearJob(jobId: string, signal?: AbortSignal): Promise<void> {
    // The job's keys run from `<jobId>.` up to (not including) `<jobId>/` ('/' follows '.').
    const id = checkJobId(jobId);
    const filter = odata`PartitionKey eq ${MARKS_PARTITION} and RowKey ge ${`${id}.`} and RowKey lt ${`${id}/`}`;
    for (const { startId } of await this.#list(filter, signal)) await this.clear(jobId, startId, signal);
  }

  list(signal?: AbortSignal): Promise<StartMark[]> {
    return this.#list(odata`PartitionKey eq ${MARKS_PARTITION}`, signal);
  }

  async #list(filter: string, signal?: AbortSignal): Promise<StartMark[]> {
    const out: StartMark[] = [];
    await this.host.withTable(async () => {
      out.length = 0;
      const rows = this.host.table.listEntities({ queryOptions: { filter, select: ['RowKey'] }, abortSignal: signal });
      for await (const row of rows) {
        const mark = typeof row.rowKey === 'string' ? markOf(row.rowKey) : undefined;
        if (mark !== undefined) out.push(mark);
      }
    });
    return inJobOrder(out);
  }
}
