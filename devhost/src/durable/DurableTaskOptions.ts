/**
 * host.json `extensions.durableTask`, read as the Durable extension reads it for the Azure Storage
 * provider, with its defaults outside the Consumption plan and its validation
 * (Azure/azure-functions-durable-extension Options/DurableTaskOptions.cs, Options/AzureStorageOptions.cs,
 * AzureStorageDurabilityProviderFactory.cs). Property names are case-insensitive, as in the host's
 * configuration binder.
 *
 * Honored: hubName, maxConcurrentActivityFunctions and maxConcurrentOrchestratorFunctions (default
 * 10 x processor count), maxOrchestrationActions (100,000), overridableExistingInstanceStates
 * (NonRunningStates), extendedSessionsEnabled (turned off with a warning for Node.js, like the
 * extension), and storageProvider.{connectionName, partitionCount (4), controlQueueBatchSize (32),
 * controlQueueBufferThreshold (256), controlQueueVisibilityTimeout (5 min, 1 to 60),
 * workItemQueueVisibilityTimeout (5 min), maxQueuePollingInterval (30 s)}. Logging only: tracing.
 * Settings the real extension acts on but this backend cannot reproduce fail the start with
 * DEVHOST_UNSUPPORTED_HOST_JSON naming them, rather than being silently ignored.
 */
import { availableParallelism } from 'node:os';

import { DevHostError } from '../errors';
import { badHostJson, durationProp, intProp, prop } from '../hostJsonProps';

export type OverridableStates = 'NonRunningStates' | 'AnyState';

export interface DurableTaskOptions {
  /** Raw hubName (may hold `%SETTING%`), undefined when absent. */
  readonly hubName: string | undefined;
  readonly maxConcurrentActivityFunctions: number;
  readonly maxConcurrentOrchestratorFunctions: number;
  readonly maxOrchestrationActions: number;
  readonly overridableExistingInstanceStates: OverridableStates;
  /** storageProvider.connectionName (or connectionStringName); undefined: AzureWebJobsStorage. */
  readonly connectionName: string | undefined;
  readonly partitionCount: number;
  readonly controlQueueBatchSize: number;
  readonly controlQueueBufferThreshold: number;
  readonly controlQueueVisibilityTimeoutMs: number;
  readonly workItemQueueVisibilityTimeoutMs: number;
  readonly maxQueuePollingIntervalMs: number;
  /** What was asked for but turned off, to warn about at start (extendedSessionsEnabled for Node.js). */
  readonly warnings: readonly string[];
}

/** Not the Consumption plan: 10 x processor count (AzureStorageDurabilityProviderFactory). */
const defaultConcurrency = (): number => 10 * availableParallelism();

export const DURABLE_TASK_DEFAULTS = {
  maxOrchestrationActions: 100_000,
  partitionCount: 4,
  controlQueueBatchSize: 32,
  controlQueueBufferThreshold: 256,
  controlQueueVisibilityTimeoutMs: 5 * 60_000,
  workItemQueueVisibilityTimeoutMs: 5 * 60_000,
  maxQueuePollingIntervalMs: 30_000,
} as const;

/** Options the extension acts on that this backend does not reproduce: refused unless set to the value that changes nothing. */
const UNSUPPORTED: ReadonlyArray<{ readonly path: string; readonly harmless: (value: unknown) => boolean; readonly why: string }> = [
  { path: 'useGracefulShutdown', harmless: (v) => v === false, why: 'graceful shutdown of in-flight orchestrations is not implemented' },
  { path: 'storeInputsInOrchestrationHistory', harmless: (v) => v === false, why: 'histories never store activity inputs here' },
  { path: 'localRpcEndpointEnabled', harmless: (v) => v === true || v === null, why: 'the durable-functions client always uses the local RPC endpoint here' },
  { path: 'notifications', harmless: (v) => !hasEventGrid(v), why: 'Event Grid lifecycle notifications are not sent' },
  { path: 'storageProvider.trackingStoreConnectionName', harmless: (v) => v === null, why: 'history and instances always live in the task hub connection here' },
  { path: 'storageProvider.trackingStoreNamePrefix', harmless: (v) => v === null, why: 'history and instances always live in the task hub connection here' },
  { path: 'storageProvider.fetchLargeMessagesAutomatically', harmless: (v) => v === true, why: 'large payloads are always fetched here' },
  { path: 'storageProvider.allowReplayingTerminalInstances', harmless: (v) => v === false, why: 'events for finished instances are always discarded here' },
];

function hasEventGrid(value: unknown): boolean {
  const grid = prop(typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : undefined, 'eventGrid');
  return typeof grid === 'object' && grid !== null && Object.keys(grid).length > 0;
}

