/**
 * The leader's upkeep of the job index (jobCoordinationPass schedules it): the refresh checks the
 * rows that say pending or running against their jobs' real status, the walk compares the jobs that
 * exist with the rows. Both put a wrong row right, add a missing one and remove one whose job no
 * longer exists; the list (JobList) puts right the rows it reads live the same way (`putRow`).
 *
 * Guarantees: the bounds of INDEX_UPKEEP below and of the pass's UPKEEP_SCHEDULE (docs/jobs.md,
 * "The job index", states them for operators); a row is removed only after a status read answered
 * JOB_NOT_FOUND for its job (or moved to its job's new key), and a read that fails leaves the row
 * for the next turn. Every write is best effort: a failed delete is logged (`index.write_failed`),
 * never thrown.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 2 and 8.
 */
import { type Logger } from '../../observability/log';
import { JobError } from '../JobError';
import { mapLimit, mapWhile } from '../pool';
import { jobsShownBy, type OrchestrationClient } from '../run/OrchestrationClient';
import { type IndexEntry, indexKey, type IndexRow, type JobIndex, sameEntry } from '../store/JobIndex';
import { type JobStore } from '../store/JobStore';
import { type JobStatusDeps, JobStatusReader } from './JobStatusReader';
import { indexEntryOf, type JobView } from './jobViews';

/**
 * The leader's upkeep of the job index (jobCoordinationPass schedules it: its UPKEEP_SCHEDULE says
 * how often). A refresh checks the rows that say pending or running against the job's real status
 * (JobStatusReader.get), up to `refreshMax` rows (and `refreshBudgetMs`) a time, carrying on after
 * the last one checked; a walk compares the jobs that exist (records, Durable instances) with the
 * rows, and puts up to `walkMax` missing or orphaned rows right.
 */
export const INDEX_UPKEEP = {
  /** Rows of pending and running jobs read per refresh, and the most of them checked. */
  refreshScan: 1_000,
  refreshMax: 100,
  /** A row this young is not checked: its job's last change wrote it. */
  refreshAfterMs: 30_000,
  /**
   * A refresh begins no further check once it has run this long; the next one carries on after the
   * last row checked. Each check is a status read of several storage reads: 100 of them held a
   * burst's leader pass for up to 4.4 s (1,000 jobs, jobs-scale).
   */
  refreshBudgetMs: 1_500,
  walkMax: 200,
} as const;
/** Jobs the index repair reads at once. */
const REPAIR_READS = 8;

/** The job index: the store's (the app always builds one; JobStore alone may have none). */
export function jobIndexOf(store: JobStore): JobIndex {
  const index = store.index;
  if (index === undefined) throw new Error('The job store has no index (JobComponents builds one).');
  return index;
}

/** Replaces `row` with `entry` (a changed creation time moves the row to its new key). Best effort. */
export async function putRow(
  index: JobIndex,
  logger: Logger,
  row: Pick<IndexRow, 'rowKey' | 'jobId'>,
  entry: IndexEntry,
  op: string,
): Promise<void> {
  await index.note(entry, op);
  if (indexKey(entry.createdAt, entry.jobId) !== row.rowKey) await forgetKey(index, logger, row, op);
}

async function forgetKey(index: JobIndex, logger: Logger, row: Pick<IndexRow, 'rowKey' | 'jobId'>, op: string): Promise<void> {
  try {
    await index.deleteKey(row.rowKey);
  } catch (err) {
    logger.warn('index.write_failed', { jobId: row.jobId, op, error: err });
  }
}

export interface IndexUpkeepDeps extends JobStatusDeps {
  readonly logger: Logger;
}

export class IndexUpkeep {
  private readonly reader: JobStatusReader;
  /** Where the index refresh carries on (the key of the last row it checked), between leader passes. */
  #refreshAfter: string | undefined;

  constructor(private readonly deps: IndexUpkeepDeps) {
    this.reader = new JobStatusReader(deps);
  }

  private get index(): JobIndex {
    return jobIndexOf(this.deps.store);
  }

