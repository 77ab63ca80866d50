/**
 * The real app (this build's functions/*.js) on development host processes, for the end-to-end
 * fault tests: an app folder with the project's host.json, one set of unique names (queues,
 * containers, task hub, lease) per scenario, host processes that reach storage directly or through
 * a storage proxy, and the HTTP calls and storage reads the tests judge by.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';
import { type QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { AZURITE_ACCOUNT, eventually, type HostProcess } from 'devhost/testing';

import { azuriteConnectionString, uniqueName, uniqueTableName } from '../../support/env';
import { startStorageProxy, type StorageProxy } from '../../support/storageProxy';
import { type E2EHost, e2eHost, startAppHost } from './appHost';

const OUT_DIR = join(__dirname, '..', '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
export const KEY = 'fence-e2e-key-not-a-secret';
/** The Durable extension's system key, shared by every process so any of them answers the webhooks. */
const SYSTEM_KEY = 'fence-e2e-system-key-not-a-secret';

export interface JobView {
  jobId: string;
  status: string;
  result?: unknown;
  progress?: { chunks: { total: number; done: number; failed: number }; items: { total: number; done: number; failed: number } } | null;
  epoch: number | null;
  error: { code: string; message: string } | null;
  createdAt: string | null;
}

export interface InstanceView {
  runtimeStatus: string;
  input: { run?: { epoch?: number; startId?: string } } | null;
  output: unknown;
  createdTime: string;
}

export interface LeaderView {
  holder: string | null;
  epoch: number | null;
  instance: { id: string; role: string; epoch: number | null; lastPass: { epoch: number; at: string } | null };
}

export function sumOf(items: readonly number[]): { count: number; sum: number; min: number; max: number } {
  return { count: items.length, sum: items.reduce((a, b) => a + b, 0), min: Math.min(...items), max: Math.max(...items) };
}

/**
 * The shipped host.json's `durableTask.storageProvider.controlQueueVisibilityTimeout` in ms (the Azure
 * Storage provider's default, 5 minutes, when it is not set): how long a control-queue message a process
 * received stays hidden from every other process, so how late the real extension may run a message
 * whose receiver dropped it without handling it (a process that finds it lost the queue's partition).
 * The test app's host.json keeps it (createRealAppRoot changes only the polling).
 */
export function shippedControlQueueVisibilityMs(): number {
  const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as {
    extensions?: { durableTask?: { storageProvider?: { controlQueueVisibilityTimeout?: string } } };
  };
  const value = hostJson.extensions?.durableTask?.storageProvider?.controlQueueVisibilityTimeout ?? '00:05:00';
  const match = /^(\d+):(\d{2}):(\d{2})$/.exec(value);
  if (match === null) throw new Error(`controlQueueVisibilityTimeout "${value}" is not hh:mm:ss`);
  return ((Number(match[1]) * 60 + Number(match[2])) * 60 + Number(match[3])) * 1000;
}

/**
 * An app folder for the real app: this build's output linked in as `app/`, the project's host.json
 * (with `queues` settings over its own), and `main` (the functions to load, relative to the folder:
 * the app's own by default) as package.json says it to both hosts.
 */
export function createRealAppRoot(queues: Readonly<Record<string, unknown>> = {}, main = 'app/functions/*.js'): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'devhost-fence-'));
  symlinkSync(OUT_DIR, join(dir, 'app'), 'dir');
  // The shipped host.json, with a test's own `extensions.queues` settings (its batch size) over its own,
  // and fast polling: these scenarios pass messages between processes (a killed worker's chunk, a
  // run whose control message another process sent), which no process's own send wakes; the shipped
  // ceilings (chosen for an idle instance's cost, docs/deploy.md) would add up to 2 s and 10 s per hop.
  const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as { extensions?: Record<string, Record<string, unknown>> };
  const extensions = hostJson.extensions ?? {};
  const durableTask = extensions.durableTask ?? {};
  const storageProvider = { ...(durableTask.storageProvider as Record<string, unknown> | undefined), maxQueuePollingInterval: '00:00:00.250' };
  writeFileSync(
    join(dir, 'host.json'),
    JSON.stringify({
      ...hostJson,
      extensions: { ...extensions, queues: { ...extensions.queues, maxPollingInterval: '00:00:00.500', ...queues }, durableTask: { ...durableTask, storageProvider } },
    }),
  );
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fence-e2e-app', main }));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One scenario's names and settings; every process of the scenario shares them (one app). */
export class Scenario {
  readonly conn = azuriteConnectionString();
  readonly taskHub = `Fence${randomBytes(6).toString('hex')}`;
  readonly names = {
    jobsQueue: uniqueName('fence-jobs'),
    workItems: uniqueName('fence-wi'),
    results: uniqueName('fence-res'),
    lease: uniqueName('fence-lease'),
    index: uniqueTableName('fenceidx'),
  };
  readonly hosts: HostProcess[] = [];
  /** Settings added to every instance started from now on (a test's own, e.g. DEVHOST_LOG_LEVEL). */
  readonly extraEnv: Record<string, string> = {};

