/**
 * Stages a job's input once, at planning: reads the items (an items blob as a stream, or the inline
 * items), checks them, and cuts them into segment blobs of whole chunks (~1 MiB of JSON each) and a
 * manifest, so the dispatcher reads a few chunks at a time instead of holding the whole array.
 *
 * Guarantees: these refusals, each with its stable code and message, in this precedence:
 * UNKNOWN_WORK_TYPE; ITEMS_BLOB_NOT_FOUND;
 * ITEMS_BLOB_INVALID (too big, not JSON, not an array); NESTING_TOO_DEEP (decided by the
 * non-recursive splitter before any recursive code sees an item; judged on the text, so also for
 * a deep value that a duplicate key later replaces, which a parse-then-check would let through);
 * ITEMS_EMPTY; ITEM_REJECTED (the count and the first five problems); ITEMS_TOO_MANY
 * (`assertChunkCount`). An items blob is read only up to the first item past what the job may hold
 * (`JOB_LIMITS.maxItems`, or `maxChunks` chunks): there it is refused ITEMS_TOO_MANY (ITEM_REJECTED
 * if an item read so far was rejected), whatever the rest of the blob holds, so a 64 MiB blob of
 * tens of millions of items costs the reading of its first million, not of the whole. The manifest
 * is written only after every segment, and only for accepted
 * input; segments cover every item exactly once, in order, chunk n being items
 * [n*chunkSize, (n+1)*chunkSize). Memory holds the current segment (and the few being written),
 * never the whole array; synchronous work runs in slices of a few milliseconds between event-loop
 * turns, so leader renewals in the same process keep their timing.
 * Idempotent: staging the same job again writes the same segments and manifest.
 * Not guaranteed: a bound on one item (an item is parsed whole, and a chunk is never split across
 * segments, so one huge item or chunk makes one big segment); segments written before a refusal
 * was known stay behind (no manifest names them; the job's purge removes them with `jobs/<jobId>/`).
 */
import { StringDecoder } from 'node:string_decoder';

import { type AnyWorkType, type Json } from '../../worktypes/WorkType';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { JobError } from '../JobError';
import { JOB_LIMITS, maxItemsAt } from '../jobLimits';
import { type JobRun } from '../JobRun';
import { assertChunkCount, MAX_NESTING_DEPTH } from '../JobSubmission';
import { type InputManifest, type InputStore } from './InputStore';
import { ItemRejections } from './ItemRejections';
import { JsonArraySplitter, JsonSplitError } from './JsonArraySplitter';

export interface StageDeps {
  readonly store: InputStore;
  readonly registry: WorkTypeRegistry;
}

export const STAGING = {
  /** A segment is cut at the first chunk boundary past this many characters of JSON. */
  segmentChars: 1024 * 1024,
  /** Segment writes in flight at once (each holds its segment's text). */
  writesInFlight: 3,
  /**
   * Synchronous staging work per event-loop turn, shared by every staging in the process (each runs
   * sliceMs / active before it yields), so concurrent jobs do not add up to a long turn.
   */
  sliceMs: 4,
  /**
   * Bytes of the items blob decoded, scanned and checked per step: about a millisecond of work for
   * the densest input (`[0,0,...]`, 4,096 items), so eight stagings side by side, each yielding after
   * its step, still let the event loop turn every few milliseconds (at 64 KiB a turn of eight took
   * over 100 ms and `/api/health` waited behind it).
   */
  pieceBytes: 8 * 1024,
} as const;

