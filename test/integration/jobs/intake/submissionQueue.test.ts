/**
 * The submissions queue as the intake and the service use it (shared/jobs/SubmissionQueue.ts), held
 * to the same cases on an Azure queue through Azurite (the SDK's QueueClient) and on the in-memory
 * twin the unit tests use (MemoryQueue): what a unit test learns on the twin holds on Azure.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';

import { isStatus } from '../../../../shared/jobs/store/BlobDocuments';
import { type SubmissionQueue } from '../../../../shared/jobs/SubmissionQueue';
import { azuriteConnectionString, uniqueName } from '../../../support/env';
import { MemoryQueue } from '../../../unit/jobs/support/MemoryQueue';

const kinds: ReadonlyArray<{ readonly name: string; readonly make: () => Promise<SubmissionQueue> }> = [
  {
    name: 'Azure queue (Azurite)',
    make: async () => {
      const queue = QueueServiceClient.fromConnectionString(azuriteConnectionString()).getQueueClient(uniqueName('subq'));
      await queue.createIfNotExists();
      return queue;
    },
  },
  { name: 'in-memory twin', make: () => Promise.resolve(new MemoryQueue('subq')) },
];

for (const kind of kinds) {
  describe(`submissions queue: ${kind.name}`, () => {
    it('hands out messages in the order sent, each once while invisible, counting deliveries', async () => {
      const q = await kind.make();
      for (const text of ['a', 'b', 'c']) await q.sendMessage(text);
      assert.equal((await q.getProperties()).approximateMessagesCount, 3);
      const first = (await q.receiveMessages({ numberOfMessages: 2, visibilityTimeout: 30 })).receivedMessageItems;
      assert.deepEqual(first.map((m) => [m.messageText, m.dequeueCount]), [['a', 1], ['b', 1]]);
      assert.ok(first.every((m) => m.insertedOn instanceof Date));
      const rest = (await q.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 })).receivedMessageItems;
      assert.deepEqual(rest.map((m) => m.messageText), ['c'], 'the received two stay invisible');
      assert.equal((await q.getProperties()).approximateMessagesCount, 3, 'invisible messages still count');
      for (const m of [...first, ...rest]) await q.deleteMessage(m.messageId, m.popReceipt);
      assert.equal((await q.getProperties()).approximateMessagesCount, 0);
      assert.deepEqual((await q.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 })).receivedMessageItems, []);
    });

    it('a message back after its visibility is a new delivery whose receipt alone deletes it (400 for the old one, 404 once deleted)', async () => {
      const q = await kind.make();
      const sent = await q.sendMessage('again');
      await assert.rejects(q.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 0 }), (err) => isStatus(err, 400), 'visibility is 1 s or more');
      const [one] = (await q.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 1 })).receivedMessageItems;
      assert.equal(one?.messageId, sent.messageId);
      assert.deepEqual((await q.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 })).receivedMessageItems, []);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const [two] = (await q.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 })).receivedMessageItems;
      assert.equal(two?.dequeueCount, 2);
      assert.ok(one !== undefined && two !== undefined);
      await assert.rejects(q.deleteMessage(one.messageId, one.popReceipt), (err) => isStatus(err, 400), 'the first receipt no longer deletes it (PopReceiptMismatch)');
      await q.deleteMessage(two.messageId, two.popReceipt);
      assert.equal((await q.getProperties()).approximateMessagesCount, 0);
      await assert.rejects(q.deleteMessage(two.messageId, two.popReceipt), (err) => isStatus(err, 404), 'a deleted message is not found');
    });
  });
}
