/**
 * The job list (`GET /api/jobs`): a page of the job index, newest first (then by job id), filtered
 * by status and work type, with a continuation token and, when asked, the jobs per status.
 *
 * Guarantees: paging is exact: the token names the last job shown, so jobs submitted in between
 * never shift a later page, and unfiltered every job indexed at the first read shows once; a bad limit, filter
 * or token is refused (INVALID_PAGING, INVALID_STATUS_FILTER, INVALID_WORK_TYPE_FILTER) before any
 * read. A page's first pending and running jobs are read live, for at most LIVE_READ_BUDGET_MS, and
 * their rows put right on the way; the rest, and those not read within it, show as indexed. A job
 * shows once it is indexed; the status of one job never depends on the index (JobStatusReader).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 8.
 */
import { type Logger } from '../../observability/log';
import { JobError } from '../JobError';
import { isValidJobId } from '../jobIds';
import { mapLimit } from '../pool';
import { type OrchestrationClient } from '../run/OrchestrationClient';
import { indexKey, type IndexRow, type JobIndex, type StatusCounts } from '../store/JobIndex';
import { jobIndexOf, putRow } from './IndexUpkeep';
import { type JobStatusDeps, JobStatusReader } from './JobStatusReader';
import { entryOf, indexEntryOf, JOB_STATUSES, type JobListEntry, type JobStatus, type JobView } from './jobViews';

export interface JobPage {
  readonly jobs: readonly JobListEntry[];
  /** Present when more jobs follow: pass it as `continuation` for the next page. */
  readonly continuation?: string;
  /** Jobs per status in the index, when asked for (`counts`). */
  readonly counts?: StatusCounts & { readonly at: string };
}

export const LIST_LIMITS = { default: 100, max: 1000 } as const;
/** Live reads of a page's pending and running jobs at once. */
const LIVE_READS = 16;
/**
 * At most this many of a page's pending and running jobs are read live (the newest first); the rest
 * show as indexed. A live read is several storage reads, and during a burst the first page is all
 * running jobs: a live page polling 100 of them would take from the storage the starts need.
 */
const LIVE_READ_MAX = 20;
/**
 * How long a page waits for its live reads; a row not read by then shows as indexed (its read goes
 * on and still puts the row right). Under a burst a live read waits behind the jobs' own storage
 * requests: the first page took 0.3-1.3 s (p50) and up to 5.8 s with them (`jobs-scale`, 1,000 jobs).
 */
export const LIVE_READ_BUDGET_MS = 100;
/** A work type name, as the job schema spells it (a filter for a type no longer registered still lists its jobs). */
const WORK_TYPE_FILTER = /^[a-z][a-z0-9-]{0,39}$/;

function parseLimit(text: string | undefined): number {
  if (text === undefined || text === '') return LIST_LIMITS.default;
  const limit = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(limit) || limit < 1 || limit > LIST_LIMITS.max) {
    throw new JobError('INVALID_PAGING', `limit must be an integer from 1 to ${LIST_LIMITS.max} (default ${LIST_LIMITS.default}).`);
  }
  return limit;
}

function continuationOf(entry: Pick<JobListEntry, 'createdAt' | 'jobId'>): string {
  return Buffer.from(JSON.stringify([entry.createdAt ?? '', entry.jobId]), 'utf8').toString('base64url');
}

/** The index key after which the next page starts. */
function afterKeyOf(token: string): string {
  const after = parseContinuation(token);
  const key = after.createdAt === null ? undefined : indexKey(after.createdAt, after.jobId);
  if (key === undefined) throw new JobError('INVALID_PAGING', 'continuation is not a token this API gave out; start again without it.');
  return key;
}

function parseStatusFilter(status: string | undefined): JobStatus | undefined {
  if (status !== undefined && !(JOB_STATUSES as readonly string[]).includes(status)) {
    throw new JobError('INVALID_STATUS_FILTER', `status must be one of ${JOB_STATUSES.join(', ')}.`);
  }
  return status as JobStatus | undefined;
}

function parseWorkTypeFilter(workType: string | undefined): string | undefined {
  if (workType !== undefined && !WORK_TYPE_FILTER.test(workType)) {
    throw new JobError(
      'INVALID_WORK_TYPE_FILTER',
      'workType must be a work type name: a lowercase letter, then up to 39 lowercase letters, digits or hyphens.',
    );
  }
  return workType;
}