/** Stages `run`'s items; see the module comment. Throws JobError for input the job must refuse. */
export async function stageInput(
  deps: StageDeps,
  run: JobRun,
  signal?: AbortSignal,
  options: { readonly firstWindowAt?: string } = {},
): Promise<InputManifest> {
  const type = deps.registry.get(run.workType);
  if (type === undefined) throw new JobError('UNKNOWN_WORK_TYPE', `Work type "${run.workType}" is not registered on this instance.`);
  const chunkSize = run.options.chunkSize;
  const writer = new SegmentWriter(deps.store, run.jobId, chunkSize, signal);
  const pacer = new Pacer();
  activeStagings += 1;
  try {
    let itemCount: number;
    if (run.source.kind === 'inline') {
      const items = run.source.items;
      // Inline items were validated at submission (JobSubmission): only their count is checked here.
      assertChunkCount(items.length, chunkSize);
      for (const item of items) {
        writer.add(JSON.stringify(item));
        await writer.drain();
        await pacer.turn(signal);
      }
      itemCount = items.length;
    } else {
      itemCount = await stageBlob({
        store: deps.store,
        type,
        container: run.source.container,
        blob: run.source.blob,
        chunkSize,
        writer,
        pacer,
        signal,
      });
    }
    const segments = await writer.finish();
    const chunkCount = Math.ceil(itemCount / chunkSize);
    const manifest: InputManifest = {
      v: 1,
      jobId: run.jobId,
      itemCount,
      chunkSize,
      chunkCount,
      segments,
      startId: run.startId,
      ...(options.firstWindowAt === undefined ? {} : { firstWindowAt: options.firstWindowAt }),
    };
    await deps.store.writeManifest(manifest, signal);
    return manifest;
  } finally {
    activeStagings -= 1;
    await writer.settle();
  }
}

/**
 * The input `run`'s own start staged on an earlier attempt of its plan (the manifest names the start),
 * or undefined: a plan retried after its instance died goes on from there instead of staging again.
 */
export async function stagedInput(store: InputStore, run: JobRun, signal?: AbortSignal): Promise<InputManifest | undefined> {
  const manifest = await store.readManifest(run.jobId, signal);
  return manifest?.startId === run.startId && manifest.chunkSize === run.options.chunkSize ? manifest : undefined;
}

/** One itemsBlob's staging: where it is, the work type that checks its items, and the writer and pacer it feeds. */
interface BlobStaging {
  readonly store: InputStore;
  readonly type: AnyWorkType;
  readonly container: string;
  readonly blob: string;
  readonly chunkSize: number;
  readonly writer: SegmentWriter;
  readonly pacer: Pacer;
  readonly signal: AbortSignal | undefined;
}

async function stageBlob({ store, type, container, blob, chunkSize, writer, pacer, signal }: BlobStaging): Promise<number> {
  const where = `${container}/${blob}`;
  let count = 0;
  // Reading stops at the first item past what the job may hold.
  const limit = maxItemsAt(chunkSize);
  const rejections = new ItemRejections(type);
  const splitter = new JsonArraySplitter({
    // The rule for inline items, which sit one level deeper (inside the submission).
    maxDepth: MAX_NESTING_DEPTH - 1,
    onElement: (json, index) => {
      if (index >= limit) {
        // Past the limit: the job is refused whatever follows; the rest of this piece is skipped.
        count = limit + 1;
        writer.stop();
        return;
      }
      count = index + 1;
      if (!rejections.check(JSON.parse(json) as Json, index)) writer.stop();
      writer.add(json);
    },
  });
  const { stream } = await store.openItemsBlob(container, blob, signal);
  const decoder = new StringDecoder('utf8');
  try {
    reading: for await (const piece of stream) {
      for (let at = 0; at < piece.length; at += STAGING.pieceBytes) {
        const end = at + STAGING.pieceBytes;
        // String pieces are already text; buffers are decoded (a character split across pieces waits in the decoder).
        splitter.feed(typeof piece === 'string' ? piece.slice(at, end) : decoder.write(piece.subarray(at, end)));
        if (splitter.tooDeep) writer.stop();
        // Leaving the loop closes the download: a blob of 33 million items costs its first million.
        if (count > limit) break reading;
        await writer.drain();
        await pacer.turn(signal);
      }
    }
    if (count > limit) {
      rejections.throwIfAny(`the first ${limit + 1}`, where);
      throw tooManyInBlob(where, chunkSize);
    }
    splitter.feed(decoder.end());
    splitter.end();
  } catch (err) {
    if (!(err instanceof JsonSplitError)) throw err;
    if (err.kind === 'too-deep') {
      const levels = `more than ${MAX_NESTING_DEPTH - 1} levels deep (${MAX_NESTING_DEPTH} counting the submission, as for inline items)`;
      throw new JobError('NESTING_TOO_DEEP', `itemsBlob ${where} nests arrays or objects ${levels}.`);
    }
    if (err.kind === 'not-array') throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${where} must hold a JSON array of items.`);
    throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${where} is not JSON.`);
  }
  if (count === 0) throw new JobError('ITEMS_EMPTY', `itemsBlob ${where} holds an empty array.`);
  rejections.throwIfAny(count, where);
  assertChunkCount(count, chunkSize);
  return count;
}

