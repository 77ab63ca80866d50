/**
 * The job index: one Azure Table row per job, what `GET /api/jobs`, the live page and
 * `npx coordinator list` read instead of every record and orchestration.
 *
 *   PartitionKey  `jobs` (one partition: a page is one ordered read, the continuation one RowKey;
 *                 the table's other partition, `starts`, holds the start marks: StartMarks.ts)
 *   RowKey        `<9999999999999 - createdAt ms, 13 digits>_<jobId>`: newest first, then by job id
 *   properties    jobId, status, workType ('' when none), createdAt, updatedAt, progress (JSON text or ''),
 *                 errorCode (a failed or rejected job's error code, '' when none)
 *
 * Why a table: a page is one query that the service answers in RowKey order from where the last one
 * ended. Durable's instance query has no order by creation time and answers whole instances (inputs
 * included); a blob listing returns names in name order only.
 *
 * Guarantees: writes are made where a job's status changes (JobStore, JobService, JobList) and are best
 * effort: `note`/`forget` never throw, a failure is logged (`index.write_failed`) and the leader's
 * repair (IndexUpkeep.repairIndex, IndexUpkeep.walkIndex) puts the row right later. The table is
 * created once per process (createTable when missing). Not guaranteed: that a row agrees with its
 * job at every moment; the bounds are in docs/jobs.md ("The job index").
 */
import { odata, type TableClient, type TableEntityResult, type TransactionAction } from '@azure/data-tables';

import { type Logger } from '../../observability/log';
import { type JobProgress } from '../JobSummary';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { type MarksTable } from './StartMarks';
import { TableWrites } from './TableWrites';

export const INDEX_PARTITION = 'jobs';
/** Larger than any ms timestamp the app will see (year 2286): 13 digits, so keys sort as numbers. */
const KEY_BASE = 9_999_999_999_999;
/** Rows a query page asks for (the service's own maximum). */
const QUERY_PAGE = 1000;

export type IndexedStatus = 'pending' | 'running' | 'completed' | 'completed_with_errors' | 'failed' | 'cancelled' | 'rejected';

/** What a row says about a job (the list entry's fields). */
export interface IndexEntry {
  readonly jobId: string;
  readonly status: IndexedStatus;
  readonly workType: string | null;
  readonly progress: JobProgress | null;
  /** The job's error code (failed, rejected, or a finished job with an error); null when none. */
  readonly errorCode: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
}

export interface IndexRow extends IndexEntry {
  readonly rowKey: string;
}

/** A row as the table stores it (progress as JSON text). */
export type RowEntity = {
  readonly partitionKey: string;
  readonly rowKey: string;
  readonly jobId: string;
  readonly status: string;
  readonly workType: string;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly progress: string;
  readonly errorCode: string;
};

/** The RowKey of a job created at `createdAt` (ISO time); undefined when that is not a time. */
export function indexKey(createdAt: string, jobId: string): string | undefined {
  const ms = Date.parse(createdAt);
  if (!Number.isFinite(ms) || ms < 0 || ms > KEY_BASE) return undefined;
  return `${String(KEY_BASE - ms).padStart(13, '0')}_${jobId}`;
}

function toEntity(entry: IndexEntry, rowKey: string): RowEntity {
  return {
    partitionKey: INDEX_PARTITION,
    rowKey,
    jobId: entry.jobId,
    status: entry.status,
    workType: entry.workType ?? '',
    createdAt: entry.createdAt,
    updatedAt: entry.updatedAt,
    progress: entry.progress === null ? '' : JSON.stringify(entry.progress),
    errorCode: entry.errorCode ?? '',
  };
}

function fromEntity(e: TableEntityResult<Record<string, unknown>>): IndexRow | undefined {
  const text = (name: string): string => (typeof e[name] === 'string' ? e[name] : '');
  if (typeof e.rowKey !== 'string' || text('jobId') === '') return undefined;
  let progress: JobProgress | null = null;
  try {
    progress = text('progress') === '' ? null : (JSON.parse(text('progress')) as JobProgress);
  } catch {
    progress = null;
  }
  return {
    rowKey: e.rowKey,
    jobId: text('jobId'),
    status: text('status') as IndexedStatus,
    workType: text('workType') === '' ? null : text('workType'),
    progress,
    errorCode: text('errorCode') === '' ? null : text('errorCode'),
    createdAt: text('createdAt'),
    updatedAt: text('updatedAt'),
  };
}

