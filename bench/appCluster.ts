/**
 * Black-box harness for the benchmarks: runs the built app on N real host processes, the extensions
 * host (the real Durable, queue and timer extensions: what `npm start` runs without Core Tools) or
 * the development host (`--host devhost`), the way `npm start --instances N` does (one app root with the SHIPPED host.json, settings from
 * local.settings.sample.json, one host id, instance ids instance-1..N via WEBSITE_INSTANCE_ID), and talks
 * to it only through its HTTP API and the storage layout the API documents (claim and result blobs,
 * the work-items queue). It imports nothing from shared/ or functions/, so it measures whichever job
 * pipeline is built.
 *
 * Differences from a new user's `npm start`, on purpose (beyond a bench's own `queues` settings in
 * host.json): storage is the bench's Azurite (free ports,
 * not 10000-10002), and the task hub, queue, container, table and host names get a per-cluster suffix so
 * several clusters can share one Azurite in one `npm run bench`. Not guaranteed: instances started
 * again after a kill get fresh ports (the cluster's `baseUrl` of that instance changes).
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { type QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { eventually, type HostProcess, startHostProcess } from 'devhost/testing';

import { startExtHostProcess } from '../scripts/extHostProcess';

/** The compiled output folder (dist/), whose functions/*.js is the app `npm start` runs. */
const OUT_DIR = join(__dirname, '..');
export const REPO_ROOT = resolve(OUT_DIR, '..');

export type Json = Record<string, unknown>;

/** Which host runs a bench's app: the extensions host (the default: the real extensions), or the development host. */
export type BenchHost = 'extensions' | 'devhost';
export const BENCH_HOSTS: readonly BenchHost[] = ['extensions', 'devhost'];
export const benchHostName = (host: BenchHost): string => (host === 'extensions' ? 'extensions host' : 'development host');

export interface ClusterNames {
  readonly taskHub: string;
  readonly jobsQueue: string;
  readonly workItemsQueue: string;
  readonly resultsContainer: string;
  readonly inputsContainer: string;
  readonly leaseContainer: string;
  /** The job index's table, per cluster too: a shared one let a second cluster's leader check (and delete) the first's rows. */
  readonly indexTable: string;
  readonly hostId: string;
}

export interface AppCluster {
  readonly names: ClusterNames;
  /** The running instances by instance id (a killed one is absent until `restart`). */
  readonly instances: Map<string, HostProcess>;
  /** The settings the instances run with (local.settings.sample.json with the bench's storage and names). */
  readonly settings: Readonly<Record<string, string>>;
  readonly results: ContainerClient;
  readonly inputs: ContainerClient;
  readonly workItems: QueueClient;
  /** HTTP to one running instance (the first alive one unless named). */
  call(method: string, path: string, body?: unknown, instanceId?: string): Promise<{ status: number; json: Json }>;
  /** The same, answering the Response itself (its headers: Location, Retry-After). */
  fetch(method: string, path: string, body?: unknown, instanceId?: string): Promise<Response>;
  /** Puts a submission on the jobs queue as a queue client would (base64 JSON). */
  submitToQueue(submission: Json): Promise<void>;
  /** The lease holder per GET /api/leader, once it is one of the running instances. */
  leader(timeoutMs?: number): Promise<string>;
  /** SIGKILL one instance. */
  kill(instanceId: string): Promise<void>;
  /** Starts a killed (or stopped) instance again under the same instance id. */
  restart(instanceId: string): Promise<void>;
  stop(): Promise<void>;
}

/** The instance ids `npm start --instances N` gives (scripts/start.ts planInstances). */
export const instanceIds = (n: number): string[] => Array.from({ length: n }, (_, i) => `instance-${i + 1}`);

