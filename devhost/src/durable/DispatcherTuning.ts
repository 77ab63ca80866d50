/**
 * The dispatcher's knobs: what host.json durableTask sets (tuningFrom) over the defaults of all of
 * them (DEFAULT_TUNING). In a file of their own so that the dispatcher's parts and the backend that
 * configures them read one definition.
 */
import { availableParallelism } from 'node:os';

import { DURABLE_TASK_DEFAULTS, type DurableTaskOptions } from './DurableTaskOptions';

export interface DispatcherTuning {
  /** storageProvider.controlQueueVisibilityTimeout: how long received control messages stay hidden. */
  readonly controlVisibilitySeconds: number;
  /** storageProvider.workItemQueueVisibilityTimeout: how long an activity message stays hidden between renewals. */
  readonly workVisibilitySeconds: number;
  /** TaskHubQueue's minimum polling delay. */
  readonly minPollIntervalMs: number;
  /** storageProvider.maxQueuePollingInterval. */
  readonly maxPollIntervalMs: number;
  /** maxConcurrentOrchestratorFunctions. */
  readonly maxConcurrentEpisodes: number;
  /** maxConcurrentActivityFunctions. */
  readonly maxConcurrentActivities: number;
  /** storageProvider.controlQueueBatchSize. */
  readonly controlQueueBatchSize: number;
  /** storageProvider.controlQueueBufferThreshold: received control messages held before polling pauses. */
  readonly controlQueueBufferThreshold: number;
  readonly maxOrchestrationActions: number;
  /** OrchestrationSessionManager: an unmatched start message is deferred until this dequeue count, then discarded. */
  readonly startMessageMaxDequeues: number;
  readonly appliedMessageIdsKept: number;
  /** Graceful stop waits this long for running work, then leaves it to the queues. */
  readonly drainTimeoutMs: number;
  /**
   * A message this process adds wakes its own poller of that queue (true, as TaskHubQueue.AddMessageAsync
   * does). `DEVHOST_DURABLE_WAKE_ON_SEND=false` turns it off: every process here polls every control
   * queue (no partition leases), so with it on the sender always wins its own messages and a run stays
   * on one process; a scenario that needs another process to take a run's message turns it off.
   */
  readonly wakeOnSend?: boolean;
}

export const DEFAULT_TUNING: DispatcherTuning = {
  controlVisibilitySeconds: DURABLE_TASK_DEFAULTS.controlQueueVisibilityTimeoutMs / 1000,
  workVisibilitySeconds: DURABLE_TASK_DEFAULTS.workItemQueueVisibilityTimeoutMs / 1000,
  minPollIntervalMs: 50,
  maxPollIntervalMs: DURABLE_TASK_DEFAULTS.maxQueuePollingIntervalMs,
  maxConcurrentEpisodes: 10 * availableParallelism(),
  maxConcurrentActivities: 10 * availableParallelism(),
  controlQueueBatchSize: DURABLE_TASK_DEFAULTS.controlQueueBatchSize,
  controlQueueBufferThreshold: DURABLE_TASK_DEFAULTS.controlQueueBufferThreshold,
  maxOrchestrationActions: DURABLE_TASK_DEFAULTS.maxOrchestrationActions,
  startMessageMaxDequeues: 10,
  appliedMessageIdsKept: 512,
  drainTimeoutMs: 10_000,
};

/** The tuning host.json asks for. */
export function tuningFrom(options: DurableTaskOptions): DispatcherTuning {
  return {
    ...DEFAULT_TUNING,
    controlVisibilitySeconds: options.controlQueueVisibilityTimeoutMs / 1000,
    workVisibilitySeconds: options.workItemQueueVisibilityTimeoutMs / 1000,
    maxPollIntervalMs: Math.max(DEFAULT_TUNING.minPollIntervalMs, options.maxQueuePollingIntervalMs),
    maxConcurrentEpisodes: options.maxConcurrentOrchestratorFunctions,
    maxConcurrentActivities: options.maxConcurrentActivityFunctions,
    controlQueueBatchSize: options.controlQueueBatchSize,
    controlQueueBufferThreshold: options.controlQueueBufferThreshold,
    maxOrchestrationActions: options.maxOrchestrationActions,
  };
}
