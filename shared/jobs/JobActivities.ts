/**
 * The orchestration's activities: plan (read the items, put one message per chunk on the
 * work-items queue), measure progress (one listing), re-dispatch or expire chunks past their
 * deadline, and aggregate (combine every chunk's partial once, store the full result).
 *
 * A chunk is late when it has no result and a worker claimed its latest dispatch (the claim a
 * worker writes on each delivery) at least `deadlineSeconds` before the orchestration's `at`. A
 * chunk nobody has claimed yet (waiting in the queue behind a backlog) is never late: the queue
 * delivers it eventually, and a worker that dies mid-chunk leaves its claim, so it is still
 * caught. A late chunk is sent again as dispatch d+1 while d < `attempts`, else recorded failed
 * (`DEADLINE_EXCEEDED`). After a re-dispatch the chunk is not late again until a worker claims the
 * new message and goes silent past the deadline too.
 *
 * Guarantees: each activity is safe to run again (Durable may retry or replay-schedule it): the
 * planner's messages are idempotent at the worker (a chunk's result is created once), expiring a
 * chunk is the same conditional create, and aggregation reads the same results and rewrites the
 * same result blob. Chunking is deterministic (chunk n holds items [n*size, (n+1)*size)), so a
 * re-dispatch rebuilds exactly the chunk that went missing. Aggregation folds partials in chunk
 * order, counting each chunk's single result once.
 * The plan step is the orchestration's fence (see JobIntake): it does nothing for a job that already
 * has a final summary (it returns that summary), nor for a run whose start the job's start record no
 * longer names, nor for a run whose leader epoch is older than the lease's current one; the run then
 * stands down. `finish` records the job's final summary once, whichever run finishes first.
 * Not guaranteed: that a slow first delivery and its re-dispatch do not both do the work (they do;
 * only one result is kept).
 */
import { type QueueClient } from '@azure/storage-queue';

import { type Logger } from '../observability/log';
import { type Json } from '../worktypes/WorkType';
import { type WorkTypeRegistry } from '../worktypes/WorkTypeRegistry';
import { JobError, type JobErrorInfo } from './JobError';
import { JOB_LIMITS } from './jobLimits';
import { type FinalStatus, INLINE_RESULT_BYTES, type JobProgress, type JobRun, type JobSummary, type WorkItemMessage } from './JobRun';
import { type ChunkResult, type ChunkResultEntry, isStatus, type ItemError, type JobListing, type JobStore } from './JobStore';
import { assertChunkCount, encodeQueueMessage, MAX_NESTING_DEPTH, nestingDepthExceeds } from './JobSubmission';
import { onceUntilSuccess } from './onceUntilSuccess';
import { mapLimit } from './pool';

export interface JobPipelineDeps {
  readonly store: JobStore;
  readonly workItems: QueueClient;
  readonly registry: WorkTypeRegistry;
  readonly logger: Logger;
  /** This process (recorded as the writer of expired chunk results). */
  readonly instanceId: string;
  /** The leader lease's current epoch (undefined: no leader yet); without it the plan skips that check. */
  readonly leaseEpoch?: () => Promise<number | undefined>;
  readonly now?: () => Date;
}

export type PlanOutcome =
  | { readonly ok: true; readonly cancelled: boolean; readonly chunkCount: number; readonly itemCount: number }
  | { readonly ok: false; readonly error: JobErrorInfo }
  /** This run must not do the job: `summary` is the job's recorded final summary, or a superseded marker. */
  | { readonly ok: false; readonly standDown: JobSummary };

export interface ProgressInput {
  readonly jobId: string;
  readonly chunkCount: number;
  readonly itemCount: number;
  /** The orchestration's time (ISO): lateness is measured against it, not the activity's clock. */
  readonly at: string;
  readonly deadlineSeconds: number;
}

