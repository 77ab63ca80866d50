/**
 * JSON documents in one blob container, with the conditional writes the pipeline's guarantees rest
 * on: create once (`ifNoneMatch`: a second writer learns `exists`), replace the version read
 * (`ifMatch`: a writer that read an older version learns `conflict`). A missing container is
 * created on the first write that needs it; a missing blob reads as undefined.
 */
import { type ContainerClient, RestError } from '@azure/storage-blob';

import { downloadWhole } from '../../storage/blobText';
import { isValidJobId } from '../jobIds';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { type Versioned } from './jobDocuments';

export interface PutOptions {
  readonly ifNoneMatch?: boolean;
  readonly ifMatch?: string;
  readonly metadata?: Record<string, string>;
  readonly signal?: AbortSignal | undefined;
}

/** A job id about to become part of a blob name: callers validated it, this checks again. */
export function checkJobId(jobId: string): string {
  if (!isValidJobId(jobId)) throw new Error(`Refusing a blob path for invalid job id ${JSON.stringify(jobId).slice(0, 80)}`);
  return jobId;
}

export function isStatus(err: unknown, ...codes: number[]): boolean {
  return err instanceof RestError && err.statusCode !== undefined && codes.includes(err.statusCode);
}

function jsonBody(value: unknown): Buffer {
  return Buffer.from(JSON.stringify(value), 'utf8');
}

/** A blob as a listing shows it. */
export interface ListedDocument {
  readonly name: string;
  readonly metadata: Record<string, string>;
  readonly lastModified: Date;
}

/**
 * The narrow view of one container the job store writes through: the Azure container
 * (`BlobDocuments`) or an in-memory twin for unit tests (test/unit/jobs/support/MemoryDocuments.ts),
 * both held to the same cases by test/integration/jobs/store/documents.test.ts.
 */
export interface JsonDocuments {
  ensureContainer(signal?: AbortSignal): Promise<unknown>;
  put(name: string, value: unknown, options?: Omit<PutOptions, 'ifMatch'>): Promise<'written' | 'exists'>;
  putVersioned(name: string, value: unknown, options?: PutOptions): Promise<{ etag: string } | 'exists' | 'conflict'>;
  getVersioned<T>(name: string, signal?: AbortSignal): Promise<Versioned<T> | undefined>;
  get<T>(name: string, signal?: AbortSignal): Promise<T | undefined>;
  getText(name: string, signal?: AbortSignal): Promise<string | undefined>;
  exists(name: string, signal?: AbortSignal): Promise<boolean>;
  /** The document's metadata (one read of its properties, no body), or undefined when it does not exist. */
  metadata(name: string, signal?: AbortSignal): Promise<Record<string, string> | undefined>;
  setMetadata(name: string, metadata: Record<string, string>, signal?: AbortSignal): Promise<void>;
  delete(name: string, signal?: AbortSignal): Promise<boolean>;
  list(prefix: string, includeMetadata: boolean, signal?: AbortSignal): AsyncIterable<ListedDocument>;
}

export class BlobDocuments implements JsonDocuments {
  constructor(private readonly container: ContainerClient) {}

  /** Creates the container once; a concurrent create (409) is success. */
  readonly ensureContainer = onceUntilSuccess((signal) => this.container.createIfNotExists({ abortSignal: signal }));

  /** One upload of a JSON body (no retry). */
  private upload(
    name: string,
    body: Buffer,
    conditions: { ifNoneMatch: string } | { ifMatch: string } | undefined,
    metadata: Record<string, string> | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ etag?: string }> {
    return this.container.getBlockBlobClient(name).uploadData(body, {
      blobHTTPHeaders: { blobContentType: 'application/json' },
      ...(metadata === undefined ? {} : { metadata }),
      ...(conditions === undefined ? {} : { conditions }),
      abortSignal: signal,
    });
  }

  async put(name: string, value: unknown, options: Omit<PutOptions, 'ifMatch'> = {}): Promise<'written' | 'exists'> {
    const outcome = await this.putVersioned(name, value, options);
    return typeof outcome === 'object' ? 'written' : 'exists';
  }

