/**
 * The development host's app loader: the fixture app's own `app.*` / `df.app.*` registrations are
 * captured with their binding metadata, and invocations go through the library's programming model
 * (typed data in, converted results and outputs back).
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';

import { type LoadedApp,loadFunctionApp } from '../../src/AppLoader';
import { type HttpResponseData } from '../../src/contracts';
import { memoryLogger } from '../../src/log';

const fixtureRoot = join(__dirname, '..', 'fixtures', 'basicApp');

describe('loadFunctionApp', () => {
  let loaded: LoadedApp;
  const logger = memoryLogger('devhost');

  before(async () => {
    loaded = await loadFunctionApp({ appRoot: fixtureRoot, main: '*.js', logger });
  });

  it('captures every registration with its trigger and binding metadata', () => {
    const byName = new Map(loaded.list().map((fn) => [fn.name, fn]));
    assert.deepEqual([...byName.keys()].sort(), ['fail', 'fixtureActivity', 'fixtureOrchestrator', 'hello', 'onQueue', 'slow', 'startFixture', 'submit', 'tick']);

    const hello = byName.get('hello');
    assert.equal(hello?.triggerType, 'httpTrigger');
    const helloTrigger = hello.bindings[hello.triggerName];
    assert.equal(helloTrigger?.route, 'hello/{name?}');
    assert.deepEqual(helloTrigger?.methods, ['GET', 'POST']);
    assert.equal(helloTrigger?.authLevel, 'anonymous');
    assert.equal(hello.bindings.$return?.type, 'http');
    assert.equal(hello.bindings.$return?.direction, 'out');

    assert.equal(byName.get('submit')?.bindings[byName.get('submit')?.triggerName ?? '']?.authLevel, 'function');

    const onQueue = byName.get('onQueue');
    assert.equal(onQueue?.triggerType, 'queueTrigger');
    assert.equal(onQueue.bindings[onQueue.triggerName]?.queueName, '%FIXTURE_QUEUE%');
    assert.equal(onQueue.bindings[onQueue.triggerName]?.connection, 'AzureWebJobsStorage');
    const outputs = Object.values(onQueue.bindings).filter((b) => b.direction === 'out');
    assert.deepEqual(
      outputs.map((b) => [b.type, b.queueName]),
      [['queue', '%FIXTURE_OUT_QUEUE%']],
    );

    const tick = byName.get('tick');
    assert.equal(tick?.triggerType, 'timerTrigger');
    assert.equal(tick.bindings[tick.triggerName]?.schedule, '%FIXTURE_TIMER_SCHEDULE%');

    assert.equal(byName.get('fixtureOrchestrator')?.triggerType, 'orchestrationTrigger');
    assert.equal(byName.get('fixtureActivity')?.triggerType, 'activityTrigger');
    const start = byName.get('startFixture');
    assert.deepEqual(
      Object.values(start?.bindings ?? {})
        .filter((b) => b.type === 'durableClient')
        .map((b) => b.direction),
      ['in'],
    );
  });

  it('invokes an HTTP function with route params, query, body, and converts its response', async () => {
    const result = await loaded.invoke('hello', {
      trigger: {
        method: 'POST',
        url: 'http://127.0.0.1:7071/api/hello/ada?q=1',
        headers: { 'content-type': 'text/plain' },
        query: { q: '1' },
        params: { name: 'ada' },
        body: Buffer.from('payload'),
      },
    });
    const response = result.returnValue as HttpResponseData;
    assert.equal(response.status, 200);
    assert.equal(response.headers['x-fixture'], 'yes');
    assert.equal(response.headers['content-type'], 'application/json');
    assert.deepEqual(response.cookies, ['seen=1; HttpOnly']);
    assert.deepEqual(JSON.parse(response.body.toString('utf8')), {
      name: 'ada',
      query: '1',
      method: 'POST',
      body: 'payload',
      url: 'http://127.0.0.1:7071/api/hello/ada?q=1',
    });
    assert.ok(logger.lines.some((l) => l.event === 'function.log' && l.message === 'hello called' && l.function === 'hello'));
  });

  it('invokes a queue function with a JSON body and trigger metadata, returning its output binding', async () => {
    const result = await loaded.invoke('onQueue', {
      trigger: JSON.stringify({ n: 7 }),
      triggerMetadata: { id: 'm-1', dequeueCount: 2, insertionTime: '2026-01-01T00:00:00.000Z' },
    });
    assert.deepEqual(result.returnValue, { handled: { n: 7 } });
    const [outName] = Object.keys(result.outputs);
    assert.ok(outName !== undefined);
    assert.deepEqual(result.outputs[outName], {
      received: { n: 7 },
      metadata: { id: 'm-1', dequeueCount: 2, insertionTime: '2026-01-01T00:00:00.000Z' },
    });
  });

  it('passes a timer trigger in the host shape and the handler sees the library TimerInfo', async () => {
    const result = await loaded.invoke('tick', {
      trigger: { Schedule: { AdjustForDST: true }, ScheduleStatus: { Last: 'a', Next: 'b', LastUpdated: 'c' }, IsPastDue: true },
    });
    assert.deepEqual(result.returnValue, {
      instance: process.env.WEBSITE_INSTANCE_ID ?? null,
      isPastDue: true,
      schedule: { adjustForDST: true },
      scheduleStatus: { last: 'a', next: 'b', lastUpdated: 'c' },
      functionName: 'tick',
    });
  });

  it('invokes an activity with a string input and returns its string output', async () => {
    const result = await loaded.invoke('fixtureActivity', { trigger: 'world' });
    assert.equal(result.returnValue, 'hello world');
  });

  it('fills a durableClient input from the registered provider when the caller gives none', async () => {
    loaded.provideInput('durableClient', () => ({ taskHubName: 'FixtureHub', creationUrls: {}, managementUrls: {}, rpcBaseUrl: 'http://127.0.0.1:1/' }));
    const result = await loaded.invoke('startFixture', {
      trigger: { method: 'POST', url: 'http://127.0.0.1:7071/api/start', headers: {}, query: {}, params: {}, body: Buffer.alloc(0) },
    });
    const response = result.returnValue as HttpResponseData;
    assert.deepEqual(JSON.parse(response.body.toString('utf8')), { taskHubName: 'FixtureHub' });
  });

  it('rejects with the function’s own error when it throws', async () => {
    await assert.rejects(
      loaded.invoke('fail', { trigger: { method: 'GET', url: 'http://127.0.0.1:7071/api/fail', headers: {}, query: {}, params: {}, body: Buffer.alloc(0) } }),
      /fixture failure/,
    );
    assert.equal(loaded.inFlight, 0);
  });

  it('refuses an unknown function name and a second app in the same process', async () => {
    await assert.rejects(loaded.invoke('nope', { trigger: 'x' }), (err: { code?: string }) => err.code === 'DEVHOST_UNKNOWN_FUNCTION');
    await assert.rejects(loadFunctionApp({ appRoot: fixtureRoot, main: '*.js' }), (err: { code?: string }) => err.code === 'DEVHOST_APP_ALREADY_LOADED');
  });
});
