/**
 * Orchestration instances in blob storage: one JSON blob per instance holding its status, input,
 * output, custom status and the current execution's history, with a few fields mirrored into blob
 * metadata for listing.
 *
 * Guarantees: every write is conditional (create: the blob must not exist or must still have the
 * etag that was read; save: the etag that was read), so two host processes never overwrite each
 * other's progress: the loser gets `conflict` and redoes its work from a fresh read. Reads return
 * the etag to write back with.
 * Not guaranteed: listing is a scan of the container (filtered on metadata, then each match read),
 * fine for a development host, not for millions of instances.
 */
import { type BlobServiceClient, type ContainerClient, RestError } from '@azure/storage-blob';

import { blobServiceClient, type StorageConnection } from '../storage';
import { type HistoryEvent, type ParentInstanceRef, type RuntimeStatus } from './HistoryEvent';
import { instanceBlobName, instanceIdFromBlobName, type TaskHubNames } from './taskHubNames';

export interface InstanceState {
  readonly schema: 1;
  instanceId: string;
  /** Orchestrator function name. */
  name: string;
  executionId: string;
  runtimeStatus: RuntimeStatus;
  /** JSON text of the current execution's input (null for none). */
  input: string | null;
  /** JSON text of the output; for Failed and Terminated the reason, as the extension stores it. */
  output: string | null;
  /** JSON text of the custom status. */
  customStatus: string | null;
  /** The current execution's ExecutionStarted time: it restarts at every continue-as-new, as on Azure Storage. */
  createdTime: string;
  lastUpdatedTime: string;
  parent: ParentInstanceRef | null;
  /** The current execution's history, in the order the extension writes it. */
  history: HistoryEvent[];
  /** Ids of the most recent queue messages applied to this instance (duplicate-delivery detection). */
  appliedMessageIds: string[];
  /** Continue-as-new generation of the current execution (restarts of a finished id count on, as in the provider). */
  generation: number;
  /** The orchestration version given at start (`startNew(..., { version })`), '' for none. */
  version?: string;
}

/** A conditional write: the new etag, or `conflict` when the condition failed. */
export type WriteResult = { readonly etag: string } | 'conflict';

export interface StoredInstance {
  readonly state: InstanceState;
  readonly etag: string;
}

export interface InstanceFilter {
  readonly createdTimeFrom?: Date;
  readonly createdTimeTo?: Date;
  readonly runtimeStatus?: readonly RuntimeStatus[];
  readonly instanceIdPrefix?: string;
}

export interface InstancePage {
  readonly items: InstanceState[];
  readonly continuationToken?: string;
}

const READ_CONCURRENCY = 8;

function isStatus(err: unknown, ...codes: number[]): boolean {
  return err instanceof RestError && err.statusCode !== undefined && codes.includes(err.statusCode);
}

async function readAll(stream: NodeJS.ReadableStream | undefined): Promise<Buffer> {
  if (stream === undefined) return Buffer.alloc(0);
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks);
}

function metadataFor(state: InstanceState): Record<string, string> {
  return {
    runtimestatus: state.runtimeStatus,
    createdtime: state.createdTime,
    name: encodeURIComponent(state.name),
  };
}

function matchesMetadata(metadata: Record<string, string> | undefined, filter: InstanceFilter): boolean {
  const status = metadata?.runtimestatus;
  const created = metadata?.createdtime === undefined ? NaN : Date.parse(metadata.createdtime);
  if (filter.runtimeStatus !== undefined && filter.runtimeStatus.length > 0 && (status === undefined || !filter.runtimeStatus.includes(status as RuntimeStatus))) return false;
  if (filter.createdTimeFrom !== undefined && !(created >= filter.createdTimeFrom.getTime())) return false;
  if (filter.createdTimeTo !== undefined && !(created <= filter.createdTimeTo.getTime())) return false;
  return true;
}

export class InstanceStore {
  readonly #container: ContainerClient;
  #ready: Promise<void> | undefined;

  constructor(storage: StorageConnection, names: TaskHubNames, service: BlobServiceClient = blobServiceClient(storage)) {
    this.#container = service.getContainerClient(names.instancesContainer);
  }

  /** Creates the container once per process; concurrent creators are fine. */
  ensureReady(): Promise<void> {
    this.#ready ??= this.#container
      .createIfNotExists()
      .then(() => undefined)
      .catch((err: unknown) => {
        this.#ready = undefined;
        throw err;
      });
    return this.#ready;
  }