  /**
   * The leader's refresh of the index (INDEX_UPKEEP): every row that says pending or running, up to
   * `max`, is checked against the job's real status and put right (a job that no longer exists:
   * its row goes). Carries on after the last row checked next time, so every such row is checked
   * within ceil(rows / max) refreshes. Answers what it did.
   */
  async repairIndex(
    orchestrations: OrchestrationClient,
    options: {
      readonly max?: number;
      readonly signal?: AbortSignal;
      readonly budgetMs?: number;
      /**
       * How long submissions wait on the jobs queue now (JobIntake.submissionWaitMs): a pending row is
       * checked only once older than that plus `refreshAfterMs`, since until then its job is on the
       * queue and the row is right (an HTTP burst's pending rows drew ~5 status reads a job).
       */
      readonly queueWaitMs?: number;
    } = {},
  ): Promise<{ checked: number; fixed: number; removed: number; open: number }> {
    const max = options.max ?? INDEX_UPKEEP.refreshMax;
    const budgetMs = options.budgetMs ?? INDEX_UPKEEP.refreshBudgetMs;
    const began = Date.now();
    const open = ['pending', 'running'] as const;
    let listed = await this.index.rowsWithStatus(open, INDEX_UPKEEP.refreshScan, this.#refreshAfter);
    if (listed.length === 0 && this.#refreshAfter !== undefined) listed = await this.index.rowsWithStatus(open, INDEX_UPKEEP.refreshScan);
    this.#refreshAfter = listed.length >= INDEX_UPKEEP.refreshScan ? listed.at(-1)?.rowKey : undefined;
    // A row written in the last `refreshAfterMs` is the write of its job's last change, and a burst's
    // fresh rows are most of them: each check is a status read of several storage reads.
    const now = Date.now();
    const pendingAfterMs = INDEX_UPKEEP.refreshAfterMs + (options.queueWaitMs ?? 0);
    const youngerThan = (row: IndexRow): number => (row.status === 'pending' ? pendingAfterMs : INDEX_UPKEEP.refreshAfterMs);
    const rows = listed.filter((row) => !(now - Date.parse(row.updatedAt ?? '') < youngerThan(row))).slice(0, max);
    const report = { checked: 0, fixed: 0, removed: 0 };
    // The first round always begins (a slow listing must not starve the checks), the rest within the budget.
    let begun = 0;
    const canStart = (): boolean => options.signal?.aborted !== true && (begun++ < REPAIR_READS || Date.now() - began < budgetMs);
    const started = await mapWhile(rows, REPAIR_READS, canStart, async (row) => {
      report.checked += 1;
      const outcome = await this.reconcile(row, orchestrations);
      if (outcome === 'fixed') report.fixed += 1;
      if (outcome === 'removed') report.removed += 1;
    });
    // Stopped at the budget: the next refresh carries on after the last row this one began (rows are in key order).
    if (started < rows.length && started > 0) this.#refreshAfter = rows[started - 1]?.rowKey;
    if (report.fixed + report.removed > 0) this.deps.logger.info('index.repaired', { ...report, kind: 'refresh' });
    // How many rows said pending or running (young ones included): what tells the leader's pass that jobs are about.
    return { ...report, open: listed.length };
  }

  /**
   * The leader's slow walk of the index (every UPKEEP_SCHEDULE.walkEveryMs): the jobs that exist (records
   * and Durable instances, one listing of each) against the rows; a job without a row gets one, a
   * row of a job that no longer exists goes (each checked with `get` first), at most `max` of them.
   */
  async walkIndex(
    orchestrations: OrchestrationClient,
    options: { readonly max?: number; readonly signal?: AbortSignal } = {},
  ): Promise<{ added: number; removed: number; fixed: number }> {
    const max = options.max ?? INDEX_UPKEEP.walkMax;
    const [records, instances, rows] = await Promise.all([this.deps.store.listRecords(), orchestrations.list(), this.index.allKeys()]);
    const existing = new Set<string>(records.map((r) => r.jobId));
    for (const s of instances) for (const shown of jobsShownBy(s)) existing.add(shown.jobId);
    const indexed = new Map<string, Array<(typeof rows)[number]>>();
    for (const row of rows) indexed.set(row.jobId, [...(indexed.get(row.jobId) ?? []), row]);
    const missing = [...existing].filter((jobId) => !indexed.has(jobId));
    // Rows of jobs gone, and a job's extra rows (its creation time changed): checked one by one below.
    const suspect = rows.filter((row) => !existing.has(row.jobId) || (indexed.get(row.jobId)?.length ?? 0) > 1);
    const report = { added: 0, removed: 0, fixed: 0 };
    await mapLimit(missing.slice(0, max), REPAIR_READS, async (jobId) => {
      if (options.signal?.aborted === true) return;
      const view = await this.reader.get(jobId, orchestrations).catch(() => undefined);
      const entry = view === undefined ? undefined : indexEntryOf(view);
      if (entry === undefined) return;
      await this.index.note(entry, 'walk');
      report.added += 1;
    });
    await mapLimit(suspect.slice(0, max), REPAIR_READS, async (row) => {
      if (options.signal?.aborted === true) return;
      const outcome = await this.reconcile(row, orchestrations);
      if (outcome === 'removed') report.removed += 1;
      if (outcome === 'fixed') report.fixed += 1;
    });
    if (report.added + report.removed + report.fixed > 0) this.deps.logger.info('index.repaired', { ...report, kind: 'walk' });
    return report;
  }

  /** One row against its job's real status: kept, put right, or removed (the job does not exist). Errors: left for next time. */
  private async reconcile(
    row: Pick<IndexRow, 'rowKey' | 'jobId'> & Partial<IndexEntry>,
    orchestrations: OrchestrationClient,
  ): Promise<'kept' | 'fixed' | 'removed' | 'failed'> {
    let view: JobView;
    try {
      view = await this.reader.get(row.jobId, orchestrations);
    } catch (err) {
      if (err instanceof JobError && err.code === 'JOB_NOT_FOUND') {
        await forgetKey(this.index, this.deps.logger, row, 'repair');
        return 'removed';
      }
      this.deps.logger.warn('index.repair_failed', { jobId: row.jobId, error: err });
      return 'failed';
    }
    const entry = indexEntryOf(view);
    if (entry === undefined) return 'kept';
    const sameKey = indexKey(entry.createdAt, entry.jobId) === row.rowKey;
    const complete = row.status !== undefined && row.createdAt !== undefined && row.updatedAt !== undefined;
    const current = complete ? (row as IndexEntry) : undefined;
    if (sameKey && current !== undefined && sameEntry(current, entry)) return 'kept';
    await putRow(this.index, this.deps.logger, row, entry, 'repair');
    return 'fixed';
  }
}
