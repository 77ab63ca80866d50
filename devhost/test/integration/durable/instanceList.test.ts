/**
 * Listing instances costs what the extension's Instances table query costs, a request per page:
 * an instance's status summary rides in its blob's metadata, written with the blob, so a page is
 * served from the listing; an instance whose summary is too large for metadata (a large input) is
 * read, and still listed with its whole input. Against Azurite, requests counted on the client.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient, newPipeline, type RequestPolicy } from '@azure/storage-blob';

import { type InstanceState, InstanceStore, newInstanceState, SUMMARY_METADATA_MAX } from '../../../src/durable/InstanceStore';
import { taskHubNames } from '../../../src/durable/taskHubNames';
import { toStatusPayload } from '../../../src/durable/toStatusPayload';
import { uniqueTaskHub } from '../../support/durableTestHost';
import { azuriteConnectionString } from '../../support/env';

describe('instance listing from blob metadata (Azurite)', () => {
  const requests: string[] = [];
  let store: InstanceStore;
  let service: BlobServiceClient;
  let hub: string;

  before(() => {
    const plain = BlobServiceClient.fromConnectionString(azuriteConnectionString());
    const pipeline = newPipeline(plain.credential);
    pipeline.factories.push({
      create: (next: RequestPolicy): RequestPolicy => ({
        sendRequest(request) {
          requests.push(`${request.method} ${new URL(request.url).pathname}`);
          return next.sendRequest(request);
        },
      }),
    });
    service = new BlobServiceClient(plain.url, pipeline);
    hub = uniqueTaskHub('list');
    store = new InstanceStore({ kind: 'connectionString', settingName: 'AZURITE', connectionString: azuriteConnectionString() }, taskHubNames(hub), service);
  });

  after(async () => {
    await service.getContainerClient(taskHubNames(hub).instancesContainer).deleteIfExists();
  });

  const instance = (id: string, input: unknown, customStatus: unknown): InstanceState => {
    const now = new Date();
    const state = newInstanceState({ instanceId: id, name: 'Hello', executionId: randomUUID(), input: JSON.stringify(input), parent: null, now, generation: 0 });
    return { ...state, runtimeStatus: 'Running', customStatus: JSON.stringify(customStatus) };
  };

  it('a page of small instances is one request; a large one is read and listed whole', async () => {
    const small = Array.from({ length: 20 }, (_, i) => instance(`small-${String(i).padStart(2, '0')}`, { n: i }, { phase: 'step', wait: i }));
    // An input whose summary cannot fit in metadata.
    const large = instance('large-00', { items: Array.from({ length: 2_000 }, (_, i) => i) }, { phase: 'plan' });
    assert.ok(JSON.stringify(large.input).length > SUMMARY_METADATA_MAX);
    for (const state of [...small, large]) assert.deepEqual(Object.keys(await store.create(state)), ['etag']);

    requests.length = 0;
    const smallPage = await store.list({ runtimeStatus: ['Running'], instanceIdPrefix: 'small-' }, 100);
    assert.equal(requests.length, 1, requests.join('\n'));
    assert.match(requests[0] ?? '', /^GET /);
    assert.deepEqual(
      smallPage.items.map((s) => toStatusPayload(s, { showInput: true })),
      small.map((s) => toStatusPayload(s, { showInput: true })),
    );

    requests.length = 0;
    const all = await store.list({ runtimeStatus: ['Running'] }, 100);
    // The listing, then one read: the large instance's blob.
    assert.equal(requests.length, 2, requests.join('\n'));
    const listedLarge = all.items.find((s) => s.instanceId === 'large-00');
    assert.ok(listedLarge !== undefined);
    assert.deepEqual(toStatusPayload(listedLarge, { showInput: true }), toStatusPayload(large, { showInput: true }));
    assert.equal(all.items.length, 21);

    // A filter on what changed since: the summary is written with each save, so it never lags the blob.
    const stored = await store.read('small-03');
    assert.ok(stored !== undefined);
    const saved = await store.save({ ...stored.state, runtimeStatus: 'Completed', output: '42' }, stored.etag);
    assert.notEqual(saved, 'conflict');
    const running = await store.listAll({ runtimeStatus: ['Running'], instanceIdPrefix: 'small-' });
    assert.deepEqual(running.map((s) => s.instanceId), small.map((s) => s.instanceId).filter((id) => id !== 'small-03'));
    const completed = await store.listAll({ runtimeStatus: ['Completed'], instanceIdPrefix: 'small-' });
    assert.deepEqual(completed.map((s) => [s.instanceId, s.output]), [['small-03', '42']]);
  });
});
