/**
 * Every error code the app can emit (in an HTTP answer, a job's status, a chunk or item error, a log
 * line) is in the error table of docs/jobs.md (linked from the README), and the table lists no code the app no longer emits. Codes
 * are read from the sources where they are born: error constructors, `code:` fields, fallbacks given
 * to `toCoordinatorError`, and the job error table.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';

import { JOB_ERROR_CODES } from '../../shared/jobs/JobError';

// <outDir>/test/unit -> repository root.
const ROOT = resolve(__dirname, '..', '..', '..');
const CODE = '([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*)';
const BIRTHPLACES = [
  new RegExp(`new [A-Za-z]*Error\\(\\s*'${CODE}'`, 'g'),
  new RegExp(`super\\(\\s*'${CODE}'`, 'g'),
  new RegExp(`\\bcode: '${CODE}'`, 'g'),
  new RegExp(`toCoordinatorError\\([^,()]+, '${CODE}'\\)`, 'g'),
];

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return sources(full);
    return name.endsWith('.ts') ? [full] : [];
  });
}

function emittedCodes(): Map<string, string> {
  const where = new Map<string, string>();
  for (const code of Object.keys(JOB_ERROR_CODES)) where.set(code, 'shared/jobs/JobError.ts');
  for (const file of ['shared', 'functions'].flatMap((dir) => sources(join(ROOT, dir)))) {
    const text = readFileSync(file, 'utf8');
    for (const pattern of BIRTHPLACES) {
      for (const match of text.matchAll(pattern)) if (match[1] !== undefined && !where.has(match[1])) where.set(match[1], file.slice(ROOT.length + 1));
    }
  }
  return where;
}

function documentedCodes(): Set<string> {
  const readme = readFileSync(join(ROOT, 'docs', 'jobs.md'), 'utf8');
  const start = readme.indexOf('### Error codes');
  assert.ok(start >= 0, 'docs/jobs.md has an "Error codes" section');
  const end = readme.indexOf('\n#', start + 1);
  const rows = readme.slice(start, end < 0 ? undefined : end).split('\n').filter((line) => line.startsWith('| `'));
  // The first column of each row: one or more codes in backticks.
  return new Set(rows.flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((m) => m[1] as string)));
}

describe('error codes', () => {
  it('every code the app emits is in the error table (docs/jobs.md)', () => {
    const documented = documentedCodes();
    const missing = [...emittedCodes()].filter(([code]) => !documented.has(code)).map(([code, file]) => `${code} (${file})`);
    assert.deepEqual(missing, []);
  });

  it('the error table (docs/jobs.md) lists no code the app does not emit', () => {
    const emitted = emittedCodes();
    assert.deepEqual([...documentedCodes()].filter((code) => !emitted.has(code)), []);
  });

  it('finds codes at each kind of birthplace (the scan itself works)', () => {
    const emitted = emittedCodes();
    for (const code of ['ITEM_TOO_LARGE', 'STORAGE_UNAVAILABLE', 'DEADLINE_EXCEEDED', 'PASS_FAILED', 'CONFIG_INVALID']) assert.ok(emitted.has(code), code);
  });
});
