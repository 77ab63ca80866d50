/**
 * The job store's view of a container (`JsonDocuments`), held to the same cases on the Azure
 * container through Azurite (`BlobDocuments`) and on the in-memory twin the unit tests use
 * (`MemoryDocuments`): what a unit test learns on the twin is what the store does on Azure.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { BlobDocuments, isStatus, type JsonDocuments } from '../../../../shared/jobs/store/BlobDocuments';
import { azuriteConnectionString, uniqueName } from '../../../support/env';
import { MemoryDocuments } from '../../../unit/jobs/support/MemoryDocuments';

const kinds: ReadonlyArray<{ readonly name: string; readonly make: () => JsonDocuments }> = [
  {
    name: 'Azure container (Azurite)',
    make: () => new BlobDocuments(BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient(uniqueName('docs'))),
  },
  { name: 'in-memory twin', make: () => new MemoryDocuments() },
];

async function names(docs: JsonDocuments, prefix: string, metadata = false): Promise<Array<[string, Record<string, string>]>> {
  const out: Array<[string, Record<string, string>]> = [];
  for await (const d of docs.list(prefix, metadata)) out.push([d.name, d.metadata]);
  return out;
}

for (const kind of kinds) {
  describe(`job documents: ${kind.name}`, () => {
    it('reads a missing document as undefined and lists nothing, before the container exists', async () => {
      const docs = kind.make();
      assert.equal(await docs.get('a.json'), undefined);
      assert.equal(await docs.getVersioned('a.json'), undefined);
      assert.equal(await docs.getText('a.json'), undefined);
      assert.equal(await docs.exists('a.json'), false);
      assert.equal(await docs.metadata('a.json'), undefined);
      assert.deepEqual(await names(docs, ''), []);
      assert.equal(await docs.delete('a.json'), false);
    });

    it('creates once: a second create learns exists and the first document stays', async () => {
      const docs = kind.make();
      assert.equal(await docs.put('jobs/j/start.json', { n: 1 }, { ifNoneMatch: true }), 'written');
      assert.equal(await docs.put('jobs/j/start.json', { n: 2 }, { ifNoneMatch: true }), 'exists');
      assert.deepEqual(await docs.get('jobs/j/start.json'), { n: 1 });
      assert.equal(await docs.getText('jobs/j/start.json'), '{"n":1}');
      assert.equal(await docs.put('jobs/j/start.json', { n: 3 }), 'written', 'a plain write replaces');
      assert.deepEqual(await docs.get('jobs/j/start.json'), { n: 3 });
    });

    it('replaces only the version read: a stale etag or a missing document is a conflict', async () => {
      const docs = kind.make();
      const created = await docs.putVersioned('r.json', { v: 1 }, { ifNoneMatch: true });
      assert.ok(typeof created === 'object');
      const read = await docs.getVersioned<{ v: number }>('r.json');
      assert.equal(read?.etag, created.etag);
      const replaced = await docs.putVersioned('r.json', { v: 2 }, { ifMatch: created.etag });
      assert.ok(typeof replaced === 'object' && replaced.etag !== created.etag, 'a new etag');
      assert.equal(await docs.putVersioned('r.json', { v: 3 }, { ifMatch: created.etag }), 'conflict', 'the version read is gone');
      assert.deepEqual((await docs.getVersioned('r.json'))?.value, { v: 2 });
      assert.equal(await docs.putVersioned('gone.json', { v: 1 }, { ifMatch: created.etag }), 'conflict');
      assert.equal(await docs.exists('gone.json'), false);
    });

    it('lists by prefix in name order, with metadata only when asked; setMetadata replaces it and needs the blob', async () => {
      const docs = kind.make();
      await docs.put('jobs/j/results/00002.json', {}, { metadata: { status: 'ok' } });
      await docs.put('jobs/j/results/00001.json', {}, { metadata: { status: 'failed', items: '3' } });
      await docs.put('jobs/k/results/00001.json', {});
      assert.deepEqual(await docs.metadata('jobs/j/results/00001.json'), { status: 'failed', items: '3' }, 'one read of its metadata');
      assert.deepEqual(await docs.metadata('jobs/k/results/00001.json'), {});
      assert.equal(await docs.metadata('jobs/k/results/00002.json'), undefined);
      assert.deepEqual(await names(docs, 'jobs/j/', true), [
        ['jobs/j/results/00001.json', { status: 'failed', items: '3' }],
        ['jobs/j/results/00002.json', { status: 'ok' }],
      ]);
      assert.deepEqual(await names(docs, 'jobs/j/'), [
        ['jobs/j/results/00001.json', {}],
        ['jobs/j/results/00002.json', {}],
      ]);
      await docs.setMetadata('jobs/j/results/00001.json', { beat: 'x' });
      assert.deepEqual((await names(docs, 'jobs/j/results/00001', true))[0]?.[1], { beat: 'x' });
      await assert.rejects(docs.setMetadata('jobs/j/nothing.json', { beat: 'x' }), (err) => isStatus(err, 404));
      for await (const d of docs.list('jobs/k/', false)) assert.ok(d.lastModified instanceof Date && !Number.isNaN(d.lastModified.getTime()));
      assert.equal(await docs.delete('jobs/k/results/00001.json'), true);
      assert.equal(await docs.delete('jobs/k/results/00001.json'), false);
      assert.deepEqual(await names(docs, 'jobs/k/'), []);
    });
  });
}
