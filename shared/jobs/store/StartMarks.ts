/**
 * The marks of starts not yet seen past their plan step: made with the start record, followed by
 * the leader's start checks (intake/StartRepair.ts), removed by the run's plan once past its fence.
 * Every job makes one and removes it, so where they live decides a cost paid per job:
 *
 * - `TableStartMarks` (the app: wherever it has its job index): rows of the job index's table in a
 *   partition of their own, `starts`, RowKey the job id; when it was marked is the row's Timestamp
 *   (the service's clock). The index's readers ask for the `jobs` partition only, so marks are never
 *   listed as jobs.
 * - `BlobStartMarks` (a store without an index: the tests of the pipeline alone): empty blobs
 *   `unconfirmed-starts/<jobId>` in the results container, marked at the blob's Last-Modified.
 *
 * Why a table where there is one: on Azure both are one request, but Azurite keeps the metadata of
 * every blob of the account in one collection and re-sorts its indexes on each blob delete, so a
 * delete costs in proportion to what the whole account stores; in a 1,000-job burst the marks'
 * deletes took 13.7% of Azurite's CPU (a profile of `jobs-scale`, docs/figures.md). A table row's
 * delete touches its own table only.
 *
 * Guarantees (both): `mark` is an upsert (marking again moves the mark's time), `clear` of a missing
 * mark is success, `list` answers every mark with its time, in job id order. Failures throw: a start
 * whose mark was not written is not made (Submissions.ts).
 */
import { odata } from '@azure/data-tables';

import { isValidJobId } from '../jobIds';
import { checkJobId, type JsonDocuments } from './BlobDocuments';
import { type TableWrites, type WritesTable } from './TableWrites';

/** A marked start: its job id and when it was last marked (ms since the epoch, the storage service's clock). */
export interface StartMark {
  readonly jobId: string;
  readonly markedAt: number;
}

export interface StartMarks {
  mark(jobId: string, signal?: AbortSignal): Promise<void>;
  clear(jobId: string, signal?: AbortSignal): Promise<void>;
  list(signal?: AbortSignal): Promise<StartMark[]>;
}

const UNCONFIRMED_PREFIX = 'unconfirmed-starts/';

export class BlobStartMarks implements StartMarks {
  constructor(private readonly docs: JsonDocuments) {}

  static blobName(jobId: string): string {
    return `${UNCONFIRMED_PREFIX}${checkJobId(jobId)}`;
  }

  async mark(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.put(BlobStartMarks.blobName(jobId), {}, { metadata: { since: new Date().toISOString() }, signal });
  }

  async clear(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.delete(BlobStartMarks.blobName(jobId), signal);
  }

  async list(signal?: AbortSignal): Promise<StartMark[]> {
    const out: StartMark[] = [];
    for await (const blob of this.docs.list(UNCONFIRMED_PREFIX, false, signal)) {
      const jobId = blob.name.slice(UNCONFIRMED_PREFIX.length);
      if (isValidJobId(jobId)) out.push({ jobId, markedAt: blob.lastModified.getTime() });
    }
    return out;
  }
}

export const MARKS_PARTITION = 'starts';

/** The table the marks share (the job index's), its calls' guard (the table is created when missing) and its coalesced row writes. */
export interface MarksTable extends WritesTable {
  readonly writes: TableWrites;
}

export class TableStartMarks implements StartMarks {
  /** Whether the blob marks an earlier version of the app left were moved here (once per process, at the first listing). */
  #legacyMoved = false;

  constructor(
    private readonly host: MarksTable,
    /** Where earlier versions kept the marks: moved into the table at the first listing, so an upgrade leaves no start unchecked. */
    private readonly legacy?: StartMarks,
  ) {}

  async mark(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.host.writes.upsert({ partitionKey: MARKS_PARTITION, rowKey: checkJobId(jobId) }, signal);
  }

  async clear(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.host.writes.delete(MARKS_PARTITION, checkJobId(jobId), signal);
  }

  async list(signal?: AbortSignal): Promise<StartMark[]> {
    if (this.legacy !== undefined && !this.#legacyMoved) {
      for (const { jobId } of await this.legacy.list(signal)) {
        await this.mark(jobId, signal);
        await this.legacy.clear(jobId, signal);
      }
      this.#legacyMoved = true;
    }
    const out: StartMark[] = [];
    await this.host.withTable(async () => {
      out.length = 0;
      const rows = this.host.table.listEntities({
        queryOptions: { filter: odata`PartitionKey eq ${MARKS_PARTITION}`, select: ['RowKey', 'Timestamp'] },
        abortSignal: signal,
      });
      for await (const row of rows) {
        const markedAt = typeof row.timestamp === 'string' ? Date.parse(row.timestamp) : Number.NaN;
        const jobId = row.rowKey;
        if (typeof jobId === 'string' && isValidJobId(jobId) && Number.isFinite(markedAt)) out.push({ jobId, markedAt });
      }
    });
    return out;
  }
}
