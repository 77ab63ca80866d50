/**
 * The worker's logic for one work-item message (one chunk), on any instance.
 *
 * Guarantees: a chunk's result is written at most once (conditional create), so a redelivered or
 * re-dispatched chunk never counts twice; a chunk whose result exists is skipped before any work;
 * a chunk of a cancelled job is skipped; each bad item is recorded (index, code, message) and the
 * chunk goes on; a chunk-level failure is thrown back for the host to redeliver until the
 * message's last attempt (`dequeueCount >= attempts`), where it is recorded as a failed chunk
 * with the reason instead, so the job always finishes. A permanent failure (unknown work type,
 * missing chunk items) is recorded at once. Before processing, each delivery records a claim on
 * the chunk (one blob write, `JobStore.claimChunk`): the orchestration's deadline runs from the
 * latest claim, so a chunk still waiting in a backlog is never declared late.
 * Not guaranteed: that `process` runs once per item (a redelivery repeats it; only one result is kept).
 */
import { type Logger } from '../observability/log';
import { ItemError, type Json } from '../worktypes/WorkType';
import { type WorkTypeRegistry } from '../worktypes/WorkTypeRegistry';
import { CLAIM_LIVENESS } from './dispatch/ChunkDispatcher';
import { type ChunkStore } from './dispatch/PipelineStore';
import { type InputBlobs } from './InputContainers';
import { JobError } from './JobError';
import { type ChunkResult, type ItemError as RecordedItemError } from './JobStore';
import { parseWorkItemMessage, type WorkItemMessage } from './messageCodec';
import { mapLimit } from './pool';
import { type Now, nowOf } from './wallClock';

export interface WorkerDeps {
  readonly store: ChunkStore;
  /** The blobs work types may read (the job input containers only). */
  readonly inputs: InputBlobs;
  readonly registry: WorkTypeRegistry;
  readonly logger: Logger;
  readonly instanceId: string;
  readonly now?: Now;
}

export interface Delivery {
  /** How many times the queue has handed out this message, this delivery included. */
  readonly dequeueCount: number;
  readonly messageId?: string;
  readonly signal?: AbortSignal;
}

export type WorkOutcome = 'written' | 'failed_recorded' | 'duplicate' | 'cancelled';

const ITEM_CONCURRENCY = 8;
const MAX_ITEM_ERRORS_PER_CHUNK = 100;

export class WorkItemProcessor {
  private readonly now: Now;

  constructor(private readonly deps: WorkerDeps) {
    this.now = nowOf(deps);
  }

