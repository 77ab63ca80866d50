/**
 * The results container's stamp (JobStore.startRecordsOnly, BlobDocuments.ensureContainer) against
 * the run's Azurite: the process that creates the container writes `store.json`, whether it creates
 * it at set-up or at its first write, and every store over it (another process's too) then knows
 * that every job in it has a start record, so a started run writes no id claim there. A container
 * that was there before (made by the deployment or an earlier version) is never stamped: its stores
 * keep the claims and the reads only jobs of earlier versions need.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { azuriteConnectionString, uniqueName } from '../../../support/env';

const blobs = (): BlobServiceClient => BlobServiceClient.fromConnectionString(azuriteConnectionString());

async function stampOf(container: string): Promise<Record<string, unknown> | undefined> {
  const blob = blobs().getContainerClient(container).getBlobClient(JobStore.stampBlob);
  if (!(await blob.exists())) return undefined;
  return JSON.parse((await blob.downloadToBuffer()).toString('utf8')) as Record<string, unknown>;
}

async function claimed(container: string, jobId: string): Promise<boolean> {
  return blobs().getContainerClient(container).getBlobClient(`jobs/${jobId}/job.json`).exists();
}

describe('the results container\'s stamp', () => {
  it('is written by the store that creates the container, and read by every store over it', async () => {
    const container = uniqueName('stamp-made');
    const store = JobStore.onBlobs(blobs(), container);
    await store.ensureContainer();
    const stamp = await stampOf(container);
    assert.equal(stamp?.startRecords, true, JSON.stringify(stamp));
    assert.ok(Date.parse(String(stamp.createdAt)) > Date.now() - 60_000);
    assert.equal(await store.startRecordsOnly(), true);
    // Another process's store over the same container: it did not make it, and reads the stamp.
    const other = JobStore.onBlobs(blobs(), container);
    await other.ensureContainer();
    assert.equal(await other.startRecordsOnly(), true);
    assert.deepEqual(await stampOf(container), stamp, 'a store that found the container there wrote the stamp again');

    // A started run (it has a start record) claims nothing: its start record is the claim.
    assert.equal(await other.claimJobId('started-run', 'a'.repeat(64), undefined, true), true);
    assert.equal(await claimed(container, 'started-run'), false);
    // A run without one (started by an earlier version) still claims the id, create-once by fingerprint.
    assert.equal(await other.claimJobId('older-run', 'a'.repeat(64)), true);
    assert.equal(await claimed(container, 'older-run'), true);
    assert.equal(await other.claimJobId('older-run', 'b'.repeat(64)), false);
  });

  it('is written when the container is made by the store\'s first write', async () => {
    const container = uniqueName('stamp-first-write');
    const store = JobStore.onBlobs(blobs(), container);
    await store.markCancelled('first-write', 'test');
    assert.equal((await stampOf(container))?.startRecords, true);
    assert.equal(await store.startRecordsOnly(), true);
  });

  it('is never written into a container that was there before: its stores keep the claims', async () => {
    const container = uniqueName('stamp-older');
    await blobs().getContainerClient(container).create();
    const store = JobStore.onBlobs(blobs(), container);
    await store.ensureContainer();
    await store.markCancelled('some-job', 'test');
    assert.equal(await stampOf(container), undefined);
    assert.equal(await store.startRecordsOnly(), false);
    assert.equal(await store.claimJobId('started-run', 'a'.repeat(64), undefined, true), true);
    assert.equal(await claimed(container, 'started-run'), true, 'a started run in an unstamped store wrote no claim');
    assert.equal(await store.claimJobId('started-run', 'b'.repeat(64), undefined, true), false, 'a different job took the id');
  });
});