  /** Writes a JSON blob; with `ifNoneMatch` (create once) or `ifMatch` (replace that version) it may lose. */
  async putVersioned(name: string, value: unknown, options: PutOptions = {}): Promise<{ etag: string } | 'exists' | 'conflict'> {
    const body = jsonBody(value);
    const conditions =
      options.ifNoneMatch === true ? { ifNoneMatch: '*' } : options.ifMatch === undefined ? undefined : { ifMatch: options.ifMatch };
    const upload = () => this.upload(name, body, conditions, options.metadata, options.signal);
    // 409 (BlobAlreadyExists) or 412: someone wrote it first (or since our read); that write is the one that counts.
    const lost = (err: unknown): 'exists' | 'conflict' | undefined =>
      conditions === undefined || !isStatus(err, 409, 412) ? undefined : options.ifNoneMatch === true ? 'exists' : 'conflict';
    try {
      return { etag: (await upload()).etag ?? '' };
    } catch (err) {
      const outcome = lost(err);
      if (outcome !== undefined) return outcome;
      if (!isStatus(err, 404)) throw err;
      // The container is missing, or (for a replace) the blob is gone: a lost race, not something to create.
      if (options.ifMatch !== undefined) return 'conflict';
      await this.ensureContainer(options.signal);
      try {
        return { etag: (await upload()).etag ?? '' };
      } catch (retryErr) {
        const retried = lost(retryErr);
        if (retried !== undefined) return retried;
        throw retryErr;
      }
    }
  }

  async getVersioned<T>(name: string, signal?: AbortSignal): Promise<Versioned<T> | undefined> {
    try {
      const { body, etag } = await downloadWhole(this.container.getBlobClient(name), signal);
      return { value: JSON.parse(body.toString('utf8')) as T, etag };
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  async get<T>(name: string, signal?: AbortSignal): Promise<T | undefined> {
    try {
      return JSON.parse((await downloadWhole(this.container.getBlobClient(name), signal)).body.toString('utf8')) as T;
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  async getText(name: string, signal?: AbortSignal): Promise<string | undefined> {
    try {
      return (await downloadWhole(this.container.getBlobClient(name), signal)).body.toString('utf8');
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  async exists(name: string, signal?: AbortSignal): Promise<boolean> {
    return this.container.getBlobClient(name).exists({ abortSignal: signal });
  }

  async metadata(name: string, signal?: AbortSignal): Promise<Record<string, string> | undefined> {
    try {
      return (await this.container.getBlobClient(name).getProperties({ abortSignal: signal })).metadata ?? {};
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  /** Replaces the blob's metadata (one write, no body). */
  async setMetadata(name: string, metadata: Record<string, string>, signal?: AbortSignal): Promise<void> {
    await this.container.getBlockBlobClient(name).setMetadata(metadata, { abortSignal: signal });
  }

  /** Deletes the blob if it is there: whether it was (a missing container holds nothing to delete). */
  async delete(name: string, signal?: AbortSignal): Promise<boolean> {
    try {
      return (await this.container.getBlobClient(name).deleteIfExists({ abortSignal: signal })).succeeded;
    } catch (err) {
      // deleteIfExists answers false for a missing blob only; ContainerNotFound is the same absence.
      if (isStatus(err, 404)) return false;
      throw err;
    }
  }

  /** The blobs under a prefix (with their metadata when asked); a missing container lists nothing. */
  async *list(prefix: string, includeMetadata: boolean, signal?: AbortSignal): AsyncGenerator<ListedDocument> {
    try {
      for await (const blob of this.container.listBlobsFlat({ prefix, includeMetadata, abortSignal: signal })) {
        yield { name: blob.name, metadata: blob.metadata ?? {}, lastModified: blob.properties.lastModified };
      }
    } catch (err) {
      if (!isStatus(err, 404)) throw err;
    }
  }
}
