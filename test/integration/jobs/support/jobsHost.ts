/**
 * The app's job functions on the project's development host, in this test process: the compiled
 * functions/*.js of this build loaded by the host's AppLoader (exact binding metadata), HTTP on a
 * loopback port with function keys enforced, the storage queue trigger as host.json configures
 * it, and the Durable backend, all against the run's Azurite with names unique to this test file
 * (queues, containers, task hub). One host per process (the loader's rule), so one per test file.
 *
 * The app reads its settings from `process.env` when its modules load, so they are set here
 * before the host loads it.
 */
import { basename, join, resolve } from 'node:path';

import { InvocationContext } from '@azure/functions';
import { type QueueClient, QueueServiceClient } from '@azure/storage-queue';
import { FunctionHost } from 'devhost';
import * as df from 'durable-functions';

import { memoryLogger } from '../../../../shared/observability/log';
import { azuriteConnectionString, uniqueName, uniqueTableName } from '../../../support/env';
import { startStorageProxy, type StorageProxy } from '../../../support/storageProxy';

/** <outDir> (this file is <outDir>/test/integration/jobs/support/jobsHost.js) and the repository root above it. */
const OUT_DIR = join(__dirname, '..', '..', '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
export const JOB_FUNCTION_FILES = ['jobsApi', 'jobOrchestrator', 'jobActivities', 'workItemsWorker'];
export const MASTER_KEY = 'test-master-key-not-a-secret';

export interface JobsHost {
  readonly host: FunctionHost;
  readonly baseUrl: string;
  readonly env: Readonly<Record<string, string>>;
  readonly jobsQueue: QueueClient;
  readonly poisonQueue: QueueClient;
  readonly workItemsQueue: QueueClient;
  readonly client: df.DurableClient;
  readonly logger: ReturnType<typeof memoryLogger>;
  /** A request to the host with the master key (or `key`, or none when `key` is null). */
  request(method: string, path: string, body?: string | Uint8Array, key?: string | null): Promise<{ status: number; headers: Headers; json: unknown; text: string }>;
  stop(): Promise<void>;
}

export async function startJobsHost(prefix: string, files: readonly string[] = JOB_FUNCTION_FILES, extraEnv: Readonly<Record<string, string>> = {}): Promise<JobsHost> {
  const conn = azuriteConnectionString();
  const env: Record<string, string> = {
    AzureWebJobsStorage: conn,
    CoordinatorStorage: conn,
    JOBS_QUEUE: uniqueName(`${prefix}-jobs`),
    WORK_ITEMS_QUEUE: uniqueName(`${prefix}-wi`),
    JOB_RESULTS_CONTAINER: uniqueName(`${prefix}-res`),
    JOB_INDEX_TABLE: uniqueTableName(`${prefix}idx`),
    LEADER_LEASE_CONTAINER: uniqueName(`${prefix}-lease`),
    TASK_HUB_NAME: `${prefix.replace(/[^A-Za-z0-9]/g, '')}${Math.random().toString(36).slice(2, 10)}`.slice(0, 40),
    COORDINATOR_INSTANCE_ID: `${prefix}-host`,
    // Where the tests put job inputs (uniqueName gives `<prefix>-<hex>`).
    JOB_INPUT_CONTAINERS: 'inputs,e2e-inputs-*,corpus-inputs-*',
    DEVHOST_MASTER_KEY: MASTER_KEY,
    // Tests put submissions on the jobs queue themselves: the leader reads it every second, idle or not.
    LEADER_IDLE_PASS_INTERVAL_SECONDS: extraEnv.LEADER_PASS_INTERVAL_SECONDS ?? '1',
    ...extraEnv,
  };
  Object.assign(process.env, env);
  // Every level in memory: tests read the development host's debug lines (an activity's receive) too.
  const logger = memoryLogger('jobs-host', 'debug');
  const host = await FunctionHost.start({
    appRoot: REPO_ROOT,
    main: `${basename(OUT_DIR)}/functions/{${files.join(',')}}.js`,
    port: 0,
    hostId: `${prefix.toLowerCase().replace(/[^a-z0-9]/g, '')}-test`.slice(0, 32),
    instanceId: env.COORDINATOR_INSTANCE_ID ?? 'test',
    env: process.env,
    logger,
    drainTimeoutMs: 5_000,
  });
  const queues = QueueServiceClient.fromConnectionString(conn);
  const clientInput = df.input.durableClient();
  const context = new InvocationContext({ functionName: 'jobsTest', options: { extraInputs: [clientInput] } });
  context.extraInputs.set(clientInput, host.durableClientBinding());
  return {
    host,
    baseUrl: host.baseUrl,
    env,
    jobsQueue: queues.getQueueClient(env.JOBS_QUEUE ?? ''),
    poisonQueue: queues.getQueueClient(`${env.JOBS_QUEUE}-poison`),
    workItemsQueue: queues.getQueueClient(env.WORK_ITEMS_QUEUE ?? ''),
    client: df.getClient(context),
    logger,
    async request(method, path, body, key = MASTER_KEY) {
      const headers: Record<string, string> = { 'Content-Type': 'application/json' };
      if (key !== null) headers['x-functions-key'] = key;
      const response = await fetch(`${host.baseUrl}${path}`, { method, headers, ...(body === undefined ? {} : { body }) });
      const text = await response.text();
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return { status: response.status, headers: response.headers, json, text };
    },
    stop: () => host.stop(),
  };
}

/**
 * A host whose app storage (job blobs, inputs, the call lease) goes through a storage proxy, for a
 * test that holds one of its requests; the Durable backend's own storage does not.
 */
export async function startProxiedJobsHost(prefix: string): Promise<{ h: JobsHost; proxy: StorageProxy; stop: () => Promise<void> }> {
  const proxy = await startStorageProxy(azuriteConnectionString());
  const h = await startJobsHost(prefix, JOB_FUNCTION_FILES, { CoordinatorStorage: proxy.connectionString });
  return {
    h,
    proxy,
    stop: async () => {
      await h.stop();
      await proxy.close();
    },
  };
}

/** Polls `check` until it returns a value that is not undefined. */
export async function eventually<T>(check: () => Promise<T | undefined>, timeoutMs = 60_000, what = 'condition'): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
