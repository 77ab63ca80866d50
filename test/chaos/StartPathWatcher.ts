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
 * One process starts several jobs at once (the intake takes a batch a few at a time) and reads
 * other jobs' instances meanwhile (status requests read a record, then an instance, just as a start
 * does), so each process keeps its awaited steps in order, first come first matched, and a start
 * message is matched to an awaited job of its own partition only: another job's read never hides
 * the awaited one.
 */
import { AZURITE_ACCOUNT, DURABLE_TASK_DEFAULTS, partitionOf } from 'devhost/testing';

import { type ProxiedRequest, type ProxiedResponse } from '../support/tcpProxy';
import { type ProcessRef, type StartStep, type StorageWrite } from './ChaosRecord';

export interface StorageNames {
  readonly taskHub: string;
  readonly resultsContainer: string;
  readonly jobsQueue: string;
  /** The task hub's control queues (host.json durableTask.storageProvider.partitionCount); 4 unless set. */
  readonly partitionCount?: number;
}

type Classified =
  | { kind: 'instance-read' | 'instance-create' | 'record-read' | 'record-create'; jobId: string }
  | { kind: 'control-send'; partition: number }
  | { kind: 'jobs-delete' }
  | undefined;

/** What a storage request is, in the terms of starting a job. */
export function classifyRequest(names: StorageNames, request: Pick<ProxiedRequest, 'method' | 'path' | 'headers'>): Classified {
  const path = decodeURIComponent(request.path.split('?')[0] ?? '');
  const prefix = `/${AZURITE_ACCOUNT}/`;
  if (!path.startsWith(prefix)) return undefined;
  const rest = path.slice(prefix.length);
  const hub = names.taskHub.toLowerCase();
  const instance = new RegExp(`^${hub}-instances/job-([A-Za-z0-9_-]+)$`).exec(rest);
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
  if (request.method === 'POST' && control !== null) return { kind: 'control-send', partition: Number(control[1]) };
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

  onRequest(process: ProcessRef, request: ProxiedRequest): 'forward' | 'drop' {
    const classified = classifyRequest(this.names, request);
    if (classified === undefined) return 'forward';
    const proc = `${process.instance}#${process.gen}`;
    let step: StartStep | undefined;
    let jobId: string | undefined;
    if (classified.kind === 'control-send') {
      jobId = this.#take(this.#awaitingMessage, proc, (id) => this.#partitionOf(id) === classified.partition);
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
