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
 * instance), start-message (the next message put on a control queue: the backend sends the start
 * message before it writes the instance, as the Azure Storage provider does), instance-write (PUT
 * of the instance with If-None-Match: *), queue-delete (the next delete on the jobs queue after that
 * write; a job found already started is not followed to its delete). If that layout changes, the
 * watcher stops seeing steps and the run reports its step faults as not fired.
 */
import { AZURITE_ACCOUNT } from 'devhost/testing';

import { type ProxiedRequest, type ProxiedResponse } from '../support/tcpProxy';
import { type ProcessRef, type StartStep, type StorageWrite } from './ChaosRecord';

export interface StorageNames {
  readonly taskHub: string;
  readonly resultsContainer: string;
  readonly jobsQueue: string;
}

type Classified =
  | { kind: 'instance-read' | 'instance-create' | 'record-read' | 'record-create'; jobId: string }
  | { kind: 'control-send' | 'jobs-delete' }
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
  if (request.method === 'POST' && new RegExp(`^${hub}-control-\\d+/messages$`).test(rest)) return { kind: 'control-send' };
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
  /** Per process: the job whose start message it is about to send, or whose submission it is about to delete. */
  readonly #awaitingMessage = new Map<string, string>();
  readonly #awaitingDelete = new Map<string, string>();
  readonly #pendingWrites = new WeakMap<ProxiedRequest, StorageWrite>();

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

  armed(jobId: string): boolean {
    return this.#triggers.some((t) => t.jobId === jobId);
  }

  onRequest(process: ProcessRef, request: ProxiedRequest): 'forward' | 'drop' {
    const classified = classifyRequest(this.names, request);
    if (classified === undefined) return 'forward';
    const proc = `${process.instance}#${process.gen}`;
    let step: StartStep | undefined;
    let jobId: string | undefined;
    if (!('jobId' in classified)) {
      const waiting = classified.kind === 'control-send' ? this.#awaitingMessage : this.#awaitingDelete;
      jobId = waiting.get(proc);
      if (jobId === undefined) return 'forward';
      waiting.delete(proc);
      step = classified.kind === 'control-send' ? 'start-message' : 'queue-delete';
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
          this.#awaitingMessage.set(proc, id);
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
          this.#awaitingDelete.set(proc, id);
        }
      }
    }
    if (step === undefined) return 'forward';
    const index = this.#triggers.findIndex((t) => t.jobId === jobId && t.step === step);
    if (index < 0) return 'forward';
    const [trigger] = this.#triggers.splice(index, 1);
    return (trigger as StepTrigger).fire(process);
  }

  onResponse(response: ProxiedResponse): void {
    const write = this.#pendingWrites.get(response.request);
    if (write === undefined) return;
    const index = this.writes.indexOf(write);
    if (index >= 0) this.writes[index] = { ...write, status: response.status, answeredAt: response.at };
  }
}
