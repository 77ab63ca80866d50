/**
 * Staging against Azurite with the blob store: a real items blob staged into the results container
 * under `jobs/<jobId>/input/` and read back chunk by chunk; and the itemsBlob corpus of the
 * intake, end-to-end and activity tests (plus hostile cases), where the stager must give exactly
 * what the whole-array planner it replaced (`wholeArrayPlanner.ts`) gives: the same items, or the same
 * code and message.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ChunkItemsReader } from '../../../../shared/jobs/input/ChunkItemsReader';
import { stageInput } from '../../../../shared/jobs/input/InputStager';
import { BlobInputStore } from '../../../../shared/jobs/input/InputStore';
import { JobError } from '../../../../shared/jobs/JobError';
import { JOB_LIMITS } from '../../../../shared/jobs/jobLimits';
import { type Json } from '../../../../shared/worktypes/WorkType';
import { uniqueName } from '../../../support/env';
import { jobPipeline, jobRun } from '../support/jobPipeline';
import { wholeArrayItems } from './wholeArrayPlanner';

type Outcome = { items: Json[] } | { code: string; message: string };

async function outcome(fn: () => Promise<Json[]>): Promise<Outcome> {
  try {
    return { items: await fn() };
  } catch (err) {
    if (!(err instanceof JobError)) throw err;
    return { code: err.code, message: err.message };
  }
}

describe('input staging (Azurite)', () => {
  it('stages a real items blob into jobs/<jobId>/input/ and reads every chunk back', async () => {
    const p = await jobPipeline('stage');
    const inputs = p.blobs.getContainerClient(uniqueName('inputs'));
    await inputs.create();
    const items = Array.from({ length: 40_000 }, (_, i) => ({ id: i, text: `item ${i} ${'ü'.repeat(i % 5)}`.padEnd(48, '.') }));
    const body = JSON.stringify(items);
    await inputs.getBlockBlobClient('items.json').uploadData(Buffer.from(body, 'utf8'));
    const store = new BlobInputStore(p.blobs, p.store.containerName);
    const run = jobRun('staged-1', 'noop', { kind: 'blob', container: inputs.containerName, blob: 'items.json' }, { chunkSize: 300 });

    const manifest = await stageInput({ store, registry: p.registry }, run);
    assert.equal(manifest.itemCount, 40_000);
    assert.equal(manifest.chunkCount, 134);
    const names: string[] = [];
    for await (const b of p.blobs.getContainerClient(p.store.containerName).listBlobsFlat({ prefix: 'jobs/staged-1/input/' })) names.push(b.name);
    const segmentNames = manifest.segments.map((_, i) => `jobs/staged-1/input/${String(i).padStart(5, '0')}.json`);
    assert.deepEqual(names.sort(), [...segmentNames, 'jobs/staged-1/input/manifest.json'].sort());
    assert.ok(manifest.segments.length >= 2, `${manifest.segments.length} segments`);
    assert.deepEqual(await store.readManifest('staged-1'), manifest);

    const reader = new ChunkItemsReader(store);
    const chunks = await reader.items('staged-1', Array.from({ length: manifest.chunkCount }, (_, c) => c));
    const back = [...chunks.entries()].sort((a, b) => a[0] - b[0]).flatMap(([, list]) => list);
    assert.deepEqual(back, items);
    // What the planner would have read.
    assert.deepEqual(back, await wholeArrayItems(p.blobs, p.registry, run));
    assert.equal(await store.readSegment('staged-1', manifest.segments.length), undefined);
  });

  it('refuses the corpus\'s itemsBlobs (and hostile ones) with exactly the planner\'s code and message', async () => {
    const p = await jobPipeline('corpus');
    const inputs = p.blobs.getContainerClient(uniqueName('inputs'));
    await inputs.create();
    const put = async (name: string, body: string | Buffer) => {
      const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
      await inputs.getBlockBlobClient(name).uploadData(bytes);
    };
    // From jobLifecycle.test.ts (the bad-input corpus) and jobActivities.test.ts.
    await put('object.json', '{"not":"an array"}');
    await put('floats.json', '[1, 2.5, 3]');
    await put('deep.json', `[${'['.repeat(100_000)}${']'.repeat(100_000)}]`);
    await put('deep64.json', `[${'['.repeat(63)}1${']'.repeat(63)}]`);
    await put('good.json', JSON.stringify(Array.from({ length: 12 }, (_, i) => i)));
    await put('broken.json', '[1, 2');
    await put('object2.json', '{"items":[1]}');
    // Hostile: the rest of the planner's refusals and their precedence.
    await put('deep63.json', `[${'['.repeat(62)}1${']'.repeat(62)}]`);
    await put('trailing.json', '[1, 2] [3]');
    await put('bom.json', '\ufeff[1]');
    await put('empty.json', '[]');
    await put('blank.json', '');
    await put('many-rejected.json', JSON.stringify(['1', 2, 'x', null, [3], { a: 1 }, 1.5, true, '9'.repeat(50)]));
    await put('deep-then-broken.json', `[${'['.repeat(100_000)}${']'.repeat(100_000)}, 1`);
    await put('deep-in-object.json', `{"a": [${'['.repeat(100)}${']'.repeat(100)}]}`);
    await put('chunks.json', JSON.stringify(new Array(10_001).fill(0)));
    await put('invalid-utf8.json', Buffer.from([0x5b, 0x22, 0xc3, 0x28, 0x22, 0x5d]));
    await put('huge.json', Buffer.alloc(JOB_LIMITS.maxItemsBlobBytes + 1, 0x20));

    const store = new BlobInputStore(p.blobs, p.store.containerName);
    const cases: Array<[string, string, number?]> = [
      ['missing.json', 'sum'],
      ['object.json', 'sum'],
      ['floats.json', 'sum'],
      ['deep.json', 'noop'],
      ['deep64.json', 'noop'],
      ['deep63.json', 'noop'],
      ['good.json', 'sum'],
      ['broken.json', 'sum'],
      ['object2.json', 'sum'],
      ['trailing.json', 'sum'],
      ['bom.json', 'sum'],
      ['empty.json', 'sum'],
      ['blank.json', 'sum'],
      ['many-rejected.json', 'sum'],
      ['deep-then-broken.json', 'noop'],
      ['deep-in-object.json', 'noop'],
      ['chunks.json', 'noop', 1],
      ['invalid-utf8.json', 'noop'],
      ['huge.json', 'noop'],
      ['good.json', 'no-such-type'],
    ];
    const codes = new Set<string>();
    for (const [index, [blob, workType, chunkSize]] of cases.entries()) {
      const source = { kind: 'blob' as const, container: inputs.containerName, blob };
      const run = jobRun(`c-${index}`, workType, source, chunkSize === undefined ? {} : { chunkSize });
      const planner = await outcome(() => wholeArrayItems(p.blobs, p.registry, run));
      const staged = await outcome(async () => {
        await stageInput({ store, registry: p.registry }, run);
        const reader = new ChunkItemsReader(store);
        const manifest = await store.readManifest(run.jobId);
        const chunks = await reader.items(run.jobId, Array.from({ length: manifest?.chunkCount ?? 0 }, (_, c) => c));
        return [...chunks.entries()].sort((a, b) => a[0] - b[0]).flatMap(([, list]) => list);
      });
      assert.deepEqual(staged, planner, blob);
      codes.add('code' in planner ? planner.code : 'ok');
    }
    const every = ['ITEMS_BLOB_INVALID', 'ITEMS_BLOB_NOT_FOUND', 'ITEMS_EMPTY', 'ITEMS_TOO_MANY', 'ITEM_REJECTED'];
    every.push('NESTING_TOO_DEEP', 'UNKNOWN_WORK_TYPE');
    assert.deepEqual([...codes].sort(), [...every, 'ok']);
  });
});
