/**
 * host.json `functionTimeout` on both local hosts, in one run whatever E2E_HOST says, with a fixture
 * app (test/e2e/fixtures/timeoutApp.ts) whose HTTP function sleeps past a 2 s timeout. What each
 * does, and what exthost/README.md and devhost/README.md say of it:
 * - the extensions host runs the WebJobs SDK's own executor with `ThrowOnTimeout`: the timed-out call
 *   fails with FunctionTimeoutException, and its exception handler (exthost/TimeoutHandler.cs) keeps
 *   the host serving. (The SDK's default handler stopped the JobHost and left the process up serving
 *   nothing.) The Functions host on Azure fails the call too and restarts the language worker;
 *   neither local host restarts it: the timed-out code runs on until it ends;
 * - the development host fails the call with the SDK's message and goes on serving.
 * A call within the timeout answers on both.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { eventually, type HostProcess } from 'devhost/testing';

import { azuriteConnectionString } from '../support/env';
import { BOTH_HOSTS, e2eHostName, startAppHost } from './support/appHost';

const OUT_DIR = join(__dirname, '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');

for (const kind of BOTH_HOSTS) {
  describe(`a function past host.json's functionTimeout, on the ${e2eHostName(kind)}`, () => {
    let dir: string | undefined;
    let host: HostProcess | undefined;

    before(
      async () => {
        dir = mkdtempSync(join(tmpdir(), 'timeout-app-'));
        symlinkSync(OUT_DIR, join(dir, 'app'), 'dir');
        const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as Record<string, unknown>;
        // No Durable function here: the extension's options stay, its task hub is never used.
        writeFileSync(join(dir, 'host.json'), JSON.stringify({ ...hostJson, functionTimeout: '00:00:02' }));
        writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'timeout-app', main: 'app/test/e2e/fixtures/timeoutApp.js' }));
        const conn = azuriteConnectionString();
        host = await startAppHost(
          { appRoot: dir, hostId: `timeout-${kind}`, instanceId: `timeout-${kind}`, env: { FUNCTIONS_WORKER_RUNTIME: 'node', AzureWebJobsStorage: conn, TASK_HUB_NAME: 'TimeoutHub' } },
          kind,
        );
      },
      { timeout: 180_000 },
    );
    after(async () => {
      await host?.kill();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    it('fails the call with FunctionTimeoutException and goes on serving', async () => {
      assert.ok(host !== undefined);
      const within = await fetch(`${host.baseUrl}/api/sleepy?ms=200`);
      assert.equal(within.status, 200, 'a call within the timeout answers');
      const past = await fetch(`${host.baseUrl}/api/sleepy?ms=6000`).then(
        async (res) => ({ status: res.status, text: await res.text() }),
        (err: unknown) => ({ status: 0, text: err instanceof Error ? err.message : String(err) }),
      );
      assert.notEqual(past.status, 200, `a call past the timeout failed: ${past.text}`);
      const said = kind === 'extensions' ? /exthost: Timeout value of 00:00:02 was exceeded by function: sleepy: the call failed/ : /Timeout value of 00:00:02 was exceeded by function: Functions\.sleepy/;
      await eventually(() => Promise.resolve(host?.lines().some((l) => said.test(l)) === true ? true : undefined), 10_000, `the host to log the timeout:\n${host.lines().slice(-20).join('\n')}`);
      // The development host answers 500; the extensions host's HTTP front drops the connection of a call that threw.
      if (kind === 'devhost') assert.equal(past.status, 500, past.text);
      const quick = await fetch(`${host.baseUrl}/api/quick`);
      assert.equal(quick.status, 200, 'the host still serves');
      assert.equal(host.child.exitCode, null, 'the host did not stop');
    });
  });
}