  /** `host`: the host every instance of the scenario runs on (E2E_HOST's by default). */
  constructor(
    private readonly appRoot: string,
    readonly host: E2EHost = e2eHost(),
  ) {}

  /**
   * Starts an instance with its own host id (its own timers, like a separate app) unless `hostId`
   * names one (instances of one app share one, and its timer's listener lock), reaching storage
   * through `conn`, running the app of `appRoot` (the scenario's by default: another, such as one with
   * fewer functions, is an instance of the same app with a part of its functions).
   */
  async start(
    instanceId: string,
    conn = this.conn,
    appRoot = this.appRoot,
    env: Readonly<Record<string, string>> = {},
    hostId = `fence-${instanceId}`.toLowerCase().slice(0, 32),
  ): Promise<HostProcess> {
    const settings: Record<string, string> = {
      FUNCTIONS_WORKER_RUNTIME: 'node',
      AzureWebJobsStorage: conn,
      CoordinatorStorage: conn,
      TASK_HUB_NAME: this.taskHub,
      JOBS_QUEUE: this.names.jobsQueue,
      WORK_ITEMS_QUEUE: this.names.workItems,
      JOB_RESULTS_CONTAINER: this.names.results,
      JOB_INDEX_TABLE: this.names.index,
      LEADER_LEASE_CONTAINER: this.names.lease,
      LEADER_TIMER_SCHEDULE: '*/2 * * * * *',
      LEADER_PASS_INTERVAL_SECONDS: '2',
      LEADER_IDLE_PASS_INTERVAL_SECONDS: '2',
      COORDINATOR_INSTANCE_ID: '',
      COORDINATOR_LOG_LEVEL: 'info',
      DEVHOST_HOST_KEYS: KEY,
      DEVHOST_SYSTEM_KEYS: `durabletask_extension=${SYSTEM_KEY}`,
      ...this.extraEnv,
      ...env,
    };
    const host = await startAppHost({ appRoot, hostId, instanceId, env: settings, timeoutMs: 60_000 }, this.host);
    this.hosts.push(host);
    return host;
  }

