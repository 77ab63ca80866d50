/**
 * The narrow view of Durable that the job pipeline needs (status of one instance, start, cancel
 * event, list), with `durableOrchestrationClient` adapting the durable-functions client to it.
 *
 * Guarantees: `getStatus` answers undefined for an instance that does not exist (the client's
 * 404), never throws for it; anything else the client throws passes through. Every call settles
 * within a timeout (SERVICE_UNAVAILABLE after it): the client takes no AbortSignal and sets no
 * timeout of its own, and one hung call must not hold the leader's pass, which blocks the next
 * term's passes, or an HTTP request forever. A late answer is ignored.
 */
import {
  type DurableClient,
  type DurableOrchestrationStatus,
  type OrchestrationFilter,
  OrchestrationRuntimeStatus,
} from 'durable-functions';

import { JobError } from '../JobError';
import { isBatchInstanceId, parseInstanceId } from '../jobIds';
import { type JobRun } from '../JobRun';
import { type BatchCustomStatus, type BatchOutput, type BatchState, JOB_BATCH_ORCHESTRATOR } from './batchOrchestration';
import { CANCEL_EVENT, JOB_ORCHESTRATOR, type OrchestrationState, RESUME_EVENT, type ResumeRequest } from './jobOrchestration';

/** Per call; listing a whole task hub gets twice as long. */
export const DURABLE_CALL_TIMEOUT_MS = 30_000;

function withTimeout<T>(what: string, call: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new JobError('SERVICE_UNAVAILABLE', `Durable ${what} did not answer within ${ms / 1000} s.`)), ms);
  });
  return Promise.race([call, timedOut]).finally(() => clearTimeout(timer));
}

export interface OrchestrationSnapshot {
  readonly instanceId: string;
  /** Durable's runtime status: Pending, Running, Completed, ContinuedAsNew, Failed, Terminated, Suspended. */
  readonly runtimeStatus: string;
  readonly input: unknown;
  readonly output: unknown;
  readonly customStatus: unknown;
  readonly createdTime: Date;
  readonly lastUpdatedTime: Date;
}

/** Durable's runtime statuses of an instance that has ended (purgeable, replaceable by a new start). */
const FINISHED_STATUSES: ReadonlySet<string> = new Set(['Completed', 'Failed', 'Terminated', 'Canceled']);

export function isFinished(runtimeStatus: string): boolean {
  return FINISHED_STATUSES.has(runtimeStatus);
}

/** The job run an instance was started with (its input's `run`), as far as the input holds one. */
export function runOf(snapshot: OrchestrationSnapshot | undefined): JobRun | undefined {
  return (snapshot?.input as Partial<OrchestrationState> | undefined)?.run;
}

/** The fingerprint of the submission an instance runs: equal to a submission's own when they are the same job. */
export function fingerprintOf(snapshot: OrchestrationSnapshot | undefined): string | undefined {
  return runOf(snapshot)?.fingerprint;
}

export interface OrchestrationClient {
  getStatus(instanceId: string): Promise<OrchestrationSnapshot | undefined>;
  start(instanceId: string, input: OrchestrationState): Promise<void>;
  /** Starts a shared run of several small jobs (batchOrchestration.ts); absent: every job starts alone. */
  startBatch?(instanceId: string, input: BatchState): Promise<void>;
  raiseCancel(instanceId: string, reason: string): Promise<void>;
  /** Asks a run to call its current activity again (StalledJobs). */
  raiseResume(instanceId: string, request: ResumeRequest): Promise<void>;
  list(): Promise<OrchestrationSnapshot[]>;
  /**
   * The instances not finished: Pending, Running and ContinuedAsNew (with their inputs: the client has
   * no way to leave them out; a run's inline items are under 48 KiB). A scan of the task hub's
   * instances, finished ones included, on every backend: the stall check lists at a new leader's
   * first pass and then seldom (StalledJobs).
   */
  listActive(): Promise<OrchestrationSnapshot[]>;
  /** Deletes a finished instance's history and state; false when there was none. */
  purge(instanceId: string): Promise<boolean>;
}

function snapshot(status: DurableOrchestrationStatus): OrchestrationSnapshot {
  return {
    instanceId: status.instanceId,
    runtimeStatus: String(status.runtimeStatus),
    input: status.input,
    output: status.output,
    customStatus: status.customStatus,
    createdTime: new Date(status.createdTime),
    lastUpdatedTime: new Date(status.lastUpdatedTime),
  };
}

