/**
 * What the HTTP API does with jobs, free of HTTP types: submit (validate and enqueue exactly the
 * message a queue client would send), status of one job, list, cancel, full result.
 *
 * Guarantees: a submission is validated by the same contract as the queue path before anything
 * is written; the enqueued message is the submission with its (possibly generated) jobId, base64
 * JSON; a job id already used by a different submission is refused (DUPLICATE_JOB_ID) and an
 * identical resubmission answers with the same job. Status comes from the job's current Durable
 * instance when there is one (`job-<jobId>`, or the generation its start record names after a
 * stuck start was repaired), else from its start record (accepted, starting: pending) or its
 * record (pending or rejected). A run that stood down is never shown as the job's outcome. Job ids
 * are validated before they touch storage.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 1 and 8.
 */
import { randomUUID } from 'node:crypto';

import { type QueueClient } from '@azure/storage-queue';

import { publicMessage } from '../../errors';
import { type Logger } from '../../observability/log';
import { type Json } from '../../worktypes/WorkType';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { type DeliveryTargets, hasReply, type JobReply } from '../delivery/DeliveryTargets';
import { type DeliveryRecord, type DeliveryView, deliveryView, waitingView } from '../delivery/OutcomeDelivery';
import { type InputContainers } from '../input/InputContainers';
import { JobError, type JobErrorInfo } from '../JobError';
import { assertJobId, instanceIdFor, isValidJobId, parseInstanceId } from '../jobIds';
import { JOB_LIMITS } from '../jobLimits';
import { decodeUtf8, encodeQueueMessage, parseJsonText } from '../messageCodec';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { mapLimit } from '../pool';
import { fingerprintOf, isFinished, type OrchestrationClient, type OrchestrationSnapshot, runOf } from '../run/OrchestrationClient';
import { type IndexEntry, indexKey, type IndexRow, type JobIndex, sameEntry, type StatusCounts } from '../store/JobIndex';
import { type JobRecord, type JobStore, type StartRecord } from '../store/JobStore';
import { type Now, nowOf } from '../wallClock';
import { validateSubmission } from './JobSubmission';
import { isSuperseded, type JobCustomStatus, type JobProgress, type JobSummary } from './JobSummary';

