/**
 * Resolves package.json `main` the way the worker does (a glob relative to the app root, e.g.
 * `dist/functions/*.js`) without a glob dependency: `*`, `?`, `**` and `{a,b}` are understood;
 * `node_modules` and dot folders are never searched. Results are sorted so loading order is stable.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, posix } from 'node:path';

import { DevHostError } from '../errors';

function segmentRegex(segment: string): RegExp {
  let source = '';
  let inBraces = false;
  for (const ch of segment) {
    if (ch === '*') source += '[^/]*';
    else if (ch === '?') source += '[^/]';
    else if (ch === '{') {
      source += '(?:';
      inBraces = true;
    } else if (ch === '}' && inBraces) {
      source += ')';
      inBraces = false;
    } else if (ch === ',' && inBraces) source += '|';
    else source += ch.replace(/[.+^$()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`);
}

function hasMagic(pattern: string): boolean {
  return /[*?{]/.test(pattern);
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir).filter((name) => name !== 'node_modules' && !name.startsWith('.'));
  } catch {
    return [];
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function walk(base: string, relative: string, segments: readonly string[], out: Set<string>): void {
  const [head, ...rest] = segments;
  const here = join(base, relative);
  if (head === undefined) {
    if (isFile(here)) out.add(relative);
    return;
  }
  if (head === '**') {
    walk(base, relative, rest, out);
    for (const name of listDir(here)) {
      if (isDirectory(join(here, name))) walk(base, posix.join(relative, name), segments, out);
    }
    return;
  }
  if (!hasMagic(head)) {
    walk(base, relative === '' ? head : posix.join(relative, head), rest, out);
    return;
  }
  const re = segmentRegex(head);
  for (const name of listDir(here)) {
    if (re.test(name)) walk(base, relative === '' ? name : posix.join(relative, name), rest, out);
  }
}

/** Files under `appRoot` matching `pattern`, as paths relative to `appRoot` with forward slashes. */
export function findEntryPoints(appRoot: string, pattern: string): string[] {
  const segments = pattern.replace(/\\/g, '/').replace(/^\.\//, '').split('/').filter((s) => s !== '' && s !== '.');
  if (segments.some((s) => s === '..')) {
    throw new DevHostError('DEVHOST_BAD_MAIN', `The entry point pattern "${pattern}" must stay inside the app root.`, true);
  }
  const found = new Set<string>();
  walk(appRoot, '', segments, found);
  return [...found].sort();
}
