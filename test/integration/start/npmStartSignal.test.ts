/**
 * `npm start` as an operator stops it from another terminal: SIGINT to npm's own pid must stop the
 * script as SIGTERM does. npm passes SIGINT on to the process it spawned, which is `/bin/sh -c
 * <start script>`; a POSIX shell waiting for a foreground command holds SIGINT until that command
 * ends, so the script must be exec'd by the shell (package.json: `exec node ...`). Checked with the
 * real npm and the real shell running package.json's own start script, the script being a stand-in
 * for dist/scripts/start.js that records what reaches it. The banner's pids are checked too.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { stopBanner } from '../../../scripts/start';

const REPO_ROOT = join(__dirname, '..', '..', '..', '..');
const dirs: string[] = [];
const children: ChildProcess[] = [];

after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('npm start and signals', () => {
  it("SIGINT to npm's pid reaches the start script (the shell execs it), which then stops", async () => {
    const scripts = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
    const start = scripts.start ?? '';
    assert.match(start, /dist\/scripts\/start\.js/, 'the start script runs dist/scripts/start.js');

    const dir = mkdtempSync(join(tmpdir(), 'npm-start-signal-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'dist', 'scripts'), { recursive: true });
    const marker = join(dir, 'signal');
    const ready = join(dir, 'ready');
    // The stand-in: records its parent's pid once running, and the signal that stops it.
    writeFileSync(
      join(dir, 'dist', 'scripts', 'start.js'),
      `const fs = require('node:fs');
       for (const s of ['SIGINT', 'SIGTERM']) process.on(s, () => { fs.writeFileSync(${JSON.stringify(marker)}, s); process.exit(0); });
       fs.writeFileSync(${JSON.stringify(ready)}, String(process.ppid));
       setInterval(() => {}, 1000);`,
    );
    // Only the start script: its pre-script (the build) is not what is tested here.
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'start-signal', version: '1.0.0', private: true, scripts: { start } }));

    const npm = spawn('npm', ['start', '--silent', '--', '--devhost'], { cwd: dir, stdio: 'ignore', env: { ...process.env } });
    children.push(npm);
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    const parent = await eventually(() => Promise.resolve(existsSync(ready) ? Number(readFileSync(ready, 'utf8')) : undefined), 30_000, 'the script to start');
    assert.equal(parent, npm.pid, 'npm itself is the script\'s parent: no shell in between holds the signal');

    process.kill(npm.pid as number, 'SIGINT');
    const got = await eventually(() => Promise.resolve(existsSync(marker) ? readFileSync(marker, 'utf8') : undefined), 15_000, 'the script to get SIGINT');
    assert.equal(got, 'SIGINT');
    assert.equal(await exited, 0, 'npm ends with the script');
  });

  it('the banner names the pids that stop everything', () => {
    assert.equal(
      stopBanner(200, 100),
      "Ctrl-C, or SIGINT/SIGTERM to npm's pid 100 or this script's pid 200, stops everything. Killing one instance's pid leaves the others running.",
    );
    assert.match(stopBanner(200, undefined), /SIGINT\/SIGTERM to pid 200, stops everything/);
  });
});
