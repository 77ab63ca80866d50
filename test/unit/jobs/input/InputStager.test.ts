/**
 * Staging on the in-memory store: segments of whole chunks cover every item exactly once, in
 * order, cut near the target size; inline and blob sources stage alike; staging again rewrites the
 * same blobs; every refusal has the planner's code and message, in its precedence, and leaves no
 * manifest; the chunk reader slices chunks back, reading only the segments it needs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ChunkItemsReader } from '../../../../shared/jobs/input/ChunkItemsReader';
import { stageInput, STAGING } from '../../../../shared/jobs/input/InputStager';
import { manifestBlobName, MemoryInputStore, segmentBlobName } from '../../../../shared/jobs/input/InputStore';
import { JobError } from '../../../../shared/jobs/JobError';
import { JOB_LIMITS } from '../../../../shared/jobs/jobLimits';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { type Json } from '../../../../shared/worktypes/WorkType';
import { builtInWorkTypes } from '../../../../shared/worktypes/WorkTypeRegistry';

const registry = builtInWorkTypes();
const C = 'inputs';

function run(jobId: string, workType: string, source: JobRun['source'], chunkSize = 10): JobRun {
  return {
    jobId,
    workType,
    fingerprint: 'f'.repeat(64),
    options: { chunkSize, attempts: 3, deadlineSeconds: 300 },
    source,
    epoch: 1,
    holder: 'test',
    submittedAt: new Date(0).toISOString(),
    via: 'queue',
    startId: 'start-1',
  };
}

const blob = (name: string) => ({ kind: 'blob' as const, container: C, blob: name });

async function refusal(store: MemoryInputStore, r: JobRun): Promise<{ code: string; message: string }> {
  try {
    await stageInput({ store, registry }, r);
  } catch (err) {
    assert.ok(err instanceof JobError, String(err));
    assert.equal(await store.readManifest(r.jobId), undefined, 'no manifest for refused input');
    return { code: err.code, message: err.message };
  }
  assert.fail(`${r.jobId} was staged`);
}

/** Every segment's items in order, as stored. */
function storedItems(store: MemoryInputStore, jobId: string, segments: number): Json[] {
  const all: Json[] = [];
  for (let i = 0; i < segments; i++) all.push(...(JSON.parse(store.blobs.get(segmentBlobName(jobId, i)) ?? 'null') as Json[]));
  return all;
}

