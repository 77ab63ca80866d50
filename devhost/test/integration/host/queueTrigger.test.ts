/**
 * The storage queue trigger on real development host processes against Azurite: base64 decoding
 * and JSON bodies, trigger metadata, retries up to host.json `maxDequeueCount` then `<queue>-poison`
 * with the original text, a non-base64 message poisoned without an invocation (the host's
 * MessageDecodingFailed handling), and `messageEncoding: none`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { type QueueClient, QueueServiceClient } from '@azure/storage-queue';

import { eventually, type HostProcess, startHostProcess } from '../../../src/testing/hostProcess';
import { type AppRoot, createAppRoot } from '../../support/appRoot';
import { azuriteConnectionString, uniqueName } from '../../support/env';

const MAX_DEQUEUE = 3;
const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

function queues(): QueueServiceClient {
  return QueueServiceClient.fromConnectionString(azuriteConnectionString());
}

async function peekAll(queue: QueueClient): Promise<string[]> {
  if (!(await queue.exists())) return [];
  const peeked = await queue.peekMessages({ numberOfMessages: 32 });
  return peeked.peekedMessageItems.map((m) => m.messageText);
}

function appValues(inQueue: string, outQueue: string): Record<string, string> {
  return {
    AzureWebJobsStorage: azuriteConnectionString(),
    FIXTURE_QUEUE: inQueue,
    FIXTURE_OUT_QUEUE: outQueue,
    FIXTURE_TIMER_QUEUE: uniqueName('q-timer'),
    FIXTURE_TIMER_SCHEDULE: '0 0 0 1 1 *',
  };
}

describe('development host queue trigger, base64 (the default encoding)', () => {
  let app: AppRoot;
  let host: HostProcess;
  const inQueue = uniqueName('q-in');
  const outQueue = uniqueName('q-out');
  let preExhaustedId = '';

  before(async () => {
    const input = queues().getQueueClient(inQueue);
    await input.create();
    // A message that already used up its attempts elsewhere: received MAX_DEQUEUE times by hand.
    const sent = await input.sendMessage(b64(JSON.stringify({ n: 'exhausted' })));
    preExhaustedId = sent.messageId;
    for (let i = 0; i < MAX_DEQUEUE; i += 1) {
      const got = await input.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 1 });
      const message = got.receivedMessageItems[0];
      assert.ok(message !== undefined);
      await input.updateMessage(message.messageId, message.popReceipt, undefined, 0);
    }
    app = createAppRoot({
      fixture: 'basicApp',
      hostJson: {
        version: '2.0',
        extensions: { queues: { batchSize: 4, newBatchThreshold: 2, maxPollingInterval: '00:00:00.500', visibilityTimeout: '00:00:00', maxDequeueCount: MAX_DEQUEUE } },
      },
      values: appValues(inQueue, outQueue),
    });
    host = await startHostProcess({ appRoot: app.dir, hostId: uniqueName('qh').slice(0, 32), instanceId: 'queue-1' });
  });

  after(async () => {
    await host.stop();
    app.remove();
  });

  it('decodes base64, parses JSON, and gives the host trigger metadata', async () => {
    const sent = await queues().getQueueClient(inQueue).sendMessage(b64(JSON.stringify({ n: 42 })));
    const out = queues().getQueueClient(outQueue);
    const record = await eventually(
      async () => {
        for (const text of await peekAll(out)) {
          const parsed = JSON.parse(Buffer.from(text, 'base64').toString('utf8')) as { received?: { n?: unknown }; metadata?: Record<string, unknown> };
          if (parsed.received?.n === 42) return parsed;
        }
        return undefined;
      },
      10_000,
      'the handled message on the output queue',
    );
    const metadata = record.metadata ?? {};
    assert.equal(metadata.id, sent.messageId);
    assert.equal(metadata.dequeueCount, 1);
    for (const key of ['insertionTime', 'expirationTime', 'nextVisibleTime', 'popReceipt']) {
      assert.equal(typeof metadata[key], 'string', `${key} is present`);
    }
    assert.equal(new Date(metadata.insertionTime as string).getTime(), sent.insertedOn.getTime());
  });

  it('retries a failing message maxDequeueCount times, then moves the original text to <queue>-poison', async () => {
    const original = b64(JSON.stringify({ fail: true, tag: 'poison-me' }));
    const sent = await queues().getQueueClient(inQueue).sendMessage(original);
    const poison = queues().getQueueClient(`${inQueue}-poison`);
    await eventually(async () => ((await peekAll(poison)).includes(original) ? true : undefined), 15_000, 'the message in the poison queue');
    const attempts = host.events('queue.invocation_failed').filter((e) => e.messageId === sent.messageId);
    assert.deepEqual(
      attempts.map((a) => a.dequeueCount),
      [1, 2, 3],
    );
    // Moved right after the last failed attempt, not on a further delivery.
    const moved = await eventually(
      () => Promise.resolve(host.events('queue.message_poisoned').find((e) => e.messageId === sent.messageId)),
      5_000,
      'the poison log line',
    );
    assert.equal(moved.dequeueCount, MAX_DEQUEUE);
    assert.equal((await peekAll(queues().getQueueClient(inQueue))).includes(original), false);
  });

  it('poisons a message received past maxDequeueCount without invoking the function', async () => {
    const poison = queues().getQueueClient(`${inQueue}-poison`);
    const original = b64(JSON.stringify({ n: 'exhausted' }));
    await eventually(async () => ((await peekAll(poison)).includes(original) ? true : undefined), 10_000, 'the exhausted message in the poison queue');
    assert.equal(host.events('queue.invocation_failed').some((e) => e.messageId === preExhaustedId), false);
    const out = await peekAll(queues().getQueueClient(outQueue));
    assert.equal(
      out.some((t) => Buffer.from(t, 'base64').toString('utf8').includes('exhausted')),
      false,
    );
  });

  it('moves a message that is not valid base64 to the poison queue unchanged, without an invocation', async () => {
    const raw = '{"plain":"not base64"}';
    const sent = await queues().getQueueClient(inQueue).sendMessage(raw);
    const poison = queues().getQueueClient(`${inQueue}-poison`);
    await eventually(async () => ((await peekAll(poison)).includes(raw) ? true : undefined), 10_000, 'the undecodable message in the poison queue');
    assert.ok(host.events('queue.decoding_failed').some((e) => e.messageId === sent.messageId));
    assert.equal(host.events('queue.invocation_failed').some((e) => e.messageId === sent.messageId), false);
  });
});

describe('development host queue trigger, messageEncoding none', () => {
  let app: AppRoot;
  let host: HostProcess;
  const inQueue = uniqueName('qn-in');
  const outQueue = uniqueName('qn-out');

  before(async () => {
    app = createAppRoot({
      fixture: 'basicApp',
      hostJson: { version: '2.0', extensions: { queues: { maxPollingInterval: '00:00:00.500', messageEncoding: 'none' } } },
      values: appValues(inQueue, outQueue),
    });
    host = await startHostProcess({ appRoot: app.dir, hostId: uniqueName('qn').slice(0, 32), instanceId: 'queue-none-1' });
  });

  after(async () => {
    await host.stop();
    app.remove();
  });

  it('hands the raw text to the function and writes output messages unencoded', async () => {
    const input = queues().getQueueClient(inQueue);
    await input.createIfNotExists();
    await input.sendMessage(JSON.stringify({ n: 'raw' }));
    const out = queues().getQueueClient(outQueue);
    const text = await eventually(
      async () => (await peekAll(out)).find((t) => t.includes('"raw"')),
      10_000,
      'the unencoded output message',
    );
    assert.deepEqual((JSON.parse(text) as { received?: unknown }).received, { n: 'raw' });
  });
});