export interface ProgressOutcome extends JobProgress {
  readonly cancelled: boolean;
  /** Chunks without a result whose latest dispatch was claimed at least the deadline before `at`. */
  readonly late: number;
}

export interface RedispatchInput {
  readonly run: JobRun;
  readonly chunkCount: number;
  readonly itemCount: number;
  /** The orchestration's time (ISO) the late chunks are measured against. */
  readonly at: string;
}

export interface RedispatchOutcome {
  /** Late chunks sent again. */
  readonly redispatched: number;
  /** Late chunks out of attempts, recorded failed with DEADLINE_EXCEEDED. */
  readonly expired: number;
  /** The highest dispatch round any chunk of the job has now reached (1: none re-sent). */
  readonly highestDispatch: number;
}

/** A late chunk and the dispatch round its silent claim belongs to. */
export interface LateChunk {
  readonly chunk: number;
  readonly dispatch: number;
}

export interface AggregateInput {
  readonly run: JobRun;
  readonly chunkCount: number;
  readonly itemCount: number;
  readonly cancelled: boolean;
}

const SEND_CONCURRENCY = 16;
const READ_CONCURRENCY = 16;
/** The result blob keeps this many chunk and item errors; the summary the first few. */
const MAX_RECORDED_ERRORS = 100;
const SUMMARY_ERRORS = 5;
/** Aggregation yields to the event loop after this many chunks, so a 10,000-chunk fold does not stall the process (leader renewals run in it). */
const AGGREGATE_YIELD_EVERY = 50;

export class JobActivities {

  constructor(private readonly deps: JobPipelineDeps) {}

  private now(): Date {
    return this.deps.now?.() ?? new Date();
  }

  private readonly ensureQueue = onceUntilSuccess(() => this.deps.workItems.createIfNotExists());