export const JOB_STATUSES = ['pending', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export interface JobView {
  readonly jobId: string;
  readonly status: JobStatus;
  readonly workType: string | null;
  readonly progress: JobProgress | null;
  readonly phase: string | null;
  readonly result?: Json;
  readonly resultUrl?: string;
  readonly error: JobErrorInfo | null;
  readonly errors?: readonly JobErrorInfo[];
  readonly createdAt: string | null;
  readonly updatedAt: string | null;
  readonly epoch: number | null;
  /** For a rejection stored under a derived id: the id the submission asked for. */
  readonly submittedJobId?: string;
  /** For a job with `replyTo` or `callbackUrl`: where its outcome went, or is waiting to go. */
  readonly delivery?: DeliveryView;
  readonly correlationId?: string;
}

export interface JobListEntry {
  readonly jobId: string;
  readonly status: JobStatus;
  /** Null only for a rejected submission that named no known work type. */
  readonly workType: string | null;
  /** Live for a running job (what a list view draws its progress bars from); null before planning. */
  readonly progress: JobProgress | null;
  /** A failed or rejected job's error code (the job's `error.code`); null when it has none. */
  readonly errorCode: string | null;
  readonly createdAt: string | null;
  readonly updatedAt: string | null;
}

export interface JobPage {
  readonly jobs: readonly JobListEntry[];
  /** Present when more jobs follow: pass it as `continuation` for the next page. */
  readonly continuation?: string;
  /** Jobs per status in the index, when asked for (`counts`). */
  readonly counts?: StatusCounts & { readonly at: string };
}

export const LIST_LIMITS = { default: 100, max: 1000 } as const;

/**
 * The leader's upkeep of the job index (jobCoordinationPass schedules it). Every `refreshEveryMs`
 * the rows that say pending or running are checked against the job's real status (JobService.get),
 * up to `refreshMax` rows a time, carrying on after the last one checked; every `walkEveryMs` the
 * jobs that exist (records, Durable instances) are compared with the rows, and up to `walkMax`
 * missing or orphaned rows are put right. So a pending or running row disagrees with its job for at
 * most `refreshEveryMs` plus one pass (while at most `refreshMax` jobs are pending or running), and
 * a row missing or left over for at most `walkEveryMs` plus one pass.
 */
export const INDEX_UPKEEP = {
  refreshEveryMs: 10_000,
  /** Rows of pending and running jobs read per refresh, and the most of them checked. */
  refreshScan: 1_000,
  refreshMax: 100,
  /** A row this young is not checked: its job's last change wrote it. */
  refreshAfterMs: 30_000,
  /** The upkeep waits while passes take submissions, at most this long (jobCoordinationPass). */
  maxDeferMs: 60_000,
  walkEveryMs: 600_000,
  walkMax: 200,
} as const;
/** Live reads of a page's pending and running jobs at once. */
const LIVE_READS = 16;
/**
 * At most this many of a page's pending and running jobs are read live (the newest first); the rest
 * show as indexed. A live read is several storage reads, and during a burst the first page is all
 * running jobs: a live page polling 100 of them would take from the storage the starts need.
 */
const LIVE_READ_MAX = 20;
/** A work type name, as the job schema spells it (a filter for a type no longer registered still lists its jobs). */
const WORK_TYPE_FILTER = /^[a-z][a-z0-9-]{0,39}$/;

/** Newest first; equal times by job id, so the order is total and a continuation is exact. */
function compareEntries(a: Pick<JobListEntry, 'createdAt' | 'jobId'>, b: Pick<JobListEntry, 'createdAt' | 'jobId'>): number {
  return (b.createdAt ?? '').localeCompare(a.createdAt ?? '') || a.jobId.localeCompare(b.jobId);
}

function entryOf(view: JobView | JobListEntry): JobListEntry {
  return {
    jobId: view.jobId,
    status: view.status,
    workType: view.workType,
    progress: view.progress,
    errorCode: 'errorCode' in view ? view.errorCode : (view.error?.code ?? null),
    createdAt: view.createdAt,
    updatedAt: view.updatedAt,
  };
}

/** The index row a job's view makes (undefined: a view without a creation time cannot be indexed). */
function indexEntryOf(view: JobView | JobListEntry): IndexEntry | undefined {
  if (view.createdAt === null) return undefined;
  return { ...entryOf(view), createdAt: view.createdAt, updatedAt: view.updatedAt ?? view.createdAt };
}

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

export interface JobServiceDeps {
  readonly jobsQueue: QueueClient;
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
  /** Where the index refresh carries on (the key of the last row it checked), between leader passes. */
  #refreshAfter: string | undefined;

  constructor(private readonly deps: JobServiceDeps) {
    this.now = nowOf(deps);
  }

  /** The job index: the store's (the app always builds one; JobStore alone may have none). */
  get index(): JobIndex {
    const index = this.deps.store.index;
    if (index === undefined) throw new Error('The job store has no index (JobComponents builds one).');
    return index;
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
    const job = validateSubmission(value, {
      registry: this.deps.registry,
      generateJobId: () => `j-${randomUUID()}`,
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

    // Both at once (one round trip): a POST is on every burst's path.
    const [existing, startRead] = await Promise.all([orchestrations.getStatus(instanceIdFor(job.jobId)), store.readStart(job.jobId)]);
    if (existing !== undefined) {
      if (fingerprintOf(existing) === job.fingerprint) return { jobId: job.jobId, location, enqueued: false };
      throw duplicate(job.jobId);
    }
    // Accepted by the leader, its start under way: nothing to send again.
    const accepted = startRead?.value;
    if (accepted !== undefined && accepted.fingerprint !== job.fingerprint) throw duplicate(job.jobId);
    if (accepted?.state === 'active') return { jobId: job.jobId, location, enqueued: false };
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
    const created = (await store.createRecord(record)) === 'written';
    if (!created) {
      const current = await store.readRecord(job.jobId);
      if (current?.status !== 'pending' || current.fingerprint !== job.fingerprint) throw duplicate(job.jobId);
      // Pending with this very submission: its first send may have failed after the record was made
      // (a storage fault, a recycled process), and nothing else would ever send it. Send it again;
      // the leader's intake starts a job once however many identical messages arrive.
    }
    try {
      await this.ensureQueue();
      await this.deps.jobsQueue.sendMessage(encoded);
    } catch (err) {
      // Only our own new record goes (and its index row); an earlier identical submission's record stays pending.
      if (created) {
        await store.deleteRecord(job.jobId).catch(() => undefined);
        await store.index?.forget(job.jobId, record.createdAt, 'submit_undone');
      }
      throw new JobError('SERVICE_UNAVAILABLE', 'The jobs queue could not be reached; nothing was submitted. Try again.', { cause: err });
    }
    this.deps.logger.info('job.submitted', { jobId: job.jobId, workType: job.workType, via: 'http' });
    return { jobId: job.jobId, location, enqueued: true };
  }

  private readonly ensureQueue = onceUntilSuccess(() => this.deps.jobsQueue.createIfNotExists());

  /** A job's view; once the job is accepted (202) never JOB_NOT_FOUND (see `current`). */
  async get(jobId: string, orchestrations: OrchestrationClient): Promise<JobView> {
    assertJobId(jobId);
    const current = await this.current(jobId, orchestrations);
    if (current.snapshot !== undefined) {
      const snapshot = await this.settled(jobId, current.snapshot);
      return this.withDelivery(this.fromSnapshot(jobId, snapshot), runOf(snapshot)?.reply);
    }
    if (current.start !== undefined) return this.withDelivery(fromStart(current.start), current.start.run.reply);
    if (current.record !== undefined) return this.withDelivery(fromRecord(current.record), current.record.reply);
    if (current.stoodDown !== undefined) return this.fromSnapshot(jobId, current.stoodDown);
    const hint = 'A queue submission shows up here once the leader has read it (within a few seconds).';
    throw new JobError('JOB_NOT_FOUND', `No job "${jobId}". ${hint}`);
  }

  /**
   * Where the job's state is. The common case is one read: its first instance shows it. Past that,
   * the reads follow the order in which the job's records come to exist: the HTTP submission's
   * pending record, then the start record, then the instance the start names. The intake creates the
   * start record before it deletes the pending record, so a pending record gone by the time it is
   * read means the start record is there for the read after it (read the other way round, a start
   * made between the reads hid both, and an accepted job answered JOB_NOT_FOUND). `start` is set
   * when the job is accepted and no instance of it shows its state yet.
   */
  private async current(
    jobId: string,
    orchestrations: OrchestrationClient,
  ): Promise<{ snapshot?: OrchestrationSnapshot; start?: StartRecord; record?: JobRecord; stoodDown?: OrchestrationSnapshot }> {
    const first = await orchestrations.getStatus(instanceIdFor(jobId));
    if (first !== undefined && first.runtimeStatus !== 'Pending' && !isSuperseded(first.output)) return { snapshot: first };
    const record = await this.deps.store.readRecord(jobId);
    const start = (await this.deps.store.readStart(jobId))?.value;
    if (start !== undefined && start.state === 'active') {
      // Read again even for generation 1: the start may have been made since the first read.
      const named = await orchestrations.getStatus(instanceIdFor(jobId, start.generation));
      return named !== undefined && !isSuperseded(named.output) ? { snapshot: named } : { start };
    }
    if (first !== undefined && !isSuperseded(first.output)) return { snapshot: first };
    return { ...(record === undefined ? {} : { record }), ...(first === undefined ? {} : { stoodDown: first }) };
  }

  /**
   * A job that asked for a reply shows its delivery: what its record says once the outcome went out
   * (one blob read, only for such jobs), else `waiting`. A read that fails shows `waiting` too.
   */
  private async withDelivery(view: JobView, reply: JobReply | undefined): Promise<JobView> {
    const withCorrelation = reply?.correlationId === undefined ? view : { ...view, correlationId: reply.correlationId };
    if (!hasReply(reply) || reply === undefined) return withCorrelation;
    const ended = view.status !== 'pending' && view.status !== 'running';
    const record = ended ? await this.deps.store.readDelivery<DeliveryRecord>(view.jobId).catch(() => undefined) : undefined;
    return { ...withCorrelation, delivery: record === undefined ? waitingView(reply) : deliveryView(record) };
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
    const entries = await mapLimit([...rows.rows], LIVE_READS, (row, i) =>
      readLive[i] === true ? this.liveEntry(row, orchestrations) : Promise.resolve(entryOf(row)),
    );
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
      view = await this.get(row.jobId, orchestrations);
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
    if (entry !== undefined && entry.status !== row.status) await this.putRow(row, entry, 'list');
    return live;
  }

  /** Replaces `row` with `entry` (a changed creation time moves the row to its new key). Best effort. */
  private async putRow(row: Pick<IndexRow, 'rowKey' | 'jobId'>, entry: IndexEntry, op: string): Promise<void> {
    await this.index.note(entry, op);
    if (indexKey(entry.createdAt, entry.jobId) !== row.rowKey) await this.forgetKey(row, op);
  }

  private async forgetKey(row: Pick<IndexRow, 'rowKey' | 'jobId'>, op: string): Promise<void> {
    try {
      await this.index.deleteKey(row.rowKey);
    } catch (err) {
      this.deps.logger.warn('index.write_failed', { jobId: row.jobId, op, error: err });
    }
  }

  /**
   * The leader's refresh of the index (INDEX_UPKEEP): every row that says pending or running, up to
   * `max`, is checked against the job's real status and put right (a job that no longer exists:
   * its row goes). Carries on after the last row checked next time, so every such row is checked
   * within ceil(rows / max) refreshes. Answers what it did.
   */
  async repairIndex(
    orchestrations: OrchestrationClient,
    options: { readonly max?: number; readonly signal?: AbortSignal } = {},
  ): Promise<{ checked: number; fixed: number; removed: number }> {
    const max = options.max ?? INDEX_UPKEEP.refreshMax;
    const open = ['pending', 'running'] as const;
    let listed = await this.index.rowsWithStatus(open, INDEX_UPKEEP.refreshScan, this.#refreshAfter);
    if (listed.length === 0 && this.#refreshAfter !== undefined) listed = await this.index.rowsWithStatus(open, INDEX_UPKEEP.refreshScan);
    this.#refreshAfter = listed.length >= INDEX_UPKEEP.refreshScan ? listed.at(-1)?.rowKey : undefined;
    // A row written in the last `refreshAfterMs` is the write of its job's last change, and a burst's
    // fresh rows are most of them: each check is a status read of several storage reads.
    const now = Date.now();
    const rows = listed.filter((row) => !(now - Date.parse(row.updatedAt ?? '') < INDEX_UPKEEP.refreshAfterMs)).slice(0, max);
    const report = { checked: 0, fixed: 0, removed: 0 };
    await mapLimit(rows, REPAIR_READS, async (row) => {
      if (options.signal?.aborted === true) return;
      report.checked += 1;
      const outcome = await this.reconcile(row, orchestrations);
      if (outcome === 'fixed') report.fixed += 1;
      if (outcome === 'removed') report.removed += 1;
    });
    if (report.fixed + report.removed > 0) this.deps.logger.info('index.repaired', { ...report, kind: 'refresh' });
    return report;
  }

  /**
   * The leader's slow walk of the index (INDEX_UPKEEP.walkEveryMs): the jobs that exist (records
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
    for (const s of instances) {
      const id = parseInstanceId(s.instanceId);
      if (id !== undefined) existing.add(id.jobId);
    }
    const indexed = new Map<string, Array<(typeof rows)[number]>>();
    for (const row of rows) indexed.set(row.jobId, [...(indexed.get(row.jobId) ?? []), row]);
    const missing = [...existing].filter((jobId) => !indexed.has(jobId));
    // Rows of jobs gone, and a job's extra rows (its creation time changed): checked one by one below.
    const suspect = rows.filter((row) => !existing.has(row.jobId) || (indexed.get(row.jobId)?.length ?? 0) > 1);
    const report = { added: 0, removed: 0, fixed: 0 };
    await mapLimit(missing.slice(0, max), REPAIR_READS, async (jobId) => {
      if (options.signal?.aborted === true) return;
      const view = await this.get(jobId, orchestrations).catch(() => undefined);
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
      view = await this.get(row.jobId, orchestrations);
    } catch (err) {
      if (err instanceof JobError && err.code === 'JOB_NOT_FOUND') {
        await this.forgetKey(row, 'repair');
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
    await this.putRow(row, entry, 'repair');
    return 'fixed';
  }

  /** Every job, from every record and orchestration (the retention sweep's hourly view; the list reads the index). */
  private async listAll(orchestrations: OrchestrationClient): Promise<JobListEntry[]> {
    const byId = new Map<string, JobListEntry>();
    // A record listing carries no error code; the retention sweep needs none.
    for (const r of await this.deps.store.listRecords()) {
      byId.set(r.jobId, { ...r, workType: r.workType ?? null, progress: null, errorCode: null });
    }
    // A repaired job has several instances: its newest generation that did not stand down shows it.
    const shown = new Map<string, { generation: number; superseded: boolean; snapshot: OrchestrationSnapshot }>();
    for (const s of await orchestrations.list()) {
      const id = parseInstanceId(s.instanceId);
      if (id === undefined) continue;
      const superseded = isSuperseded(s.output);
      const before = shown.get(id.jobId);
      const older = before !== undefined && superseded === before.superseded && id.generation < before.generation;
      if (before !== undefined && ((superseded && !before.superseded) || older)) continue;
      shown.set(id.jobId, { generation: id.generation, superseded, snapshot: s });
    }
    // A running job's recorded outcome is one read each (see `settled`), several at once.
    const views = await mapLimit([...shown], SETTLED_READS, async ([jobId, { snapshot }]) =>
      this.fromSnapshot(jobId, await this.settled(jobId, snapshot)),
    );
    for (const view of views) byId.set(view.jobId, entryOf(view));
    return [...byId.values()].sort(compareEntries);
  }

  /**
   * Purges a finished job now: its Durable history (every instance generation a repair used), its
   * records and its blobs, results included. The job id is free afterwards. A pending or running
   * job is refused (cancel it first); an instance a repair left Pending stays, as Durable purges
   * only finished instances.
   */
  async purge(jobId: string, orchestrations: OrchestrationClient): Promise<{ jobId: string; instances: number; blobs: number }> {
    const view = await this.get(jobId, orchestrations);
    if (view.status === 'pending' || view.status === 'running') {
      throw new JobError(
        'JOB_NOT_FINISHED',
        `Job "${jobId}" is ${view.status}: cancel it first (DELETE /api/jobs/${jobId}), then purge it once it has ended.`,
      );
    }
    // Ended (its outcome recorded) while its run may still be finishing in Durable, which purges only finished instances.
    for (let waited = 0; ; waited += PURGE_WAIT.pollMs) {
      const { snapshot } = await this.current(jobId, orchestrations);
      if (snapshot === undefined || isFinished(snapshot.runtimeStatus)) break;
      if (waited >= PURGE_WAIT.maxMs) {
        throw new JobError(
          'JOB_NOT_FINISHED',
          `Job "${jobId}" has ended, but its run is still winding down in Durable (at most a minute); purge it once that is over.`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, PURGE_WAIT.pollMs));
    }
    return this.purgeFinished(jobId, orchestrations);
  }

  private async purgeFinished(
    jobId: string,
    orchestrations: OrchestrationClient,
  ): Promise<{ jobId: string; instances: number; blobs: number }> {
    const generations = (await this.deps.store.readStart(jobId))?.value.generation ?? 1;
    let instances = 0;
    for (let g = 1; g <= generations; g++) {
      try {
        if (await orchestrations.purge(instanceIdFor(jobId, g))) instances += 1;
      } catch (err) {
        // A generation a repair left Pending cannot be purged; the rest of the job still goes.
        this.deps.logger.warn('job.purge_instance_failed', { jobId, instanceId: instanceIdFor(jobId, g), error: err });
      }
    }
    const blobs = await this.deps.store.purgeJob(jobId);
    this.deps.logger.info('job.purged', { jobId, instances, blobs });
    return { jobId, instances, blobs };
  }

  /**
   * The retention sweep the leader runs (at most once an hour): purges up to `max` finished jobs
   * whose last change is older than `retentionDays`, oldest first. Answers the job ids purged.
   */
  async purgeExpired(orchestrations: OrchestrationClient, retentionDays: number, max = 100): Promise<string[]> {
    if (retentionDays <= 0) return [];
    const cutoff = this.now().getTime() - retentionDays * 86_400_000;
    const expired = (await this.listAll(orchestrations))
      .filter((e) => e.status !== 'pending' && e.status !== 'running' && e.updatedAt !== null && Date.parse(e.updatedAt) < cutoff)
      .sort((a, b) => (a.updatedAt ?? '').localeCompare(b.updatedAt ?? ''))
      .slice(0, max);
    const purged: string[] = [];
    for (const entry of expired) {
      try {
        await this.purgeFinished(entry.jobId, orchestrations);
        purged.push(entry.jobId);
      } catch (err) {
        this.deps.logger.warn('job.purge_failed', { jobId: entry.jobId, error: err });
      }
    }
    return purged;
  }

  /** Cancels a pending or running job: the marker makes workers skip its chunks, the event wakes the orchestration. */
  async cancel(jobId: string, orchestrations: OrchestrationClient): Promise<JobView> {
    assertJobId(jobId);
    const { snapshot } = await this.current(jobId, orchestrations);
    const view =
      snapshot === undefined ? await this.get(jobId, orchestrations) : this.fromSnapshot(jobId, await this.settled(jobId, snapshot));
    if (view.status !== 'pending' && view.status !== 'running') {
      throw new JobError('JOB_ALREADY_FINISHED', `Job "${jobId}" is ${view.status}; only pending or running jobs can be cancelled.`);
    }
    // The marker first: a job not started yet sees it when it plans, a running one at its next poll.
    await this.deps.store.markCancelled(jobId, 'cancelled through the API');
    if (snapshot !== undefined) await orchestrations.raiseCancel(snapshot.instanceId, 'cancelled through the API');
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
    const run = runOf(snapshot);
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
    const text = await this.deps.store.readJobResultText(jobId);
    if (text === undefined) throw new JobError('JOB_NOT_FOUND', `Job "${jobId}" has no stored result (yet).`);
    return text;
  }

  /**
   * A running job whose outcome is already recorded shows it: `final.json` is written once, by the
   * activity that aggregates the job, before the run hears of it (a Durable hop later), and a run
   * whose call was repeated after a resume (StalledJobs) stays Running in Durable until the held
   * answer comes back (up to the control queue's 1 minute: Durable completes an instance only once
   * every activity it started has answered). Costs one blob read per status read of a running job,
   * none once the run is Pending or finished.
   */
  private async settled(jobId: string, s: OrchestrationSnapshot): Promise<OrchestrationSnapshot> {
    if (s.runtimeStatus !== 'Running' && s.runtimeStatus !== 'ContinuedAsNew') return s;
    const custom = s.customStatus as Partial<JobCustomStatus> | null | undefined;
    // Unreadable now (a storage fault): Durable's own view stands; the outcome shows on a later read.
    const final = await this.deps.store.readFinal(jobId).catch(() => undefined);
    if (final === undefined || isSuperseded(final)) return s;
    // Its last change is when the outcome was recorded (the run's last update may be older).
    const lastUpdatedTime = finishedLast(s.lastUpdatedTime, final);
    return { ...s, runtimeStatus: 'Completed', output: final, customStatus: { ...custom, phase: 'done' }, lastUpdatedTime };
  }

  private fromSnapshot(jobId: string, s: OrchestrationSnapshot): JobView {
    const run = runOf(s);
    const custom = s.customStatus as Partial<JobCustomStatus> | null | undefined;
    const base = {
      jobId,
      workType: run?.workType ?? null,
      // The run's submission time: Durable's createdTime restarts at every continue-as-new on Azure Storage.
      createdAt: run?.submittedAt ?? s.createdTime.toISOString(),
      updatedAt: s.lastUpdatedTime.toISOString(),
      epoch: run?.epoch ?? custom?.epoch ?? null,
      phase: custom?.phase ?? null,
    };
    switch (s.runtimeStatus) {
      case 'Completed': {
        const summary = s.output as JobSummary | null | undefined;
        if (summary === null || summary === undefined) {
          return {
            ...base,
            status: 'failed',
            progress: custom?.progress ?? null,
            error: { code: 'INTERNAL', message: 'The orchestration completed without a summary.' },
          };
        }
        // A run that stood down: the job's own start has not shown its state yet.
        if (summary.superseded !== undefined) return { ...base, status: 'pending', phase: null, progress: null, error: null };
        return {
          ...base,
          // Durable's status times are whole seconds, so its completion may read up to 1 s before the
          // outcome was recorded: the job changed last at whichever is later.
          updatedAt: finishedLast(s.lastUpdatedTime, summary).toISOString(),
          // The run that did the job (a late start of a finished job answers that run's summary).
          epoch: summary.epoch,
          status: summary.status,
          progress: summary.progress,
          ...(summary.result === undefined ? {} : { result: summary.result }),
          ...(summary.result === undefined && summary.resultBlob !== undefined
            ? { resultUrl: `${this.deps.statusPath(jobId)}/result` }
            : {}),
          error: summary.error ?? null,
          ...(summary.errors === undefined ? {} : { errors: summary.errors }),
        };
      }
      case 'Failed':
        return {
          ...base,
          status: 'failed',
          progress: custom?.progress ?? null,
          error: {
            code: 'INTERNAL',
            message: typeof s.output === 'string' ? `The orchestration failed: ${publicMessage(s.output)}` : 'The orchestration failed.',
          },
        };
      case 'Terminated':
      case 'Canceled':
        return { ...base, status: 'cancelled', progress: custom?.progress ?? null, error: null };
      case 'Pending':
        return { ...base, status: 'pending', progress: custom?.progress ?? null, error: null };
      default:
        return { ...base, status: 'running', progress: custom?.progress ?? null, error: null };
    }
  }
}

/** The later of a run's last update and its summary's `finishedAt` (when that one reads as a time). */
function finishedLast(lastUpdatedTime: Date, summary: Pick<JobSummary, 'finishedAt'>): Date {
  const finishedAt = Date.parse(summary.finishedAt);
  return Number.isFinite(finishedAt) && finishedAt > lastUpdatedTime.getTime() ? new Date(finishedAt) : lastUpdatedTime;
}

/** Recorded outcomes of running jobs a list reads at once. */
const SETTLED_READS = 16;
/** Jobs the index repair reads at once. */
const REPAIR_READS = 8;
/** How long a purge waits for the run of a job that has ended to finish in Durable (normally one Durable hop). */
const PURGE_WAIT = { pollMs: 250, maxMs: 5_000 } as const;

function fromStart(start: StartRecord): JobView {
  return {
    jobId: start.jobId,
    status: 'pending',
    workType: start.run.workType,
    progress: null,
    phase: null,
    error: null,
    createdAt: start.run.submittedAt,
    updatedAt: start.at,
    epoch: start.epoch,
  };
}

function fromRecord(record: JobRecord): JobView {
  return {
    jobId: record.jobId,
    status: record.status,
    workType: record.workType ?? null,
    progress: null,
    phase: null,
    error: record.error ?? null,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    epoch: record.epoch ?? null,
    ...(record.submittedJobId === undefined ? {} : { submittedJobId: record.submittedJobId }),
  };
}

function duplicate(jobId: string): JobError {
  return new JobError(
    'DUPLICATE_JOB_ID',
    `Job id "${jobId}" is already used by a different submission; submit with a new jobId (or none, to get one generated).`,
  );
}
