/**
 * Runs the Durable reference app for a test: the host's AppLoader loads the compiled fixture app
 * (once per process, as the worker does), a Durable backend serves the extension's HTTP API on a
 * real http.Server on loopback, and the durable-functions SDK's own DurableClient is built with
 * `df.getClient` from the `durableClient` binding value the backend provides. Each host gets its
 * own task hub, so tests sharing one Azurite never see each other's instances.
 */
import { createServer, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { join } from 'node:path';

import { InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';

import { type LoadedApp, loadFunctionApp } from '../../src/AppLoader';
import { type DurableBackend, type FunctionInvoker } from '../../src/contracts';
import { createDurableBackend, type DispatcherTuning, parseDurableTaskOptions } from '../../src/durable';
import { eventTypeName, type HistoryEvent } from '../../src/durable/HistoryEvent';
import { InstanceStore } from '../../src/durable/InstanceStore';
import { taskHubNames } from '../../src/durable/taskHubNames';
import { TaskHubQueues } from '../../src/durable/TaskHubQueues';
import { memoryLogger } from '../../src/log';
import { type StorageConnection } from '../../src/storage';
import type * as ReferenceApp from '../fixtures/referenceApp';
import { azuriteConnectionString } from './env';

/** The package's compiled output root (this file is <root>/dist/test/support/durableTestHost.js). */
export const OUT_DIR = join(__dirname, '..', '..');
export const REFERENCE_APP_MAIN = 'test/fixtures/referenceApp.js';

/** Short enough that tests wait little, long enough for Azurite on a busy machine. */
export const TEST_TUNING: Partial<DispatcherTuning> = { maxPollIntervalMs: 250, controlVisibilitySeconds: 10, workVisibilitySeconds: 10 };

let loaded: Promise<LoadedApp> | undefined;

export function loadReferenceApp(): Promise<LoadedApp> {
  loaded ??= loadFunctionApp({ appRoot: OUT_DIR, main: REFERENCE_APP_MAIN, logger: memoryLogger('app') });
  return loaded;
}

export function storageFromEnv(): StorageConnection {
  return { kind: 'connectionString', settingName: 'AZURITE_CONNECTION_STRING', connectionString: azuriteConnectionString() };
}

/** A task hub name unique to one test (letters and digits only). */
export function uniqueTaskHub(prefix: string): string {
  return `${prefix.replace(/[^A-Za-z0-9]/g, '')}${Math.random().toString(36).slice(2, 10)}`.slice(0, 45);
}

export interface DurableTestHost {
  readonly app: LoadedApp;
  readonly backend: DurableBackend;
  readonly baseUrl: string;
  readonly taskHub: string;
  /** The SDK's client, from the binding value the backend gives `durableClient` inputs. */
  readonly client: df.DurableClient;
  readonly logger: ReturnType<typeof memoryLogger>;
  /** The task hub's queues, as the backend names them (for tests that hold or inject messages). */
  readonly queues: TaskHubQueues;
  readonly store: InstanceStore;
  /** The raw history the backend stored (what the orchestrator received on its last episode, plus that episode's decisions). */
  rawHistory(instanceId: string): Promise<HistoryEvent[]>;
  stop(): Promise<void>;
}

export interface DurableTestHostOptions {
  readonly taskHub?: string;
  readonly tuning?: Partial<DispatcherTuning>;
  /** False: serve the client API but dispatch nothing until `backend.start()`. */
  readonly start?: boolean;
  /** Passed to createDurableBackend (e.g. a short timer re-chain limit). */
  readonly maxTimerMessageDelaySeconds?: number;
  /** Wraps the app's invoker (e.g. to record what the backend sends to functions). */
  readonly wrapInvoker?: (app: LoadedApp) => FunctionInvoker;
  /** host.json extensions.durableTask (its defaults when absent). */
  readonly durableTask?: Record<string, unknown>;
}

export async function startDurableTestHost(options: DurableTestHostOptions = {}): Promise<DurableTestHost> {
  const app = await loadReferenceApp();
  const taskHub = options.taskHub ?? uniqueTaskHub('Hub');
  const logger = memoryLogger('durable-test');
  const storage = storageFromEnv();
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
    void backend.handleHttp(req, res, url).then((handled) => {
      if (!handled) {
        res.writeHead(404);
        res.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const durableTask = parseDurableTaskOptions(options.durableTask);
  const backend = createDurableBackend({ invoker: options.wrapInvoker?.(app) ?? app, storage, taskHub, baseUrl, instanceId: `test-${process.pid}`, logger, durableTask }, {
    tuning: { ...TEST_TUNING, ...options.tuning },
    ...(options.maxTimerMessageDelaySeconds === undefined ? {} : { maxTimerMessageDelaySeconds: options.maxTimerMessageDelaySeconds }),
  });
  const bindingValue = backend.clientBindingValue();
  app.provideInput('durableClient', () => bindingValue);
  if (options.start !== false) await backend.start();

  const clientInput = df.input.durableClient();
  const context = new InvocationContext({ functionName: 'durableTest', options: { extraInputs: [clientInput] } });
  context.extraInputs.set(clientInput, bindingValue);
  const client = df.getClient(context);
  const names = taskHubNames(taskHub, durableTask.partitionCount);
  const store = new InstanceStore(storage, names);
  const queues = new TaskHubQueues(storage, names, logger);
  return {
    app,
    backend,
    baseUrl,
    taskHub,
    client,
    logger,
    queues,
    store,
    async rawHistory(instanceId) {
      const stored = await store.read(instanceId);
      if (stored === undefined) throw new Error(`No instance ${instanceId} in task hub ${taskHub}.`);
      return stored.state.history;
    },
    async stop() {
      await backend.stop();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Polls the SDK client until the instance is no longer Pending/Running. */
export async function waitForFinish(client: df.DurableClient, instanceId: string, timeoutMs = 30_000): Promise<df.DurableOrchestrationStatus> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await client.getStatus(instanceId);
    if (!['Pending', 'Running', 'ContinuedAsNew'].includes(String(status.runtimeStatus))) return status;
    if (Date.now() > deadline) throw new Error(`Instance ${instanceId} still ${status.runtimeStatus} after ${timeoutMs} ms.`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Event type names of a raw history, in order (what the docs' history table lists). */
export function eventNames(history: readonly HistoryEvent[]): string[] {
  return history.map((e) => eventTypeName(e.EventType) ?? String(e.EventType));
}

/** Polls `check` until it holds. */
export async function waitUntil(check: () => Promise<boolean>, timeoutMs = 20_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}.`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * The fixture module's exports (e.g. `codeVariants`), after the loader loaded it: a plain import
 * would load it before the host supplies `@azure/functions-core`, and nothing would register.
 */
export async function referenceAppExports(): Promise<typeof ReferenceApp> {
  await loadReferenceApp();
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the module instance the loader loaded
  return require(join(OUT_DIR, REFERENCE_APP_MAIN)) as typeof ReferenceApp;
}
