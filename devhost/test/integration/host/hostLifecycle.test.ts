/**
 * The host process's start and stop: a configuration the host would reject stops it at start with
 * the error's code and what to fix; SIGTERM lets an HTTP request and a queue invocation that are
 * running finish (the message is then deleted, its output written) before the process exits 0.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';

import { eventually, startHostProcess } from '../../../src/testing/hostProcess';
import { createAppRoot } from '../../support/appRoot';
import { azuriteConnectionString, uniqueName } from '../../support/env';

function values(overrides: Record<string, string | undefined> = {}): Record<string, string> {
  const base: Record<string, string | undefined> = {
    AzureWebJobsStorage: azuriteConnectionString(),
    FIXTURE_QUEUE: uniqueName('life-in'),
    FIXTURE_OUT_QUEUE: uniqueName('life-out'),
    FIXTURE_TIMER_QUEUE: uniqueName('life-timer'),
    FIXTURE_TIMER_SCHEDULE: '0 0 0 1 1 *',
    ...overrides,
  };
  return Object.fromEntries(Object.entries(base).filter((e): e is [string, string] => e[1] !== undefined));
}

describe('development host start and stop', () => {
  it('refuses to start when a %SETTING% in a binding is missing, naming the setting', async () => {
    const app = createAppRoot({ fixture: 'basicApp', hostJson: { version: '2.0' }, values: values({ FIXTURE_QUEUE: undefined }) });
    try {
      await assert.rejects(startHostProcess({ appRoot: app.dir, hostId: 'life-missing', instanceId: 'l-1' }), (err: Error) => {
        assert.match(err.message, /exited with 1/);
        assert.match(err.message, /\[DEVHOST_UNRESOLVED_SETTING\].*FIXTURE_QUEUE/);
        return true;
      });
    } finally {
      app.remove();
    }
  });

  it('refuses to start with a host.json value the host would reject, naming the property', async () => {
    const app = createAppRoot({ fixture: 'basicApp', hostJson: { version: '2.0', extensions: { queues: { batchSize: 64 } } }, values: values() });
    try {
      await assert.rejects(startHostProcess({ appRoot: app.dir, hostId: 'life-badjson', instanceId: 'l-2' }), /\[DEVHOST_BAD_HOST_JSON\] host\.json extensions\.queues\.batchSize/);
    } finally {
      app.remove();
    }
  });

  it('lets running HTTP and queue invocations finish on SIGTERM, then exits 0', async () => {
    const settings = values();
    const app = createAppRoot({ fixture: 'basicApp', hostJson: { version: '2.0', extensions: { queues: { maxPollingInterval: '00:00:00.200' } } }, values: settings });
    const host = await startHostProcess({ appRoot: app.dir, hostId: uniqueName('life').slice(0, 32), instanceId: 'l-3' });
    try {
      const queues = QueueServiceClient.fromConnectionString(azuriteConnectionString());
      const input = queues.getQueueClient(settings.FIXTURE_QUEUE as string);
      await input.createIfNotExists();
      await input.sendMessage(Buffer.from(JSON.stringify({ sleepMs: 1_500, tag: 'in-flight' })).toString('base64'));
      // Wait until the queue invocation has the message: invisible (peek skips it) but not deleted.
      await eventually(
        async () => ((await input.peekMessages()).peekedMessageItems.length === 0 && (await input.getProperties()).approximateMessagesCount === 1 ? true : undefined),
        10_000,
        'the message to be taken',
      );
      const slow = fetch(`${host.baseUrl}/api/slow/1500`);
      await new Promise((r) => setTimeout(r, 200));
      const exit = host.stop();

      const res = await slow;
      assert.equal(res.status, 200);
      assert.equal(await res.text(), 'finished');
      assert.equal(await exit, 0);
      assert.ok(host.lines().includes('Development host stopped.'));

      const out = await queues.getQueueClient(settings.FIXTURE_OUT_QUEUE as string).peekMessages({ numberOfMessages: 32 });
      assert.ok(
        out.peekedMessageItems.some((m) => Buffer.from(m.messageText, 'base64').toString('utf8').includes('in-flight')),
        'the in-flight message finished and its output was written',
      );
      const left = await input.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 1 });
      assert.equal(left.receivedMessageItems.length, 0);
      // Invisible messages would not show above; the count includes them (in Azurite as in Azure).
      assert.equal((await input.getProperties()).approximateMessagesCount, 0, 'the finished message was deleted, not left to be redelivered');
    } finally {
      await host.kill();
      app.remove();
    }
  });
});
