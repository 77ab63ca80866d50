/**
 * The Durable endpoints of a real development host process with keys on, as the Functions host
 * serves them: the public webhooks `/runtime/webhooks/durabletask/...` require the extension's
 * system key (`durabletask_extension`) or the master key (azure-functions-durable-extension
 * HttpApiHandler.cs links carry `code=<system key>`; the host's AuthorizationLevel.System), while
 * the durable-functions client of the app calls the local RPC endpoint `/durabletask/...`
 * (LocalHttpListener.cs: loopback, no key), so app code works unchanged with keys on.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { eventually, type HostProcess, startHostProcess } from '../../../src/testing/hostProcess';
import { type AppRoot, COMPILED_ROOT, createAppRoot } from '../../support/appRoot';
import { azuriteConnectionString, uniqueName } from '../../support/env';

const HOST_KEY = 'webhook-test-host-key';
const MASTER_KEY = 'webhook-test-master-key';
const SYSTEM_KEY = 'webhook-test-system-key';

describe('Durable webhooks on the development host (keys on)', () => {
  let app: AppRoot;
  let host: HostProcess;
  const hub = `Hooks${Math.random().toString(36).slice(2, 10)}`;

  before(async () => {
    app = createAppRoot({
      fixture: `${COMPILED_ROOT}/test/fixtures/referenceApp.js`,
      hostJson: { version: '2.0', extensions: { durableTask: { hubName: hub, storageProvider: { maxQueuePollingInterval: '00:00:01' } } } },
      values: {
        AzureWebJobsStorage: azuriteConnectionString(),
        DEVHOST_HOST_KEYS: HOST_KEY,
        DEVHOST_MASTER_KEY: MASTER_KEY,
        DEVHOST_SYSTEM_KEYS: `durabletask_extension=${SYSTEM_KEY}`,
      },
    });
    host = await startHostProcess({ appRoot: app.dir, hostId: uniqueName('hooks').slice(0, 32), instanceId: 'hooks-1' });
  });

  after(async () => {
    await host.stop();
    app.remove();
  });

  const list = (query: string, headers: Record<string, string> = {}): Promise<Response> => fetch(`${host.baseUrl}/runtime/webhooks/durabletask/instances${query}`, { headers });

  it('answers 401 with an empty body to a webhook call without the system key, even with a host key', async () => {
    for (const [query, headers] of [
      ['', {}],
      [`?code=${HOST_KEY}`, {}],
      ['', { 'x-functions-key': HOST_KEY }],
      ['?code=wrong', {}],
    ] as const) {
      const res = await list(query, headers);
      assert.equal(res.status, 401, `${query} ${JSON.stringify(headers)}`);
      assert.equal(await res.text(), '');
    }
  });

  it('answers the system key and the master key, in code or x-functions-key', async () => {
    assert.equal((await list(`?code=${SYSTEM_KEY}`)).status, 200);
    assert.equal((await list('', { 'x-functions-key': SYSTEM_KEY })).status, 200);
    assert.equal((await list(`?code=${MASTER_KEY}`)).status, 200);
  });

  it('lets the app start and watch orchestrations through its durable client, and hands out links that carry the system key', async () => {
    const started = await fetch(`${host.baseUrl}/api/orchestrators/HelloSequence`, { method: 'POST' });
    assert.equal(started.status, 202);
    const links = (await started.json()) as { id: string; statusQueryGetUri: string };
    const statusUrl = new URL(links.statusQueryGetUri);
    assert.equal(statusUrl.pathname, `/runtime/webhooks/durabletask/instances/${links.id}`);
    assert.equal(statusUrl.searchParams.get('code'), SYSTEM_KEY);
    const finished = await eventually(
      async () => {
        const res = await fetch(statusUrl);
        return res.status === 200 ? ((await res.json()) as { runtimeStatus: string; output: unknown }) : undefined;
      },
      30_000,
      'the orchestration to finish',
    );
    assert.equal(finished.runtimeStatus, 'Completed');
    statusUrl.searchParams.delete('code');
    assert.equal((await fetch(statusUrl)).status, 401, 'the same link without its key is refused');
    // The local RPC endpoint the durable-functions client uses: loopback, no key.
    const rpc = await fetch(`${host.baseUrl}/durabletask/instances/${links.id}`);
    assert.equal(rpc.status, 200);
    assert.deepEqual(((await rpc.json()) as { output: unknown }).output, ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']);
  });
});
