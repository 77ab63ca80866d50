/**
 * The queue depths the live page shows (shared/jobs/api/QueueDepths.ts), on Azurite with the real SDK:
 * each queue's count, a queue not created yet as null, and one read shared by every caller for
 * the cache time.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';

import { QueueDepths } from '../../../shared/jobs/api/QueueDepths';
import { azuriteConnectionString, uniqueName } from '../../support/env';

describe('queue depths (Azurite)', () => {
  it('counts each queue, shows a missing one as null, and shares one read for the cache time', async () => {
    const service = QueueServiceClient.fromConnectionString(azuriteConnectionString());
    const base = uniqueName('depth');
    const jobs = service.getQueueClient(base);
    const poison = service.getQueueClient(`${base}-poison`);
    const work = service.getQueueClient(`${base}-wi`);
    const missing = service.getQueueClient(`${base}-wi-poison`);
    await Promise.all([jobs.create(), poison.create(), work.create()]);
    for (let i = 0; i < 3; i++) await jobs.sendMessage(`job ${i}`);
    await poison.sendMessage('bad');
    // The cache's clock is the test's: a slow send under load must not age the cached answer.
    let now = 0;
    const depths = new QueueDepths(
      [
        { role: 'jobs', client: jobs },
        { role: 'jobs-poison', client: poison },
        { role: 'work-items', client: work },
        { role: 'work-items-poison', client: missing },
      ],
      500,
      { now: () => now },
    );
    const first = await depths.read();
    assert.deepEqual(first.queues.map((q) => [q.role, q.name, q.messages]), [
      ['jobs', base, 3],
      ['jobs-poison', `${base}-poison`, 1],
      ['work-items', `${base}-wi`, 0],
      ['work-items-poison', `${base}-wi-poison`, null],
    ]);
    await work.sendMessage('chunk');
    const [again] = await Promise.all([depths.read(), depths.read()]);
    assert.equal(again?.queues[2]?.messages, 0, 'within the cache time: the same answer');
    assert.equal(depths.reads, 1, 'one read for every caller within the cache time');
    now += 499;
    assert.equal((await depths.read()).queues[2]?.messages, 0, 'still within the cache time');
    now += 1;
    assert.equal((await depths.read()).queues[2]?.messages, 1);
    assert.equal(depths.reads, 2);
  });
});
