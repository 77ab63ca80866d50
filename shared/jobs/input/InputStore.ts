/**
 * Where a job's staged input lives: the user's items blob (read as a stream) and the segments the
 * planner cuts it into, in the results container:
 *
 *   jobs/<jobId>/input/<index, 5 digits>.json   a JSON array: the items of whole chunks
 *                                                [firstChunk, firstChunk + chunks)
 *   jobs/<jobId>/input/manifest.json             the segments' layout, written after every segment
 *
 * Guarantees: job ids are checked (`isValidJobId`) before they become blob names; an items blob
 * that does not exist is `ITEMS_BLOB_NOT_FOUND`, one larger than `JOB_LIMITS.maxItemsBlobBytes` is
 * `ITEMS_BLOB_INVALID`, decided from its properties before any byte of it is read; the stream is
 * the version whose size was checked (the download is conditional on its etag). Writes overwrite,
 * so staging a job again rewrites the same blobs. A missing segment or manifest reads as undefined.
 * Not guaranteed: that a manifest's segments all still exist (a purge may be under way); readers
 * report what is missing.
 */
import { type BlobServiceClient, type ContainerClient } from '@azure/storage-blob';

import { downloadWhole } from '../../storage/blobText';
import { type Json } from '../../worktypes/WorkType';
import { JobError } from '../JobError';
import { isValidJobId } from '../jobIds';
import { JOB_LIMITS } from '../jobLimits';
import { isStatus } from '../store/JobStore';

export interface InputManifest {
  readonly v: 1;
  readonly jobId: string;
  readonly itemCount: number;
  readonly chunkSize: number;
  readonly chunkCount: number;
  readonly segments: ReadonlyArray<{ readonly firstChunk: number; readonly chunks: number }>;
  /** The start (JobRun.startId) whose plan staged it. */
  readonly startId: string;
  /**
   * Set when the leader that took the submission staged it and sends the job's first window itself
   * (JobActivities.prestage): the time (ISO) the plan counts that window as sent.
   */
  readonly firstWindowAt?: string;
}

/** An opened items blob: its size in bytes and its content as a stream of pieces. */
export interface ItemsBlobStream {
  readonly bytes: number;
  readonly stream: AsyncIterable<Buffer | string>;
}

export interface InputStore {
  /** The user's items blob: its size and its bytes as a stream; JobError ITEMS_BLOB_NOT_FOUND when missing. */
  openItemsBlob(container: string, blob: string, signal?: AbortSignal): Promise<{ bytes: number; stream: AsyncIterable<Buffer | string> }>;
  writeSegment(jobId: string, index: number, itemsJsonArrayText: string, signal?: AbortSignal): Promise<void>;
  readSegment(jobId: string, index: number, signal?: AbortSignal): Promise<Json[] | undefined>;
  writeManifest(manifest: InputManifest, signal?: AbortSignal): Promise<void>;
  readManifest(jobId: string, signal?: AbortSignal): Promise<InputManifest | undefined>;
}

const SEGMENT_DIGITS = 5;

function checkJobId(jobId: string): string {
  if (!isValidJobId(jobId)) throw new Error(`Refusing a blob path for invalid job id ${JSON.stringify(jobId).slice(0, 80)}`);
  return jobId;
}

export function segmentBlobName(jobId: string, index: number): string {
  if (!Number.isSafeInteger(index) || index < 0) throw new Error(`Refusing a segment blob name for index ${index}`);
  return `jobs/${checkJobId(jobId)}/input/${String(index).padStart(SEGMENT_DIGITS, '0')}.json`;
}

export function manifestBlobName(jobId: string): string {
  return `jobs/${checkJobId(jobId)}/input/manifest.json`;
}

export function itemsBlobNotFound(container: string, blob: string): JobError {
  return new JobError('ITEMS_BLOB_NOT_FOUND', `itemsBlob ${container}/${blob} does not exist.`);
}

