/**
 * Reading host.json like the host's configuration binder: property names case-insensitive, TimeSpans
 * as "hh:mm:ss", and a value the host would reject failing with `DEVHOST_BAD_HOST_JSON` naming it.
 */
import { DevHostError } from './errors';
import { parseTimeSpanMs } from './schedule/TimerSchedule';

export function badHostJson(property: string, why: string): DevHostError {
  return new DevHostError('DEVHOST_BAD_HOST_JSON', `host.json ${property} ${why}`, true);
}

export function objectAt(root: unknown, path: readonly string[]): Record<string, unknown> | undefined {
  let current: unknown = root;
  for (const key of path) {
    if (typeof current !== 'object' || current === null) return undefined;
    // host.json property names are case-insensitive in the host's configuration binder.
    const entry = Object.entries(current as Record<string, unknown>).find(([k]) => k.toLowerCase() === key.toLowerCase());
    current = entry?.[1];
  }
  return typeof current === 'object' && current !== null ? (current as Record<string, unknown>) : undefined;
}

export function prop(obj: Record<string, unknown> | undefined, name: string): unknown {
  if (obj === undefined) return undefined;
  return Object.entries(obj).find(([k]) => k.toLowerCase() === name.toLowerCase())?.[1];
}

export function intProp(obj: Record<string, unknown> | undefined, path: string, name: string, fallback: number, min: number, max: number): number {
  const raw = prop(obj, name);
  if (raw === undefined) return fallback;
  const value = typeof raw === 'string' ? Number(raw) : raw;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw badHostJson(`${path}.${name}`, `must be an integer from ${min} to ${max}.`);
  }
  return value;
}

export function durationProp(obj: Record<string, unknown> | undefined, path: string, name: string, fallback: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  const raw = prop(obj, name);
  if (raw === undefined) return fallback;
  const ms = typeof raw === 'string' ? parseTimeSpanMs(raw) : undefined;
  if (ms === undefined || ms < min || ms > max) {
    throw badHostJson(`${path}.${name}`, `must be a TimeSpan "hh:mm:ss" from ${min / 1000} s${max === Number.MAX_SAFE_INTEGER ? '' : ` to ${max / 1000} s`}.`);
  }
  return ms;
}