/** Whether two entries would make the same row (what the repair compares). */
export function sameEntry(a: IndexEntry, b: IndexEntry): boolean {
  return (
    a.jobId === b.jobId &&
    a.status === b.status &&
    a.workType === b.workType &&
    a.errorCode === b.errorCode &&
    a.createdAt === b.createdAt &&
    a.updatedAt === b.updatedAt &&
    JSON.stringify(a.progress) === JSON.stringify(b.progress)
  );
}

export interface IndexPage {
  readonly rows: readonly IndexRow[];
  /** The key of the last row of this page when more rows follow it. */
  readonly lastKey?: string;
}

export type StatusCounts = Readonly<Record<IndexedStatus, number>> & { readonly total: number };

const COUNTED: readonly IndexedStatus[] = ['pending', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'];
/** Counts are one scan of the index: shared by the requests of a few seconds (the live page polls every second). */
export const COUNTS_TTL_MS = 5_000;

export class JobIndex implements MarksTable {
  #counts: { at: number; value: Promise<StatusCounts> } | undefined;

  #table: TableClient | undefined;

  /** The table's row writes, the start marks' too: coalesced per partition (TableWrites.ts). */
  readonly writes = new TableWrites(this);

  /**
   * `table` may be a factory: the client is then built at first use, so a connection the table
   * client refuses (a connection string with explicit endpoints but no TableEndpoint) fails the
   * index's calls (logged, best effort) and the list, not every job route of the process.
   */
  constructor(
    private readonly source: TableClient | (() => TableClient),
    private readonly logger: Logger,
    private readonly clock: () => number = Date.now,
  ) {}

  get table(): TableClient {
    this.#table ??= typeof this.source === 'function' ? this.source() : this.source;
    return this.#table;
  }

  /** Whether the table client can be built from the connection (one without a table endpoint cannot). */
  clientBuilds(): boolean {
    try {
      return this.table !== undefined;
    } catch {
      return false;
    }
  }

  /** Creates the table once per process (createTable answers success when it exists). */
  readonly ensureTable = onceUntilSuccess((signal) => this.table.createTable({ abortSignal: signal }));

  /** Runs a table call, creating the table first when the service says it does not exist (the start marks share it: StartMarks.ts). */
  async withTable<T>(call: () => Promise<T>): Promise<T> {
    await this.ensureTable();
    try {
      return await call();
    } catch (err) {
      if (!isTableNotFound(err)) throw err;
      // Deleted behind this process's back (a test, an operator): made again once.
      await this.table.createTable();
      return call();
    }
  }

  /** Writes the job's row (replacing it); throws on failure (`note` is the best-effort form). */
  async put(entry: IndexEntry): Promise<void> {
    const rowKey = indexKey(entry.createdAt, entry.jobId);
    if (rowKey === undefined) throw new Error(`Job ${entry.jobId} has no usable createdAt for the index`);
    await this.writes.upsert(toEntity(entry, rowKey));
  }

  /** Deletes the row of the job created at `createdAt` (none: nothing to do). */
  async delete(jobId: string, createdAt: string): Promise<void> {
    const rowKey = indexKey(createdAt, jobId);
    if (rowKey === undefined) return;
    await this.deleteKey(rowKey);
  }

  async deleteKey(rowKey: string): Promise<void> {
    await this.writes.delete(INDEX_PARTITION, rowKey);
  }

  /** `put`, best effort: a failure is logged, never thrown (the repair writes the row later). */
  async note(entry: IndexEntry, op: string): Promise<void> {
    try {
      await this.put(entry);
    } catch (err) {
      this.logger.warn('index.write_failed', { jobId: entry.jobId, op, status: entry.status, error: err });
    }
  }

  /** `delete`, best effort. */
  async forget(jobId: string, createdAt: string, op: string): Promise<void> {
    try {
      await this.delete(jobId, createdAt);
    } catch (err) {
      this.logger.warn('index.write_failed', { jobId, op, error: err });
    }
  }

  /**
   * One page: the rows after `afterKey` (newest first) matching the filters, at most `limit`, and
   * `lastKey` when more follow. One query (more only when a filter leaves a service page short).
   */
  async page(options: { limit: number; afterKey?: string; status?: string; workType?: string }): Promise<IndexPage> {
    const filter = [
      odata`PartitionKey eq ${INDEX_PARTITION}`,
      ...(options.afterKey === undefined ? [] : [odata`RowKey gt ${options.afterKey}`]),
      ...(options.status === undefined ? [] : [odata`status eq ${options.status}`]),
      ...(options.workType === undefined ? [] : [odata`workType eq ${options.workType}`]),
    ].join(' and ');
    const want = options.limit + 1;
    const rows: IndexRow[] = [];
    await this.withTable(async () => {
      rows.length = 0;
      const pages = this.table.listEntities({ queryOptions: { filter } }).byPage({ maxPageSize: Math.min(want, QUERY_PAGE) });
      for await (const page of pages) {
        for (const entity of page) {
          const row = fromEntity(entity);
          if (row !== undefined) rows.push(row);
          if (rows.length >= want) return;
        }
      }
    });
    const more = rows.length > options.limit;
    const shown = rows.slice(0, options.limit);
    const last = shown.at(-1);
    return { rows: shown, ...(more && last !== undefined ? { lastKey: last.rowKey } : {}) };
  }

  /** Every row whose status is one of `statuses`, in key order after `afterKey`, at most `max`. */
  async rowsWithStatus(statuses: readonly IndexedStatus[], max: number, afterKey?: string): Promise<IndexRow[]> {
    const either = statuses.map((s) => odata`status eq ${s}`).join(' or ');
    const filter = [
      odata`PartitionKey eq ${INDEX_PARTITION}`,
      ...(afterKey === undefined ? [] : [odata`RowKey gt ${afterKey}`]),
      `(${either})`,
    ].join(' and ');
    const rows: IndexRow[] = [];
    await this.withTable(async () => {
      rows.length = 0;
      for await (const entity of this.table.listEntities({ queryOptions: { filter } })) {
        const row = fromEntity(entity);
        if (row !== undefined) rows.push(row);
        if (rows.length >= max) return;
      }
    });
    return rows;
  }

  /** Every row's key, job id and status (one scan, 1,000 rows a request). */
  async allKeys(): Promise<Array<Pick<IndexRow, 'rowKey' | 'jobId' | 'status'>>> {
    const out: Array<Pick<IndexRow, 'rowKey' | 'jobId' | 'status'>> = [];
    await this.withTable(async () => {
      out.length = 0;
      const entities = this.table.listEntities({
        queryOptions: { filter: odata`PartitionKey eq ${INDEX_PARTITION}`, select: ['RowKey', 'jobId', 'status'] },
      });
      for await (const e of entities) {
        if (typeof e.rowKey === 'string' && typeof e.jobId === 'string') {
          out.push({ rowKey: e.rowKey, jobId: e.jobId, status: String(e.status) as IndexedStatus });
        }
      }
    });
    return out;
  }

  /** Jobs per status, from one scan of the index (its status column only), shared for COUNTS_TTL_MS. */
  async counts(): Promise<StatusCounts & { readonly at: string }> {
    const now = this.clock();
    if (this.#counts === undefined || now - this.#counts.at >= COUNTS_TTL_MS) {
      const value = this.scanCounts();
      this.#counts = { at: now, value };
      // A failed scan is not kept: the next request tries again.
      value.catch(() => {
        if (this.#counts?.value === value) this.#counts = undefined;
      });
    }
    const at = new Date(this.#counts.at).toISOString();
    return { ...(await this.#counts.value), at };
  }

  private async scanCounts(): Promise<StatusCounts> {
    const counts: Record<string, number> = Object.fromEntries(COUNTED.map((s) => [s, 0]));
    let total = 0;
    await this.withTable(async () => {
      for (const s of COUNTED) counts[s] = 0;
      total = 0;
      const entities = this.table.listEntities({ queryOptions: { filter: odata`PartitionKey eq ${INDEX_PARTITION}`, select: ['status'] } });
      for await (const e of entities) {
        const status = String(e.status);
        if (status in counts) counts[status] = (counts[status] ?? 0) + 1;
        total += 1;
      }
    });
    return { ...(counts as Record<IndexedStatus, number>), total };
  }

  /** Writes many rows at once, 100 to a transaction (tests and benches fill the index with it). */
  async putMany(entries: readonly IndexEntry[]): Promise<void> {
    await this.ensureTable();
    for (let i = 0; i < entries.length; i += 100) {
      const actions: TransactionAction[] = entries.slice(i, i + 100).map((entry) => {
        const rowKey = indexKey(entry.createdAt, entry.jobId);
        if (rowKey === undefined) throw new Error(`Job ${entry.jobId} has no usable createdAt for the index`);
        return ['upsert', toEntity(entry, rowKey), 'Replace'];
      });
      await this.table.submitTransaction(actions);
    }
  }
}

function isTableNotFound(err: unknown): boolean {
  const e = err as { statusCode?: number; code?: string } | null;
  return e?.statusCode === 404 && e.code === 'TableNotFound';
}
