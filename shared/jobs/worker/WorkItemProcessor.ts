/**
 * The worker's logic for one work-item message (one chunk, or an envelope of a few: each part is
 * handled as if it had come alone), on any instance.
 *
 * Guarantees: a chunk's result is written at most once (conditional create), so a redelivered or
 * re-dispatched chunk never counts twice; a redelivered or re-sent chunk whose result exists is
 * skipped before any work; a chunk of a job cancelled 5 s ago or more is skipped; each bad item
 * is recorded (index, code, message) and the chunk goes on; a chunk-level failure is thrown back for
 * the host to redeliver until the message's last attempt (`dequeueCount >= attempts`), where it is
 * recorded as a failed chunk with the reason instead, so the job always finishes. A permanent failure
 * (unknown work type, missing chunk items) is recorded at once. A delivery still working (or writing
 * its result) after `CLAIM_LIVENESS.claimAfterSeconds` claims the chunk (one blob write, `JobStore.claimChunk`) and then
 * beats on the claim: the orchestration's deadline runs from the claim, so a chunk still waiting in
 * a backlog is never declared late, and a claim that goes silent is sent again in seconds.
 * Storage per chunk in the common case (first delivery of a first send, done within 2 s): the
 * result's create and the host's receive and delete (one of each per message, shared by an envelope's
 * parts); the cancel marker is read once per 5 s per job (CancelMarkers).
 * Not guaranteed: that `process` runs once per item (a redelivery repeats it, and so does the first
 * delivery of a first-round chunk sent twice, by a retried activity or as unclaimed; one result is kept).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 6.
 */
import { type Logger } from '../../observability/log';
import { ItemError, type Json } from '../../worktypes/WorkType';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { CLAIM_LIVENESS } from '../dispatch/ChunkDispatcher';
import { type LandedResults } from '../dispatch/LandedResults';
import { type ChunkStore } from '../dispatch/PipelineStore';
import { type InputBlobs } from '../input/InputContainers';
import { JobError } from '../JobError';
import { type ItemError as RecordedItemError } from '../JobSummary';
import { isWakeMessage, parseWorkItemDelivery, parseWorkItemMessage, type WorkItemMessage } from '../messageCodec';
import { mapLimit } from '../pool';
import { CancelMarkers } from '../store/CancelMarkers';
import { type ChunkResult } from '../store/JobStore';
import { type Now, nowOf } from '../wallClock';

export interface WorkerDeps {
  readonly store: ChunkStore;
  /** The blobs work types may read (the job input containers only). */
  readonly inputs: InputBlobs;
  readonly registry: WorkTypeRegistry;
  readonly logger: Logger;
  readonly instanceId: string;
  readonly now?: Now;
  /** How long a delivery works before it claims its chunk; CLAIM_LIVENESS.claimAfterSeconds unless a test says otherwise. */
  readonly claimAfterMs?: number;
  /** Told of each result written, so a step of the job waiting in this process looks at once (LandedResults). */
  readonly landed?: LandedResults;
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
export { CANCEL_CHECK_MS } from '../store/CancelMarkers';

export class WorkItemProcessor {
  private readonly now: Now;
  /** Per job: the latest read of its cancel marker (CancelMarkers; the store's own where it keeps them). */
  private readonly cancels: Pick<CancelMarkers, 'isCancelled'>;

  constructor(private readonly deps: WorkerDeps) {
    this.now = nowOf(deps);
    const { store } = deps;
    this.cancels = store.cancelsCached === true ? store : new CancelMarkers((jobId, signal) => store.isCancelled(jobId, signal), this.now);
  }

  /**
   * Handles one delivery of a queue message: its chunk, or each part of an envelope at once, each as
   * if it had come alone. Throws (after every part has settled) when a part must be delivered again:
   * the parts that wrote their results skip on that delivery (it is not a first delivery).
   */
  async handleMessage(body: unknown, delivery: Delivery): Promise<WorkOutcome[]> {
    // A doorbell (messageCodec WAKE_WORKERS_MESSAGE, LEASE_FREE_MESSAGE) woke this instance's trigger; it carries no work.
    if (isWakeMessage(body)) return [];
    const parts = parseWorkItemDelivery(typeof body === 'string' ? parseText(body) : body);
    const [only] = parts;
    if (parts.length === 1 && only !== undefined) return [await this.handleChunk(only, delivery)];
    const settled = await Promise.allSettled(parts.map((part) => this.handleChunk(part, delivery)));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    return settled.map((s) => (s as PromiseFulfilledResult<WorkOutcome>).value);
  }

  /** Handles one chunk's delivery (a single work-item message's body); throws to have the host deliver it again. */
  async handle(body: unknown, delivery: Delivery): Promise<WorkOutcome> {
    return this.handleChunk(parseWorkItemMessage(typeof body === 'string' ? parseText(body) : body), delivery);
  }