  /** The job's items, checked: a blob must exist, hold a JSON array, and every item must be valid. */
  async loadItems(run: JobRun): Promise<Json[]> {
    const type = this.deps.registry.get(run.workType);
    if (type === undefined) throw new JobError('UNKNOWN_WORK_TYPE', `Work type "${run.workType}" is not registered on this instance.`);
    let items: Json[];
    if (run.source.kind === 'inline') {
      items = run.source.items;
    } else {
      const { container, blob } = run.source;
      const client = this.deps.store.blobs.getContainerClient(container).getBlobClient(blob);
      let text: string;
      try {
        const props = await client.getProperties();
        if ((props.contentLength ?? 0) > JOB_LIMITS.maxItemsBlobBytes) {
          throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} is ${props.contentLength} bytes; the limit is ${JOB_LIMITS.maxItemsBlobBytes}.`);
        }
        text = (await client.downloadToBuffer()).toString('utf8');
      } catch (err) {
        if (isStatus(err, 404)) throw new JobError('ITEMS_BLOB_NOT_FOUND', `itemsBlob ${container}/${blob} does not exist.`);
        throw err;
      }
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (err) {
        // JSON.parse itself gives up on extreme nesting with a RangeError (its own stack).
        if (err instanceof RangeError) throw tooDeep(container, blob);
        throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} is not JSON.`);
      }
      if (!Array.isArray(parsed)) throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} must hold a JSON array of items.`);
      // The rule for inline items, which sit one level deeper (inside the submission): before any recursive code sees them.
      if (nestingDepthExceeds(parsed, MAX_NESTING_DEPTH - 1)) throw tooDeep(container, blob);
      if (parsed.length === 0) throw new JobError('ITEMS_EMPTY', `itemsBlob ${container}/${blob} holds an empty array.`);
      items = parsed as Json[];
      const problems: string[] = [];
      let rejected = 0;
      items.forEach((item, index) => {
        const reason = type.validateItem(item);
        if (reason === undefined) return;
        rejected += 1;
        if (problems.length < 5) problems.push(`item ${index}: ${reason}`);
      });
      if (rejected > 0) throw new JobError('ITEM_REJECTED', `${rejected} of ${items.length} items in ${container}/${blob} rejected by work type "${type.name}": ${problems.join('; ')}.`);
    }
    assertChunkCount(items.length, run.options.chunkSize);
    return items;
  }

  async plan(run: JobRun): Promise<PlanOutcome> {
    const fenced = await this.fence(run);
    if (fenced !== undefined) {
      const reason = fenced.superseded?.reason ?? 'finished';
      this.deps.logger.warn('job.plan_refused', { jobId: run.jobId, startId: run.startId, epoch: run.epoch, reason });
      return { ok: false, standDown: fenced };
    }
    // First, before the cancel marker or any result under this id is trusted as this job's.
    if (!(await this.deps.store.claimJobId(run.jobId, run.fingerprint))) {
      const error = new JobError(
        'DUPLICATE_JOB_ID',
        `Job id ${run.jobId} already holds the results of an earlier, different job (its orchestration history is gone); submit with another jobId.`,
      );
      return { ok: false, error: error.toJSON() };
    }
    if (await this.deps.store.isCancelled(run.jobId)) return { ok: true, cancelled: true, chunkCount: 0, itemCount: 0 };
    let items: Json[];
    try {
      items = await this.loadItems(run);
    } catch (err) {
      // Bad input is an outcome the job reports; anything else (storage down) is retried by Durable.
      if (err instanceof JobError && err.isUserError) return { ok: false, error: err.toJSON() };
      throw err;
    }
    const chunkCount = Math.ceil(items.length / run.options.chunkSize);
    await this.dispatch(run, items, range(chunkCount), 1);
    const planned = { jobId: run.jobId, items: items.length, chunks: chunkCount, epoch: run.epoch, startId: run.startId };
    this.deps.logger.info('job.planned', planned);
    return { ok: true, cancelled: false, chunkCount, itemCount: items.length };
  }

  /**
   * Checked against storage before any work: a finished job answers its final summary; a run the
   * start record no longer names, or started under an epoch older than the lease's, is superseded.
   */
  private async fence(run: JobRun): Promise<JobSummary | undefined> {
    const final = await this.deps.store.readFinal(run.jobId);
    if (final !== undefined) return final;
    // Runs started before start records existed carry no start id; nothing to compare with.
    if (run.startId === undefined) return undefined;
    const superseded = (reason: string): JobSummary => ({
      jobId: run.jobId,
      workType: run.workType,
      status: 'failed',
      progress: { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } },
      error: { code: 'SUPERSEDED', message: `This start of the job stood down (${reason}); the job's current start runs it.` },
      epoch: run.epoch,
      finishedAt: this.now().toISOString(),
      superseded: { reason },
    });
    const start = (await this.deps.store.readStart(run.jobId))?.value;
    if (start !== undefined && (start.startId !== run.startId || start.state !== 'active')) {
      const named = `the start record names start ${start.startId} of epoch ${start.epoch}`;
      return superseded(start.state === 'active' ? named : 'the submission was rejected');
    }
    const leaseEpoch = await this.deps.leaseEpoch?.();
    if (leaseEpoch !== undefined && leaseEpoch > run.epoch) {
      return superseded(`leader epoch ${leaseEpoch} is newer than the run's ${run.epoch}`);
    }
    return undefined;
  }

  /** Records the job's final summary once and answers the stored one (a run that finished first wins). */
  async finish(summary: JobSummary): Promise<JobSummary> {
    return this.deps.store.writeFinal(summary);
  }

  /** One message per chunk; a chunk too big for a message travels as a blob it references. */
  async dispatch(run: JobRun, items: readonly Json[], chunks: readonly number[], dispatch: number): Promise<void> {
    await this.ensureQueue();
    const size = run.options.chunkSize;
    await mapLimit(chunks, SEND_CONCURRENCY, async (chunk) => {
      const chunkItems = items.slice(chunk * size, (chunk + 1) * size);
      const base = { v: 1 as const, jobId: run.jobId, chunk, workType: run.workType, firstIndex: chunk * size, itemCount: chunkItems.length, attempts: run.options.attempts, epoch: run.epoch, dispatch };
      let message: WorkItemMessage = { ...base, items: chunkItems };
      if (Buffer.byteLength(JSON.stringify(message), 'utf8') > JOB_LIMITS.maxMessageJsonBytes) {
        const itemsRef = await this.deps.store.writeChunkItems(run.jobId, chunk, chunkItems);
        message = { ...base, itemsRef };
      }
      await this.deps.workItems.sendMessage(encodeQueueMessage(message));
    });
  }

  async progress(input: ProgressInput): Promise<ProgressOutcome> {
    const listing = await this.deps.store.listJob(input.jobId);
    const late = lateChunks(listing, input.chunkCount, Date.parse(input.at), input.deadlineSeconds);
    return { cancelled: listing.cancelled, late: late.length, ...countProgress(listing.results, input.chunkCount, input.itemCount) };
  }

  /** Re-sends every late chunk (see the module comment), or records it failed once out of attempts. */
  async redispatch(input: RedispatchInput): Promise<RedispatchOutcome> {
    const { run } = input;
    const listing = await this.deps.store.listJob(run.jobId);
    const late = lateChunks(listing, input.chunkCount, Date.parse(input.at), run.options.deadlineSeconds);
    const highest = (): number => highestDispatch(listing);
    if (late.length === 0 || listing.cancelled) return { redispatched: 0, expired: 0, highestDispatch: highest() };
    const expire = late.filter((c) => c.dispatch >= run.options.attempts);
    const resend = late.filter((c) => c.dispatch < run.options.attempts);
    if (expire.length > 0) {
      const size = run.options.chunkSize;
      await mapLimit(expire, SEND_CONCURRENCY, async ({ chunk, dispatch }) => {
        const itemCount = Math.min(size, input.itemCount - chunk * size);
        const result: ChunkResult = {
          jobId: run.jobId,
          chunk,
          status: 'failed',
          itemCount,
          itemsFailed: itemCount,
          partial: null,
          itemErrors: [],
          error: {
            code: 'DEADLINE_EXCEEDED',
            message: `No result on each of ${dispatch} dispatches: the worker that claimed it went silent (no heartbeat for ${CLAIM_LIVENESS.silenceSeconds} s) or took over ${run.options.deadlineSeconds} s.`,
          },
          attempt: dispatch,
          dispatch,
          writtenBy: `orchestration@${this.deps.instanceId}`,
          writtenAt: this.now().toISOString(),
        };
        // If a worker's result lands first, the conditional create keeps the worker's.
        await this.deps.store.writeChunkResult(result);
      });
      this.deps.logger.warn('job.chunks_expired', { jobId: run.jobId, chunks: expire.length, epoch: run.epoch });
    }
    let highestSent = 0;
    if (resend.length > 0) {
      const items = await this.loadItems(run);
      // Grouped by round: a message carries its dispatch number. Sent before marked, so a retry after
      // a failure in between sends again (harmless: results are created once) rather than never.
      for (const dispatch of [...new Set(resend.map((c) => c.dispatch + 1))].sort((a, b) => a - b)) {
        const chunks = resend.filter((c) => c.dispatch + 1 === dispatch).map((c) => c.chunk);
        await this.dispatch(run, items, chunks, dispatch);
        await mapLimit(chunks, SEND_CONCURRENCY, (chunk) => this.deps.store.markRedispatched(run.jobId, chunk, dispatch, input.at));
        highestSent = dispatch;
      }
      this.deps.logger.warn('job.chunks_redispatched', { jobId: run.jobId, chunks: resend.length, dispatch: highestSent, epoch: run.epoch });
    }
    return { redispatched: resend.length, expired: expire.length, highestDispatch: Math.max(highest(), highestSent) };
  }

  async aggregate(input: AggregateInput): Promise<JobSummary> {
    const { run } = input;
    const type = this.deps.registry.get(run.workType);
    if (type === undefined) throw new JobError('UNKNOWN_WORK_TYPE', `Work type "${run.workType}" is not registered on this instance.`);
    const listing = await this.deps.store.listJob(run.jobId);
    const entries = listing.results.filter((e) => e.chunk < input.chunkCount).sort((a, b) => a.chunk - b.chunk);
    const needRead = entries.filter((e) => (e.status === 'ok' && e.partial === undefined) || e.status === 'failed' || e.itemsFailed > 0);
    // Errors are only read for the first chunks that have them; partials always.
    let errorReads = 0;
    const toRead = needRead.filter((e) => (e.status === 'ok' && e.partial === undefined) || errorReads++ < MAX_RECORDED_ERRORS);
    const read = new Map<number, ChunkResult>();
    await mapLimit(toRead, READ_CONCURRENCY, async (e) => {
      const full = await this.deps.store.readChunkResult(run.jobId, e.chunk);
      if (full !== undefined) read.set(e.chunk, full);
    });

    let total = type.empty();
    const chunkErrors: Array<JobErrorInfo & { chunk: number }> = [];
    const itemErrors: ItemError[] = [];
    let folded = 0;
    for (const e of entries) {
      if (++folded % AGGREGATE_YIELD_EVERY === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      const full = read.get(e.chunk);
      if (e.status === 'ok') {
        const partial = e.partial ?? full?.partial;
        if (partial === undefined) throw new Error(`Chunk ${e.chunk} of job ${run.jobId} has no readable partial`);
        total = type.combine(total, partial);
      } else if (chunkErrors.length < MAX_RECORDED_ERRORS) {
        chunkErrors.push({ chunk: e.chunk, code: full?.error?.code ?? e.errorCode ?? 'CHUNK_FAILED', message: full?.error?.message ?? 'chunk failed' });
      }
      for (const itemError of full?.itemErrors ?? []) if (itemErrors.length < MAX_RECORDED_ERRORS) itemErrors.push(itemError);
    }
    const result = type.finish(total);
    const progress = countProgress(entries, input.chunkCount, input.itemCount);
    const status: FinalStatus = input.cancelled
      ? 'cancelled'
      : progress.chunks.failed === input.chunkCount && input.chunkCount > 0
        ? 'failed'
        : progress.chunks.failed > 0 || progress.items.failed > 0
          ? 'completed_with_errors'
          : 'completed';
    const finishedAt = this.now().toISOString();
    const stored = await this.deps.store.writeJobResult(run.jobId, { jobId: run.jobId, workType: run.workType, status, progress, result, chunkErrors, itemErrors, epoch: run.epoch, finishedAt });
    const inline = Buffer.byteLength(JSON.stringify(result), 'utf8') <= INLINE_RESULT_BYTES;
    const errors: JobErrorInfo[] = [
      ...chunkErrors.map((e) => ({ code: e.code, message: `chunk ${e.chunk}: ${e.message}` })),
      ...itemErrors.map((e) => ({ code: e.code, message: `item ${e.index}: ${e.message}` })),
    ].slice(0, SUMMARY_ERRORS);
    this.deps.logger.info('job.aggregated', { jobId: run.jobId, status, chunks: progress.chunks, items: progress.items, epoch: run.epoch });
    return {
      jobId: run.jobId,
      workType: run.workType,
      status,
      progress,
      ...(inline ? { result } : {}),
      resultBlob: stored.blob,
      ...(status === 'failed' ? { error: { code: chunkErrors[0]?.code ?? 'CHUNK_FAILED', message: `All ${input.chunkCount} chunks failed; first: ${chunkErrors[0]?.message ?? 'unknown'}` } } : {}),
      ...(errors.length > 0 ? { errors } : {}),
      epoch: run.epoch,
      finishedAt,
    };
  }
}

