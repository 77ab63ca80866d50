/**
 * Reads the storage requests of every process to follow a leader starting a job, step by step, and
 * fires a fault at a chosen step of a chosen job: "pause whoever reads job X's orchestration for
 * the second time", "kill whoever sends the start message after writing job X's instance".
 * It also records every create-once write a leader makes (an orchestration instance, a job record),
 * which is what the checker times a stale leader's act by.
 *
 * The steps, as the intake and the development host's Durable backend make them today:
 * status-read (the intake's `getStatus`: GET <hub>-instances/job-X), record-read (GET
 * <results>/records/X.json), start-read (the backend's read inside `startNew`, the second GET of the
 * instance), start-message (the next message put on the instance's control queue: the backend sends
 * the start message before it writes the instance, as the Azure Storage provider does),
 * instance-write (PUT of the instance with If-None-Match: *), queue-delete (the next delete on the
 * jobs queue after that write; a job found already started is not followed to its delete). If that
 * layout changes, the watcher stops seeing steps and the run reports its step faults as not fired.
 *
 * On the extensions host (`host: 'extensions'`) the task hub is the Azure Storage provider's own, and
 * the Durable steps are the requests test/e2e/support/durableRequests.ts names for that layout (the
 * same predicates the end-to-end fault tests hold requests by): status-read and start-read are reads
 * of the instance's `<Hub>Instances` row (the extension's `getStatus`, then the read inside its
 * start), start-message is the ExecutionStarted message naming the instance on its control queue
 * (told apart by its body, which the proxy holds for these requests: `wantsBody`), instance-write the
 * insert of its Instances row (POST to the table, its PartitionKey the instance id: the create-once
 * write, answered 409 when the row exists). record-read and queue-delete are the app's own requests,
 * the same on both hosts.
 *
 * One process starts several jobs at once (the intake takes a batch a few at a time) and reads
 * other jobs' instances meanwhile (status requests read a record, then an instance, just as a start
 * does), so each process keeps its awaited steps in order, first come first matched, and a start
 * message is matched to an awaited job of its own partition only: another job's read never hides
 * the awaited one.
 */
import { AZURITE_ACCOUNT, DURABLE_TASK_DEFAULTS, partitionOf } from 'devhost/testing';

import { type E2EHost } from '../e2e/support/appHost';
import { type DurableRequests, durableRequests } from '../e2e/support/durableRequests';
import { type SniffedRequest } from '../support/httpRequestSniffer';
import { type ProxiedRequest as StorageRequest } from '../support/storageProxy';
import { type ProxiedRequest, type ProxiedResponse } from '../support/tcpProxy';
import { type ProcessRef, type StartStep, type StorageWrite } from './ChaosRecord';

export interface StorageNames {
  readonly taskHub: string;
  readonly resultsContainer: string;
  readonly jobsQueue: string;
  /** The task hub's control queues (host.json durableTask.storageProvider.partitionCount); 4 unless set. */
  readonly partitionCount?: number;
  /** Whose task-hub layout the Durable requests follow: the development host's (the default) or the real extension's. */
  readonly host?: E2EHost;
}

export type ServiceName = StorageRequest['service'];

type Classified =
  | { kind: 'instance-read' | 'instance-create' | 'record-read' | 'record-create'; jobId: string }
  /** `startOf`: whether it is that job's start message, where the request tells (the extension's layout). */
  | { kind: 'control-send'; partition: number; startOf?: (jobId: string) => boolean }
  | { kind: 'jobs-delete' }
  | undefined;

/** A job's Durable instance id (its first start's; a repair's `job-X.2` is not followed). */
const JOB_INSTANCE = /^job-([A-Za-z0-9_-]+)$/;

/** The request as test/support/storageProxy.ts records it, the shape the durableRequests predicates read. */
export function asStorageRequest(
  service: ServiceName,
  request: Pick<ProxiedRequest, 'method' | 'path' | 'headers'> & { readonly body?: Buffer; readonly at?: number },
): StorageRequest {
  const url = new URL(request.path, 'http://storage');
  const { method, headers, body = Buffer.alloc(0), at = 0 } = request;
  return { service, method, path: url.pathname, query: url.searchParams, headers, body, at };
}

/**
 * The requests whose body the extension's layout needs to tell a step (held by the proxy until whole):
 * messages put on the hub's control queues, and inserts into its Instances table. None on the development host.
 */
export function stepNeedsBody(names: StorageNames, service: ServiceName, request: Pick<SniffedRequest, 'method' | 'path'>): boolean {
  if ((names.host ?? 'devhost') !== 'extensions' || request.method !== 'POST') return false;
  const path = request.path.split('?')[0] ?? '';
  if (service === 'queue') return new RegExp(`^/${AZURITE_ACCOUNT}/${names.taskHub.toLowerCase()}-control-\\d+/messages$`).test(path);
  return service === 'table' && path === `/${AZURITE_ACCOUNT}/${names.taskHub}Instances`;
}

