/**
 * The test runner's own contract: every verdict of every file reaches the summary CI reads, and a
 * file whose process outlives its tests fails the run instead of hanging it. Runs Node's real test
 * runner with scripts/runTests' arguments on generated files.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { nodeTestArgs } from '../../../scripts/nodeTestArgs';

interface RunResult {
  readonly code: number | null;
  readonly output: string;
  readonly elapsedMs: number;
}

function runNodeTest(files: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<RunResult> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, nodeTestArgs({ files, concurrency: 4, timeoutMs: 60_000 }), {
      env: { ...process.env, NODE_TEST_CONTEXT: undefined, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, output, elapsedMs: Date.now() - started }));
  });
}

function summaryCount(output: string, name: string): number {
  const m = new RegExp(`ℹ ${name} (\\d+)`).exec(output);
  assert.ok(m, `no "${name}" line in the summary:\n${output.slice(-2000)}`);
  return Number(m[1]);
}

describe('scripts/runTests: node --test arguments', () => {
  let dir = '';
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'runner-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('reports every verdict of many fast files, run after run (--test-force-exit lost 3-12 of 1,600)', async () => {
    const files: string[] = [];
    for (let f = 0; f < 8; f++) {
      const lines = ["const test = require('node:test');"];
      for (let t = 0; t < 200; t++) lines.push(`test(${JSON.stringify(`f${f} t${t} ${'x'.repeat(300)}`)}, () => {});`);
      // The last test of one file fails: a lost tail would hide it.
      if (f === 5) lines.push("test('the last test fails', () => { throw new Error('expected failure'); });");
      const file = join(dir, `many${f}.test.js`);
      writeFileSync(file, lines.join('\n'));
      files.push(file);
    }
    for (let run = 0; run < 3; run++) {
      const result = await runNodeTest(files);
      assert.equal(summaryCount(result.output, 'tests'), 1601, `run ${run}: every test reported`);
      assert.equal(summaryCount(result.output, 'fail'), 1, `run ${run}: the failing last test reported`);
      assert.match(result.output, /the last test fails/);
      assert.equal(result.code, 1);
    }
  });

  it('ends a file whose process outlives its tests, with a failure that names it', async () => {
    const leak = join(dir, 'leak.test.js');
    writeFileSync(leak, "require('node:test')('starts an interval and never stops it', () => { setInterval(() => {}, 1000); });");
    const result = await runNodeTest([leak], { TEST_EXIT_GRACE_MS: '500' });
    assert.equal(result.code, 1, result.output);
    assert.match(result.output, /leak\.test\.js: its tests finished 500 ms ago but the process is still alive/);
    assert.equal(summaryCount(result.output, 'pass'), 1, 'the test itself passed');
    assert.ok(result.elapsedMs < 30_000, `ended after ${result.elapsedMs} ms`);
  });

  it('does not cut a test that runs longer than the grace period', async () => {
    const slow = join(dir, 'slow.test.js');
    writeFileSync(
      slow,
      [
        "const test = require('node:test');",
        "test('quick', () => {});",
        "test('slower than the grace', () => new Promise((r) => setTimeout(r, 1500)));",
      ].join('\n'),
    );
    const result = await runNodeTest([slow], { TEST_EXIT_GRACE_MS: '300' });
    assert.equal(result.code, 0, result.output);
    assert.equal(summaryCount(result.output, 'pass'), 2);
    assert.doesNotMatch(result.output, /still alive/);
  });
});
