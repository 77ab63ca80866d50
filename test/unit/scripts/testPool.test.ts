/**
 * scripts/testPool: each file in its own `node --test` with its own environment (its Azurite), the
 * phase's summary added up from the files' own, and every failure in the phase's report, including a
 * file that dies before its summary. Runs Node's real test runner on generated files.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { combine, failureReport, parseSummary, phaseReport, runPool, withoutSummary } from '../../../scripts/testPool';

const SPEC_TAIL = ['ℹ tests 3', 'ℹ suites 1', 'ℹ pass 2', 'ℹ fail 1', 'ℹ cancelled 0', 'ℹ skipped 0', 'ℹ todo 0', 'ℹ duration_ms 12.5'];

describe('scripts/testPool', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'pool-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the last summary and the failure report of a file, and leaves the summary out of what it prints', () => {
    const output = ['▶ a suite', 'ℹ tests 99 (a line of a test, not the summary)', ...SPEC_TAIL, '', '✖ failing tests:', '', '✖ it fails', '  Error: boom', ''].join('\n');
    assert.deepEqual(parseSummary(output), { tests: 3, suites: 1, pass: 2, fail: 1, cancelled: 0, skipped: 0, todo: 0 });
    assert.equal(parseSummary('▶ no summary here\n'), undefined);
    assert.equal(failureReport(output), '✖ it fails\n  Error: boom');
    assert.equal(failureReport('ℹ fail 0\n'), '');
    const printed = withoutSummary(output);
    assert.ok(!printed.includes('ℹ pass 2') && !printed.includes('ℹ duration_ms'), printed);
    assert.ok(printed.includes('ℹ tests 99 (a line') && printed.includes('✖ it fails'), printed);
  });

  it('adds the files up, and counts a file that exited non-zero without a failing test as one failure', () => {
    const summary = { tests: 2, suites: 1, pass: 2, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
    const total = combine([
      { file: 'a', code: 0, ms: 1, summary, failures: '' },
      { file: 'b', code: 1, ms: 1, summary: { ...summary, pass: 1, fail: 1 }, failures: '✖ x' },
      { file: 'c', code: 1, ms: 1, summary, failures: '' },
      { file: 'd', code: 7, ms: 1, summary: undefined, failures: '' },
    ]);
    assert.deepEqual(total, { tests: 6, suites: 3, pass: 5, fail: 3, cancelled: 0, skipped: 0, todo: 0 });
  });

  it('runs each file with its own environment, at most `concurrency` at a time, and reports every failure of the phase', async () => {
    const write = (name: string, body: string): string => {
      const file = join(dir, name);
      writeFileSync(file, `const test = require('node:test');\nconst assert = require('node:assert');\n${body}\n`);
      return file;
    };
    const files = [
      write('a.test.js', "test('sees its own setting', async () => { assert.equal(process.env.POOL_OWN, 'a.test.js'); await new Promise((r) => setTimeout(r, 300)); });"),
      write('b.test.js', "test('passes', async () => { await new Promise((r) => setTimeout(r, 300)); }); test('fails', () => { assert.equal(1, 2, 'one is not two'); });"),
      write('c.test.js', "test('sees its own setting', async () => { assert.equal(process.env.POOL_OWN, 'c.test.js'); await new Promise((r) => setTimeout(r, 300)); });"),
      write('d.test.js', "test('ends its process with its tests running', async () => { setTimeout(() => process.exit(3), 50); await new Promise((r) => setTimeout(r, 5_000)); });"),
    ];
    let running = 0;
    let most = 0;
    const done: string[] = [];
    const printed: string[] = [];
    const { outcomes, interrupted } = await runPool({
      files,
      concurrency: 2,
      timeoutMs: 30_000,
      env: { ...process.env, NODE_TEST_CONTEXT: undefined },
      cwd: dir,
      prepare: (file) => {
        running += 1;
        most = Math.max(most, running);
        return Promise.resolve({
          env: { POOL_OWN: basename(file) },
          done: () => {
            running -= 1;
            done.push(basename(file));
            return Promise.resolve();
          },
        });
      },
      label: (file) => basename(file),
      write: (text) => printed.push(text),
    });
    assert.equal(interrupted, false);
    assert.deepEqual(outcomes.map((o) => basename(o.file)), ['a.test.js', 'b.test.js', 'c.test.js', 'd.test.js'], 'every file, in the order given');
    assert.deepEqual([...done].sort(), ['a.test.js', 'b.test.js', 'c.test.js', 'd.test.js'], 'each file ended its environment');
    assert.equal(most, 2, 'two files at a time');
    assert.deepEqual(outcomes.map((o) => o.code !== 0), [false, true, false, true]);
    const report = phaseReport(outcomes, 1234, (f) => basename(f));
    assert.match(report, /^ℹ tests 5$/m);
    assert.match(report, /^ℹ pass 3$/m);
    // b's failing test, and d, which died with its test running (Node's runner reports it failed, or no summary).
    assert.match(report, /^ℹ fail 2$/m, report);
    assert.match(report, /b\.test\.js \(exit 1[\s\S]*one is not two/);
    assert.match(report, /d\.test\.js \(exit [1-9]/);
    const all = printed.join('');
    assert.match(all, /▷ a\.test\.js: exit 0/);
    assert.ok(!/^ℹ pass/m.test(all), 'the files print no summary of their own');
  });
});