/** The extension layout's predicates for one task hub, made once. */
const predicates = new Map<string, DurableRequests>();
function extensionRequests(taskHub: string): DurableRequests {
  let requests = predicates.get(taskHub);
  if (requests === undefined) {
    requests = durableRequests({ taskHub }, 'extensions');
    predicates.set(taskHub, requests);
  }
  return requests;
}

/** The extension's Durable steps (Instances rows, ExecutionStarted messages), by the end-to-end tests' predicates. */
function classifyExtensionRequest(requests: DurableRequests, r: StorageRequest): Classified {
  if (r.service === 'table' && r.method === 'GET') {
    const id = /PartitionKey eq '(job-[A-Za-z0-9_-]+)'/.exec(r.query.get('$filter') ?? '')?.[1];
    const jobId = JOB_INSTANCE.exec(id ?? '')?.[1];
    if (id !== undefined && jobId !== undefined && requests.instanceRead(r, id)) return { kind: 'instance-read', jobId };
    return undefined;
  }
  if (r.service === 'table' && r.method === 'POST') {
    let id: unknown;
    try {
      id = (JSON.parse(r.body.toString('utf8')) as { PartitionKey?: unknown }).PartitionKey;
    } catch {
      return undefined;
    }
    const jobId = typeof id === 'string' ? JOB_INSTANCE.exec(id)?.[1] : undefined;
    if (typeof id === 'string' && jobId !== undefined && requests.instanceWrite(r, id)) return { kind: 'instance-create', jobId };
    return undefined;
  }
  return undefined;
}

/** What a storage request is, in the terms of starting a job; `service` is needed for the extension's layout. */
export function classifyRequest(
  names: StorageNames,
  request: Pick<ProxiedRequest, 'method' | 'path' | 'headers'> & { readonly body?: Buffer },
  service?: ServiceName,
): Classified {
  const path = decodeURIComponent(request.path.split('?')[0] ?? '');
  const prefix = `/${AZURITE_ACCOUNT}/`;
  if (!path.startsWith(prefix)) return undefined;
  const rest = path.slice(prefix.length);
  const hub = names.taskHub.toLowerCase();
  const extension = (names.host ?? 'devhost') === 'extensions';
  if (extension && service === 'table') {
    return classifyExtensionRequest(extensionRequests(names.taskHub), asStorageRequest(service, request));
  }
  const instance = extension ? null : new RegExp(`^${hub}-instances/job-([A-Za-z0-9_-]+)$`).exec(rest);
  const createOnce = request.headers['if-none-match'] === '*';
  if (instance !== null) {
    const jobId = instance[1] as string;
    if (request.method === 'GET' || request.method === 'HEAD') return { kind: 'instance-read', jobId };
    if (request.method === 'PUT' && createOnce) return { kind: 'instance-create', jobId };
    return undefined;
  }
  const record = new RegExp(`^${names.resultsContainer}/records/([A-Za-z0-9_-]+)\\.json$`).exec(rest);
  if (record !== null) {
    const jobId = record[1] as string;
    if (request.method === 'GET' || request.method === 'HEAD') return { kind: 'record-read', jobId };
    if (request.method === 'PUT' && createOnce) return { kind: 'record-create', jobId };
    return undefined;
  }
  const control = new RegExp(`^${hub}-control-(\\d+)/messages$`).exec(rest);
  if (request.method === 'POST' && control !== null) {
    if (!extension) return { kind: 'control-send', partition: Number(control[1]) };
    if (service !== 'queue') return undefined;
    const r = asStorageRequest(service, request);
    const requests = extensionRequests(names.taskHub);
    return { kind: 'control-send', partition: Number(control[1]), startOf: (jobId) => requests.startMessage(r, `job-${jobId}`) };
  }
  if (request.method === 'DELETE' && new RegExp(`^${names.jobsQueue}/messages/[^/]+$`).test(rest)) return { kind: 'jobs-delete' };
  return undefined;
}

export interface StepTrigger {
  readonly faultId: string;
  readonly jobId: string;
  readonly step: StartStep;
  /** Runs inside the proxy's request callback, before the request is forwarded; its answer decides the request's fate. */
  readonly fire: (process: ProcessRef) => 'forward' | 'drop';
}