describe('stageInput (memory store)', () => {
  it('cuts a blob into segments of whole chunks near the target size that cover every item exactly once', async () => {
    const store = new MemoryInputStore(1000);
    // ~150-character items, 23,456 of them: about 3.5 MB, several segments, a short last chunk.
    const items = Array.from({ length: 23_456 }, (_, i) => `${i}:${'é'.repeat(i % 7)}${'x'.repeat(140)}`);
    store.putItemsBlob(C, 'big.json', JSON.stringify(items, null, 1));
    const manifest = await stageInput({ store, registry }, run('big', 'noop', blob('big.json'), 100));
    assert.equal(manifest.itemCount, 23_456);
    assert.equal(manifest.chunkCount, 235);
    assert.equal(manifest.chunkSize, 100);
    assert.ok(manifest.segments.length >= 3, `${manifest.segments.length} segments`);
    let next = 0;
    manifest.segments.forEach((s, i) => {
      assert.equal(s.firstChunk, next, 'segments are contiguous');
      next += s.chunks;
      const text = store.blobs.get(segmentBlobName('big', i)) ?? '';
      const count = (JSON.parse(text) as Json[]).length;
      if (i < manifest.segments.length - 1) {
        assert.equal(count, s.chunks * 100, 'whole chunks');
        const size = `segment ${i}: ${text.length} characters`;
        assert.ok(text.length >= STAGING.segmentChars && text.length < STAGING.segmentChars + 100 * 200, size);
      }
    });
    assert.equal(next, manifest.chunkCount);
    assert.deepEqual(storedItems(store, 'big', manifest.segments.length), items);
    // The manifest is written last.
    assert.equal(store.writes.at(-1), manifestBlobName('big'));

    // Staging again rewrites the same blobs with the same content.
    const before = new Map(store.blobs);
    const again = await stageInput({ store, registry }, run('big', 'noop', blob('big.json'), 100));
    assert.deepEqual(again, manifest);
    assert.deepEqual(store.blobs, before);
  });

  it('stages inline items as it stages the same items from a blob', async () => {
    const store = new MemoryInputStore(7);
    const items: Json[] = Array.from({ length: 95 }, (_, i) => (i % 3 === 0 ? { n: i, s: 'ü' } : i % 3 === 1 ? [i, null, true] : `s${i}`));
    store.putItemsBlob(C, 'same.json', JSON.stringify(items));
    const fromBlob = await stageInput({ store, registry }, run('from-blob', 'noop', blob('same.json'), 20));
    const inline = await stageInput({ store, registry }, run('inline', 'noop', { kind: 'inline', items }, 20));
    assert.deepEqual({ ...fromBlob, jobId: 'x' }, { ...inline, jobId: 'x' });
    assert.deepEqual(fromBlob.segments, [{ firstChunk: 0, chunks: 5 }]);
    assert.deepEqual(storedItems(store, 'from-blob', 1), items);
    assert.deepEqual(storedItems(store, 'inline', 1), items);
  });

  it('refuses bad input with the planner\'s codes and messages', async () => {
    const store = new MemoryInputStore(333);
    const put = (name: string, text: string) => store.putItemsBlob(C, name, text);
    put('object.json', '{"not":"an array"}');
    put('broken.json', '[1, 2');
    put('trailing.json', '[1, 2] 3');
    put('floats.json', `[1, 2.5, 3, ${Array.from({ length: 7 }, (_, i) => `"${i}x"`).join(', ')}]`);
    put('deep.json', `[${'['.repeat(100_000)}${']'.repeat(100_000)}]`);
    put('deep64.json', `[${'['.repeat(63)}1${']'.repeat(63)}]`);
    put('deep63.json', `[${'['.repeat(62)}1${']'.repeat(62)}]`);
    put('empty.json', ' [ ] ');
    put('many.json', `[${new Array(JOB_LIMITS.maxItems + 1).fill('0').join(',')}]`);
    put('chunks.json', `[${new Array(10_001).fill('0').join(',')}]`);
    store.putItemsBlob(C, 'huge.json', Buffer.alloc(JOB_LIMITS.maxItemsBlobBytes + 1, 0x20));
    const at = (name: string) => `itemsBlob ${C}/${name}`;
    const levels = 'more than 63 levels deep (64 counting the submission, as for inline items)';
    const expect = async (name: string, workType: string, code: string, message: string, chunkSize = 10) =>
      assert.deepEqual(await refusal(store, run(`j-${code}`, workType, blob(name), chunkSize)), { code, message }, name);

    await expect('object.json', 'fft', 'UNKNOWN_WORK_TYPE', 'Work type "fft" is not registered on this instance.');
    await expect('missing.json', 'sum', 'ITEMS_BLOB_NOT_FOUND', `${at('missing.json')} does not exist.`);
    const limit = JOB_LIMITS.maxItemsBlobBytes;
    await expect('huge.json', 'sum', 'ITEMS_BLOB_INVALID', `${at('huge.json')} is ${limit + 1} bytes; the limit is ${limit}.`);
    await expect('object.json', 'sum', 'ITEMS_BLOB_INVALID', `${at('object.json')} must hold a JSON array of items.`);
    await expect('broken.json', 'sum', 'ITEMS_BLOB_INVALID', `${at('broken.json')} is not JSON.`);
    await expect('trailing.json', 'sum', 'ITEMS_BLOB_INVALID', `${at('trailing.json')} is not JSON.`);
    await expect('deep.json', 'noop', 'NESTING_TOO_DEEP', `${at('deep.json')} nests arrays or objects ${levels}.`);
    await expect('deep64.json', 'noop', 'NESTING_TOO_DEEP', `${at('deep64.json')} nests arrays or objects ${levels}.`);
    assert.equal((await stageInput({ store, registry }, run('d63', 'noop', blob('deep63.json')))).itemCount, 1);
    await expect('empty.json', 'sum', 'ITEMS_EMPTY', `${at('empty.json')} holds an empty array.`);
    const problems = ['item 1: 2.5 is not an integer', ...[0, 1, 2, 3].map((i) => `item ${i + 3}: "${i}x" is not a decimal integer`)];
    const rejected = `8 of 10 items in ${C}/floats.json rejected by work type "sum": ${problems.join('; ')}; ....`;
    await expect('floats.json', 'sum', 'ITEM_REJECTED', rejected);
    const most = `holds more than ${JOB_LIMITS.maxItems} items; a job holds at most ${JOB_LIMITS.maxItems}.`;
    await expect('many.json', 'noop', 'ITEMS_TOO_MANY', `${at('many.json')} ${most}`, 10_000);
    const chunkLimit = `a job has at most ${JOB_LIMITS.maxChunks}: raise options.chunkSize.`;
    const moreChunks = `holds more than 10000 items, which in chunks of 1 make more than 10000 chunks; ${chunkLimit}`;
    await expect('chunks.json', 'noop', 'ITEMS_TOO_MANY', `${at('chunks.json')} ${moreChunks}`, 1);
    const inline = { kind: 'inline' as const, items: new Array<Json>(10_001).fill(0) };
    const chunks = `10001 items in chunks of 1 make 10001 chunks; ${chunkLimit}`;
    assert.deepEqual(await refusal(store, run('inline-many', 'noop', inline, 1)), { code: 'ITEMS_TOO_MANY', message: chunks });
  });

  it('stops reading an items blob at the first item past the limit, whatever follows it', async () => {
    const store = new MemoryInputStore(64 * 1024);
    const over = JOB_LIMITS.maxItems + 500_000;
    // Items past the limit, then text that is not JSON: a whole read would answer ITEMS_BLOB_INVALID.
    store.putItemsBlob(C, 'over.json', `[${new Array(over).fill('0').join(',')}, }} not json`);
    const refused = await refusal(store, run('over', 'noop', blob('over.json'), 1_000));
    assert.equal(refused.code, 'ITEMS_TOO_MANY');
    const firstMillion = 2 * (JOB_LIMITS.maxItems + 1);
    assert.ok(store.bytesRead <= firstMillion + 64 * 1024, `read ${store.bytesRead} bytes; the first ${JOB_LIMITS.maxItems + 1} items are ${firstMillion}`);
    assert.equal(await store.readManifest('over'), undefined);
    // At chunk size 1 the limit is maxChunks items.
    store.bytesRead = 0;
    assert.equal((await refusal(store, run('over-chunks', 'noop', blob('over.json'), 1))).code, 'ITEMS_TOO_MANY');
    assert.ok(store.bytesRead <= 2 * (JOB_LIMITS.maxChunks + 1) + 64 * 1024, `read ${store.bytesRead} bytes at chunk size 1`);
    // An item rejected before the limit still wins, as in a whole read.
    store.putItemsBlob(C, 'over-bad.json', `[1.5,${new Array(over).fill('1').join(',')}]`);
    const bad = await refusal(store, run('over-bad', 'sum', blob('over-bad.json'), 1_000));
    assert.equal(bad.code, 'ITEM_REJECTED');
    assert.match(bad.message, /^1 of the first 1000001 items in .* rejected by work type "sum": item 0: 1\.5 is not an integer\.$/);
  });

  it('refuses in the planner\'s precedence: not JSON, not an array, too deep, empty, rejected, too many', async () => {
    const store = new MemoryInputStore(100);
    const deep = `${'['.repeat(100)}${']'.repeat(100)}`;
    const code = async (text: string, workType = 'sum', chunkSize = 10) => {
      store.putItemsBlob(C, 'p.json', text);
      return (await refusal(store, run('p', workType, blob('p.json'), chunkSize))).code;
    };
    assert.equal(await code(`[1.5, ${deep}] ,`), 'ITEMS_BLOB_INVALID', 'not JSON over too deep and rejected');
    assert.equal(await code(`{"a": ${deep}}`), 'ITEMS_BLOB_INVALID', 'not an array over too deep');
    assert.equal(await code(`[1.5, ${deep}, 2]`), 'NESTING_TOO_DEEP', 'too deep over rejected');
    assert.equal(await code(`[${new Array(20_000).fill('1.5').join(',')}]`, 'sum', 1), 'ITEM_REJECTED', 'rejected over too many chunks');
  });

  it('stops when its signal aborts, leaving no manifest', async () => {
    const store = new MemoryInputStore(1024);
    store.putItemsBlob(C, 'a.json', JSON.stringify(Array.from({ length: 200_000 }, (_, i) => i)));
    const controller = new AbortController();
    const staging = stageInput({ store, registry }, run('aborted', 'sum', blob('a.json')), controller.signal);
    setImmediate(() => controller.abort());
    await assert.rejects(staging, (err: unknown) => err instanceof Error && err.name === 'AbortError');
    assert.equal(await store.readManifest('aborted'), undefined);
  });
});

