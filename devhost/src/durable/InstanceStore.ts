/**
 * Orchestration instances in blob storage: one JSON blob per instance holding its status, input,
 * output, custom status and the current execution's history, with a few fields mirrored into blob
 * metadata for listing.
 *
 * Guarantees: every write is conditional (create: the blob must not exist or must still have the
 * etag that was read; save: the etag that was read), so two host processes never overwrite each
 * other's progress: the loser gets `conflict` and redoes its work from a fresh read. Reads return
 * the etag to write back with.
 * Listing costs what the extension's Instances table query costs, a request per page: each blob's
 * metadata carries the instance's status summary (what a list answers: status, times, input,
 * output, custom status) when it fits in `SUMMARY_METADATA_MAX` characters, written with the blob in
 * the same request, so a page is served from the listing alone; an instance whose summary does not
 * fit (a large input or output) is read. A read per match would make an app that lists its Running
 * instances every few seconds (the coordinator's stall check) pay per instance and per second.
 * Not guaranteed: listing is a scan of the container, fine for a development host, not for millions
 * of instances.
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
  readonly items: InstanceSummary[];
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

/** What a list of instances answers for each (the Durable HTTP API's status payload without history). */
export type InstanceSummary = Pick<
  InstanceState,
  'instanceId' | 'name' | 'runtimeStatus' | 'input' | 'output' | 'customStatus' | 'createdTime' | 'lastUpdatedTime'
>;

/** The longest summary (base64url of its JSON) kept in metadata: Azure allows 8 KiB of metadata per blob. */
export const SUMMARY_METADATA_MAX = 6_000;

function summaryOf(state: InstanceSummary): InstanceSummary {
  const { instanceId, name, runtimeStatus, input, output, customStatus, createdTime, lastUpdatedTime } = state;
  return { instanceId, name, runtimeStatus, input, output, customStatus, createdTime, lastUpdatedTime };
}

function metadataFor(state: InstanceState): Record<string, string> {
  const summary = Buffer.from(JSON.stringify(summaryOf(state)), 'utf8').toString('base64url');
  return {
    runtimestatus: state.runtimeStatus,
    createdtime: state.createdTime,
    name: encodeURIComponent(state.name),
    ...(summary.length <= SUMMARY_METADATA_MAX ? { summary } : {}),
  };
}

/** The summary a listing carries, when its blob's metadata has one that parses. */
function summaryFrom(metadata: Record<string, string> | undefined): InstanceSummary | undefined {
  const encoded = metadata?.summary;
  if (encoded === undefined) return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as Partial<InstanceSummary>;
    return typeof parsed.instanceId === 'string' && typeof parsed.runtimeStatus === 'string' ? (parsed as InstanceSummary) : undefined;
  } catch {
    return undefined;
  }
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
    const matching = page.segment.blobItems.filter((item) => matchesMetadata(item.metadata, filter));
    // In listing order: a summary from the metadata, or (too large for it) the blob read.
    const items: (InstanceSummary | undefined)[] = matching.map((item) => summaryFrom(item.metadata));
    const unread = matching.flatMap((item, i) => (items[i] === undefined ? [{ i, name: item.name }] : []));
    for (let k = 0; k < unread.length; k += READ_CONCURRENCY) {
      const batch = unread.slice(k, k + READ_CONCURRENCY);
      const read = await Promise.all(batch.map(({ name }) => this.read(instanceIdFromBlobName(name))));
      batch.forEach(({ i }, j) => {
        const stored = read[j];
        // Gone since the listing, or changed so that it no longer matches: left out.
        items[i] = stored !== undefined && matchesMetadata(metadataFor(stored.state), filter) ? summaryOf(stored.state) : undefined;
      });
    }
    const found = items.filter((item): item is InstanceSummary => item !== undefined);
    const next = page.continuationToken;
    return next === undefined || next === '' ? { items: found } : { items: found, continuationToken: next };
  }

  /** Every instance matching `filter` (all pages). */
  async listAll(filter: InstanceFilter): Promise<InstanceSummary[]> {
    const all: InstanceSummary[] = [];
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
