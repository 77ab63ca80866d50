/**
 * The worker's logic against Azurite with the planner's real messages: exactly-once chunk results
 * under duplicate and concurrent delivery, the last-attempt failure record, cancelled jobs, item
 * errors, chunks too big for a message, and messages that are not work items.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { decodeQueueMessage,type WorkItemMessage } from '../../../../shared/jobs/messageCodec';
import { ChunkBlobs } from '../../../../shared/jobs/store/ChunkBlobs';
import { CANCEL_CHECK_MS } from '../../../../shared/jobs/worker/WorkItemProcessor';
import { ItemError, type WorkType } from '../../../../shared/worktypes/WorkType';
import { builtInWorkTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { uniqueName } from '../../../support/env';
import { jobPipeline, jobRun } from '../support/jobPipeline';

/** A work type whose processing fails (an injected fault), for the last-attempt path. */
const failing: WorkType<{ count: number }, { count: number }> = {
  name: 'failing',
  description: 'always throws',
  validateItem: () => undefined,
  process: () => {
    throw new Error('disk on fire');
  },
  empty: () => ({ count: 0 }),
  combine: (a, b) => ({ count: a.count + b.count }),
  finish: (t) => t,
};

const T0 = new Date('2026-01-01T00:00:00Z');

describe('work-items worker (Azurite)', () => {
  it('counts a chunk once however often it is delivered, concurrently or again later', async () => {
    const p = await jobPipeline('dup');
    const items = Array.from({ length: 25 }, (_, i) => i + 1);
    const run = jobRun('dup-job', 'sum', { kind: 'inline', items });
    const planned = await p.plan(run);
    assert.deepEqual(planned.ok ? [planned.chunkCount, planned.itemCount, planned.cancelled] : planned, [3, 25, false]);
    const messages = await p.drainMessages();
    assert.equal(messages.length, 3, 'one message per chunk');

    const first = messages[0];
    assert.ok(first !== undefined);
    const concurrent = await Promise.all([p.deliver(first), p.deliver(first, 2)]);
    assert.deepEqual([...concurrent].sort(), ['duplicate', 'written']);
    assert.equal(await p.deliver(first, 3), 'duplicate');
    for (const m of messages.slice(1)) {
      assert.equal(await p.deliver(m), 'written');
      assert.equal(await p.deliver(m, 2), 'duplicate');
    }
    const summary = await p.activities.aggregate({ run, chunkCount: 3, itemCount: 25, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.deepEqual(summary.result, { count: 25, sum: 325, min: 1, max: 25 });
    assert.deepEqual(summary.progress, { chunks: { total: 3, done: 3, failed: 0 }, items: { total: 25, done: 25, failed: 0 } });
  });

  it('carries up to four chunks in one message, each handled as if it came alone; a part that fails redelivers the message and only that part works again', async () => {
    let failOnce = true;
    // Item 13 (chunk 4 of 3-item chunks) fails its first delivery: a transient fault of the chunk.
    const flaky: WorkType<{ count: number; sum: number }, { count: number; sum: number }> = {
      name: 'flaky',
      description: 'sums, failing once on item 13',
      validateItem: () => undefined,
      process: (item) => {
        if (item === 13 && failOnce) {
          failOnce = false;
          throw new Error('transient');
        }
        return { count: 1, sum: Number(item) };
      },
      empty: () => ({ count: 0, sum: 0 }),
      combine: (a, b) => ({ count: a.count + b.count, sum: a.sum + b.sum }),
      finish: (t) => t,
    };
    const p = await jobPipeline('packed', builtInWorkTypes().register(flaky), undefined, undefined, undefined, 4);
    const items = Array.from({ length: 30 }, (_, i) => i + 1);
    const planned = await p.plan(jobRun('packed-job', 'flaky', { kind: 'inline', items }, { chunkSize: 3 }));
    assert.ok(planned.ok && !('standDown' in planned) && planned.chunkCount === 10);
    const messages = await p.drainMessages();
    const bodies = messages.map((m) => decodeQueueMessage(m.messageText) as { parts?: WorkItemMessage[] });
    assert.deepEqual(bodies.map((b) => b.parts?.map((part) => part.chunk)).sort(), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]], 'three messages: 4, 4 and 2 chunks');
    const [first, second, third] = messages;
    assert.deepEqual(await p.worker.handleMessage(decodeQueueMessage(first?.messageText ?? ''), { dequeueCount: 1 }), ['written', 'written', 'written', 'written']);
    await assert.rejects(p.worker.handleMessage(decodeQueueMessage(second?.messageText ?? ''), { dequeueCount: 1 }), /transient/);
    // The three parts that finished wrote their results; the redelivery skips them and does chunk 4.
    assert.deepEqual(await p.worker.handleMessage(decodeQueueMessage(second?.messageText ?? ''), { dequeueCount: 2 }), ['written', 'duplicate', 'duplicate', 'duplicate']);
    assert.deepEqual(await p.worker.handleMessage(decodeQueueMessage(third?.messageText ?? ''), { dequeueCount: 1 }), ['written', 'written']);
    const summary = await p.activities.aggregate({ run: jobRun('packed-job', 'flaky', { kind: 'inline', items }), chunkCount: 10, itemCount: 30, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.deepEqual(summary.result, { count: 30, sum: 465 });
  });

  it('throws for redelivery before the last attempt and records the chunk as failed on it', async () => {
    const registry = builtInWorkTypes().register(failing);
    const p = await jobPipeline('last', registry);
    const run = jobRun('last-job', 'failing', { kind: 'inline', items: [1, 2, 3] }, { attempts: 2 });
    await p.plan(run);
    const [message] = await p.drainMessages();
    assert.ok(message !== undefined);
    await assert.rejects(p.deliver(message, 1), /disk on fire/);
    assert.equal(await p.store.chunks.chunkResultExists('last-job', 0), false, 'nothing recorded before the last attempt');
    assert.equal(await p.deliver(message, 2), 'failed_recorded');
    const result = await p.store.chunks.readChunkResult('last-job', 0);
    assert.equal(result?.status, 'failed');
    assert.equal(result?.error?.code, 'CHUNK_FAILED');
    assert.match(result?.error?.message ?? '', /attempt 2 of 2: disk on fire/);
    assert.equal(result?.itemsFailed, 3);
    const summary = await p.activities.aggregate({ run, chunkCount: 1, itemCount: 3, cancelled: false });
    assert.equal(summary.status, 'failed');
    assert.equal(summary.error?.code, 'CHUNK_FAILED');
    assert.deepEqual(summary.progress.items, { total: 3, done: 0, failed: 3 });
  });

  it('skips the chunks of a job cancelled CANCEL_CHECK_MS (5 s) ago (a worker reads the marker once per 5 s per job)', async () => {
    let clock = new Date(T0);
    const p = await jobPipeline('cancel', undefined, () => clock);
    const run = jobRun('cancel-job', 'sum', { kind: 'inline', items: [1, 2, 3, 4] }, { chunkSize: 2 });
    await p.plan(run);
    const messages = await p.drainMessages();
    assert.equal(await p.deliver(messages[0] ?? assert.fail()), 'written');
    await p.store.markCancelled('cancel-job', 'test');
    clock = new Date(T0.getTime() + CANCEL_CHECK_MS);
    assert.equal(await p.deliver(messages[1] ?? assert.fail()), 'cancelled');
    assert.equal(await p.store.chunks.chunkResultExists('cancel-job', 1), false);
    const summary = await p.activities.aggregate({ run, chunkCount: 2, itemCount: 4, cancelled: true });
    assert.equal(summary.status, 'cancelled');
    assert.deepEqual(summary.result, { count: 2, sum: 3, min: 1, max: 2 });
  });

  it('records each bad item with its index and code, and finishes the chunk', async () => {
    const p = await jobPipeline('items');
    const texts = p.blobs.getContainerClient(uniqueName('texts'));
    await texts.create();
    await texts.getBlockBlobClient('a.txt').upload('one two two', 11);
    await texts.getBlockBlobClient('b.txt').upload('three three three\nfour', 22);
    // The fourth names a blob in the results container (another job's data): never read, whatever it holds.
    await p.store.writeJobResult('other-job', { secret: 'words words words' });
    const items = [`${texts.containerName}/a.txt`, `${texts.containerName}/missing.txt`, `${texts.containerName}/b.txt`, `${p.store.containerName}/jobs/other-job/result.json`];
    const run = jobRun('wc-job', 'wordcount', { kind: 'inline', items });
    await p.plan(run);
    const [message] = await p.drainMessages();
    assert.equal(await p.deliver(message ?? assert.fail()), 'written');
    const chunk = await p.store.chunks.readChunkResult('wc-job', 0);
    assert.equal(chunk?.itemsFailed, 2);
    assert.deepEqual(
      chunk?.itemErrors.map((e) => [e.index, e.code]),
      [[1, 'BLOB_NOT_FOUND'], [3, 'BLOB_NOT_ALLOWED']],
    );
    const summary = await p.activities.aggregate({ run, chunkCount: 1, itemCount: 4, cancelled: false });
    assert.equal(summary.status, 'completed_with_errors');
    const result = summary.result as { blobs: number; words: number; topWords: Array<{ word: string; count: number }> };
    assert.equal(result.blobs, 2);
    assert.equal(result.words, 7);
    assert.deepEqual(result.topWords[0], { word: 'three', count: 3 });
    assert.equal(summary.errors?.[0]?.code, 'BLOB_NOT_FOUND');
  });

  it('sends a chunk too big for a queue message by blob reference and still processes it', async () => {
    const p = await jobPipeline('big');
    const items = Array.from({ length: 30 }, (_, i) => `${i}-${'x'.repeat(3_000)}`);
    const run = jobRun('big-job', 'noop', { kind: 'inline', items }, { chunkSize: 20 });
    await p.plan(run);
    const messages = await p.drainMessages();
    assert.equal(messages.length, 2);
    const bodies = messages.map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage).sort((a, b) => a.chunk - b.chunk);
    assert.equal(bodies[0]?.items, undefined);
    assert.equal(bodies[0]?.itemsRef, ChunkBlobs.itemsBlob('big-job', 0));
    assert.equal(bodies[1]?.items?.length, 10, 'the small chunk stays inline');
    for (const m of messages) assert.ok(m.messageText.length <= 64 * 1024);
    for (const m of messages) assert.equal(await p.deliver(m), 'written');
    const summary = await p.activities.aggregate({ run, chunkCount: 2, itemCount: 30, cancelled: false });
    assert.deepEqual(summary.result, { count: 30 });
  });

  it('refuses a message that is not a work item, so the host retries it into the poison queue', async () => {
    const p = await jobPipeline('junk');
    await assert.rejects(p.worker.handle({ hello: 'world' }, { dequeueCount: 1 }), { code: 'INVALID_WORK_ITEM' });
    await assert.rejects(p.worker.handle('not json', { dequeueCount: 1 }), { code: 'INVALID_WORK_ITEM' });
  });

  it('treats an ItemError from process as the item\'s fault, not the chunk\'s', async () => {
    const picky: WorkType<{ n: number }, { n: number }> = {
      name: 'picky',
      description: 'refuses odd items while processing',
      validateItem: () => undefined,
      process: (item) => {
        if (Number(item) % 2 === 1) throw new ItemError('ODD', `${String(item)} is odd`);
        return { n: 1 };
      },
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: a.n + b.n }),
      finish: (t) => t,
    };
    const p = await jobPipeline('picky', builtInWorkTypes().register(picky));
    const run = jobRun('picky-job', 'picky', { kind: 'inline', items: [1, 2, 3, 4, 6] });
    await p.plan(run);
    const [message] = await p.drainMessages();
    assert.equal(await p.deliver(message ?? assert.fail()), 'written');
    const summary = await p.activities.aggregate({ run, chunkCount: 1, itemCount: 5, cancelled: false });
    assert.equal(summary.status, 'completed_with_errors');
    assert.deepEqual(summary.result, { n: 3 });
    assert.deepEqual(summary.progress.items, { total: 5, done: 3, failed: 2 });
  });
});
