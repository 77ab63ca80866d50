import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { freePort } from 'devhost/testing';

import { BlobLeaseStore } from '../../../shared/leader/BlobLeaseStore';
import { LeaseLostError } from '../../../shared/leader/errors';
import { recordMetadata } from '../../../shared/leader/LeaseStore';
import { azuriteConnectionString, uniqueName } from '../../support/env';
import { blobPortOf, startTcpProxy, withBlobPort } from '../../support/tcpProxy';
import { blobClient, connection } from './harness';

const A = 'aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa';
const B = 'bbbbbbbb-bbbb-4bbb-8bbb-bbbbbbbbbbbb';
const never = (): AbortSignal => new AbortController().signal;

function store(container: string, requestTimeoutMs = 2_000, conn = azuriteConnectionString()): BlobLeaseStore {
  return BlobLeaseStore.fromConnection(connection(conn), container, 'coordinator', requestTimeoutMs);
}

describe('BlobLeaseStore on Azurite', { concurrency: true }, () => {
  it('creates the container and blob on first acquire; concurrent creators all succeed and exactly one holds the lease', async () => {
    const container = uniqueName('store-create');
    const ids = Array.from({ length: 8 }, (_, i) => `0000000${i}-0000-4000-8000-000000000000`);
    const results = await Promise.all(ids.map((id) => store(container).acquire(id, 15, never())));
    assert.equal(results.filter(Boolean).length, 1);
    const snap = await store(container).read(never());
    assert.equal(snap.leaseState, 'leased');
    assert.equal(snap.record, undefined);
  });

  it('reads a missing blob as an available lease with no record', async () => {
    const snap = await store(uniqueName('store-missing')).read(never());
    assert.deepEqual(snap, { record: undefined, extra: {}, leaseState: 'available', leaseStatus: 'unlocked', etag: '' });
  });

  it('acquiring again with the holding id renews; another id is refused', async () => {
    const s = store(uniqueName('store-renew'));
    assert.equal(await s.acquire(A, 15, never()), true);
    assert.equal(await s.acquire(A, 15, never()), true);
    assert.equal(await s.acquire(B, 15, never()), false);
  });

  it('maps "not your lease" on renew, write and release to LeaseLostError', async () => {
    const s = store(uniqueName('store-lost'));
    await s.acquire(A, 15, never());
    await assert.rejects(s.renew(B, never()), (e: unknown) => e instanceof LeaseLostError && e.serviceCode === 'LeaseIdMismatchWithLeaseOperation');
    const snap = await s.read(never());
    await assert.rejects(s.write(B, recordMetadata({ epoch: 1, holder: 'b', acquiredAt: 'x' }), snap.etag, never()), LeaseLostError);
    await assert.rejects(s.release(B, never()), LeaseLostError);
  });

  it('writes the record through the lease only while the etag still matches', async () => {
    const s = store(uniqueName('store-write'));
    await s.acquire(A, 15, never());
    const first = await s.read(never());
    const { etag } = await s.write(A, recordMetadata({ epoch: 1, holder: 'a', acquiredAt: '2026-01-01T00:00:00.000Z' }, { note: 'x' }), first.etag, never());
    const snap = await s.read(never());
    assert.deepEqual(snap.record, { epoch: 1, holder: 'a', acquiredAt: '2026-01-01T00:00:00.000Z' });
    assert.deepEqual(snap.extra, { note: 'x' });
    assert.equal(snap.etag, etag);
    await assert.rejects(s.write(A, recordMetadata({ epoch: 2, holder: 'a', acquiredAt: 'y' }), first.etag, never()), (e: unknown) => e instanceof LeaseLostError && e.serviceCode === 'ConditionNotMet');
    const { etag: renewedEtag } = await s.renew(A, never());
    assert.equal(renewedEtag, etag, 'lease operations leave the etag alone (the elector relies on it)');
  });

  it('a broken lease cannot be renewed', async () => {
    const container = uniqueName('store-broken');
    const s = store(container);
    await s.acquire(A, 15, never());
    await blobClient(azuriteConnectionString(), container).getBlobLeaseClient().breakLease(0);
    await assert.rejects(s.renew(A, never()), LeaseLostError);
  });

  it('a hung request ends when its signal aborts (the SDK has no client-side per-try timeout of its own)', async () => {
    const direct = azuriteConnectionString();
    const proxy = await startTcpProxy(blobPortOf(direct));
    try {
      proxy.blackhole();
      const s = store(uniqueName('store-hung'), 1_000, withBlobPort(direct, proxy.port));
      const started = performance.now();
      await assert.rejects(s.renew(A, AbortSignal.timeout(500)));
      const took = performance.now() - started;
      assert.ok(took < 1_000, `the request outlived its signal by ${Math.round(took - 500)} ms`);
    } finally {
      await proxy.close();
    }
  });

  it('its client does not retry: an unreachable endpoint fails once, at once, instead of backing off for seconds', async () => {
    const port = await freePort(); // nothing listens here
    const s = store(uniqueName('store-refused'), 1_000, withBlobPort(azuriteConnectionString(), port));
    const started = performance.now();
    await assert.rejects(s.acquire(A, 15, never()));
    const took = performance.now() - started;
    // The SDK's default policy would try 4 times with exponential backoff from 4 s.
    assert.ok(took < 1_000, `took ${Math.round(took)} ms`);
  });
});