  async read(instanceId: string): Promise<StoredInstance | undefined> {
    await this.ensureReady();
    const blob = this.#container.getBlockBlobClient(instanceBlobName(instanceId));
    try {
      // One GET returns the content and the etag of that same version.
      const response = await blob.download(0);
      const body = await readAll(response.readableStreamBody);
      if (response.etag === undefined) throw new Error(`Blob ${blob.name} came back without an etag.`);
      return { state: JSON.parse(body.toString('utf8')) as InstanceState, etag: response.etag };
    } catch (err) {
      if (isStatus(err, 404)) return undefined;
      throw err;
    }
  }

  /**
   * Writes a new instance: when `replaceEtag` is given, only over that exact version (restarting a
   * finished instance id), otherwise only if no blob exists. Resolves `conflict` when that failed.
   */
  async create(state: InstanceState, replaceEtag?: string): Promise<WriteResult> {
    await this.ensureReady();
    return this.#write(state, replaceEtag === undefined ? { ifNoneMatch: '*' } : { ifMatch: replaceEtag });
  }

  /** Writes `state` over the version read with `etag`; `conflict` means someone else wrote first. */
  async save(state: InstanceState, etag: string): Promise<WriteResult> {
    return this.#write(state, { ifMatch: etag });
  }

  async #write(state: InstanceState, conditions: { ifMatch?: string; ifNoneMatch?: string }): Promise<WriteResult> {
    const body = JSON.stringify(state);
    const blob = this.#container.getBlockBlobClient(instanceBlobName(state.instanceId));
    try {
      const response = await blob.upload(body, Buffer.byteLength(body), {
        conditions,
        metadata: metadataFor(state),
        blobHTTPHeaders: { blobContentType: 'application/json' },
      });
      return { etag: response.etag ?? '' };
    } catch (err) {
      // 412: the etag moved (a concurrent writer won); 409: the blob already exists (If-None-Match: *).
      if (isStatus(err, 409, 412)) return 'conflict';
      throw err;
    }
  }

  /** Deletes the instance; false when it did not exist. */
  async delete(instanceId: string): Promise<boolean> {
    await this.ensureReady();
    const response = await this.#container.getBlockBlobClient(instanceBlobName(instanceId)).deleteIfExists();
    return response.succeeded;
  }

  /** One page of instances matching `filter`; pages follow the blob listing, so a page may hold fewer than `pageSize`. */
  async list(filter: InstanceFilter, pageSize: number, continuationToken?: string): Promise<InstancePage> {
    await this.ensureReady();
    const prefix = filter.instanceIdPrefix === undefined ? undefined : instanceBlobName(filter.instanceIdPrefix);
    const pages = this.#container
      .listBlobsFlat({ includeMetadata: true, ...(prefix === undefined ? {} : { prefix }) })
      .byPage({ maxPageSize: pageSize, ...(continuationToken === undefined ? {} : { continuationToken }) });
    const first = await pages.next();
    if (first.done === true) return { items: [] };
    const page = first.value;
    const names = page.segment.blobItems.filter((item) => matchesMetadata(item.metadata, filter)).map((item) => item.name);
    const items: InstanceState[] = [];
    for (let i = 0; i < names.length; i += READ_CONCURRENCY) {
      const batch = await Promise.all(names.slice(i, i + READ_CONCURRENCY).map((name) => this.read(instanceIdFromBlobName(name))));
      for (const stored of batch) if (stored !== undefined && matchesMetadata(metadataFor(stored.state), filter)) items.push(stored.state);
    }
    const next = page.continuationToken;
    return next === undefined || next === '' ? { items } : { items, continuationToken: next };
  }

  /** Every instance matching `filter` (all pages). */
  async listAll(filter: InstanceFilter): Promise<InstanceState[]> {
    const all: InstanceState[] = [];
    let token: string | undefined;
    do {
      const page = await this.list(filter, 100, token);
      all.push(...page.items);
      token = page.continuationToken;
    } while (token !== undefined);
    return all;
  }
}

/** A new instance as the start API and sub-orchestration creation write it: Pending, no history yet. */
export function newInstanceState(args: {
  instanceId: string;
  name: string;
  executionId: string;
  input: string | null;
  parent: ParentInstanceRef | null;
  now: Date;
  generation?: number;
}): InstanceState {
  const at = args.now.toISOString();
  return {
    schema: 1,
    instanceId: args.instanceId,
    name: args.name,
    executionId: args.executionId,
    runtimeStatus: 'Pending',
    input: args.input,
    output: null,
    customStatus: null,
    createdTime: at,
    lastUpdatedTime: at,
    parent: args.parent,
    history: [],
    appliedMessageIds: [],
    generation: args.generation ?? 0,
  };
}