export class StartPathWatcher {
  readonly writes: StorageWrite[] = [];
  readonly #triggers: StepTrigger[] = [];
  /** Per process and job: how far its start has gone. */
  readonly #progress = new Map<string, { recordRead: boolean }>();
  /** Per process, oldest first: the jobs whose start message it is about to send, or whose submission it is about to delete. */
  readonly #awaitingMessage = new Map<string, string[]>();
  readonly #awaitingDelete = new Map<string, string[]>();
  readonly #pendingWrites = new WeakMap<ProxiedRequest, StorageWrite>();
  /** The steps seen of a job while a fault was armed on it, oldest first: what a fault that did not fire can tell. */
  readonly #seen = new Map<string, string[]>();

  constructor(private readonly names: StorageNames) {}

  arm(trigger: StepTrigger): void {
    this.#triggers.push(trigger);
  }

  disarm(faultId: string): boolean {
    const index = this.#triggers.findIndex((t) => t.faultId === faultId);
    if (index < 0) return false;
    this.#triggers.splice(index, 1);
    return true;
  }

  /** The steps of `jobId` seen while it was armed, as `step by holder`. */
  seen(jobId: string): readonly string[] {
    return this.#seen.get(jobId) ?? [];
  }

  armed(jobId: string): boolean {
    return this.#triggers.some((t) => t.jobId === jobId);
  }

  /** `service`: which of the instance's proxies saw it (the extension's layout needs it). */
  onRequest(process: ProcessRef, request: ProxiedRequest, service?: ServiceName): 'forward' | 'drop' {
    const classified = classifyRequest(this.names, request, service);
    if (classified === undefined) return 'forward';
    const proc = `${process.instance}#${process.gen}`;
    let step: StartStep | undefined;
    let jobId: string | undefined;
    if (classified.kind === 'control-send') {
      const fits = (id: string): boolean => this.#partitionOf(id) === classified.partition && (classified.startOf?.(id) ?? true);
      jobId = this.#take(this.#awaitingMessage, proc, fits);
      if (jobId === undefined) return 'forward';
      step = 'start-message';
    } else if (classified.kind === 'jobs-delete') {
      jobId = this.#take(this.#awaitingDelete, proc, () => true);
      if (jobId === undefined) return 'forward';
      step = 'queue-delete';
    } else {
      const id = classified.jobId;
      jobId = id;
      const key = `${proc}#${id}`;
      const progress = this.#progress.get(key) ?? { recordRead: false };
      this.#progress.set(key, progress);
      if (classified.kind === 'instance-read') {
        step = progress.recordRead ? 'start-read' : 'status-read';
        // A read after the record read is the start's own, and its start message comes next; then the
        // path begins afresh for a later pass.
        if (progress.recordRead) {
          progress.recordRead = false;
          this.#await(this.#awaitingMessage, proc, id);
        }
      } else if (classified.kind === 'record-read') {
        step = 'record-read';
        progress.recordRead = true;
      } else {
        const write: StorageWrite = { ...process, kind: classified.kind, jobId: id, forwardedAt: request.at };
        this.writes.push(write);
        this.#pendingWrites.set(request, write);
        if (classified.kind === 'instance-create') {
          step = 'instance-write';
          this.#await(this.#awaitingDelete, proc, id);
        }
      }
    }
    if (step === undefined) return 'forward';
    if (this.armed(jobId)) {
      const seen = this.#seen.get(jobId) ?? [];
      if (seen.length < 24) seen.push(`${step} by ${process.holder}`);
      this.#seen.set(jobId, seen);
    }
    const index = this.#triggers.findIndex((t) => t.jobId === jobId && t.step === step);
    if (index < 0) return 'forward';
    const [trigger] = this.#triggers.splice(index, 1);
    return (trigger as StepTrigger).fire(process);
  }

  #partitionOf(jobId: string): number {
    return partitionOf(`job-${jobId}`, this.names.partitionCount ?? DURABLE_TASK_DEFAULTS.partitionCount);
  }

  #await(waiting: Map<string, string[]>, proc: string, jobId: string): void {
    const list = (waiting.get(proc) ?? []).filter((id) => id !== jobId);
    list.push(jobId);
    waiting.set(proc, list);
  }

  /** The oldest job `proc` awaits that `fits`, taken off its list. */
  #take(waiting: Map<string, string[]>, proc: string, fits: (jobId: string) => boolean): string | undefined {
    const list = waiting.get(proc) ?? [];
    const index = list.findIndex(fits);
    if (index < 0) return undefined;
    const [jobId] = list.splice(index, 1);
    return jobId;
  }

  onResponse(response: ProxiedResponse): void {
    const write = this.#pendingWrites.get(response.request);
    if (write === undefined) return;
    const index = this.writes.indexOf(write);
    if (index >= 0) this.writes[index] = { ...write, status: response.status, answeredAt: response.at };
  }
}
