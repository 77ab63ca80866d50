/**
 * The in-memory twin of the chunk pipeline's storage (dispatch/PipelineStore.ts): chunk results
 * (created once), claims with heartbeats, cancel markers, chunk item blobs, staged items, and a work
 * queue with receive visibility like Azure Queue Storage (a received message is invisible until its
 * visibility ends or it is deleted), all on a clock the test moves.
 */
import { type ChunkObservation } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { type ChunkClaim, type ChunkItemsSource, type ChunkStore, type WorkQueue } from '../../../../shared/jobs/dispatch/PipelineStore';
import { type WorkItemMessage } from '../../../../shared/jobs/messageCodec';
import { type ChunkResult } from '../../../../shared/jobs/store/JobStore';
import { type Json } from '../../../../shared/worktypes/WorkType';

export interface QueuedMessage {
  readonly id: number;
  readonly message: WorkItemMessage;
  dequeueCount: number;
  visibleAt: number;
}

interface StoredClaim extends ChunkClaim {
  readonly chunk: number;
  readonly dispatch: number;
}

export class MemoryPipeline implements ChunkStore, WorkQueue, ChunkItemsSource {
  readonly results = new Map<string, ChunkResult>();
  readonly claims = new Map<string, StoredClaim>();
  readonly cancelled = new Set<string>();
  readonly chunkBlobs = new Map<string, Json[]>();
  /** Staged items per job, and its chunk size. */
  readonly staged = new Map<string, { readonly items: readonly Json[]; readonly chunkSize: number }>();
  readonly queue: QueuedMessage[] = [];
  /** Every message ever sent, in order. */
  readonly sent: WorkItemMessage[] = [];
  /** Storage calls by name: what a step or a worker costs. */
  readonly calls = new Map<string, number>();
  private nextId = 1;

  constructor(private readonly now: () => number) {}

  /** Counts the call and yields once, as a storage round trip would. */
  private async enter(name: string): Promise<void> {
    this.calls.set(name, (this.calls.get(name) ?? 0) + 1);
    await Promise.resolve();
  }

  stage(jobId: string, items: readonly Json[], chunkSize: number): { itemCount: number; chunkCount: number } {
    this.staged.set(jobId, { items, chunkSize });
    return { itemCount: items.length, chunkCount: Math.ceil(items.length / chunkSize) };
  }

  // --- ChunkItemsSource ---
  async items(jobId: string, chunks: readonly number[]): Promise<Map<number, Json[]>> {
    await this.enter('items');
    const staged = this.staged.get(jobId);
    if (staged === undefined) throw new Error(`job ${jobId} was not staged`);
    return new Map(chunks.map((c) => [c, staged.items.slice(c * staged.chunkSize, (c + 1) * staged.chunkSize)]));
  }

  // --- WorkQueue ---
  async send(messages: readonly WorkItemMessage[]): Promise<void> {
    await this.enter('send');
    for (const message of messages) {
      this.sent.push(message);
      this.queue.push({ id: this.nextId++, message, dequeueCount: 0, visibleAt: this.now() });
    }
  }

  /** Up to `n` visible messages, oldest first, made invisible for `visibilityMs`. */
  receive(n: number, visibilityMs: number): QueuedMessage[] {
    const t = this.now();
    const out = this.queue.filter((m) => m.visibleAt <= t).slice(0, n);
    for (const m of out) {
      m.dequeueCount += 1;
      m.visibleAt = t + visibilityMs;
    }
    return out;
  }

  delete(id: number): void {
    const i = this.queue.findIndex((m) => m.id === id);
    if (i >= 0) this.queue.splice(i, 1);
  }

  /** Messages a given job has on the queue (visible or not). */
  depth(jobId?: string): number {
    return this.queue.filter((m) => jobId === undefined || m.message.jobId === jobId).length;
  }

  // --- ChunkStore ---
  async chunkResultExists(jobId: string, chunk: number): Promise<boolean> {
    await this.enter('chunkResultExists');
    return this.results.has(`${jobId}/${chunk}`);
  }

  async writeChunkResult(result: ChunkResult): Promise<'written' | 'exists'> {
    await this.enter('writeChunkResult');
    const key = `${result.jobId}/${result.chunk}`;
    if (this.results.has(key)) return 'exists';
    this.results.set(key, result);
    return 'written';
  }

  async isCancelled(jobId: string): Promise<boolean> {
    await this.enter('isCancelled');
    return this.cancelled.has(jobId);
  }

  async claimChunk(jobId: string, chunk: number, dispatch: number, claim: ChunkClaim): Promise<void> {
    await this.enter('claimChunk');
    this.claims.set(`${jobId}/${chunk}-${dispatch}`, { chunk, dispatch, ...claim });
  }

  async beatClaim(jobId: string, chunk: number, dispatch: number, beat: { readonly claimedAt: string; readonly dequeueCount: number; readonly beatAt: string }): Promise<void> {
    await this.enter('beatClaim');
    const key = `${jobId}/${chunk}-${dispatch}`;
    const claim = this.claims.get(key);
    if (claim === undefined) throw new Error(`no claim ${key} to beat`);
    this.claims.set(key, { ...claim, ...beat });
  }

  async writeChunkItems(jobId: string, chunk: number, items: readonly Json[]): Promise<string> {
    await this.enter('writeChunkItems');
    const name = `jobs/${jobId}/chunks/${String(chunk).padStart(5, '0')}.json`;
    this.chunkBlobs.set(name, [...items]);
    return name;
  }

  async readChunkItems(name: string): Promise<Json[] | undefined> {
    await this.enter('readChunkItems');
    return this.chunkBlobs.get(name);
  }

  async observeChunks(jobId: string, chunks: readonly number[], withClaims: boolean): Promise<ChunkObservation> {
    await this.enter(withClaims ? 'observeChunks' : 'observeChunks(results)');
    const wanted = new Set(chunks);
    const results = [...this.results.values()]
      .filter((r) => r.jobId === jobId && wanted.has(r.chunk))
      .map((r) => ({ chunk: r.chunk, status: r.status, itemCount: r.itemCount, itemsFailed: r.itemsFailed }));
    const claims = [...this.claims.entries()]
      .filter(([key, c]) => withClaims && key.startsWith(`${jobId}/`) && wanted.has(c.chunk))
      .map(([, c]) => ({ chunk: c.chunk, dispatch: c.dispatch, claimedAt: c.claimedAt, ...(c.beatAt === undefined ? {} : { beatAt: c.beatAt }) }));
    return { cancelled: this.cancelled.has(jobId), results, claims };
  }
}
