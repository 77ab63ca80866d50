/**
 * The development host's Durable backend: the extension's HTTP API and client binding payload
 * (DurableHttpApi), orchestration episodes replayed by the durable-functions SDK's own executor
 * (EpisodeDispatcher) and activities (ActivityDispatcher), run together by DurableDispatcher, state
 * in blob storage and queues under the task hub's name (InstanceStore, TaskHubQueues), configured by
 * host.json durableTask as the extension reads it (DurableTaskOptions). Any number of host processes
 * may run one against the same storage; killing one loses nothing (see EpisodeDispatcher and
 * ActivityDispatcher). What it reproduces, what it refuses and where it differs from the real
 * extension: the package README.
 */
import { type DurableBackend, type DurableBackendOptions } from '../contracts';
import { type DispatcherTuning, tuningFrom } from './DispatcherTuning';
import { DurableDispatcher } from './DurableDispatcher';
import { DurableHttpApi } from './DurableHttpApi';
import { parseDurableTaskOptions } from './DurableTaskOptions';
import { InstanceStore } from './InstanceStore';
import { taskHubNames } from './taskHubNames';
import { TaskHubQueues } from './TaskHubQueues';

export { DEFAULT_TUNING, type DispatcherTuning, tuningFrom } from './DispatcherTuning';
export { clientBindingPayload, RPC_PATH, WEBHOOK_PATH, type WebhookAuth } from './DurableHttpApi';
export { type DurableTaskOptions, parseDurableTaskOptions } from './DurableTaskOptions';

export interface DurableBackendExtras {
  /** Overrides of what host.json sets (tests shorten visibility timeouts and polling). */
  readonly tuning?: Partial<DispatcherTuning>;
  /** Longest queue delay of a timer message before it is re-chained (default 6 days; Azure's limit is 7). */
  readonly maxTimerMessageDelaySeconds?: number;
}

export function createDurableBackend(options: DurableBackendOptions, extras: DurableBackendExtras = {}): DurableBackend {
  const durableTask = options.durableTask ?? parseDurableTaskOptions(undefined);
  const names = taskHubNames(options.taskHub, durableTask.partitionCount);
  const logger = options.logger.child('durable');
  for (const warning of durableTask.warnings) logger.warn('durable.config.adjusted', { message: warning });
  const store = new InstanceStore(options.storage, names);
  const queues = new TaskHubQueues(options.storage, names, logger, extras.maxTimerMessageDelaySeconds);
  const wakeOnSend = process.env.DEVHOST_DURABLE_WAKE_ON_SEND?.trim().toLowerCase() !== 'false';
  const tuning: DispatcherTuning = { ...tuningFrom(durableTask), wakeOnSend, ...extras.tuning };
  const dispatcher = new DurableDispatcher({
    invoker: options.invoker,
    store,
    queues,
    logger,
    tuning,
    ...(options.dispatch === undefined ? {} : { dispatch: options.dispatch }),
  });
  const api = new DurableHttpApi({
    taskHub: options.taskHub,
    baseUrl: options.baseUrl,
    invoker: options.invoker,
    store,
    queues,
    logger,
    overridableExistingInstanceStates: durableTask.overridableExistingInstanceStates,
    ...(options.webhookAuth === undefined ? {} : { webhookAuth: options.webhookAuth }),
  });
  let started = false;
  return {
    clientBindingValue: () => api.clientBindingValue(),
    handleHttp: (req, res, url) => api.handle(req, res, url),
    async start() {
      if (started) return;
      await Promise.all([store.ensureReady(), queues.ensureReady()]);
      dispatcher.start();
      started = true;
      logger.info('durable.started', { taskHub: options.taskHub, hostInstance: options.instanceId, partitions: names.controlQueues.length });
    },
    async stop() {
      if (!started) return;
      started = false;
      await dispatcher.stop();
      logger.info('durable.stopped', { taskHub: options.taskHub, hostInstance: options.instanceId });
    },
  };
}