/** ITEMS_TOO_MANY for an items blob whose reading stopped at the first item past the limit. */
export function tooManyInBlob(where: string, chunkSize: number): JobError {
  const most = maxItemsAt(chunkSize);
  if (most < JOB_LIMITS.maxItems) {
    return new JobError(
      'ITEMS_TOO_MANY',
      `itemsBlob ${where} holds more than ${most} items, which in chunks of ${chunkSize} make more than ` +
        `${JOB_LIMITS.maxChunks} chunks; a job has at most ${JOB_LIMITS.maxChunks}: raise options.chunkSize.`,
    );
  }
  return new JobError('ITEMS_TOO_MANY', `itemsBlob ${where} holds more than ${most} items; a job holds at most ${most}.`);
}

/** Stagings running in this process: they share the slice of each event-loop turn. */
let activeStagings = 0;

/** Yields to the event loop once this staging's share of `STAGING.sliceMs` has run. */
class Pacer {
  private sliceStart = performance.now();

  async turn(signal: AbortSignal | undefined): Promise<void> {
    if (performance.now() - this.sliceStart < STAGING.sliceMs / Math.max(1, activeStagings)) return;
    await new Promise<void>((resolve) => setImmediate(resolve));
    signal?.throwIfAborted();
    this.sliceStart = performance.now();
  }
}

/** Collects item texts into segments of whole chunks and writes them, a few at a time. */
class SegmentWriter {
  private texts: string[] = [];
  private chars = 0;
  private items = 0;
  private nextChunk = 0;
  private writing = true;
  private readonly segments: Array<{ firstChunk: number; chunks: number }> = [];
  private readonly inFlight = new Set<Promise<void>>();
  private failure: { error: unknown } | undefined;

  constructor(
    private readonly store: InputStore,
    private readonly jobId: string,
    private readonly chunkSize: number,
    private readonly signal: AbortSignal | undefined,
  ) {}

  /** The input will be refused: keep nothing more. */
  stop(): void {
    this.writing = false;
    this.texts = [];
  }

  add(json: string): void {
    if (!this.writing) return;
    this.texts.push(json);
    this.chars += json.length + 1;
    this.items += 1;
    if (this.items % this.chunkSize === 0 && this.chars >= STAGING.segmentChars) this.cut();
  }

  /** Waits while too many writes are in flight; throws a failed write's error. */
  async drain(): Promise<void> {
    while (this.inFlight.size >= STAGING.writesInFlight) await Promise.race(this.inFlight);
    if (this.failure !== undefined) throw this.failure.error;
  }

  /** Writes the last segment, waits for every write, and answers the layout. */
  async finish(): Promise<InputManifest['segments']> {
    if (this.writing) this.cut();
    await Promise.all(this.inFlight);
    if (this.failure !== undefined) throw this.failure.error;
    return this.segments;
  }

  /** Waits for the writes still in flight, whatever their outcome (nothing is left running). */
  async settle(): Promise<void> {
    await Promise.allSettled(this.inFlight);
  }

  private cut(): void {
    if (this.texts.length === 0) return;
    const firstChunk = this.nextChunk;
    const chunks = Math.ceil(this.texts.length / this.chunkSize);
    const index = this.segments.length;
    this.segments.push({ firstChunk, chunks });
    this.nextChunk += chunks;
    const text = `[${this.texts.join(',')}]`;
    this.texts = [];
    this.chars = 0;
    const write: Promise<void> = this.store.writeSegment(this.jobId, index, text, this.signal).then(
      () => void this.inFlight.delete(write),
      (error: unknown) => {
        this.failure ??= { error };
        this.inFlight.delete(write);
      },
    );
    this.inFlight.add(write);
  }
}
