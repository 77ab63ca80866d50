/**
 * The parts of host.json the development host honors, read and validated once at start with the
 * real host's defaults and limits: `extensions.http.routePrefix`, `extensions.queues`,
 * `singleton`, `extensions.durableTask` (see DurableTaskOptions), `functionTimeout`. Logging,
 * extension bundle and Application Insights settings are ignored. A value the host would reject
 * fails with `DEVHOST_BAD_HOST_JSON` naming the property.
 *
 * Also here: `%SETTING%` resolution like the host's name resolver (a binding property that is
 * wholly or partly `%NAME%` takes the app setting's value; a missing setting is an error).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { type DurableTaskOptions, parseDurableTaskOptions } from './durable/DurableTaskOptions';
import { DevHostError } from './errors';
import { badHostJson, durationProp, intProp, objectAt, prop } from './hostJsonProps';
import { parseTimeSpanMs } from './schedule/TimerSchedule';

export type MessageEncoding = 'base64' | 'none';

export interface QueuesOptions {
  /** Messages fetched per poll (1..32). Host default 16. */
  readonly batchSize: number;
  /** Fetch the next batch when fewer than this many are still running. Host default batchSize/2. */
  readonly newBatchThreshold: number;
  /** Longest wait between polls of an empty queue. Host default 1 minute; at least 100 ms. */
  readonly maxPollingIntervalMs: number;
  /** How long a failed message stays invisible before the retry. Host default 0. */
  readonly visibilityTimeoutMs: number;
  /** Attempts before a message goes to `<queue>-poison`. Host default 5. */
  readonly maxDequeueCount: number;
  readonly messageEncoding: MessageEncoding;
}

export interface SingletonOptions {
  /** Lease duration of a listener lock (15..60 s). Host default 60 s. */
  readonly listenerLockPeriodMs: number;
  /** How often an instance without the listener lock tries again (>= 15 s). Host default 60 s. */
  readonly listenerLockRecoveryPollingIntervalMs: number;
}

export interface HostConfig {
  readonly routePrefix: string;
  readonly queues: QueuesOptions;
  readonly singleton: SingletonOptions;
  /** `extensions.durableTask`, read as the Durable extension reads it (see DurableTaskOptions). */
  readonly durableTask: DurableTaskOptions;
  /** `functionTimeout` (default 30 minutes outside the Consumption plan); undefined for "-1" (no limit). */
  readonly functionTimeoutMs: number | undefined;
}

/** ScriptHostOptionsSetup.DefaultFunctionTimeout (plans other than Consumption) and MinFunctionTimeout. */
export const DEFAULT_FUNCTION_TIMEOUT_MS = 30 * 60_000;
const MIN_FUNCTION_TIMEOUT_MS = 1_000;

export const QUEUE_DEFAULTS = {
  batchSize: 16,
  maxPollingIntervalMs: 60_000,
  visibilityTimeoutMs: 0,
  maxDequeueCount: 5,
  messageEncoding: 'base64',
} as const;
export const MAX_QUEUE_BATCH_SIZE = 32;
export const MIN_QUEUE_POLLING_INTERVAL_MS = 100;
export const SINGLETON_DEFAULTS = { listenerLockPeriodMs: 60_000, listenerLockRecoveryPollingIntervalMs: 60_000 } as const;

