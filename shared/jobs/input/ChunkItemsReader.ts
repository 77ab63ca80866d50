/**
 * Reads chunks' items back from a job's staged input (see InputStager): the manifest once per job,
 * then only the segments that hold the chunks asked for, keeping the last few segments read.
 *
 * Guarantees: chunk n is items [n*chunkSize, (n+1)*chunkSize) of the job (the last chunk shorter),
 * exactly as staged; a missing manifest or segment, a chunk outside the job, or a segment whose
 * length disagrees with the manifest is an Error naming the job and the blob (never a short chunk).
 * Concurrent requests for one segment share one read. Each chunk's array is new, but its items
 * (objects and arrays) are the cached segment's: callers must not modify them.
 * Not guaranteed: a manifest cached for a job stays cached after the job's blobs are purged.
 */
import { type Json } from '../../worktypes/WorkType';
import { type InputManifest, type InputStore, manifestBlobName, segmentBlobName } from './InputStore';

/** Manifests are a few hundred bytes; keep this many jobs' worth. */
const CACHED_MANIFESTS = 256;
const DEFAULT_CACHED_SEGMENTS = 4;

export class ChunkItemsReader {
  private readonly cachedSegments: number;
  private readonly manifests = new Map<string, Promise<InputManifest>>();
  private readonly segments = new Map<string, Promise<Json[]>>();

  constructor(
    private readonly store: InputStore,
    options: { cachedSegments?: number } = {},
  ) {
    this.cachedSegments = Math.max(1, options.cachedSegments ?? DEFAULT_CACHED_SEGMENTS);
  }

  /** Each asked-for chunk's items, by chunk number. */
  async items(jobId: string, chunks: readonly number[], signal?: AbortSignal): Promise<Map<number, Json[]>> {
    const manifest = await this.manifest(jobId, signal);
    const bySegment = new Map<number, number[]>();
    for (const chunk of chunks) {
      if (!Number.isSafeInteger(chunk) || chunk < 0 || chunk >= manifest.chunkCount) {
        throw new Error(`Job ${jobId} has no chunk ${chunk}: its input has ${manifest.chunkCount} chunks (${manifestBlobName(jobId)})`);
      }
      const segment = segmentOf(manifest, chunk);
      if (segment === undefined) {
        throw new Error(`Job ${jobId}'s input manifest (${manifestBlobName(jobId)}) places chunk ${chunk} in no segment`);
      }
      const list = bySegment.get(segment);
      if (list === undefined) bySegment.set(segment, [chunk]);
      else list.push(chunk);
    }
    const out = new Map<number, Json[]>();
    // Segments one after another: a window of chunks spans one or two, and each is ~1 MiB parsed.
    for (const [index, segmentChunks] of bySegment) {
      const items = await this.segment(jobId, index, manifest, signal);
      const { firstChunk } = manifest.segments[index] ?? { firstChunk: 0 };
      for (const chunk of segmentChunks) {
        const start = (chunk - firstChunk) * manifest.chunkSize;
        const expected = Math.min(manifest.chunkSize, manifest.itemCount - chunk * manifest.chunkSize);
        const slice = items.slice(start, start + manifest.chunkSize);
        if (slice.length !== expected) {
          const name = segmentBlobName(jobId, index);
          throw new Error(`Input segment ${name} holds ${items.length} items, too few for chunk ${chunk} (${expected} expected)`);
        }
        out.set(chunk, slice);
      }
    }
    return out;
  }

  private manifest(jobId: string, signal?: AbortSignal): Promise<InputManifest> {
    const cached = this.manifests.get(jobId);
    if (cached !== undefined) return cached;
    const read = this.store.readManifest(jobId, signal).then((manifest) => {
      if (manifest === undefined) throw new Error(`Job ${jobId} has no staged input: ${manifestBlobName(jobId)} does not exist`);
      return manifest;
    });
    remember(this.manifests, jobId, read, CACHED_MANIFESTS);
    return read;
  }

  private segment(jobId: string, index: number, manifest: InputManifest, signal?: AbortSignal): Promise<Json[]> {
    const key = `${jobId}/${index}`;
    const cached = this.segments.get(key);
    if (cached !== undefined) {
      // Most recently used last.
      this.segments.delete(key);
      this.segments.set(key, cached);
      return cached;
    }
    const read = this.store.readSegment(jobId, index, signal).then((items) => {
      if (items === undefined) {
        const name = segmentBlobName(jobId, index);
        throw new Error(`Job ${jobId}'s input segment ${name} does not exist (its manifest names ${manifest.segments.length})`);
      }
      return items;
    });
    remember(this.segments, key, read, this.cachedSegments);
    return read;
  }
}

/** Caches a read, evicting the least recently used; a failed read is forgotten so the next call retries. */
function remember<T>(cache: Map<string, Promise<T>>, key: string, read: Promise<T>, limit: number): void {
  cache.set(key, read);
  read.catch(() => {
    if (cache.get(key) === read) cache.delete(key);
  });
  while (cache.size > limit) {
    const oldest = cache.keys().next().value;
    if (oldest === undefined) break;
    cache.delete(oldest);
  }
}

/** The index of the segment holding `chunk` (segments are in chunk order), by binary search. */
function segmentOf(manifest: InputManifest, chunk: number): number | undefined {
  const segments = manifest.segments;
  let lo = 0;
  let hi = segments.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const s = segments[mid];
    if (s === undefined) return undefined;
    if (chunk < s.firstChunk) hi = mid - 1;
    else if (chunk >= s.firstChunk + s.chunks) lo = mid + 1;
    else return mid;
  }
  return undefined;
}