  /** Handles one delivery; throws to have the host deliver it again. */
  async handle(body: unknown, delivery: Delivery): Promise<WorkOutcome> {
    const message = parseWorkItemMessage(typeof body === 'string' ? parseText(body) : body);
    const { store, logger } = this.deps;
    const signal = delivery.signal ?? new AbortController().signal;
    const log = {
      jobId: message.jobId,
      workType: message.workType,
      chunk: message.chunk,
      dequeueCount: delivery.dequeueCount,
      dispatch: message.dispatch,
      epoch: message.epoch,
    };

    if (await store.chunkResultExists(message.jobId, message.chunk, signal)) {
      logger.info('workitem.duplicate_skipped', log);
      return 'duplicate';
    }
    if (await store.isCancelled(message.jobId, signal)) {
      logger.info('workitem.cancelled_skipped', log);
      return 'cancelled';
    }

    // A claim write that fails is storage trouble: throwing has the host deliver the chunk again.
    const claimedAt = this.now().toISOString();
    await store.claimChunk(
      message.jobId,
      message.chunk,
      message.dispatch,
      { claimedAt, claimedBy: this.deps.instanceId, dequeueCount: delivery.dequeueCount, beatAt: claimedAt },
      signal,
    );
    // Heartbeats while it works: a claim that goes silent is sent again in seconds (dispatch/DispatchLedger.ts).
    const heartbeat = setInterval(() => {
      const beat = { claimedAt, dequeueCount: delivery.dequeueCount, beatAt: this.now().toISOString() };
      store
        .beatClaim(message.jobId, message.chunk, message.dispatch, beat, signal)
        .catch((err: unknown) => logger.debug('workitem.heartbeat_failed', { ...log, error: err }));
    }, CLAIM_LIVENESS.heartbeatSeconds * 1000);
    heartbeat.unref();

    const startedAt = performance.now();
    let result: ChunkResult;
    try {
      result = await this.process(message, delivery.dequeueCount, signal);
    } catch (err) {
      clearInterval(heartbeat);
      const permanent = err instanceof JobError && err.isUserError;
      const lastAttempt = delivery.dequeueCount >= message.attempts;
      if (!permanent && !lastAttempt) {
        logger.warn('workitem.attempt_failed', { ...log, error: err });
        throw err;
      }
      const itemCount = message.itemCount;
      result = {
        jobId: message.jobId,
        chunk: message.chunk,
        status: 'failed',
        itemCount,
        itemsFailed: itemCount,
        partial: null,
        itemErrors: [],
        error: {
          code: err instanceof JobError ? err.code : 'CHUNK_FAILED',
          message:
            `${permanent ? 'Permanent failure' : `Failed on attempt ${delivery.dequeueCount} of ${message.attempts}`}: ` +
            `${err instanceof Error ? err.message : String(err)}`,
        },
        attempt: delivery.dequeueCount,
        dispatch: message.dispatch,
        writtenBy: this.deps.instanceId,
        writtenAt: this.now().toISOString(),
      };
    }

    clearInterval(heartbeat);
    const written = await store.writeChunkResult(result, signal);
    if (written === 'exists') {
      logger.info('workitem.duplicate_discarded', log);
      return 'duplicate';
    }
    // One line per chunk at info: the "slowest chunks" query in docs/operations.md reads durationMs.
    const durationMs = Math.round(performance.now() - startedAt);
    if (result.status === 'failed') {
      logger.error('workitem.chunk_failed', { ...log, durationMs, error: result.error });
      return 'failed_recorded';
    }
    logger.info('workitem.done', { ...log, items: result.itemCount, itemsFailed: result.itemsFailed, durationMs });
    return 'written';
  }


  private async process(message: WorkItemMessage, attempt: number, signal: AbortSignal): Promise<ChunkResult> {
    const type = this.deps.registry.get(message.workType);
    if (type === undefined) {
      throw new JobError('UNKNOWN_WORK_TYPE', `Work type "${message.workType}" is not registered on instance ${this.deps.instanceId}.`);
    }
    let items: Json[] | undefined = message.items;
    if (items === undefined && message.itemsRef !== undefined) {
      items = await this.deps.store.readChunkItems(message.itemsRef, signal);
      if (items === undefined) throw new JobError('INVALID_WORK_ITEM', `The chunk's items blob ${message.itemsRef} is missing.`);
    }
    if (items === undefined) throw new JobError('INVALID_WORK_ITEM', 'The message carries no items.');

    const ctx = { inputs: this.deps.inputs, signal, logger: this.deps.logger };
    const itemErrors: RecordedItemError[] = [];
    let itemsFailed = 0;
    const partials = await mapLimit(items, ITEM_CONCURRENCY, async (item, i): Promise<Json | undefined> => {
      const index = message.firstIndex + i;
      const reason = type.validateItem(item);
      try {
        if (reason !== undefined) throw new ItemError('ITEM_REJECTED', reason);
        return await type.process(item, ctx);
      } catch (err) {
        // Only an ItemError is the item's fault; anything else fails the chunk (and is retried).
        if (!(err instanceof ItemError)) throw err;
        itemsFailed += 1;
        if (itemErrors.length < MAX_ITEM_ERRORS_PER_CHUNK) itemErrors.push({ index, code: err.code, message: err.message });
        return undefined;
      }
    });
    let partial = type.empty();
    for (const p of partials) if (p !== undefined) partial = type.combine(partial, p);
    itemErrors.sort((a, b) => a.index - b.index);
    return {
      jobId: message.jobId,
      chunk: message.chunk,
      status: 'ok',
      itemCount: items.length,
      itemsFailed,
      partial,
      itemErrors,
      attempt,
      dispatch: message.dispatch,
      writtenBy: this.deps.instanceId,
      writtenAt: this.now().toISOString(),
    };
  }
}

function parseText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new JobError('INVALID_WORK_ITEM', 'Not a work-item message: not JSON.');
  }
}
