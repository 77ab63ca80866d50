/**
 * One development host process: loads the app (AppLoader), reads host.json, serves HTTP functions,
 * runs the timer and queue triggers, writes output bindings, enforces `functionTimeout`, and runs
 * the Durable backend when the app has Durable functions.
 *
 * Guarantees: every binding is validated before anything starts (a bad schedule, queue name,
 * missing `%SETTING%` or route conflict fails `start` with its code); `stop` stops triggers first,
 * lets invocations in flight finish (bounded), stops the Durable backend, closes HTTP, then runs
 * the app's appTerminate hooks. Not guaranteed: that an invocation still running after the drain
 * timeout completes (its queue message is redelivered after its visibility timeout, like the host).
 */
import { basename } from 'node:path';

import { type BlobServiceClient } from '@azure/storage-blob';

import { type LoadedApp,loadFunctionApp } from './AppLoader';
import { BindingInvoker, OutputBindings } from './bindings/OutputBindings';
import { resolveQueueTarget } from './bindings/QueueBindingTarget';
import { type DurableBackend, type HostedFunction } from './contracts';
import { createDurableBackend } from './durable';
import { DevHostError } from './errors';
import { TimeoutInvoker } from './functionTimeout';
import { type HostConfig, readHostConfig, resolveSettingExpression } from './HostConfig';
import { DURABLE_SYSTEM_KEY_NAME, FunctionKeys, KEY_SETTINGS } from './http/FunctionKeys';
import { HttpFront } from './http/HttpFront';
import { type Logger } from './log';
import { parseTimerSchedule } from './schedule/TimerSchedule';
import { blobServiceClient, DEFAULT_CONNECTION, readStorageConnection } from './storage';
import { QueueListener } from './triggers/QueueListener';
import { TimerListener } from './triggers/TimerListener';

/** The Durable extension's default task hub name outside App Service. */
export const DEFAULT_TASK_HUB = 'TestHubName';
const DURABLE_TRIGGERS = new Set(['orchestrationTrigger', 'activityTrigger', 'entityTrigger']);
const DURABLE_CLIENT_BINDINGS = new Set(['durableClient', 'orchestrationClient']);

export interface FunctionHostOptions {
  readonly appRoot: string;
  /** Entry point glob relative to appRoot; package.json `main` when absent. */
  readonly main?: string;
  /** 0 picks a free port. */
  readonly port: number;
  /** Interface to listen on. */
  readonly listenHost?: string;
  readonly hostId: string;
  readonly instanceId: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger;
  /** How long `stop` waits for invocations in flight. */
  readonly drainTimeoutMs?: number;
}

/** Host ids: 1-32 lowercase letters, digits and dashes, not starting or ending with a dash (the host's rule). */
export function validateHostId(hostId: string): string {
  if (!/^[a-z0-9](?:[a-z0-9-]{0,30}[a-z0-9])?$/.test(hostId)) {
    throw new DevHostError('DEVHOST_BAD_HOST_ID', `Host id "${hostId}" is invalid: use 1-32 lowercase letters, digits and dashes, not starting or ending with a dash.`, true);
  }
  return hostId;
}

/** A default host id from the app folder's name, like a site name. */
export function defaultHostId(appRoot: string): string {
  const cleaned = basename(appRoot).toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/-+/g, '-').slice(0, 32).replace(/^-+|-+$/g, '');
  return cleaned === '' ? 'devhost' : cleaned;
}

export class FunctionHost {
  #timers: TimerListener[] = [];
  #queues: QueueListener[] = [];
  #durable: DurableBackend | undefined;
  #stopping: Promise<void> | undefined;
  #port = 0;
  readonly #startedAt = new Date();

  private constructor(
    private readonly options: FunctionHostOptions,
    readonly config: HostConfig,
    readonly app: LoadedApp,
    readonly http: HttpFront,
  ) {}

