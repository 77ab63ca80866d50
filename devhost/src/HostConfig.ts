/**
 * The parts of host.json the development host honors, read and validated once at start with the
 * real host's defaults and limits: `extensions.http.routePrefix`, `extensions.queues`,
 * `singleton`, `extensions.durableTask.hubName`, `functionTimeout`. Anything else in host.json is
 * ignored (logging, extension bundle, Application Insights). A value the host would reject fails
 * with `DEVHOST_BAD_HOST_JSON` naming the property.
 *
 * Also here: `%SETTING%` resolution like the host's name resolver (a binding property that is
 * wholly or partly `%NAME%` takes the app setting's value; a missing setting is an error).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { DevHostError } from './errors';
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
  /** Raw `extensions.durableTask.hubName` (may hold `%SETTING%`), undefined when absent. */
  readonly durableHubName: string | undefined;
  /** `functionTimeout`, informational (the dev host does not cancel invocations). */
  readonly functionTimeoutMs: number | undefined;
}

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

function badHostJson(property: string, why: string): DevHostError {
  return new DevHostError('DEVHOST_BAD_HOST_JSON', `host.json ${property} ${why}`, true);
}

function objectAt(root: unknown, path: readonly string[]): Record<string, unknown> | undefined {
  let current: unknown = root;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    // host.json property names are case-insensitive in the host's configuration binder.
    const entry = Object.entries(current as Record<string, unknown>).find(([k]) => k.toLowerCase() === key.toLowerCase());
    current = entry?.[1];
  }
  return typeof current === 'object' && current !== null ? (current as Record<string, unknown>) : undefined;
}

function prop(obj: Record<string, unknown> | undefined, name: string): unknown {
  if (obj === undefined) return undefined;
  return Object.entries(obj).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
}

function intProp(obj: Record<string, unknown> | undefined, path: string, name: string, fallback: number, min: number, max: number): number {
  const raw = prop(obj, name);
  if (raw === undefined) return fallback;
  const value = typeof raw === 'string' ? Number(raw) : raw;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw badHostJson(`${path}.${name}`, `must be an integer from ${min} to ${max}.`);
  }
  return value;
}

function durationProp(obj: Record<string, unknown> | undefined, path: string, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = prop(obj, name);
  if (raw === undefined) return fallback;
  const ms = typeof raw === 'string' ? parseTimeSpanMs(raw) : undefined;
  if (ms === undefined || ms < min || ms > max) {
    throw badHostJson(`${path}.${name}`, `must be a TimeSpan "hh:mm:ss" from ${min / 1000} s${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max / 1000} s`}.`);
  }
  return ms;
}

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

  const durable = objectAt(document, ['extensions', 'durableTask']);
  const hub = prop(durable, 'hubName');
  const timeoutRaw = prop(objectAt(document, []), 'functionTimeout');
  const functionTimeoutMs = typeof timeoutRaw === 'string' ? parseTimeSpanMs(timeoutRaw) : undefined;

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
    durableHubName: typeof hub === 'string' ? hub : undefined,
    functionTimeoutMs,
  };
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
