/**
 * A job's aggregation: every chunk's partial folded once, in chunk order (one listing; a read only
 * for a partial too big for metadata or a chunk's errors, the first 100), the full result document
 * stored (`result.json`), the final summary recorded once (a run that finished first wins, and its
 * summary is answered). A result of at most 4 KiB without errors is kept in the summary alone (it
 * holds all the document would: `resultDocumentOf`): one blob write and one stored blob a job fewer,
 * and a burst of small jobs is bound by its storage requests. Safe to run again: it reads the same
 * results and writes the same document. A 10,000-chunk fold yields to the event loop every 50
 * chunks, so it does not hold the leader's renewals.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 7.
 */
import { type Logger } from '../../observability/log';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { type DispatchJob } from '../dispatch/ChunkDispatcher';
import { JobError, type JobErrorInfo } from '../JobError';
import { type FinalStatus, INLINE_RESULT_BYTES, type ItemError, type JobProgress, type JobSummary, resultDocument } from '../JobSummary';
import { mapLimit } from '../pool';
import { type ChunkResult, type ChunkResultEntry, type JobStore } from '../store/JobStore';
import { type Now } from '../wallClock';

const READ_CONCURRENCY = 16;
/** The result blob keeps this many chunk and item errors; the summary the first few. */
const MAX_RECORDED_ERRORS = 100;
const SUMMARY_ERRORS = 5;
/** Aggregation yields to the event loop after this many chunks, so a 10,000-chunk fold does not stall leader renewals. */
const AGGREGATE_YIELD_EVERY = 50;

export interface AggregateInput {
  /** The job (a whole run, or the part of it a step carries). */
  readonly run: DispatchJob;
  readonly chunkCount: number;
  readonly itemCount: number;
  readonly cancelled: boolean;
  /** Set when the orchestration calls it again after a resume: see CallClaims. */
  readonly repeat?: number;
}

export interface AggregationDeps {
  readonly store: JobStore;
  readonly registry: WorkTypeRegistry;
  readonly logger: Logger;
  readonly now: Now;
}

/**
 * `landed`: results already seen (the last dispatch pass's), used instead of a listing of the job when
 * they name every chunk (a result is created once, so what was seen is what a listing would show).
 */
export async function aggregateJob(
  deps: AggregationDeps,
  input: AggregateInput,
  landed?: readonly ChunkResultEntry[],
): Promise<JobSummary> {
  const { run } = input;
  const type = deps.registry.get(run.workType);
  if (type === undefined) throw new JobError('UNKNOWN_WORK_TYPE', `Work type "${run.workType}" is not registered on this instance.`);
  const seen = landed?.filter((e) => e.chunk < input.chunkCount);
  const covered = seen !== undefined && new Set(seen.map((e) => e.chunk)).size === input.chunkCount;
  const results = covered ? seen : (await deps.store.chunks.listJob(run.jobId)).results;
  const entries = results.filter((e) => e.chunk < input.chunkCount).sort((a, b) => a.chunk - b.chunk);
  const needRead = entries.filter((e) => (e.status === 'ok' && e.partial === undefined) || e.status === 'failed' || e.itemsFailed > 0);
  // Errors are only read for the first chunks that have them; partials always.
  let errorReads = 0;
  const toRead = needRead.filter((e) => (e.status === 'ok' && e.partial === undefined) || errorReads++ < MAX_RECORDED_ERRORS);
  const read = new Map<number, ChunkResult>();
  await mapLimit(toRead, READ_CONCURRENCY, async (e) => {
    const full = await deps.store.chunks.readChunkResult(run.jobId, e.chunk);
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
      chunkErrors.push({
        chunk: e.chunk,
        code: full?.error?.code ?? e.errorCode ?? 'CHUNK_FAILED',
        message: full?.error?.message ?? 'chunk failed',
      });
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
  const finishedAt = deps.now().toISOString();
  const { jobId, workType, epoch } = run;
  const inline = Buffer.byteLength(JSON.stringify(result), 'utf8') <= INLINE_RESULT_BYTES;
  // The summary says everything the document would: no result blob (GET .../result builds it from the summary).
  const whole = inline && chunkErrors.length === 0 && itemErrors.length === 0;
  const stored = whole
    ? undefined
    : await deps.store.writeJobResult(
        jobId,
        resultDocument({ jobId, workType, status, progress, result, chunkErrors, itemErrors, epoch, finishedAt }),
      );
  const errors: JobErrorInfo[] = [
    ...chunkErrors.map((e) => ({ code: e.code, message: `chunk ${e.chunk}: ${e.message}` })),
    ...itemErrors.map((e) => ({ code: e.code, message: `item ${e.index}: ${e.message}` })),
  ].slice(0, SUMMARY_ERRORS);
  deps.logger.info('job.aggregated', { jobId: run.jobId, status, chunks: progress.chunks, items: progress.items, epoch: run.epoch });
  // Recorded once here (one Durable hop fewer than a separate finish): a run that finished first wins.
  const summary: JobSummary = {
    jobId: run.jobId,
    workType: run.workType,
    status,
    progress,
    ...(inline ? { result } : {}),
    ...(stored === undefined ? {} : { resultBlob: stored.blob }),
    ...(status === 'failed'
      ? {
          error: {
            code: chunkErrors[0]?.code ?? 'CHUNK_FAILED',
            message: `All ${input.chunkCount} chunks failed; first: ${chunkErrors[0]?.message ?? 'unknown'}`,
          },
        }
      : {}),
    ...(errors.length > 0 ? { errors } : {}),
    epoch: run.epoch,
    finishedAt,
  };
  // The creation time the run carries keys the job's index row (no read of the start record).
  return deps.store.writeFinal(summary, undefined, run.submittedAt);
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