  private async handleChunk(message: WorkItemMessage, delivery: Delivery): Promise<WorkOutcome> {
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

    // A first delivery of a first-round send has no result yet, unless the chunk went out twice (a
    // retried plan or step, rare): then this copy is worked again and its result discarded at the
    // create. A copy the dispatcher sent again in its round says so (`resent`) and checks first: a
    // chunk whose claim write failed can be re-sent as unclaimed while the queue redelivers it, and
    // that copy must not run again once the last attempt is recorded. One read per chunk saved in the
    // common case.
    const firstSend = delivery.dequeueCount === 1 && message.dispatch === 1 && message.resent !== true;
    if (!firstSend && (await store.chunkResultExists(message.jobId, message.chunk, signal))) {
      logger.info('workitem.duplicate_skipped', log);
      return 'duplicate';
    }
    if (await this.cancels.isCancelled(message.jobId, signal)) {
      logger.info('workitem.cancelled_skipped', log);
      return 'cancelled';
    }

    const heartbeat = this.keepClaim(message, delivery.dequeueCount, log, signal);

    const startedAt = performance.now();
    let result: ChunkResult;
    try {
      result = await this.process(message, delivery.dequeueCount, signal);
    } catch (err) {
      const permanent = err instanceof JobError && err.isUserError;
      const lastAttempt = delivery.dequeueCount >= message.attempts;
      if (!permanent && !lastAttempt) {
        // A failure faster than the first claim leaves one now: the queue brings the message back
        // after its visibility (10 s), before the claim goes silent (20 s), so the dispatcher does not
        // take the chunk for unclaimed and send a copy that would run beside the redelivery (a third
        // call of a chunk allowed two attempts).
        await heartbeat.claimNow();
        await heartbeat.stop();
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

    // The claim covers the result's write too: a worker stuck writing it is still holding the chunk.
    let written: 'written' | 'exists';
    try {
      written = await store.writeChunkResult(result, signal);
    } finally {
      await heartbeat.stop();
    }
    if (written === 'exists') {
      logger.info('workitem.duplicate_discarded', log);
      return 'duplicate';
    }
    this.deps.landed?.landed(result);
    // One line per chunk at info: the "slowest chunks" query in docs/operations.md reads durationMs.
    const durationMs = Math.round(performance.now() - startedAt);
    if (result.status === 'failed') {
      logger.error('workitem.chunk_failed', { ...log, durationMs, error: result.error });
      return 'failed_recorded';
    }
    logger.info('workitem.done', { ...log, items: result.itemCount, itemsFailed: result.itemsFailed, durationMs });
    return 'written';
  }


  /**
   * Claims the chunk once this delivery has worked on it for `claimAfterSeconds`, then beats on the
   * claim every `heartbeatSeconds` (a claim that goes silent is sent again in seconds:
   * dispatch/DispatchLedger.ts). A write that fails is logged and tried again at the next beat: the
   * chunk then looks unclaimed for a while, which costs at most a duplicate send.
   */
  private keepClaim(
    message: WorkItemMessage,
    dequeueCount: number,
    log: Record<string, unknown>,
    signal: AbortSignal,
  ): { claimNow(): Promise<void>; stop(): Promise<void> } {
    const { store, logger } = this.deps;
    const { jobId, chunk, dispatch } = message;
    const claimedAt = this.now().toISOString();
    let claimed = false;
    let interval: NodeJS.Timeout | undefined;
    let writing: Promise<void> = Promise.resolve();
    const beat = (): void => {
      const beatAt = this.now().toISOString();
      const write = claimed
        ? store.beatClaim(jobId, chunk, dispatch, { claimedAt, dequeueCount, beatAt }, signal)
        : store.claimChunk(jobId, chunk, dispatch, { claimedAt, claimedBy: this.deps.instanceId, dequeueCount, beatAt }, signal);
      claimed = true;
      writing = write.catch((err: unknown) => {
        claimed = false;
        logger.debug('workitem.claim_failed', { ...log, error: err });
      });
    };
    const first = setTimeout(() => {
      beat();
      interval = setInterval(beat, CLAIM_LIVENESS.heartbeatSeconds * 1000);
      interval.unref();
    }, this.deps.claimAfterMs ?? CLAIM_LIVENESS.claimAfterSeconds * 1000);
    first.unref();
    return {
      /** Claims at once if this delivery has not claimed yet (its first write may still be due). */
      claimNow: async () => {
        if (claimed) return;
        clearTimeout(first);
        beat();
        await writing;
      },
      // Settles once a write in flight has: a claim never lands after the delivery is over.
      stop: () => {
        clearTimeout(first);
        clearInterval(interval);
        return writing;
      },
    };
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