function at(section: Record<string, unknown> | undefined, path: string): unknown {
  let current: unknown = section;
  for (const key of path.split('.')) {
    current = prop(typeof current === 'object' && current !== null ? (current as Record<string, unknown>) : undefined, key);
  }
  return current;
}

function boolProp(obj: Record<string, unknown> | undefined, path: string, name: string): boolean | undefined {
  const raw = prop(obj, name);
  if (raw === undefined) return undefined;
  if (typeof raw === 'boolean') return raw;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw badHostJson(`${path}.${name}`, 'must be true or false.');
}

export function parseDurableTaskOptions(section: Record<string, unknown> | undefined): DurableTaskOptions {
  const where = 'extensions.durableTask';
  for (const option of UNSUPPORTED) {
    const value = at(section, option.path);
    if (value !== undefined && !option.harmless(value)) {
      throw new DevHostError(
        'DEVHOST_UNSUPPORTED_HOST_JSON',
        `host.json ${where}.${option.path} is set, but the development host's Durable backend cannot honor it (${option.why}). Remove it to run here.`,
        true,
      );
    }
  }
  const storage = prop(section, 'storageProvider');
  const provider = typeof storage === 'object' && storage !== null ? (storage as Record<string, unknown>) : undefined;
  const storageWhere = `${where}.storageProvider`;
  const type = prop(provider, 'type');
  if (type !== undefined && !(typeof type === 'string' && ['azurestorage', 'azure_storage'].includes(type.toLowerCase()))) {
    throw new DevHostError('DEVHOST_UNSUPPORTED_HOST_JSON', `host.json ${storageWhere}.type ${JSON.stringify(type)} is not supported: the development host runs the Azure Storage provider only.`, true);
  }
  const hub = prop(section, 'hubName');
  if (hub !== undefined && typeof hub !== 'string') throw badHostJson(`${where}.hubName`, 'must be a string.');
  const connection = prop(provider, 'connectionName') ?? prop(provider, 'connectionStringName');
  if (connection !== undefined && (typeof connection !== 'string' || connection === '')) throw badHostJson(`${storageWhere}.connectionName`, 'must be an app setting name.');
  const states = prop(section, 'overridableExistingInstanceStates') ?? 'NonRunningStates';
  const overridable = typeof states === 'string' ? (['NonRunningStates', 'AnyState'] as const).find((s) => s.toLowerCase() === states.toLowerCase()) : undefined;
  if (overridable === undefined) throw badHostJson(`${where}.overridableExistingInstanceStates`, 'must be "NonRunningStates" or "AnyState".');
  const warnings: string[] = [];
  if (boolProp(section, where, 'extendedSessionsEnabled') === true) {
    warnings.push('Durable Functions does not work with extendedSessions = true for non-.NET languages. This value is being set to false instead.');
  }
  const big = 1_000_000_000;
  return {
    hubName: hub,
    maxConcurrentActivityFunctions: intProp(section, where, 'maxConcurrentActivityFunctions', defaultConcurrency(), 1, big),
    maxConcurrentOrchestratorFunctions: intProp(section, where, 'maxConcurrentOrchestratorFunctions', defaultConcurrency(), 1, big),
    maxOrchestrationActions: intProp(section, where, 'maxOrchestrationActions', DURABLE_TASK_DEFAULTS.maxOrchestrationActions, 1, 2_147_483_647),
    overridableExistingInstanceStates: overridable,
    connectionName: connection,
    partitionCount: intProp(provider, storageWhere, 'partitionCount', DURABLE_TASK_DEFAULTS.partitionCount, 1, 16),
    controlQueueBatchSize: intProp(provider, storageWhere, 'controlQueueBatchSize', DURABLE_TASK_DEFAULTS.controlQueueBatchSize, 1, 32),
    controlQueueBufferThreshold: intProp(provider, storageWhere, 'controlQueueBufferThreshold', DURABLE_TASK_DEFAULTS.controlQueueBufferThreshold, 1, 1000),
    controlQueueVisibilityTimeoutMs: durationProp(provider, storageWhere, 'controlQueueVisibilityTimeout', DURABLE_TASK_DEFAULTS.controlQueueVisibilityTimeoutMs, 60_000, 3_600_000),
    workItemQueueVisibilityTimeoutMs: durationProp(provider, storageWhere, 'workItemQueueVisibilityTimeout', DURABLE_TASK_DEFAULTS.workItemQueueVisibilityTimeoutMs, 1_000, 7 * 24 * 3_600_000),
    maxQueuePollingIntervalMs: durationProp(provider, storageWhere, 'maxQueuePollingInterval', DURABLE_TASK_DEFAULTS.maxQueuePollingIntervalMs, 1),
    warnings,
  };
}