  async call(host: HostProcess, method: string, path: string, body?: string): Promise<{ status: number; json: unknown }> {
    const headers = { 'x-functions-key': KEY, 'content-type': 'application/json' };
    const res = await fetch(`${host.baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
    const text = await res.text();
    return { status: res.status, json: text === '' ? null : (JSON.parse(text) as unknown) };
  }

  async leader(host: HostProcess): Promise<LeaderView> {
    return (await this.call(host, 'GET', '/api/cluster')).json as LeaderView;
  }

  /** Waits until `host` leads (epoch above `above`) and has finished a pass in that term. */
  async leading(host: HostProcess, above = 0, timeoutMs = 60_000): Promise<LeaderView> {
    return eventually(
      async () => {
        // Not an answer yet (the extensions host answered its first /api/cluster with an error body
        // once, before its worker was ready): asked again, as for a follower.
        const answer = await this.call(host, 'GET', '/api/cluster');
        const view = answer.json as LeaderView | null;
        const mine = answer.status === 200 ? view?.instance : undefined;
        if (mine === undefined || view === null) return undefined;
        return mine.role === 'leader' && (mine.epoch ?? 0) > above && mine.lastPass?.epoch === mine.epoch ? view : undefined;
      },
      timeoutMs,
      `${host.instanceId} to lead above epoch ${above} and finish a pass`,
    );
  }

  /** A Durable instance as the development host's status API shows it (input included), or undefined. */
  async instance(host: HostProcess, instanceId: string): Promise<InstanceView | undefined> {
    const res = await fetch(`${host.baseUrl}/runtime/webhooks/durabletask/instances/${encodeURIComponent(instanceId)}?showInput=true`, {
      headers: { 'x-functions-key': SYSTEM_KEY },
    });
    const text = await res.text();
    return res.status === 200 || res.status === 202 ? (JSON.parse(text) as InstanceView) : undefined;
  }

  async job(host: HostProcess, jobId: string): Promise<JobView | undefined> {
    const res = await this.call(host, 'GET', `/api/jobs/${encodeURIComponent(jobId)}`);
    return res.status === 200 ? (res.json as JobView) : undefined;
  }

  finished(host: HostProcess, jobId: string, timeoutMs: number): Promise<JobView> {
    return eventually(
      async () => {
        const view = await this.job(host, jobId);
        return view !== undefined && !['pending', 'running'].includes(view.status) ? view : undefined;
      },
      timeoutMs,
      `job ${jobId} to finish`,
    );
  }

  /** Waits until the job shows at least `chunks` chunks done. */
  finishedChunks(host: HostProcess, jobId: string, chunks: number, timeoutMs: number): Promise<JobView> {
    return eventually(
      async () => {
        const view = await this.job(host, jobId);
        return view !== undefined && (view.progress?.chunks.done ?? 0) >= chunks ? view : undefined;
      },
      timeoutMs,
      `job ${jobId} to have ${chunks} chunks done`,
    );
  }

  jobsQueue(): QueueClient {
    return QueueServiceClient.fromConnectionString(this.conn).getQueueClient(this.names.jobsQueue);
  }

  async submitByQueue(job: Record<string, unknown>): Promise<void> {
    const queue = this.jobsQueue();
    await queue.createIfNotExists();
    await queue.sendMessage(Buffer.from(JSON.stringify(job), 'utf8').toString('base64'));
  }

  async submitByHttp(host: HostProcess, job: Record<string, unknown>): Promise<void> {
    const posted = await this.call(host, 'POST', '/api/jobs', JSON.stringify(job));
    assert.equal(posted.status, 202, JSON.stringify(posted.json));
  }

  /** A blob of the results container (undefined when absent), with its etag. */
  async resultsBlob(name: string): Promise<{ text: string; etag: string } | undefined> {
    const client = BlobServiceClient.fromConnectionString(this.conn).getContainerClient(this.names.results).getBlobClient(name);
    try {
      const buffer = await client.downloadToBuffer();
      const props = await client.getProperties();
      return { text: buffer.toString('utf8'), etag: props.etag ?? '' };
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) return undefined;
      throw err;
    }
  }

  /** The path of a job's (first) Durable instance blob as the development host stores it. */
  instancePath(jobId: string): string {
    return `/${AZURITE_ACCOUNT}/${this.taskHub.toLowerCase()}-instances/job-${jobId}`;
  }

  controlQueuePath(): RegExp {
    return new RegExp(`^/${AZURITE_ACCOUNT}/${this.taskHub.toLowerCase()}-control-\\d+/messages$`);
  }

  /** Every process's log lines with this event (and this job id, when given). */
  events(event: string, jobId?: string): Array<Record<string, unknown>> {
    return this.hosts.flatMap((h) => h.events(event)).filter((e) => jobId === undefined || e.jobId === jobId);
  }

  async stopAll(): Promise<void> {
    await Promise.all(
      this.hosts.map(async (h) => {
        // A paused process ignores SIGTERM until it runs again.
        if (h.child.exitCode === null && h.child.signalCode === null) h.child.kill('SIGCONT');
        await h.kill();
      }),
    );
  }
}

/**
 * For a describe block: the real app's folder made before its tests and removed after, and each
 * test's scenario with a storage proxy in front of Azurite, all stopped and closed after the block.
 */
export function proxiedScenarios(queues: Readonly<Record<string, unknown>> = {}): { start(): Promise<{ s: Scenario; proxy: StorageProxy }> } {
  let app: { dir: string; remove(): void } | undefined;
  const scenarios: Scenario[] = [];
  const proxies: StorageProxy[] = [];
  before(() => {
    app = createRealAppRoot(queues);
  });
  after(async () => {
    await Promise.all(scenarios.map((s) => s.stopAll()));
    await Promise.all(proxies.map((p) => p.close()));
    app?.remove();
  });
  return {
    async start() {
      if (app === undefined) throw new Error('proxiedScenarios().start() runs inside a test of its describe block');
      const s = new Scenario(app.dir);
      scenarios.push(s);
      const proxy = await startStorageProxy(s.conn);
      proxies.push(proxy);
      return { s, proxy };
    },
  };
}
