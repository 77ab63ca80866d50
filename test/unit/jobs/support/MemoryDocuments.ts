/**
 * The in-memory twin of one blob container as the job store sees it (store/BlobDocuments.ts,
 * `JsonDocuments`): create-once writes that lose with `exists`, replaces of the version read that
 * lose with `conflict`, etags that change on every write, metadata, listings in name order, and a
 * missing blob read as undefined. test/integration/jobs/store/documents.test.ts holds it and the
 * Azure container to the same cases. `calls` counts requests by kind, as a counting proxy would.
 */
import { RestError } from '@azure/storage-blob';

import { type JsonDocuments, type ListedDocument, type PutOptions } from '../../../../shared/jobs/store/BlobDocuments';
import { type Versioned } from '../../../../shared/jobs/store/jobDocuments';

interface Stored {
  readonly text: string;
  etag: string;
  metadata: Record<string, string>;
  lastModified: Date;
}

export class MemoryDocuments implements JsonDocuments {
  readonly blobs = new Map<string, Stored>();
  readonly calls = new Map<string, number>();
  #version = 0;

  constructor(private readonly now: () => number = Date.now) {}

  private count(kind: string): void {
    this.calls.set(kind, (this.calls.get(kind) ?? 0) + 1);
  }

  private nextEtag(): string {
    this.#version += 1;
    return `"0x${this.#version.toString(16)}"`;
  }

  ensureContainer(): Promise<unknown> {
    return Promise.resolve();
  }

  async put(name: string, value: unknown, options: Omit<PutOptions, 'ifMatch'> = {}): Promise<'written' | 'exists'> {
    const outcome = await this.putVersioned(name, value, options);
    return typeof outcome === 'object' ? 'written' : 'exists';
  }

  putVersioned(name: string, value: unknown, options: PutOptions = {}): Promise<{ etag: string } | 'exists' | 'conflict'> {
    this.count('put');
    const current = this.blobs.get(name);
    if (options.ifNoneMatch === true && current !== undefined) return Promise.resolve('exists');
    if (options.ifMatch !== undefined && current?.etag !== options.ifMatch) return Promise.resolve('conflict');
    const etag = this.nextEtag();
    this.blobs.set(name, { text: JSON.stringify(value), etag, metadata: { ...(options.metadata ?? {}) }, lastModified: new Date(this.now()) });
    return Promise.resolve({ etag });
  }

  getVersioned<T>(name: string): Promise<Versioned<T> | undefined> {
    this.count('get');
    const stored = this.blobs.get(name);
    return Promise.resolve(stored === undefined ? undefined : { value: JSON.parse(stored.text) as T, etag: stored.etag });
  }

  async get<T>(name: string): Promise<T | undefined> {
    return (await this.getVersioned<T>(name))?.value;
  }

  getText(name: string): Promise<string | undefined> {
    this.count('get');
    return Promise.resolve(this.blobs.get(name)?.text);
  }

  exists(name: string): Promise<boolean> {
    this.count('exists');
    return Promise.resolve(this.blobs.has(name));
  }

  metadata(name: string): Promise<Record<string, string> | undefined> {
    this.count('metadata');
    const stored = this.blobs.get(name);
    return Promise.resolve(stored === undefined ? undefined : { ...stored.metadata });
  }

  setMetadata(name: string, metadata: Record<string, string>): Promise<void> {
    this.count('setMetadata');
    const stored = this.blobs.get(name);
    if (stored === undefined) return Promise.reject(new RestError('The specified blob does not exist.', { statusCode: 404, code: 'BlobNotFound' }));
    stored.metadata = { ...metadata };
    stored.etag = this.nextEtag();
    stored.lastModified = new Date(this.now());
    return Promise.resolve();
  }

  delete(name: string): Promise<boolean> {
    this.count('delete');
    return Promise.resolve(this.blobs.delete(name));
  }

  async *list(prefix: string, includeMetadata: boolean): AsyncGenerator<ListedDocument> {
    this.count('list');
    const names = [...this.blobs.keys()].filter((n) => n.startsWith(prefix)).sort();
    for (const name of names) {
      const stored = this.blobs.get(name);
      if (stored === undefined) continue;
      yield { name, metadata: includeMetadata ? { ...stored.metadata } : {}, lastModified: stored.lastModified };
      await Promise.resolve();
    }
  }
}
