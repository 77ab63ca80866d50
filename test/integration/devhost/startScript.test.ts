/**
 * `npm start`'s environment checks, on free ports instead of 10000-10002 so parallel tests cannot
 * collide: Azurite reused when it answers, started when nothing does, a clear error when something
 * else holds a port; Core Tools used only when `func --version` really answers.
 */
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { freePort, startAzurite } from 'devhost/testing';

import { detectCoreTools, ensureAzurite } from '../../../scripts/start';

async function freePorts(): Promise<{ blob: number; queue: number; table: number }> {
  return { blob: await freePort(), queue: await freePort(), table: await freePort() };
}

describe('npm start: Azurite', () => {
  it('refuses a port held by something that is not Azurite, naming the port', async () => {
    const ports = await freePorts();
    const impostor = createServer((_req, res) => res.end('hello'));
    await new Promise<void>((resolve) => impostor.listen(ports.queue, '127.0.0.1', resolve));
    const root = mkdtempSync(join(tmpdir(), 'start-'));
    try {
      await assert.rejects(ensureAzurite(root, ports), (err: Error) => err.name === 'StartError' && err.message.includes(String(ports.queue)) && err.message.includes('not Azurite'));
      assert.equal(existsSync(join(root, '.azurite')), false, 'nothing was started');
    } finally {
      await new Promise((resolve) => impostor.close(resolve));
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('reuses an Azurite that already answers on the ports', async () => {
    const running = await startAzurite();
    const root = mkdtempSync(join(tmpdir(), 'start-'));
    try {
      const result = await ensureAzurite(root, { blob: running.blobPort, queue: running.queuePort, table: running.tablePort });
      assert.equal(result.started, undefined);
      assert.match(result.note, /reusing/);
    } finally {
      await running.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('reuses an Azurite that does not answer its first request in time (busy, or just started)', async () => {
    const running = await startAzurite();
    // The queue port answers as Azurite's queue would, except that the first request gets no answer.
    let asked = 0;
    const slow = createServer((_req, res) => {
      asked += 1;
      if (asked === 1) return; // never answered: the probe times out
      res.setHeader('Server', 'Azurite-Queue/3.37.0');
      res.end();
    });
    const queuePort = await freePort();
    await new Promise<void>((resolve) => slow.listen(queuePort, '127.0.0.1', resolve));
    const root = mkdtempSync(join(tmpdir(), 'start-'));
    try {
      const result = await ensureAzurite(root, { blob: running.blobPort, queue: queuePort, table: running.tablePort });
      assert.equal(result.started, undefined);
      assert.match(result.note, /reusing/);
      assert.equal(asked, 2, 'the port that gave no answer was asked again');
    } finally {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
      await running.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('starts Azurite with its data in .azurite/ when nothing answers, and stops it', async () => {
    const ports = await freePorts();
    const root = mkdtempSync(join(tmpdir(), 'start-'));
    try {
      const result = await ensureAzurite(root, ports);
      assert.ok(result.started !== undefined);
      assert.ok(existsSync(join(root, '.azurite')));
      const res = await fetch(`http://127.0.0.1:${ports.blob}/`);
      assert.match(res.headers.get('server') ?? '', /^Azurite-Blob/);
      await result.started.stop();
      await assert.rejects(fetch(`http://127.0.0.1:${ports.blob}/`));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('npm start: Core Tools detection', () => {
  function fakeFunc(script: string): { env: NodeJS.ProcessEnv; remove(): void } {
    const dir = mkdtempSync(join(tmpdir(), 'fake-func-'));
    const file = join(dir, 'func');
    writeFileSync(file, `#!/bin/sh\n${script}\n`);
    chmodSync(file, 0o755);
    return { env: { ...process.env, PATH: `${dir}:/usr/bin:/bin` }, remove: () => rmSync(dir, { recursive: true, force: true }) };
  }

  it('uses func only when `func --version` answers with a version', () => {
    const working = fakeFunc('echo 4.0.7030');
    // Prints a version yet fails, like an install whose host download never finished.
    const broken = fakeFunc('echo 4.0.7030; echo "Could not find the host" >&2; exit 1');
    try {
      assert.deepEqual(detectCoreTools(working.env), { usable: true, version: '4.0.7030', reason: 'Core Tools 4.0.7030 found' });
      assert.equal(detectCoreTools(broken.env).usable, false);
      assert.equal(detectCoreTools({ ...process.env, PATH: '/nonexistent' }).usable, false);
    } finally {
      working.remove();
      broken.remove();
    }
  });
});
