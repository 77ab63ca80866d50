/**
 * HTTP triggers on a real development host process with function keys configured: routes with
 * parameters under the route prefix, methods, keys (401 without, accepted in the header or `code`),
 * anonymous routes open, function errors as bare 500s, and a queue output binding written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';

import { eventually, type HostProcess, startHostProcess } from '../../../src/testing/hostProcess';
import { type AppRoot, createAppRoot } from '../../support/appRoot';
import { azuriteConnectionString, uniqueName } from '../../support/env';

const HOST_KEY = 'host-key-for-tests-1';
const FUNCTION_KEY = 'submit-only-key';
const MASTER_KEY = 'master-key-for-tests';

describe('development host HTTP triggers (keys on)', () => {
  let app: AppRoot;
  let host: HostProcess;
  const outQueue = uniqueName('http-out');

  before(async () => {
    app = createAppRoot({
      fixture: 'basicApp',
      hostJson: { version: '2.0', extensions: { http: { routePrefix: 'api' } } },
      values: {
        AzureWebJobsStorage: azuriteConnectionString(),
        FIXTURE_QUEUE: uniqueName('http-in'),
        FIXTURE_OUT_QUEUE: outQueue,
        FIXTURE_TIMER_QUEUE: uniqueName('http-timer'),
        FIXTURE_TIMER_SCHEDULE: '0 0 0 1 1 *',
        DEVHOST_HOST_KEYS: HOST_KEY,
        DEVHOST_FUNCTION_KEYS: `submit=${FUNCTION_KEY}`,
        DEVHOST_MASTER_KEY: MASTER_KEY,
      },
    });
    host = await startHostProcess({ appRoot: app.dir, hostId: uniqueName('http').slice(0, 32), instanceId: 'http-1' });
  });

  after(async () => {
    await host.stop();
    app.remove();
  });

  const call = (method: string, path: string, init: { headers?: Record<string, string>; body?: string } = {}): Promise<Response> =>
    fetch(`${host.baseUrl}${path}`, { method, ...init });

  it('rejects a function-level route without a key, with an empty 401', async () => {
    const res = await call('POST', '/api/jobs/j1');
    assert.equal(res.status, 401);
    assert.equal(await res.text(), '');
  });

  it('rejects a wrong key and does not echo it', async () => {
    const res = await call('POST', '/api/jobs/j1?code=not-the-key');
    assert.equal(res.status, 401);
    const text = await res.text();
    assert.equal(text.includes('not-the-key'), false);
    assert.equal(host.lines().some((l) => l.includes('not-the-key') || l.includes(HOST_KEY)), false);
  });

  it('accepts a host key in x-functions-key, a function key in code, and the master key', async () => {
    const byHeader = await call('POST', '/api/jobs/j-header', { headers: { 'x-functions-key': HOST_KEY } });
    assert.equal(byHeader.status, 202);
    assert.deepEqual(await byHeader.json(), { accepted: 'j-header' });
    const byCode = await call('POST', `/api/jobs/j-code?code=${FUNCTION_KEY}`);
    assert.equal(byCode.status, 202);
    const byMaster = await call('POST', '/api/jobs/j-master', { headers: { 'x-functions-key': MASTER_KEY } });
    assert.equal(byMaster.status, 202);
  });

  it('opens the admin host status only with the master key', async () => {
    const res = await call('GET', `/admin/host/status?code=${FUNCTION_KEY}`);
    assert.equal(res.status, 401);
    const ok = await call('GET', '/admin/host/status', { headers: { 'x-functions-key': MASTER_KEY } });
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as { instanceId?: string }).instanceId, 'http-1');
  });

  it('leaves anonymous routes open and passes route parameters, query and body', async () => {
    const get = await call('GET', '/api/hello/ada?q=7');
    assert.equal(get.status, 200);
    assert.equal(get.headers.get('x-fixture'), 'yes');
    assert.equal(get.headers.get('set-cookie'), 'seen=1; HttpOnly');
    const body = (await get.json()) as Record<string, unknown>;
    assert.equal(body.name, 'ada');
    assert.equal(body.query, '7');
    const optional = await call('POST', '/api/HELLO', { body: 'payload' });
    assert.equal(optional.status, 200);
    assert.deepEqual(
      { name: null, body: 'payload', method: 'POST' },
      (({ name, body: b, method }) => ({ name, body: b, method }))((await optional.json()) as Record<string, unknown>),
    );
  });

  it('answers 404 for an unknown route, outside the prefix, and for a method the route does not take (as the real host)', async () => {
    assert.equal((await call('GET', '/api/nope')).status, 404);
    assert.equal((await call('GET', '/hello/ada')).status, 404);
    assert.equal((await call('DELETE', '/api/hello/ada')).status, 404);
    assert.equal((await call('GET', '/api/jobs/j1', { headers: { 'x-functions-key': HOST_KEY } })).status, 404);
  });

  it('turns a function error into a bare 500 and logs it', async () => {
    const res = await call('GET', '/api/fail');
    assert.equal(res.status, 500);
    assert.equal(await res.text(), '');
    await eventually(() => Promise.resolve(host.events('http.function_failed').length > 0 ? true : undefined), 5_000, 'the failure log line');
  });

  it('writes the queue output binding of a successful call (base64, as the host does)', async () => {
    const res = await call('POST', '/api/jobs/out-1', { headers: { 'x-functions-key': HOST_KEY } });
    assert.equal(res.status, 202);
    const queue = QueueServiceClient.fromConnectionString(azuriteConnectionString()).getQueueClient(outQueue);
    const texts = await eventually(
      async () => {
        const peeked = await queue.peekMessages({ numberOfMessages: 32 });
        const decoded = peeked.peekedMessageItems.map((m) => Buffer.from(m.messageText, 'base64').toString('utf8'));
        return decoded.some((t) => t.includes('out-1')) ? decoded : undefined;
      },
      5_000,
      'the output message',
    );
    assert.ok(texts.includes(JSON.stringify({ jobId: 'out-1' })));
  });
});