/** The size rule for an items blob, with the planner's wording. */
export function checkItemsBlobSize(container: string, blob: string, bytes: number): void {
  if (bytes > JOB_LIMITS.maxItemsBlobBytes) {
    const limit = JOB_LIMITS.maxItemsBlobBytes;
    throw new JobError('ITEMS_BLOB_INVALID', `itemsBlob ${container}/${blob} is ${bytes} bytes; the limit is ${limit}.`);
  }
}

/** A manifest read back: the shape checked, since a reader slices items by it. */
export function parseManifest(value: unknown, jobId: string, blobName: string): InputManifest {
  const m = value as Partial<InputManifest> | null;
  const nat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
  const ok =
    m !== null &&
    typeof m === 'object' &&
    m.v === 1 &&
    m.jobId === jobId &&
    nat(m.itemCount) &&
    nat(m.chunkSize) &&
    m.chunkSize > 0 &&
    nat(m.chunkCount) &&
    typeof m.startId === 'string' &&
    (m.firstWindowAt === undefined || (typeof m.firstWindowAt === 'string' && Number.isFinite(Date.parse(m.firstWindowAt)))) &&
    Array.isArray(m.segments) &&
    (m.segments as unknown[]).every((s) => {
      const segment = s as Record<string, unknown> | null;
      return segment !== null && typeof segment === 'object' && nat(segment.firstChunk) && nat(segment.chunks);
    });
  if (!ok) throw new Error(`Input manifest ${blobName} is not a manifest of job ${jobId}`);
  return m as InputManifest;
}

/** The blob implementation: the user's container for items blobs, the results container for the rest. */
export class BlobInputStore implements InputStore {
  readonly container: ContainerClient;

  constructor(
    private readonly blobs: BlobServiceClient,
    resultsContainerName: string,
  ) {
    this.container = blobs.getContainerClient(resultsContainerName);
  }

  async openItemsBlob(container: string, blob: string, signal?: AbortSignal): Promise<ItemsBlobStream> {
    const client = this.blobs.getContainerClient(container).getBlobClient(blob);
    // The download is pinned to the version whose size was checked; a blob replaced in between is checked again.
    for (let attempt = 1; ; attempt++) {
      try {
        const props = await client.getProperties({ abortSignal: signal });
        const bytes = props.contentLength ?? 0;
        checkItemsBlobSize(container, blob, bytes);
        const response = await client.download(0, undefined, { abortSignal: signal, conditions: { ifMatch: props.etag } });
        const body = response.readableStreamBody;
        if (body === undefined) throw new Error(`itemsBlob ${container}/${blob}: the download has no body`);
        return { bytes, stream: body as AsyncIterable<Buffer | string> };
      } catch (err) {
        if (isStatus(err, 404)) throw itemsBlobNotFound(container, blob);
        if (isStatus(err, 412) && attempt < 3) continue;
        throw err;
      }
    }
  }

  async writeSegment(jobId: string, index: number, itemsJsonArrayText: string, signal?: AbortSignal): Promise<void> {
    await this.put(segmentBlobName(jobId, index), itemsJsonArrayText, signal);
  }

  async readSegment(jobId: string, index: number, signal?: AbortSignal): Promise<Json[] | undefined> {
    const name = segmentBlobName(jobId, index);
    const text = await this.get(name, signal);
    if (text === undefined) return undefined;
    const value = JSON.parse(text) as unknown;
    if (!Array.isArray(value)) throw new Error(`Input segment ${name} is not a JSON array`);
    return value as Json[];
  }

  async writeManifest(manifest: InputManifest, signal?: AbortSignal): Promise<void> {
    await this.put(manifestBlobName(manifest.jobId), JSON.stringify(manifest), signal);
  }

  async readManifest(jobId: string, signal?: AbortSignal): Promise<InputManifest | undefined> {
    const name = manifestBlobName(jobId);
    const text = await this.get(name, signal);
    return text === undefined ? undefined : parseManifest(JSON.parse(text), jobId, name);
  }

