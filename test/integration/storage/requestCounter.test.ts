/**
 * The app's storage requests per minute (shared/storage/requestCounter.ts), what GET /api/cluster and
 * the live page show: every request of the app's blob, queue and table clients counts once, a retried
 * one once per try, by service, over the last 60 s. Real clients against Azurite; a held clock for
 * the window.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { readStorageConnection } from '../../../shared/config/settings';
import { blobServiceClient, queueServiceClient, tableClient } from '../../../shared/storage/clients';
import { appStorageRequests, StorageRequestCounter } from '../../../shared/storage/requestCounter';
import { azuriteConnectionString, uniqueName, uniqueTableName } from '../../support/env';

describe("the app's storage requests per minute", () => {
  it('counts each request of the blob, queue and table clients once, by service', async () => {
    const conn = readStorageConnection({ CoordinatorStorage: azuriteConnectionString() }, 'CoordinatorStorage');
    const before = appStorageRequests.lastMinute();
    const container = blobServiceClient(conn).getContainerClient(uniqueName('count'));
    await container.create();
    await container.getBlockBlobClient('a.json').upload('{}', 2);
    await container.getBlockBlobClient('a.json').downloadToBuffer();
    const queue = queueServiceClient(conn).getQueueClient(uniqueName('count'));
    await queue.create();
    await queue.sendMessage('x');
    const table = tableClient(conn, uniqueTableName('count'));
    await table.createTable();
    const after = appStorageRequests.lastMinute();
    assert.equal(after.queue - before.queue, 2);
    assert.equal(after.table - before.table, 1);
    // create, upload, then download: downloadToBuffer reads the properties first, then the content.
    assert.ok(after.blob - before.blob >= 3 && after.blob - before.blob <= 4, `blob requests: ${after.blob - before.blob}`);
    assert.equal(after.perMinute - before.perMinute, after.blob - before.blob + 3);
    assert.equal(after.scope, 'app');
  });

  it('keeps the last 60 seconds only, and says over how long a young process counted', () => {
    let now = Date.parse('2026-11-26T12:00:00.000Z');
    const counter = new StorageRequestCounter(() => now);
    counter.record('blob');
    now += 10_000;
    counter.record('queue');
    counter.record('queue');
    assert.deepEqual(counter.lastMinute(), { perMinute: 3, blob: 1, queue: 2, table: 0, windowSeconds: 10, scope: 'app' });
    now += 55_000; // the blob request is now 65 s old, the queue ones 55 s
    assert.deepEqual(counter.lastMinute(), { perMinute: 2, blob: 0, queue: 2, table: 0, windowSeconds: 60, scope: 'app' });
    now += 10_000;
    counter.record('table');
    assert.deepEqual(counter.lastMinute(), { perMinute: 1, blob: 0, queue: 0, table: 1, windowSeconds: 60, scope: 'app' });
  });
});