function parseContinuation(token: string): Pick<JobListEntry, 'createdAt' | 'jobId'> {
  try {
    const value = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as unknown;
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      typeof value[0] === 'string' &&
      typeof value[1] === 'string' &&
      isValidJobId(value[1])
    ) {
      return { createdAt: value[0] === '' ? null : value[0], jobId: value[1] };
    }
  } catch {
    // Falls through to the error below.
  }
  throw new JobError('INVALID_PAGING', 'continuation is not a token this API gave out; start again without it.');
}

export interface JobListDeps extends JobStatusDeps {
  readonly logger: Logger;
}

export class JobList {
  private readonly reader: JobStatusReader;

  constructor(private readonly deps: JobListDeps) {
    this.reader = new JobStatusReader(deps);
  }

  private get index(): JobIndex {
    return jobIndexOf(this.deps.store);
  }

  /**
   * One page of jobs, newest first (then by job id): at most `limit` (default 100, at most 1,000),
   * and a continuation token when more follow; pass it back for the next page. The token names the
   * last job shown, so jobs submitted in between do not shift the pages. The page is one query of
   * the job index (JobIndex), optionally by `status` and `workType`; its pending and running jobs
   * are then read live (the first LIVE_READ_MAX of them: their status and progress, LIVE_READS at a time), and
   * a row found behind its job is put right on the way. With a status filter, a job whose live
   * status no longer matches is left out of the page (the continuation still follows the rows).
   */
  async list(
    orchestrations: OrchestrationClient,
    status?: string,
    page: { limit?: string; continuation?: string; workType?: string; counts?: boolean } = {},
  ): Promise<JobPage> {
    const statusFilter = parseStatusFilter(status);
    const workType = parseWorkTypeFilter(page.workType);
    const limit = parseLimit(page.limit);
    const afterKey = page.continuation === undefined ? undefined : afterKeyOf(page.continuation);
    const index = this.index;
    const [rows, counts] = await Promise.all([
      index.page({
        limit,
        ...(afterKey === undefined ? {} : { afterKey }),
        ...(statusFilter === undefined ? {} : { status: statusFilter }),
        ...(workType === undefined ? {} : { workType }),
      }),
      page.counts === true ? index.counts() : Promise.resolve(undefined),
    ]);
    let live = 0;
    const readLive = rows.rows.map((row) => (row.status === 'pending' || row.status === 'running') && live++ < LIVE_READ_MAX);
    let timer: NodeJS.Timeout | undefined;
    const budget = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, LIVE_READ_BUDGET_MS);
    });
    const entries = await mapLimit([...rows.rows], LIVE_READS, (row, i) => {
      if (readLive[i] !== true) return Promise.resolve(entryOf(row));
      return Promise.race([this.liveEntry(row, orchestrations), budget.then(() => entryOf(row))]);
    }).finally(() => clearTimeout(timer));
    const jobs = entries.filter(
      (e) => (statusFilter === undefined || e.status === statusFilter) && (workType === undefined || e.workType === workType),
    );
    const last = rows.rows.at(-1);
    return {
      jobs,
      ...(rows.lastKey !== undefined && last !== undefined ? { continuation: continuationOf(last) } : {}),
      ...(counts === undefined ? {} : { counts }),
    };
  }

  /** Jobs per status, from the index (shared for a few seconds: JobIndex.counts). */
  async counts(): Promise<StatusCounts & { readonly at: string }> {
    return this.index.counts();
  }

  /** A row as the list shows it: a pending or running job read live (its row corrected when behind), a finished one as indexed. */
  private async liveEntry(row: IndexRow, orchestrations: OrchestrationClient): Promise<JobListEntry> {
    const indexed = entryOf(row);
    if (row.status !== 'pending' && row.status !== 'running') return indexed;
    let view: JobView;
    try {
      view = await this.reader.get(row.jobId, orchestrations);
    } catch (err) {
      // Not found (purged, or its submission undone) or unreadable now: shown as indexed; the leader's repair decides.
      if (!(err instanceof JobError && err.code === 'JOB_NOT_FOUND')) {
        this.deps.logger.warn('index.live_read_failed', { jobId: row.jobId, error: err });
      }
      return indexed;
    }
    const live = entryOf(view);
    const entry = indexEntryOf(view);
    // Behind (finished, or started): put right now. Progress alone changes every poll; the row keeps the last status change's.
    if (entry !== undefined && entry.status !== row.status) await putRow(this.index, this.deps.logger, row, entry, 'list');
    return live;
  }
}