export async function startAppCluster(
  connectionString: string,
  options: {
    instances: number;
    label: string;
    /** The host every instance runs on (`npm run bench -- ... --host extensions|devhost`). */
    host: BenchHost;
    env?: Record<string, string>;
    /** The functions to load, relative to the compiled output folder; the app's own by default. */
    main?: string;
    /** host.json `extensions.queues` settings over the shipped ones (a bench's batch size). */
    queues?: Readonly<Record<string, unknown>>;
    /** Top-level host.json sections over the shipped ones (`singleton`, say). */
    hostJson?: Readonly<Record<string, unknown>>;
    /** host.json `extensions.durableTask.storageProvider` settings over the shipped ones (a bench's polling variant). */
    durableStorageProvider?: Readonly<Record<string, unknown>>;
  },
): Promise<AppCluster> {
  const main = `app/${options.main ?? 'functions/*.js'}`;
  const suffix = `${options.label}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 5)}`.toLowerCase();
  const names: ClusterNames = {
    taskHub: `B${suffix.replace(/[^a-z0-9]/g, '')}`.slice(0, 45),
    jobsQueue: `jobs-${suffix}`,
    workItemsQueue: `work-items-${suffix}`,
    resultsContainer: `job-results-${suffix}`,
    inputsContainer: `job-inputs-${suffix}`,
    leaseContainer: `leader-election-${suffix}`,
    indexTable: `jobindex${suffix.replace(/[^a-z0-9]/g, '')}`.slice(0, 63),
    hostId: `bench-${suffix}`.slice(0, 29).replace(/-+$/, ''),
  };
  const sample = JSON.parse(readFileSync(join(REPO_ROOT, 'local.settings.sample.json'), 'utf8')) as { Values: Record<string, string> };
  const settings: Record<string, string> = {
    ...sample.Values,
    AzureWebJobsStorage: connectionString,
    CoordinatorStorage: connectionString,
    TASK_HUB_NAME: names.taskHub,
    JOBS_QUEUE: names.jobsQueue,
    WORK_ITEMS_QUEUE: names.workItemsQueue,
    JOB_RESULTS_CONTAINER: names.resultsContainer,
    JOB_INPUT_CONTAINERS: names.inputsContainer,
    LEADER_LEASE_CONTAINER: names.leaseContainer,
    JOB_INDEX_TABLE: names.indexTable,
    ...options.env,
  };
  // The app root npm start uses is the project folder; here a folder of its own with the shipped
  // host.json, the settings file and a link to the compiled app.
  const root = mkdtempSync(join(tmpdir(), `bench-${options.label}-`));
  symlinkSync(OUT_DIR, join(root, 'app'), 'dir');
  const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as { extensions?: Record<string, Record<string, unknown>> };
  if (options.queues !== undefined) {
    const extensions = hostJson.extensions ?? {};
    hostJson.extensions = { ...extensions, queues: { ...extensions.queues, ...options.queues } };
  }
  if (options.durableStorageProvider !== undefined) {
    const extensions = hostJson.extensions ?? {};
    const durableTask = extensions.durableTask ?? {};
    const storageProvider = (durableTask.storageProvider ?? {}) as Record<string, unknown>;
    hostJson.extensions = { ...extensions, durableTask: { ...durableTask, storageProvider: { ...storageProvider, ...options.durableStorageProvider } } };
  }
  writeFileSync(join(root, 'host.json'), JSON.stringify({ ...hostJson, ...options.hostJson }, null, 2));
  writeFileSync(join(root, 'local.settings.json'), JSON.stringify({ IsEncrypted: false, Values: settings }, null, 2));
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'bench-app', main }));

  const start = (instanceId: string): Promise<HostProcess> =>
    options.host === 'extensions'
      ? startExtHostProcess({
          appRoot: root,
          hostId: names.hostId,
          instanceId,
          env: { AzureFunctionsWebHost__hostid: names.hostId, WEBSITE_INSTANCE_ID: instanceId, DEVHOST_LOG_LEVEL: 'info' },
          main,
          timeoutMs: 120_000,
        })
      : startHostProcess({
          appRoot: root,
          hostId: names.hostId,
          instanceId,
          env: { AzureFunctionsWebHost__hostid: names.hostId, WEBSITE_INSTANCE_ID: instanceId },
          extraArgs: ['--main', main],
          timeoutMs: 60_000,
        });
  const instances = new Map<string, HostProcess>();
  const started = await Promise.allSettled(instanceIds(options.instances).map(async (id) => instances.set(id, await start(id))));
  const blobs = BlobServiceClient.fromConnectionString(connectionString);
  const queues = QueueServiceClient.fromConnectionString(connectionString);
  const cluster: AppCluster = {
    names,
    instances,
    settings,
    results: blobs.getContainerClient(names.resultsContainer),
    inputs: blobs.getContainerClient(names.inputsContainer),
    workItems: queues.getQueueClient(names.workItemsQueue),
    fetch(method, path, body, instanceId) {
      const host = instanceId === undefined ? [...instances.values()][0] : instances.get(instanceId);
      if (host === undefined) return Promise.reject(new Error(`no running instance ${instanceId ?? ''}`));
      return fetch(`${host.baseUrl}${path}`, {
        method,
        headers: { 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
    },
    async call(method, path, body, instanceId) {
      const res = await cluster.fetch(method, path, body, instanceId);
      const text = await res.text();
      let json: Json = {};
      try {
        json = JSON.parse(text) as Json;
      } catch {
        json = { text };
      }
      return { status: res.status, json };
    },
    async submitToQueue(submission) {
      const jobs = queues.getQueueClient(names.jobsQueue);
      await jobs.createIfNotExists();
      await jobs.sendMessage(Buffer.from(JSON.stringify(submission), 'utf8').toString('base64'));
    },
    async leader(timeoutMs = 60_000) {
      return eventually(
        async () => {
          const holder = await cluster.call('GET', '/api/leader').then(
            (r) => r.json.holder,
            () => undefined,
          );
          return typeof holder === 'string' && instances.has(holder) ? holder : undefined;
        },
        timeoutMs,
        'a running instance to hold the leader lease',
      );
    },
    async kill(instanceId) {
      const host = instances.get(instanceId);
      instances.delete(instanceId);
      await host?.kill();
    },
    async restart(instanceId) {
      if (!instances.has(instanceId)) instances.set(instanceId, await start(instanceId));
    },
    async stop() {
      await Promise.all([...instances.values()].map((h) => h.stop()));
      instances.clear();
      rmSync(root, { recursive: true, force: true });
    },
  };
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed !== undefined) {
    await cluster.stop();
    throw failed.reason;
  }
  await cluster.inputs.createIfNotExists();
  return cluster;
}

/** Uploads a JSON array of items to the cluster's input container; answers the `itemsBlob` to submit. */
export async function uploadItems(cluster: AppCluster, name: string, items: readonly unknown[]): Promise<string> {
  const text = JSON.stringify(items);
  await cluster.inputs.getBlockBlobClient(name).upload(text, Buffer.byteLength(text));
  return `${cluster.names.inputsContainer}/${name}`;
}

export interface JobOutcome {
  readonly view: Json;
  /** performance.now() when the POST was sent, and when a status poll first saw the job finished. */
  readonly postedAt: number;
  readonly finishedAt: number;
}

export async function submitJob(cluster: AppCluster, submission: Json, instanceId?: string): Promise<number> {
  const postedAt = performance.now();
  const res = await cluster.call('POST', '/api/jobs', submission, instanceId);
  if (res.status !== 202) throw new Error(`POST /api/jobs answered ${res.status}: ${JSON.stringify(res.json)}`);
  return postedAt;
}

/** Polls GET /api/jobs/{id} until the job leaves pending/running (any instance that answers). */
export async function waitForJob(
  cluster: AppCluster,
  jobId: string,
  timeoutMs: number,
  options: { pollMs?: number; note?: (message: string) => void } = {},
): Promise<{ view: Json; finishedAt: number; polls: number }> {
  const started = performance.now();
  let polls = 0;
  const deadline = started + timeoutMs;
  let lastNote = started;
  let last: Json | undefined;
  for (;;) {
    const ids = [...cluster.instances.keys()];
    for (const id of ids) {
      polls += 1;
      const res = await cluster.call('GET', `/api/jobs/${jobId}`, undefined, id).catch(() => undefined);
      if (res === undefined || res.status !== 200) continue;
      const status = String(res.json.status);
      if (status !== 'pending' && status !== 'running') return { view: res.json, finishedAt: performance.now(), polls };
      last = res.json;
      break;
    }
    const now = performance.now();
    if (options.note !== undefined && now - lastNote > 15_000) {
      lastNote = now;
      options.note(`${jobId}: ${String(last?.status)} ${String(last?.phase)} ${JSON.stringify(last?.progress ?? null)} after ${secs(now - started)} s`);
    }
    if (now > deadline) throw new Error(`job ${jobId} not finished after ${Math.round(timeoutMs / 1000)} s: ${JSON.stringify(last)}`);
    await sleep(options.pollMs ?? 200);
  }
}

export async function runJob(cluster: AppCluster, submission: Json & { jobId: string }, timeoutMs: number): Promise<JobOutcome> {
  const postedAt = await submitJob(cluster, submission);
  const { view, finishedAt } = await waitForJob(cluster, submission.jobId, timeoutMs);
  return { view, postedAt, finishedAt };
}

/**
 * Where a job's time went, from the instances' log lines: ms from `fromEpochMs` (wall clock) to the
 * first line of each event for the job (absent when no instance logged it), and to the last line of
 * each of `lastOf` (as `<event> (last)`).
 */
export function jobTimeline(
  cluster: AppCluster,
  jobId: string,
  fromEpochMs: number,
  events: readonly string[],
  lastOf: readonly string[] = [],
): Record<string, number | undefined> {
  return jobTimelines(cluster, [jobId], fromEpochMs, events, lastOf).get(jobId) ?? {};
}

/** `jobTimeline` of many jobs in one read of the logs (read once per job, it took minutes at 10,000 jobs). */
export function jobTimelines(
  cluster: AppCluster,
  jobIds: readonly string[],
  fromEpochMs: number,
  events: readonly string[],
  lastOf: readonly string[] = [],
): Map<string, Record<string, number | undefined>> {
  interface Seen {
    readonly first: Record<string, number | undefined>;
    readonly last: Record<string, number>;
  }
  const seen = new Map<string, Seen>(jobIds.map((id) => [id, { first: Object.fromEntries(events.map((e) => [e, undefined])), last: {} }]));
  for (const host of cluster.instances.values()) {
    for (const line of host.lines()) {
      const jobId = /"jobId":"([^"]+)"/.exec(line)?.[1];
      const job = jobId === undefined ? undefined : seen.get(jobId);
      if (job === undefined) continue;
      const event = /"event":"([^"]+)"/.exec(line)?.[1];
      if (event === undefined || !(event in job.first || lastOf.includes(event))) continue;
      const at = Date.parse(/"ts":"([^"]+)"/.exec(line)?.[1] ?? '') - fromEpochMs;
      if (!Number.isFinite(at)) continue;
      if (event in job.first && (job.first[event] === undefined || at < (job.first[event] ?? Infinity))) job.first[event] = at;
      if (lastOf.includes(event) && at > (job.last[event] ?? -Infinity)) job.last[event] = at;
    }
  }
  const timeline = ({ first, last }: Seen): Record<string, number | undefined> => ({
    ...first,
    ...Object.fromEntries(lastOf.map((event) => [`${event} (last)`, last[event]])),
  });
  return new Map([...seen].map(([id, job]) => [id, timeline(job)]));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` every `everyMs` until stopped (a failed probe is skipped, the next one tries again). */
export function monitor(everyMs: number, probe: () => Promise<void>): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      await probe().catch(() => undefined);
      await sleep(everyMs);
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** Messages on the cluster's work-items queue (the queue's approximate count). */
export async function workItemsDepth(cluster: AppCluster): Promise<number> {
  return (await cluster.workItems.getProperties()).approximateMessagesCount ?? 0;
}

/** Blob names under a prefix (one listing call per 5,000). */
export async function listNames(container: ContainerClient, prefix: string): Promise<string[]> {
  const names: string[] = [];
  for await (const page of container.listBlobsFlat({ prefix }).byPage({ maxPageSize: 5000 })) {
    for (const item of page.segment.blobItems) names.push(item.name);
  }
  return names;
}

/**
 * Chunks of a job that are claimed but have no result yet, with the instance holding each (the
 * `claimedBy` of the chunk's latest dispatch claim, read from the claim blob's JSON body).
 */
export async function claimedUnfinished(cluster: AppCluster, jobId: string): Promise<{ holders: Map<number, string>; results: number; claimed: number }> {
  const [claims, results] = await Promise.all([listNames(cluster.results, `jobs/${jobId}/claims/`), listNames(cluster.results, `jobs/${jobId}/results/`)]);
  const done = new Set(results.map((n) => Number(/results\/(\d+)\.json$/.exec(n)?.[1] ?? NaN)));
  const latest = new Map<number, { dispatch: number; name: string }>();
  for (const name of claims) {
    const m = /claims\/(\d+)-(\d+)\.json$/.exec(name);
    if (m === null) continue;
    const chunk = Number(m[1]);
    const dispatch = Number(m[2]);
    if ((latest.get(chunk)?.dispatch ?? -1) < dispatch) latest.set(chunk, { dispatch, name });
  }
  const holders = new Map<number, string>();
  await Promise.all(
    [...latest].filter(([chunk]) => !done.has(chunk)).map(async ([chunk, { name }]) => {
      const body = await cluster.results.getBlockBlobClient(name).downloadToBuffer().catch(() => undefined);
      if (body === undefined) return;
      const claimedBy = (JSON.parse(body.toString('utf8')) as { claimedBy?: unknown }).claimedBy;
      if (typeof claimedBy === 'string') holders.set(chunk, claimedBy);
    }),
  );
  return { holders, results: done.size, claimed: latest.size };
}

export function percentile(values: readonly number[], p: number): number {
  // Nearest rank: with fewer than 100 samples p99 is the largest.
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1] ?? NaN;
}

export const secs = (ms: number): string => (ms / 1000).toFixed(1);