  private async put(name: string, text: string, signal?: AbortSignal): Promise<void> {
    const body = Buffer.from(text, 'utf8');
    const headers = { blobContentType: 'application/json' };
    const upload = () => this.container.getBlockBlobClient(name).uploadData(body, { blobHTTPHeaders: headers, abortSignal: signal });
    try {
      await upload();
    } catch (err) {
      // The results container is created by the job store; a fresh account may not have it yet.
      if (!isStatus(err, 404)) throw err;
      await this.container.createIfNotExists({ abortSignal: signal });
      await upload();
    }
  }

  private async get(name: string, signal?: AbortSignal): Promise<string | undefined> {
    try {
      return (await downloadWhole(this.container.getBlobClient(name), signal)).body.toString('utf8');
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }
}

/** The in-memory twin, for unit tests: same names, same refusals, items blobs served in small pieces. */
export class MemoryInputStore implements InputStore {
  /** Items blobs by `container/blob`. */
  readonly itemsBlobs = new Map<string, Buffer>();
  /** Staged blobs by name (the blob implementation's names), as written. */
  readonly blobs = new Map<string, string>();
  readonly writes: string[] = [];
  /** Segment reads, by blob name, in order. */
  readonly segmentReads: string[] = [];

  /** `pieceBytes`: the size of the pieces an items blob is streamed in (small, to cross every boundary). */
  /** Bytes of items blobs handed out so far (a test's measure of how far a staging read). */
  bytesRead = 0;

  constructor(private readonly pieceBytes = 64 * 1024) {}

  putItemsBlob(container: string, blob: string, content: string | Buffer): void {
    this.itemsBlobs.set(`${container}/${blob}`, typeof content === 'string' ? Buffer.from(content, 'utf8') : content);
  }

  async openItemsBlob(container: string, blob: string, signal?: AbortSignal): Promise<ItemsBlobStream> {
    await Promise.resolve();
    signal?.throwIfAborted();
    const stored = this.itemsBlobs.get(`${container}/${blob}`);
    if (stored === undefined) throw itemsBlobNotFound(container, blob);
    const bytes = stored;
    checkItemsBlobSize(container, blob, bytes.length);
    const pieceBytes = this.pieceBytes;
    const read = (n: number): void => void (this.bytesRead += n);
    async function* pieces(): AsyncGenerator<Buffer> {
      for (let at = 0; at < bytes.length; at += pieceBytes) {
        signal?.throwIfAborted();
        await Promise.resolve();
        const piece = bytes.subarray(at, at + pieceBytes);
        read(piece.length);
        yield piece;
      }
    }
    return { bytes: bytes.length, stream: pieces() };
  }

  async writeSegment(jobId: string, index: number, itemsJsonArrayText: string, signal?: AbortSignal): Promise<void> {
    const name = segmentBlobName(jobId, index);
    await Promise.resolve();
    signal?.throwIfAborted();
    this.blobs.set(name, itemsJsonArrayText);
    this.writes.push(name);
  }

  async readSegment(jobId: string, index: number, signal?: AbortSignal): Promise<Json[] | undefined> {
    const name = segmentBlobName(jobId, index);
    this.segmentReads.push(name);
    const text = this.blobs.get(name);
    await Promise.resolve();
    signal?.throwIfAborted();
    return text === undefined ? undefined : (JSON.parse(text) as Json[]);
  }

  async writeManifest(manifest: InputManifest, signal?: AbortSignal): Promise<void> {
    const name = manifestBlobName(manifest.jobId);
    await Promise.resolve();
    signal?.throwIfAborted();
    this.blobs.set(name, JSON.stringify(manifest));
    this.writes.push(name);
  }

  async readManifest(jobId: string, signal?: AbortSignal): Promise<InputManifest | undefined> {
    const name = manifestBlobName(jobId);
    const text = this.blobs.get(name);
    await Promise.resolve();
    signal?.throwIfAborted();
    return text === undefined ? undefined : parseManifest(JSON.parse(text), jobId, name);
  }
}
