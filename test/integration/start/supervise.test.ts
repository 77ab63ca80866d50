/**
 * How `npm start` looks after its processes (scripts/supervise.ts), with real child processes: a
 * killed instance leaves the others running, a failing one stops them, the script notices when npm
 * (its grandparent) is gone, and a previous run's leftovers are named with their pids.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import {
  ancestorPids,
  exitVerdict,
  findLeftovers,
  isAlive,
  leftoverMessage,
  RUN_RECORD,
  superviseInstances,
  watchProcesses,
  writeRunRecord,
} from '../../../scripts/supervise';

const IDLE = 'setInterval(() => {}, 1000)';
const spawned: ChildProcess[] = [];

function idleChild(script = IDLE): ChildProcess {
  const child = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  spawned.push(child);
  return child;
}

const running = (c: ChildProcess): boolean => c.exitCode === null && c.signalCode === null;

after(() => {
  for (const c of spawned) if (running(c)) c.kill('SIGKILL');
});

describe('npm start: supervision of its instances', () => {
  it('treats a signal or a clean exit as one instance gone, a failure as a failure for all', () => {
    assert.equal(exitVerdict(null, 'SIGKILL'), 'keep-others');
    assert.equal(exitVerdict(null, 'SIGTERM'), 'keep-others');
    assert.equal(exitVerdict(0, null), 'keep-others');
    assert.equal(exitVerdict(1, null), 'stop-all');
  });

  it('keeps the other instances running when one is killed (kill -9), and stops them all on request', async () => {
    const children = [idleChild(), idleChild(), idleChild()].map((child, i) => ({ child, label: `[instance-${i + 1}]` }));
    const lines: string[] = [];
    const supervision = superviseInstances(children, { stopTimeoutMs: 10_000, log: (l) => lines.push(l), error: (l) => lines.push(l) });
    children[1]?.child.kill('SIGKILL');
    await eventually(() => Promise.resolve(lines.some((l) => l.includes('[instance-2] exited (SIGKILL)')) ? true : undefined), 10_000, 'the kill to be seen');
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(children.map((c) => running(c.child)), [true, false, true], lines.join('\n'));
    assert.match(lines.join('\n'), /the other 2 instance\(s\) keep running/);
    supervision.stopAll('SIGINT');
    const done = await supervision.done;
    assert.equal(done.failed, false);
    assert.ok(children.every((c) => !running(c.child)));
  });

  it('stops the others when an instance fails on its own, and reports the failure', async () => {
    const failing = idleChild('setTimeout(() => process.exit(3), 300)');
    const children = [{ child: idleChild(), label: '[instance-1]' }, { child: failing, label: '[instance-2]' }];
    const lines: string[] = [];
    const supervision = superviseInstances(children, { stopTimeoutMs: 10_000, log: (l) => lines.push(l), error: (l) => lines.push(l) });
    const done = await supervision.done;
    assert.equal(done.failed, true);
    assert.ok(done.codes.includes(3));
    assert.ok(!running(children[0]?.child as ChildProcess), 'the healthy instance was stopped');
    assert.match(lines.join('\n'), /\[instance-2\] exited \(code 3\); stopping the others/);
  });
});

describe('npm start: noticing that npm went away', () => {
  it('reads its parent and grandparent from /proc', () => {
    const ancestors = ancestorPids();
    assert.equal(ancestors[0], process.ppid);
    assert.ok(ancestors.length >= 1);
  });

  it('calls back once a watched process is gone', async () => {
    const child = idleChild();
    let gone: number | undefined;
    watchProcesses([child.pid as number], (pid) => (gone = pid), 100);
    child.kill('SIGKILL');
    await eventually(() => Promise.resolve(gone), 5_000, 'the watcher to notice');
    assert.equal(gone, child.pid);
  });

  it('a script run by a shell run by a parent stops when that parent is killed (npm given SIGTERM does this)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'supervise-'));
    const marker = join(dir, 'stopped');
    const supervise = require.resolve('../../../scripts/supervise');
    // The script: what npm start does with its ancestors; it writes a marker when it stops.
    const script =
      `const s = require(${JSON.stringify(supervise)}); const fs = require('node:fs');` +
      `s.watchProcesses(s.ancestorPids(), (pid) => { fs.writeFileSync(${JSON.stringify(marker)}, String(pid)); process.exit(0); }, 200);` +
      'setInterval(() => {}, 1000);';
    // The stand-in for npm: runs the script through sh (as `npm run` does) and stays.
    const npm = spawn(process.execPath, ['-e', `require('node:child_process').spawn('sh', ['-c', ${JSON.stringify(`"${process.execPath}" -e "$S"; true`)}], { stdio: 'ignore', env: { ...process.env } }); ${IDLE}`], {
      stdio: 'ignore',
      env: { ...process.env, S: script },
    });
    spawned.push(npm);
    try {
      // Let the tree come up, then kill "npm" alone, as a service manager's SIGTERM does.
      await new Promise((r) => setTimeout(r, 1_500));
      assert.equal(existsSync(marker), false, 'the script runs while npm does');
      npm.kill('SIGKILL');
      const noticed = await eventually(() => Promise.resolve(existsSync(marker) ? readFileSync(marker, 'utf8') : undefined), 10_000, 'the script to notice npm is gone');
      assert.equal(Number(noticed), npm.pid);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('npm start: leftovers of an earlier run', () => {
  it('names the processes of an earlier run that still run, and forgets a run whose processes are all gone', () => {
    const root = mkdtempSync(join(tmpdir(), 'start-record-'));
    try {
      const host = idleChild();
      const gonePid = 2 ** 22 + 12_345; // above Linux's default pid_max: never a live process
      assert.equal(isAlive(gonePid), false);
      writeRunRecord(root, { startedAt: '2026-11-22T10:00:00.000Z', startPid: gonePid, hosts: [{ label: '[instance-1]', pid: host.pid as number, port: 7071 }] });
      const found = findLeftovers(root);
      assert.ok(found !== undefined);
      assert.deepEqual(found.alive, [`[instance-1] (port 7071): pid ${String(host.pid)}`]);
      assert.match(leftoverMessage(found), new RegExp(`kill ${String(host.pid)}\``));

      writeRunRecord(root, { startedAt: '2026-11-22T10:00:00.000Z', startPid: gonePid, hosts: [{ label: '[instance-1]', pid: gonePid, port: 7071 }] });
      assert.equal(findLeftovers(root), undefined);
      assert.equal(existsSync(join(root, RUN_RECORD)), false, 'a record of nothing running is removed');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