export function countProgress(entries: readonly ChunkResultEntry[], chunkCount: number, itemCount: number): JobProgress {
  let chunksDone = 0;
  let chunksFailed = 0;
  let itemsDone = 0;
  let itemsFailed = 0;
  for (const e of entries) {
    if (e.chunk >= chunkCount) continue;
    if (e.status === 'ok') chunksDone += 1;
    else chunksFailed += 1;
    itemsDone += e.itemCount - e.itemsFailed;
    itemsFailed += e.itemsFailed;
  }
  return {
    chunks: { total: chunkCount, done: chunksDone, failed: chunksFailed },
    items: { total: itemCount, done: itemsDone, failed: itemsFailed },
  };
}

/** Each chunk's latest dispatch round: its re-dispatch mark, or a later round a worker already claimed, else 1. */
function latestDispatches(listing: JobListing): Map<number, number> {
  const latest = new Map<number, number>();
  for (const r of listing.redispatched) latest.set(r.chunk, Math.max(latest.get(r.chunk) ?? 1, r.dispatch));
  for (const c of listing.claims) latest.set(c.chunk, Math.max(latest.get(c.chunk) ?? 1, c.dispatch));
  return latest;
}

function highestDispatch(listing: JobListing): number {
  let highest = 1;
  for (const d of latestDispatches(listing).values()) highest = Math.max(highest, d);
  return highest;
}

