/**
 * The narrow storage interface of the chunk pipeline, as `LeaseStore` is the elector's: what the
 * dispatcher and the workers read and write about chunks (results, claims, the cancel marker, chunk
 * items), the work queue, and the staged input. `JobStore` and `QueueWorkQueue` are the Azure Storage
 * implementations; test/unit/jobs/support/MemoryPipeline.ts is the in-memory twin that the clock-driven
 * dispatch, recovery, fairness and cancel tests run on.
 *
 * Contracts every implementation keeps: `writeChunkResult` creates once ('exists' when another writer
 * won); `observeChunks` answers the results (and, when asked, the claims) of the named chunks (it may answer more);
 * a claim is overwritten by each delivery of the same round, and `beatClaim` changes only its beat.
 */
import { type Json } from '../../worktypes/WorkType';
import { type WorkItemMessage } from '../messageCodec';
import { type ChunkResult } from '../store/JobStore';
import { type ChunkObservation } from './DispatchLedger';

export interface ChunkClaim {
  readonly claimedAt: string;
  readonly claimedBy: string;
  readonly dequeueCount: number;
  readonly beatAt?: string;
}

export interface ChunkStore {
  chunkResultExists(jobId: string, chunk: number, signal?: AbortSignal): Promise<boolean>;
  writeChunkResult(result: ChunkResult, signal?: AbortSignal): Promise<'written' | 'exists'>;
  isCancelled(jobId: string, signal?: AbortSignal): Promise<boolean>;
  /**
   * True when `isCancelled` already answers from this process's reads of at most `CANCEL_CHECK_MS`
   * ago (store/CancelMarkers.ts): the worker then asks it as it is, and a cancel is not seen twice as late.
   */
  readonly cancelsCached?: boolean;
  claimChunk(jobId: string, chunk: number, dispatch: number, claim: ChunkClaim, signal?: AbortSignal): Promise<void>;
  beatClaim(
    jobId: string,
    chunk: number,
    dispatch: number,
    beat: { readonly claimedAt: string; readonly dequeueCount: number; readonly beatAt: string },
    signal?: AbortSignal,
  ): Promise<void>;
  /** Stores a chunk's items that do not fit a queue message; answers the name its message carries. */
  writeChunkItems(jobId: string, chunk: number, items: readonly Json[], signal?: AbortSignal): Promise<string>;
  readChunkItems(name: string, signal?: AbortSignal): Promise<Json[] | undefined>;
  /** `withClaims` false: the claims are not needed (`claimsMatter`) and may be left out. */
  observeChunks(jobId: string, chunks: readonly number[], withClaims: boolean, signal?: AbortSignal): Promise<ChunkObservation>;
}

/** Where chunk messages go. */
export interface WorkQueue {
  /**
   * Puts these chunks on the queue in one message (an envelope when there are several; QueueWorkQueue
   * may add other sends' chunks to it; the in-memory twin queues each on its own, as a worker handles
   * each part as if it had come alone). Resolves once that message is on the queue.
   */
  send(messages: readonly WorkItemMessage[], signal?: AbortSignal): Promise<void>;
}

/** A staged job's items, a few chunks at a time. */
export interface ChunkItemsSource {
  items(jobId: string, chunks: readonly number[], signal?: AbortSignal): Promise<Map<number, Json[]>>;
}