  get port(): number {
    return this.#port;
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  get durableEnabled(): boolean {
    return this.#durable !== undefined;
  }

  get hostId(): string {
    return this.options.hostId;
  }

  get instanceId(): string {
    return this.options.instanceId;
  }

  get timers(): readonly TimerListener[] {
    return this.#timers;
  }

  static async start(options: FunctionHostOptions): Promise<FunctionHost> {
    validateHostId(options.hostId);
    const { env, logger } = options;
    const config = readHostConfig(options.appRoot);
    const app = await loadFunctionApp({ appRoot: options.appRoot, ...(options.main === undefined ? {} : { main: options.main }), logger });
    const functions = app.list();

    const queueListeners = new Map<string, QueueListener[]>();
    const outputs = new OutputBindings(functions, env, config.queues.messageEncoding, (queueName) => {
      for (const listener of queueListeners.get(queueName) ?? []) listener.notify();
    });
    // Timed out first, so a timed-out invocation's output bindings are never written (as on Azure).
    const invoker = new BindingInvoker(new TimeoutInvoker(app, config.functionTimeoutMs, logger.child('host')), outputs);
    const keys = FunctionKeys.fromEnv(env);
    if (keys.generatedSystemKey) {
      logger.warn('host.system_key_generated', {
        key: DURABLE_SYSTEM_KEY_NAME,
        hint: `Keys are on and ${KEY_SETTINGS.systemKeys} has no ${DURABLE_SYSTEM_KEY_NAME} key: one was generated for this process, so other instances do not know it. Set ${KEY_SETTINGS.systemKeys}=${DURABLE_SYSTEM_KEY_NAME}=<key> to share it.`,
      });
    }
    const holder: { host?: FunctionHost } = {};
    const http = new HttpFront({
      functions,
      routePrefix: config.routePrefix,
      invoker,
      keys,
      logger: logger.child('http'),
      status: () => holder.host?.status() ?? {},
    });
    const host = new FunctionHost(options, config, app, http);
    holder.host = host;

    // Validate and build every trigger before anything listens.
    const needsStorage = functions.some((fn) => fn.triggerType === 'timerTrigger');
    const hostBlobs = needsStorage ? blobServiceClient(readStorageConnection(env, DEFAULT_CONNECTION)) : undefined;
    for (const fn of functions) {
      if (fn.triggerType === 'timerTrigger') host.#timers.push(host.#timerFor(fn, hostBlobs as BlobServiceClient, invoker));
      if (fn.triggerType === 'queueTrigger') {
        const trigger = fn.bindings[fn.triggerName] ?? { type: 'queueTrigger', direction: 'in' };
        const target = resolveQueueTarget(fn.name, fn.triggerName, trigger, env);
        const listener = new QueueListener({
          fn,
          queue: target.service.getQueueClient(target.queueName),
          poisonQueue: target.service.getQueueClient(`${target.queueName}-poison`),
          options: config.queues,
          invoker,
          logger: logger.child('queue'),
        });
        host.#queues.push(listener);
        queueListeners.set(target.queueName, [...(queueListeners.get(target.queueName) ?? []), listener]);
      }
    }

    host.#port = await http.listen(options.port, options.listenHost ?? '127.0.0.1');
    try {
      await host.#startDurable(functions, invoker, keys);
      for (const listener of host.#queues) listener.start();
      await Promise.all(host.#timers.map((t) => t.start()));
    } catch (err) {
      await host.stop();
      throw err;
    }
    return host;
  }

  #timerFor(fn: HostedFunction, blobs: BlobServiceClient, invoker: BindingInvoker): TimerListener {
    const trigger = fn.bindings[fn.triggerName];
    const where = `Function "${fn.name}" binding "${fn.triggerName}"`;
    if (typeof trigger?.schedule !== 'string') throw new DevHostError('DEVHOST_BAD_BINDING', `${where}: schedule is missing.`, true);
    const schedule = parseTimerSchedule(resolveSettingExpression(trigger.schedule, this.options.env, where));
    return new TimerListener({
      fn,
      schedule,
      runOnStartup: trigger.runOnStartup === true,
      useMonitor: trigger.useMonitor !== false,
      invoker,
      blobService: blobs,
      hostId: this.options.hostId,
      instanceId: this.options.instanceId,
      listenerLockPeriodMs: this.config.singleton.listenerLockPeriodMs,
      recoveryPollingIntervalMs: this.config.singleton.listenerLockRecoveryPollingIntervalMs,
      logger: this.options.logger.child('timer'),
    });
  }

  async #startDurable(functions: readonly HostedFunction[], invoker: BindingInvoker, keys: FunctionKeys): Promise<void> {
    const needed = functions.some((fn) => DURABLE_TRIGGERS.has(fn.triggerType) || Object.values(fn.bindings).some((b) => DURABLE_CLIENT_BINDINGS.has(b.type)));
    if (!needed) return;
    const durableTask = this.config.durableTask;
    const hub = durableTask.hubName === undefined ? DEFAULT_TASK_HUB : resolveSettingExpression(durableTask.hubName, this.options.env, 'host.json extensions.durableTask.hubName');
    const systemKey = keys.systemKey(DURABLE_SYSTEM_KEY_NAME);
    const backend = createDurableBackend({
      invoker,
      storage: readStorageConnection(this.options.env, durableTask.connectionName ?? DEFAULT_CONNECTION),
      taskHub: hub,
      baseUrl: this.baseUrl,
      instanceId: this.options.instanceId,
      // The backend names its own child logger.
      logger: this.options.logger,
      durableTask,
      dispatch: {
        episodes: functions.some((fn) => fn.triggerType === 'orchestrationTrigger' || fn.triggerType === 'entityTrigger'),
        activities: functions.some((fn) => fn.triggerType === 'activityTrigger'),
      },
      ...(systemKey === undefined ? {} : { webhookAuth: { systemKey, authorize: (presented: string | undefined) => keys.authorizeSystem(DURABLE_SYSTEM_KEY_NAME, presented) } }),
    });
    this.#durable = backend;
    this.http.setDurable(backend);
    this.app.provideInput('durableClient', () => backend.clientBindingValue());
    this.app.provideInput('orchestrationClient', () => backend.clientBindingValue());
    await backend.start();
  }

  /** The value a `durableClient` input binding gets (for callers outside the app: tests, benchmarks); undefined without Durable. */
  durableClientBinding(): unknown {
    return this.#durable?.clientBindingValue();
  }

  status(): Record<string, unknown> {
    return {
      id: this.options.hostId,
      instanceId: this.options.instanceId,
      state: this.#stopping === undefined ? 'Running' : 'Stopping',
      version: 'devhost',
      startedAt: this.#startedAt.toISOString(),
      functions: this.app.list().map((fn) => fn.name),
      timersListening: this.#timers.filter((t) => t.listening).length,
      durable: this.#durable !== undefined,
    };
  }

  /** Graceful stop; idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const drainMs = this.options.drainTimeoutMs ?? 10_000;
    const log = this.options.logger;
    const results = await Promise.allSettled([...this.#queues.map((q) => q.stop(drainMs)), ...this.#timers.map((t) => t.stop())]);
    for (const r of results) if (r.status === 'rejected') log.warn('host.stop_trigger_failed', { error: r.reason as unknown });
    if (this.#durable !== undefined) {
      try {
        await this.#durable.stop();
      } catch (err) {
        log.warn('host.stop_durable_failed', { error: err });
      }
    }
    await this.http.close(Math.min(drainMs, 5_000));
    if (!(await this.app.drain(drainMs))) log.warn('host.drain_timeout', { inFlight: this.app.inFlight, drainTimeoutMs: drainMs });
    try {
      await this.app.terminate();
    } catch (err) {
      log.warn('host.app_terminate_failed', { error: err });
    }
  }
}