export function durableOrchestrationClient(client: DurableClient, options: { readonly timeoutMs?: number } = {}): OrchestrationClient {
  const ms = options.timeoutMs ?? DURABLE_CALL_TIMEOUT_MS;
  return {
    async getStatus(instanceId) {
      try {
        return snapshot(await withTimeout('getStatus', client.getStatus(instanceId, { showInput: true }), ms));
      } catch (err) {
        // The client reports a missing instance only as an Error whose text names the 404.
        if (err instanceof Error && /HTTP 404/.test(err.message)) return undefined;
        throw err;
      }
    },
    async start(instanceId, input) {
      await withTimeout('startNew', client.startNew(JOB_ORCHESTRATOR, { instanceId, input }), ms);
    },
    async startBatch(instanceId, input) {
      await withTimeout('startNew', client.startNew(JOB_BATCH_ORCHESTRATOR, { instanceId, input }), ms);
    },
    async raiseCancel(instanceId, reason) {
      await withTimeout('raiseEvent', client.raiseEvent(instanceId, CANCEL_EVENT, { reason }), ms);
    },
    async raiseResume(instanceId, request) {
      await withTimeout('raiseEvent', client.raiseEvent(instanceId, RESUME_EVENT, request), ms);
    },
    async list() {
      return (await withTimeout('getStatusAll', client.getStatusAll(), 2 * ms)).map(snapshot);
    },
    async listActive() {
      const filter: OrchestrationFilter = {
        runtimeStatus: [OrchestrationRuntimeStatus.Pending, OrchestrationRuntimeStatus.Running, OrchestrationRuntimeStatus.ContinuedAsNew],
      };
      return (await withTimeout('getStatusBy', client.getStatusBy(filter), 2 * ms)).map(snapshot);
    },
    async purge(instanceId) {
      try {
        return (await withTimeout('purgeInstanceHistory', client.purgeInstanceHistory(instanceId), ms)).instancesDeleted > 0;
      } catch (err) {
        if (err instanceof Error && /HTTP 404/.test(err.message)) return false;
        throw err;
      }
    },
  };
}

/**
 * A shared run's instance as one of its jobs' (its run as the input, its summary as the output:
 * what a job's own instance shows); any other instance as it is. Undefined when the shared run does
 * not hold the job.
 */
export function jobViewOf(snapshot: OrchestrationSnapshot | undefined, jobId: string): OrchestrationSnapshot | undefined {
  const runs: BatchState['runs'] | undefined = (snapshot?.input as Partial<BatchState> | null | undefined)?.runs;
  if (snapshot === undefined || runs === undefined) return snapshot;
  const run = runs.find((r) => r.run.jobId === jobId)?.run;
  if (run === undefined) return undefined;
  const output = (snapshot.output as BatchOutput | null | undefined)?.[jobId] ?? null;
  // Its plan stood down as superseded: shown as a run of its own that did (nextStartStep takes it over).
  const status = snapshot.customStatus as BatchCustomStatus | null | undefined;
  const superseded = status?.stoodDown?.includes(jobId) === true;
  const customStatus = superseded ? { ...status, phase: 'done', superseded: true } : snapshot.customStatus;
  return { ...snapshot, input: { run }, output, customStatus };
}

export interface ShownJob {
  readonly jobId: string;
  readonly generation: number;
  readonly snapshot: OrchestrationSnapshot;
}

/**
 * The jobs an instance shows, each as its own snapshot: a job run's instance (`job-<jobId>[.<n>]`)
 * its one job with its generation, a shared run (`batch-<uuid>`) each of its jobs (generation 0:
 * a job's own instance, a run that went on alone, shows it better); other instances none.
 */
export function jobsShownBy(snapshot: OrchestrationSnapshot): ShownJob[] {
  const id = parseInstanceId(snapshot.instanceId);
  if (id !== undefined) return [{ ...id, snapshot }];
  if (!isBatchInstanceId(snapshot.instanceId)) return [];
  const runs = (snapshot.input as Partial<BatchState> | null | undefined)?.runs ?? [];
  return runs.flatMap(({ run }) => {
    const shown = jobViewOf(snapshot, run.jobId);
    return shown === undefined ? [] : [{ jobId: run.jobId, generation: 0, snapshot: shown }];
  });
}
