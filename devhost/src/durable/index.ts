/**
 * The development host's Durable backend: the extension's HTTP API and client binding payload
 * (DurableHttpApi), orchestration episodes replayed by the durable-functions SDK's own executor
 * and activities (DurableDispatcher), state in blob storage and queues under the task hub's name
 * (InstanceStore, TaskHubQueues). Any number of host processes may run one against the same
 * storage; killing one loses nothing (see DurableDispatcher). What is supported and what differs
 * from the real extension: README.md in this folder.
 */
import { type DurableBackend, type DurableBackendOptions } from '../contracts';
import { DEFAULT_TUNING, type DispatcherTuning,DurableDispatcher } from './DurableDispatcher';
import { DurableHttpApi } from './DurableHttpApi';
import { InstanceStore } from './InstanceStore';
import { taskHubNames } from './taskHubNames';
import { TaskHubQueues } from './TaskHubQueues';

export { DEFAULT_TUNING, type DispatcherTuning } from './DurableDispatcher';
export { clientBindingPayload, WEBHOOK_PATH } from './DurableHttpApi';

export interface DurableBackendExtras {
  /** Overrides of the dispatcher's timing and concurrency (tests shorten visibility timeouts). */
  readonly tuning?: Partial<DispatcherTuning>;
  /** Number of control queues (partitions); every process polls all of them. Default 1. */
  readonly controlQueueCount?: number;
  /** Longest queue delay of a timer message before it is re-chained (default 6 days; Azure's limit is 7). */
  readonly maxTimerMessageDelaySeconds?: number;
}

export function createDurableBackend(options: DurableBackendOptions, extras: DurableBackendExtras = {}): DurableBackend {
  const names = taskHubNames(options.taskHub, extras.controlQueueCount ?? 1);
  const logger = options.logger.child('durable');
  const store = new InstanceStore(options.storage, names);
  const queues = new TaskHubQueues(options.storage, names, logger, extras.maxTimerMessageDelaySeconds);
  const tuning: DispatcherTuning = { ...DEFAULT_TUNING, ...extras.tuning };
  const dispatcher = new DurableDispatcher({ invoker: options.invoker, store, queues, logger, tuning });
  const api = new DurableHttpApi({
    taskHub: options.taskHub,
    baseUrl: options.baseUrl,
    invoker: options.invoker,
    store,
    queues,
    logger,
    onControlMessage: () => dispatcher.wakeControl(),
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
      logger.info('durable.started', { taskHub: options.taskHub, hostInstance: options.instanceId, controlQueues: names.controlQueues.length });
    },
    async stop() {
      if (!started) return;
      started = false;
      await dispatcher.stop();
      logger.info('durable.stopped', { taskHub: options.taskHub, hostInstance: options.instanceId });
    },
  };
}