/** Validates an already-parsed host.json document. */
export function parseHostConfig(document: unknown): HostConfig {
  const http = objectAt(document, ['extensions', 'http']);
  const routePrefixRaw = prop(http, 'routePrefix');
  if (routePrefixRaw !== undefined && typeof routePrefixRaw !== 'string') throw badHostJson('extensions.http.routePrefix', 'must be a string.');
  const routePrefix = (routePrefixRaw ?? 'api').replace(/^\/+|\/+$/g, '');

  const q = objectAt(document, ['extensions', 'queues']);
  const batchSize = intProp(q, 'extensions.queues', 'batchSize', QUEUE_DEFAULTS.batchSize, 1, MAX_QUEUE_BATCH_SIZE);
  const newBatchThreshold = intProp(q, 'extensions.queues', 'newBatchThreshold', Math.floor(batchSize / 2), 0, 10_000);
  const maxPollingIntervalMs = durationProp(q, 'extensions.queues', 'maxPollingInterval', QUEUE_DEFAULTS.maxPollingIntervalMs, MIN_QUEUE_POLLING_INTERVAL_MS);
  const visibilityTimeoutMs = durationProp(q, 'extensions.queues', 'visibilityTimeout', QUEUE_DEFAULTS.visibilityTimeoutMs, 0, 7 * 24 * 3600 * 1000);
  const maxDequeueCount = intProp(q, 'extensions.queues', 'maxDequeueCount', QUEUE_DEFAULTS.maxDequeueCount, 1, 10_000);
  const encodingRaw = prop(q, 'messageEncoding') ?? QUEUE_DEFAULTS.messageEncoding;
  if (typeof encodingRaw !== 'string' || !['base64', 'none'].includes(encodingRaw.toLowerCase())) {
    throw badHostJson('extensions.queues.messageEncoding', 'must be "base64" or "none".');
  }

  const s = objectAt(document, ['singleton']);
  const listenerLockPeriodMs = durationProp(s, 'singleton', 'listenerLockPeriod', SINGLETON_DEFAULTS.listenerLockPeriodMs, 15_000, 60_000);
  const listenerLockRecoveryPollingIntervalMs = durationProp(
    s,
    'singleton',
    'listenerLockRecoveryPollingInterval',
    SINGLETON_DEFAULTS.listenerLockRecoveryPollingIntervalMs,
    15_000,
  );

  const durableTask = parseDurableTaskOptions(objectAt(document, ['extensions', 'durableTask']));
  const functionTimeoutMs = parseFunctionTimeout(prop(objectAt(document, []), 'functionTimeout'));

  return {
    routePrefix,
    queues: {
      batchSize,
      newBatchThreshold,
      maxPollingIntervalMs,
      visibilityTimeoutMs,
      maxDequeueCount,
      messageEncoding: encodingRaw.toLowerCase() as MessageEncoding,
    },
    singleton: { listenerLockPeriodMs, listenerLockRecoveryPollingIntervalMs },
    durableTask,
    functionTimeoutMs,
  };
}

function parseFunctionTimeout(raw: unknown): number | undefined {
  if (raw === undefined || raw === null) return DEFAULT_FUNCTION_TIMEOUT_MS;
  if (raw === '-1' || raw === -1) return undefined;
  const ms = typeof raw === 'string' ? parseTimeSpanMs(raw) : undefined;
  if (ms === undefined || ms < MIN_FUNCTION_TIMEOUT_MS) throw badHostJson('functionTimeout', 'must be a TimeSpan "hh:mm:ss" of at least 1 second, or "-1" for no limit.');
  return ms;
}

/** Reads `<appRoot>/host.json`; a missing file is the host's defaults, an unreadable one an error. */
export function readHostConfig(appRoot: string): HostConfig {
  const path = join(appRoot, 'host.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return parseHostConfig({});
  }
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (err) {
    throw new DevHostError('DEVHOST_BAD_HOST_JSON', `${path} is not valid JSON: ${err instanceof Error ? err.message : String(err)}`, true);
  }
  return parseHostConfig(document);
}

/**
 * Resolves `%NAME%` parts of a binding property from app settings, like the host's name resolver.
 * A missing setting fails with `DEVHOST_UNRESOLVED_SETTING` naming it (never its value).
 */
export function resolveSettingExpression(value: string, env: Readonly<Record<string, string | undefined>>, where: string): string {
  return value.replace(/%([^%]+)%/g, (_match, name: string) => {
    const resolved = env[name];
    if (resolved === undefined || resolved === '') {
      throw new DevHostError('DEVHOST_UNRESOLVED_SETTING', `${where}: '%${name}%' does not resolve to a value (app setting ${name} is not set).`, true);
    }
    return resolved;
  });
}