/**
 * A worker beats on its claim every `heartbeatSeconds` while it processes the chunk; a claim whose
 * last beat is `silenceSeconds` old belongs to a worker that died or hung (its process killed, its
 * event loop blocked for that long), and the chunk is late at once instead of after the deadline.
 * The silence is measured with the worker's clock against the orchestration's, so it allows a few
 * seconds of skew; a false alarm costs a duplicate run whose result is discarded (create-once).
 */
export const CLAIM_LIVENESS = { heartbeatSeconds: 5, silenceSeconds: 20 } as const;

/**
 * The chunks without a result whose latest dispatch a worker claimed at least `deadlineSeconds`
 * before `at`, or whose claiming worker's heartbeat has been silent for
 * `CLAIM_LIVENESS.silenceSeconds`. Unclaimed chunks are never late; neither is a chunk whose latest
 * dispatch is unclaimed (it was re-sent and waits in the queue), whatever older dispatches' claims say.
 */
export function lateChunks(listing: JobListing, chunkCount: number, at: number, deadlineSeconds: number): LateChunk[] {
  const done = new Set(listing.results.map((r) => r.chunk));
  const latest = latestDispatches(listing);
  const late: LateChunk[] = [];
  for (const c of listing.claims) {
    if (c.chunk >= chunkCount || done.has(c.chunk) || c.dispatch !== (latest.get(c.chunk) ?? 1)) continue;
    const claimedAt = Date.parse(c.claimedAt);
    const beatAt = c.beatAt === undefined ? NaN : Date.parse(c.beatAt);
    // A claim without a readable time is treated as just made: never late on a guess.
    const pastDeadline = Number.isFinite(claimedAt) && at - claimedAt >= deadlineSeconds * 1000;
    const silent = Number.isFinite(beatAt) && at - beatAt >= CLAIM_LIVENESS.silenceSeconds * 1000;
    if (pastDeadline || silent) late.push({ chunk: c.chunk, dispatch: c.dispatch });
  }
  return late.sort((a, b) => a.chunk - b.chunk);
}

function range(n: number): number[] {
  return Array.from({ length: n }, (_, i) => i);
}

function tooDeep(container: string, blob: string): JobError {
  return new JobError('NESTING_TOO_DEEP', `itemsBlob ${container}/${blob} nests arrays or objects more than ${MAX_NESTING_DEPTH - 1} levels deep (${MAX_NESTING_DEPTH} counting the submission, as for inline items).`);
}