describe('ChunkItemsReader (memory store)', () => {
  it('slices every chunk back as staged, reading only the segments that hold the chunks asked for', async () => {
    const store = new MemoryInputStore();
    const items = Array.from({ length: 30_001 }, (_, i) => ({ i, pad: 'p'.repeat(60) }));
    store.putItemsBlob(C, 'r.json', JSON.stringify(items));
    const manifest = await stageInput({ store, registry }, run('r', 'noop', blob('r.json'), 250));
    assert.ok(manifest.segments.length >= 2);
    const reader = new ChunkItemsReader(store, { cachedSegments: 1 });

    const last = manifest.chunkCount - 1;
    const got = await reader.items('r', [last, 0, 1]);
    assert.deepEqual([...got.keys()].sort((a, b) => a - b), [0, 1, last]);
    assert.deepEqual(got.get(0), items.slice(0, 250));
    assert.deepEqual(got.get(1), items.slice(250, 500));
    assert.deepEqual(got.get(last), items.slice(last * 250));
    assert.equal(got.get(last)?.length, 1);
    assert.deepEqual(store.segmentReads, [segmentBlobName('r', manifest.segments.length - 1), segmentBlobName('r', 0)]);

    // Every chunk, a window at a time, is the job's items in order.
    const all: Json[] = [];
    for (let first = 0; first < manifest.chunkCount; first += 16) {
      const window = Array.from({ length: Math.min(16, manifest.chunkCount - first) }, (_, k) => first + k);
      const chunks = await reader.items('r', window);
      for (const c of window) all.push(...(chunks.get(c) ?? []));
    }
    assert.deepEqual(all, items);
    // Windows in order read each segment but the cached one once more (the cache holds one segment).
    assert.equal(store.segmentReads.length, 1 + manifest.segments.length);
  });

  it('keeps the last segments read and shares concurrent reads of one segment', async () => {
    const store = new MemoryInputStore();
    await stageInput({ store, registry }, run('c', 'noop', { kind: 'inline', items: Array.from({ length: 100 }, (_, i) => i) }, 10));
    const reader = new ChunkItemsReader(store);
    const [a, b] = await Promise.all([reader.items('c', [0, 1]), reader.items('c', [9])]);
    assert.deepEqual(a.get(1), [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]);
    assert.deepEqual(b.get(9), [90, 91, 92, 93, 94, 95, 96, 97, 98, 99]);
    await reader.items('c', [5]);
    assert.equal(store.segmentReads.length, 1);
  });

  it('names the missing blob when the manifest or a segment is gone, and refuses chunks outside the job', async () => {
    const store = new MemoryInputStore();
    const reader = new ChunkItemsReader(store);
    await assert.rejects(reader.items('nothing', [0]), /jobs\/nothing\/input\/manifest\.json does not exist/);
    await stageInput({ store, registry }, run('gone', 'noop', { kind: 'inline', items: [1, 2, 3] }, 2));
    await assert.rejects(reader.items('gone', [2]), /has no chunk 2: its input has 2 chunks/);
    store.blobs.delete(segmentBlobName('gone', 0));
    await assert.rejects(reader.items('gone', [1]), /jobs\/gone\/input\/00000\.json does not exist/);
    assert.throws(() => segmentBlobName('../x', 0), /invalid job id/);
  });
});
