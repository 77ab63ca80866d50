/**
 * Function keys for the development host, enforced like the real host with keys on: a request to a
 * `function`-level function needs a function key, a host key or the master key; an `admin`-level
 * one needs the master key; `anonymous` is always open. The key is read from the `x-functions-key`
 * header or the `code` query parameter. A missing or wrong key is 401 with an empty body.
 *
 * Where the keys come from (app settings, so `local.settings.json` Values work):
 * - `DEVHOST_MASTER_KEY`: the master key (the `_master` host key on Azure);
 * - `DEVHOST_HOST_KEYS`: comma-separated host keys, valid for every function;
 * - `DEVHOST_FUNCTION_KEYS`: `name=key` pairs separated by `;` or `,` (a function may have several);
 * - `DEVHOST_SYSTEM_KEYS`: `name=key` pairs of extension system keys (`durabletask_extension=...`
 *   opens the Durable webhooks; the master key opens them too). With keys on and no such key, one is
 *   generated for the process (instances then do not share it: set it to share it).
 * With none of the first three set, keys are off and every function is open, like `func start` locally.
 *
 * Keys are compared in constant time and never logged or echoed.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';

import { DevHostError } from '../errors';

export const KEY_SETTINGS = {
  masterKey: 'DEVHOST_MASTER_KEY',
  hostKeys: 'DEVHOST_HOST_KEYS',
  functionKeys: 'DEVHOST_FUNCTION_KEYS',
  systemKeys: 'DEVHOST_SYSTEM_KEYS',
} as const;

/** The Durable extension's system key name (its webhooks' AuthorizationLevel.System key). */
export const DURABLE_SYSTEM_KEY_NAME = 'durabletask_extension';

export type AuthLevel = 'anonymous' | 'function' | 'admin';

function splitList(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((k) => k.trim())
    .filter((k) => k !== '');
}

function sameKey(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  return x.length === y.length && timingSafeEqual(x, y);
}

export class FunctionKeys {
  private constructor(
    private readonly masterKey: string | undefined,
    private readonly hostKeys: readonly string[],
    private readonly functionKeys: ReadonlyMap<string, readonly string[]>,
    private readonly systemKeys: ReadonlyMap<string, readonly string[]>,
    /** True when a system key had to be generated (the caller warns: other instances will not know it). */
    readonly generatedSystemKey: boolean,
  ) {}

  static fromEnv(env: Readonly<Record<string, string | undefined>>): FunctionKeys {
    const master = env[KEY_SETTINGS.masterKey]?.trim();
    const byFunction = namedKeys(env, KEY_SETTINGS.functionKeys, 'functionName');
    const system = namedKeys(env, KEY_SETTINGS.systemKeys, 'extensionName');
    const hostKeys = splitList(env[KEY_SETTINGS.hostKeys]);
    const enabled = (master !== undefined && master !== '') || hostKeys.length > 0 || byFunction.size > 0;
    // The real host creates an extension's system key on first use; so does this one, per process.
    const generate = enabled && !system.has(DURABLE_SYSTEM_KEY_NAME);
    if (generate) system.set(DURABLE_SYSTEM_KEY_NAME, [randomBytes(32).toString('base64url')]);
    return new FunctionKeys(master === '' ? undefined : master, hostKeys, byFunction, system, generate);
  }

  /** True when any key is configured (then function and admin levels are enforced). */
  get enabled(): boolean {
    return this.masterKey !== undefined || this.hostKeys.length > 0 || this.functionKeys.size > 0;
  }

  /** Whether `presented` (undefined when none was sent) opens a function with `level`. */
  authorize(level: AuthLevel, functionName: string, presented: string | undefined): boolean {
    if (level === 'anonymous' || !this.enabled) return true;
    if (presented === undefined || presented === '') return false;
    if (this.masterKey !== undefined && sameKey(presented, this.masterKey)) return true;
    if (level === 'admin') return false;
    if (this.hostKeys.some((k) => sameKey(presented, k))) return true;
    return (this.functionKeys.get(functionName.toLowerCase()) ?? []).some((k) => sameKey(presented, k));
  }

  /** An extension's system key (with keys on), e.g. `durabletask_extension`; undefined with keys off. */
  systemKey(name: string): string | undefined {
    return this.enabled ? this.systemKeys.get(name.toLowerCase())?.[0] : undefined;
  }

  /** AuthorizationLevel.System: the named system key or the master key (always true with keys off). */
  authorizeSystem(name: string, presented: string | undefined): boolean {
    if (!this.enabled) return true;
    if (presented === undefined || presented === '') return false;
    if (this.masterKey !== undefined && sameKey(presented, this.masterKey)) return true;
    return (this.systemKeys.get(name.toLowerCase()) ?? []).some((k) => sameKey(presented, k));
  }
}

/** `name=key` pairs separated by `;` or `,`, names case-insensitive; never echoes a pair (it holds a key). */
function namedKeys(env: Readonly<Record<string, string | undefined>>, setting: string, what: string): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const pair of (env[setting] ?? '').split(/[;,]/)) {
    const trimmed = pair.trim();
    if (trimmed === '') continue;
    const eq = trimmed.indexOf('=');
    const name = eq > 0 ? trimmed.slice(0, eq).trim() : '';
    const key = eq > 0 ? trimmed.slice(eq + 1).trim() : '';
    if (name === '' || key === '') throw new DevHostError('DEVHOST_BAD_KEYS', `${setting} must be "${what}=key" pairs separated by ";".`, true);
    byName.set(name.toLowerCase(), [...(byName.get(name.toLowerCase()) ?? []), key]);
  }
  return byName;
}

/** The host reads the key from `x-functions-key` first, then `code`. */
export function presentedKey(headers: Readonly<Record<string, string>>, url: URL): string | undefined {
  return headers['x-functions-key'] ?? url.searchParams.get('code') ?? undefined;
}

export function authLevelOf(raw: unknown): AuthLevel {
  const value = typeof raw === 'string' ? raw.toLowerCase() : 'function';
  // The v4 library leaves authLevel unset when the app does not give one; the host's default is function.
  return value === 'anonymous' || value === 'admin' ? value : 'function';
}
