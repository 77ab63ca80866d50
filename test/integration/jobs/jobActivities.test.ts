/**
 * The orchestration's activities against Azurite: planning (one message per chunk, blob items and
 * their refusals, cancelled before planning), re-dispatch and expiry of late chunks, and aggregation
 * from metadata and from blobs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type WorkItemMessage } from '../../../shared/jobs/JobRun';
import { decodeQueueMessage } from '../../../shared/jobs/JobSubmission';
import { uniqueName } from '../../support/env';
import { jobPipeline, jobRun } from './support/jobPipeline';

describe('job activities (Azurite)', () => {
  it('plans one message per chunk with the chunk\'s place in the job, base64 JSON like any queue client sends', async () => {
    const p = await jobPipeline('plan');
    const items = Array.from({ length: 95 }, (_, i) => i);
    const planned = await p.activities.plan(jobRun('plan-job', 'sum', { kind: 'inline', items }, { chunkSize: 20 }));
    assert.deepEqual(planned, { ok: true, cancelled: false, chunkCount: 5, itemCount: 95 });
    const messages = await p.drainMessages();
    const bodies = messages.map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage).sort((a, b) => a.chunk - b.chunk);
    assert.deepEqual(
      bodies.map((b) => [b.chunk, b.firstIndex, b.itemCount, b.items?.[0], b.dispatch, b.epoch]),
      [
        [0, 0, 20, 0, 1, 3],
        [1, 20, 20, 20, 1, 3],
        [2, 40, 20, 40, 1, 3],
        [3, 60, 20, 60, 1, 3],
        [4, 80, 15, 80, 1, 3],
      ],
    );
  });

  it('reads items from a blob and reports a missing, malformed or refused blob as the job\'s error', async () => {
    const p = await jobPipeline('blob');
    const inputs = p.blobs.getContainerClient(uniqueName('inputs'));
    await inputs.create();
    const put = async (name: string, text: string) => inputs.getBlockBlobClient(name).upload(text, Buffer.byteLength(text));
    await put('good.json', JSON.stringify(Array.from({ length: 12 }, (_, i) => i)));
    await put('object.json', '{"items":[1]}');
    await put('broken.json', '[1, 2');
    await put('floats.json', '[1, 2.5]');
    const src = (blob: string) => ({ kind: 'blob' as const, container: inputs.containerName, blob });
    assert.deepEqual(await p.activities.plan(jobRun('b1', 'sum', src('good.json'), { chunkSize: 5 })), { ok: true, cancelled: false, chunkCount: 3, itemCount: 12 });
    const code = async (blob: string) => {
      const outcome = await p.activities.plan(jobRun('b2', 'sum', src(blob)));
      return outcome.ok ? 'ok' : outcome.error.code;
    };
    assert.equal(await code('missing.json'), 'ITEMS_BLOB_NOT_FOUND');
    assert.equal(await code('object.json'), 'ITEMS_BLOB_INVALID');
    assert.equal(await code('broken.json'), 'ITEMS_BLOB_INVALID');
    assert.equal(await code('floats.json'), 'ITEM_REJECTED');
  });

  it('does not dispatch a job cancelled before planning', async () => {
    const p = await jobPipeline('precancel');
    await p.store.markCancelled('pc-job', 'test');
    assert.deepEqual(await p.activities.plan(jobRun('pc-job', 'sum', { kind: 'inline', items: [1] })), { ok: true, cancelled: true, chunkCount: 0, itemCount: 0 });
    assert.equal((await p.drainMessages()).length, 0);
  });

  it('re-dispatches only the chunks without a result, then expires them without overwriting a late result', async () => {
    const p = await jobPipeline('redo');
    const items = Array.from({ length: 40 }, (_, i) => i + 1);
    const run = jobRun('redo-job', 'sum', { kind: 'inline', items }, { chunkSize: 10 });
    await p.activities.plan(run);
    const first = await p.drainMessages();
    const byChunk = new Map(first.map((m) => [(decodeQueueMessage(m.messageText) as WorkItemMessage).chunk, m]));
    await p.deliver(byChunk.get(0) ?? assert.fail());
    await p.deliver(byChunk.get(2) ?? assert.fail());

    assert.deepEqual(await p.activities.redispatch({ run, chunkCount: 4, itemCount: 40, dispatch: 2, expire: false }), { missing: 2 });
    const again = (await p.drainMessages()).map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage);
    assert.deepEqual(
      again.map((m) => [m.chunk, m.dispatch]).sort(),
      [
        [1, 2],
        [3, 2],
      ],
    );
    // Chunk 1's original delivery finally arrives; chunk 3 never does.
    await p.deliver(byChunk.get(1) ?? assert.fail());
    let progress = await p.activities.progress({ jobId: 'redo-job', chunkCount: 4, itemCount: 40 });
    assert.deepEqual(progress.chunks, { total: 4, done: 3, failed: 0 });

    assert.deepEqual(await p.activities.redispatch({ run, chunkCount: 4, itemCount: 40, dispatch: 3, expire: true }), { missing: 1 });
    assert.equal((await p.drainMessages()).length, 0, 'expiring sends nothing');
    progress = await p.activities.progress({ jobId: 'redo-job', chunkCount: 4, itemCount: 40 });
    assert.deepEqual(progress.chunks, { total: 4, done: 3, failed: 1 });
    assert.deepEqual(progress.items, { total: 40, done: 30, failed: 10 });
    assert.equal((await p.store.readChunkResult('redo-job', 3))?.error?.code, 'DEADLINE_EXCEEDED');
    // A worker that comes in after the expiry cannot add the chunk a second time.
    const late = again.find((m) => m.chunk === 3);
    assert.equal(await p.worker.handle(late, { dequeueCount: 1 }), 'duplicate');

    const summary = await p.activities.aggregate({ run, chunkCount: 4, itemCount: 40, cancelled: false });
    assert.equal(summary.status, 'completed_with_errors');
    assert.deepEqual(summary.result, { count: 30, sum: 465, min: 1, max: 30 });
    assert.equal(summary.errors?.[0]?.code, 'DEADLINE_EXCEEDED');
    const stored = JSON.parse((await p.store.readJobResultText('redo-job')) ?? '{}') as { chunkErrors: Array<{ chunk: number; code: string }> };
    assert.deepEqual(stored.chunkErrors.map((e) => [e.chunk, e.code]), [[3, 'DEADLINE_EXCEEDED']]);
  });

  it('aggregates partials too large for metadata by reading their blobs, and keeps a large result out of the summary', async () => {
    const p = await jobPipeline('largepartial');
    const texts = p.blobs.getContainerClient(uniqueName('texts'));
    await texts.create();
    // Many distinct words make a partial bigger than blob metadata can hold.
    const words = Array.from({ length: 1_500 }, (_, i) => `w${i.toString(36)}x`).join(' ');
    await texts.getBlockBlobClient('many.txt').upload(words, words.length);
    const run = jobRun('lp-job', 'wordcount', { kind: 'inline', items: [`${texts.containerName}/many.txt`] });
    await p.activities.plan(run);
    for (const m of await p.drainMessages()) await p.deliver(m);
    const listing = await p.store.listJob('lp-job');
    assert.equal(listing.results[0]?.partial, undefined, 'the partial did not fit metadata');
    const summary = await p.activities.aggregate({ run, chunkCount: 1, itemCount: 1, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.ok(summary.result !== undefined, 'the finished result (top 10 words) is small');
    assert.equal((summary.result as { distinctWords: number }).distinctWords, 1_500);
  });
});
