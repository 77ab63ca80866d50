/**
 * The extension's HTTP API as the durable-functions client uses it (over real HTTP, against the
 * backend, state in Azurite): status codes of getStatus, start with a given instance id (running:
 * refused like the extension, finished: replaced), list with filters and continuation tokens,
 * raise event, terminate, purge, the unsupported operations' stable code, an HTTP starter function
 * using the `durableClient` binding, and start-and-wait. Expected codes and bodies follow the
 * extension's HttpApiHandler and the durable-functions DurableClient's handling of them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import * as df from 'durable-functions';

import { type HttpResponseData } from '../../../src/contracts';
import { type DurableTestHost, eventNames, startDurableTestHost, waitForFinish } from '../../support/durableTestHost';

async function waitForStatus(host: DurableTestHost, id: string, check: (status: df.DurableOrchestrationStatus) => boolean): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!check(await host.client.getStatus(id))) {
    if (Date.now() > deadline) throw new Error(`instance ${id} did not reach the expected state`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('Durable HTTP API through the durable-functions client', () => {
  let host: DurableTestHost;
  const api = (path: string): string => `${host.baseUrl}/runtime/webhooks/durabletask/${path}`;

  before(async () => {
    host = await startDurableTestHost();
  });

  after(async () => {
    await host?.stop();
  });

  it('getStatus: 404 for an unknown instance, 202 while running, 200 when finished', async () => {
    await assert.rejects(host.client.getStatus('no-such-instance'), /HTTP 404/);
    assert.equal((await fetch(api('instances/no-such-instance'))).status, 404);

    const id = await host.client.startNew('CustomStatus');
    await waitForStatus(host, id, (s) => s.runtimeStatus === df.OrchestrationRuntimeStatus.Running);
    const running = await fetch(api(`instances/${id}`));
    assert.equal(running.status, 202);
    assert.equal(running.headers.get('retry-after'), '5');
    await host.client.raiseEvent(id, 'Continue', 1);
    await waitForFinish(host.client, id);
    const done = await fetch(api(`instances/${id}`));
    assert.equal(done.status, 200);
    const body = (await done.json()) as Record<string, unknown>;
    assert.deepEqual(Object.keys(body).sort(), ['createdTime', 'customStatus', 'input', 'instanceId', 'lastUpdatedTime', 'name', 'output', 'runtimeStatus']);
    assert.match(String(body.createdTime), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/, 'DateTime.ToString("s") + "Z"');
  });

  it('startNew with an instance id: refused while it runs, a new execution once it finished', async () => {
    const id = `fixed-${Date.now()}`;
    assert.equal(await host.client.startNew('CustomStatus', { instanceId: id, input: 'first' }), id);
    await waitForStatus(host, id, (s) => s.runtimeStatus === df.OrchestrationRuntimeStatus.Running);
    await assert.rejects(host.client.startNew('HelloSequence', { instanceId: id }), /unexpected status code: 500.*already exists/);

    await host.client.raiseEvent(id, 'Continue', true);
    assert.equal((await waitForFinish(host.client, id)).output, 'finished');
    assert.equal(await host.client.startNew('HelloSequence', { instanceId: id, input: 'second' }), id);
    const second = await waitForFinish(host.client, id);
    assert.equal(second.name, 'HelloSequence');
    assert.equal(second.input, 'second');
    assert.deepEqual(second.output, ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']);
    assert.equal(eventNames(await host.rawHistory(id)).filter((n) => n === 'ExecutionStarted').length, 1, 'the old execution’s history is gone');
  });

  it('startNew with a version: the orchestrator sees it as context.df.version', async () => {
    const versioned = await host.client.startNew('ReportsVersion', { version: '2.1' });
    assert.equal((await waitForFinish(host.client, versioned)).output, '2.1');
    const plain = await host.client.startNew('ReportsVersion');
    assert.equal((await waitForFinish(host.client, plain)).output, '');
  });

  it('startNew: unknown orchestrator and invalid instance ids are refused with 400', async () => {
    await assert.rejects(host.client.startNew('NoSuchOrchestrator'), /status code: 400.*The function 'NoSuchOrchestrator' doesn't exist, is disabled, or is not an orchestrator function\. Additional info: The following are the known orchestrator functions: '.*HelloSequence/);
    await assert.rejects(host.client.startNew('HelloSequence', { instanceId: '@reserved' }), /status code: 400.*must not start with @/);
    await assert.rejects(host.client.startNew('HelloSequence', { instanceId: 'x'.repeat(257) }), /status code: 400/);
  });

  it('raiseEvent and terminate: 404 unknown, 202 accepted, 410 once finished', async () => {
    await assert.rejects(host.client.raiseEvent('no-such-instance', 'Continue', 1), /No instance with ID 'no-such-instance' found/);
    await assert.rejects(host.client.terminate('no-such-instance', 'why'), /No instance with ID/);

    const id = await host.client.startNew('CustomStatus');
    // Waiting for its event, so no activity result can share the termination's episode.
    await waitForStatus(host, id, (s) => (s.customStatus as { stage?: string } | null)?.stage === 'waiting');
    await host.client.terminate(id, 'no longer needed');
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Terminated');
    assert.equal(status.output, 'no longer needed');
    const names = eventNames(await host.rawHistory(id));
    assert.deepEqual(names.slice(-4), ['OrchestratorStarted', 'ExecutionTerminated', 'ExecutionCompleted', 'OrchestratorCompleted']);

    assert.equal((await fetch(api(`instances/${id}/terminate?reason=again`), { method: 'POST' })).status, 410);
    const raise = await fetch(api(`instances/${id}/raiseEvent/Continue`), { method: 'POST', body: '1', headers: { 'Content-Type': 'application/json' } });
    assert.equal(raise.status, 410);
    await host.client.terminate(id, 'again'); // the client treats 410 as done
  });

  it('raiseEvent refuses content that is not JSON', async () => {
    const id = await host.client.startNew('CustomStatus');
    const response = await fetch(api(`instances/${id}/raiseEvent/Continue`), { method: 'POST', body: 'go', headers: { 'Content-Type': 'text/plain' } });
    assert.equal(response.status, 400);
    assert.equal(((await response.json()) as { code: string }).code, 'DURABLE_NOT_JSON');
    await host.client.terminate(id, 'cleanup');
  });

  it('rewind, suspend and resume answer 501 with a stable code', async () => {
    const id = await host.client.startNew('HelloSequence');
    await waitForFinish(host.client, id);
    await assert.rejects(host.client.rewind(id, 'try again'), /DURABLE_NOT_SUPPORTED/);
    await assert.rejects(host.client.suspend(id, 'pause'), /status code: 501.*DURABLE_NOT_SUPPORTED/);
    await assert.rejects(host.client.resume(id, 'go'), /status code: 501/);
  });

  it('an HTTP starter function gets the durableClient payload and returns the check-status response', async () => {
    const requestUrl = `${host.baseUrl}/api/orchestrators/HelloSequence`;
    const result = await host.app.invoke('StartOrchestration', {
      trigger: { method: 'POST', url: requestUrl, headers: { 'content-type': 'application/json' }, query: {}, params: { name: 'HelloSequence' }, body: Buffer.from('"from http"') },
    });
    const response = result.returnValue as HttpResponseData;
    assert.equal(response.status, 202);
    const links = JSON.parse(response.body.toString('utf8')) as { id: string; statusQueryGetUri: string; sendEventPostUri: string };
    assert.ok(links.statusQueryGetUri.startsWith(`${host.baseUrl}/runtime/webhooks/durabletask/instances/${links.id}?taskHub=${host.taskHub}&connection=Storage`), links.statusQueryGetUri);
    assert.equal(response.headers.location ?? response.headers.Location, links.statusQueryGetUri);
    const status = await waitForFinish(host.client, links.id);
    assert.equal(status.input, 'from http');
    const viaLink = await fetch(links.statusQueryGetUri);
    assert.equal(viaLink.status, 200);
  });

  it('start and wait (createAndWaitOnNewInstancePostUri) returns the output when done in time', async () => {
    const response = await fetch(api('orchestrators/HelloSequence?timeout=20&pollingInterval=1'), { method: 'POST' });
    assert.equal(response.status, 200);
    assert.deepEqual(await response.json(), ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']);
  });
});

describe('Durable instance queries and purge through the durable-functions client', () => {
  let host: DurableTestHost;
  const completed: string[] = [];
  let running = '';
  let startedAt: Date;

  before(async () => {
    host = await startDurableTestHost();
    startedAt = new Date(Date.now() - 60_000);
    for (let i = 0; i < 3; i += 1) completed.push(await host.client.startNew('HelloSequence', { instanceId: `done-${i}` }));
    running = await host.client.startNew('CustomStatus', { instanceId: 'waiting-0' });
    for (const id of completed) await waitForFinish(host.client, id);
    await waitForStatus(host, running, (s) => s.runtimeStatus === df.OrchestrationRuntimeStatus.Running);
  });

  after(async () => {
    await host?.stop();
  });

  it('lists all instances and filters by status and creation time', async () => {
    const all = await host.client.getStatusAll();
    assert.deepEqual(all.map((s) => s.instanceId).sort(), ['done-0', 'done-1', 'done-2', 'waiting-0']);
    const byStatus = await host.client.getStatusBy({ runtimeStatus: [df.OrchestrationRuntimeStatus.Running] });
    assert.deepEqual(byStatus.map((s) => s.instanceId), ['waiting-0']);
    const future = await host.client.getStatusBy({ createdTimeFrom: new Date(Date.now() + 3_600_000) });
    assert.deepEqual(future, []);
    const window = await host.client.getStatusBy({ createdTimeFrom: startedAt, createdTimeTo: new Date(Date.now() + 60_000), runtimeStatus: [df.OrchestrationRuntimeStatus.Completed] });
    assert.deepEqual(window.map((s) => s.instanceId).sort(), ['done-0', 'done-1', 'done-2']);
  });

  it('pages with top and the x-ms-continuation-token header', async () => {
    const seen: string[] = [];
    let token: string | null = null;
    let pages = 0;
    do {
      const response: Response = await fetch(`${host.baseUrl}/runtime/webhooks/durabletask/instances/?top=1`, { headers: token === null ? {} : { 'x-ms-continuation-token': token } });
      assert.equal(response.status, 200);
      const page = (await response.json()) as Array<{ instanceId: string }>;
      assert.ok(page.length <= 1);
      seen.push(...page.map((s) => s.instanceId));
      token = response.headers.get('x-ms-continuation-token');
      pages += 1;
    } while (token !== null && pages < 20);
    assert.deepEqual(seen.sort(), ['done-0', 'done-1', 'done-2', 'waiting-0']);
    assert.ok(pages >= 4);
  });

  it('purges one instance, then the rest by filter; unknown ids purge nothing', async () => {
    const one = await host.client.purgeInstanceHistory('done-0');
    assert.equal(one.instancesDeleted, 1);
    await assert.rejects(host.client.getStatus('done-0'), /HTTP 404/);
    assert.equal((await host.client.purgeInstanceHistory('done-0')).instancesDeleted, 0);

    const byFilter = await host.client.purgeInstanceHistoryBy({ createdTimeFrom: startedAt, runtimeStatus: [df.OrchestrationRuntimeStatus.Completed] });
    assert.equal(byFilter.instancesDeleted, 2);
    assert.deepEqual((await host.client.getStatusAll()).map((s) => s.instanceId), ['waiting-0']);
    const none = await host.client.purgeInstanceHistoryBy({ createdTimeFrom: startedAt, runtimeStatus: [df.OrchestrationRuntimeStatus.Completed] });
    assert.equal(none.instancesDeleted, 0);
    const missingFrom = await fetch(`${host.baseUrl}/runtime/webhooks/durabletask/instances/`, { method: 'DELETE' });
    assert.equal(missingFrom.status, 400);
  });
});
