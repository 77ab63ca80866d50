/**
 * The start marks (shared/jobs/store/StartMarks.ts) against the run's Azurite, both kinds through
 * the real SDK clients: rows of the job index's table (the app's) and blobs of the results container
 * (a store without an index). Both keep one contract: a mark is an upsert whose time is the storage
 * service's, marking again moves it, a clear of a missing mark is success, and a list answers every
 * mark. The table's marks are never read as jobs (the index's page, counts and keys ask for the
 * `jobs` partition only), and the blob marks an earlier version left are moved into the table at the
 * first listing; without a table client (a connection with no table endpoint) the app keeps them in blobs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { BlobDocuments } from '../../../../shared/jobs/store/BlobDocuments';
import { JobIndex } from '../../../../shared/jobs/store/JobIndex';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { BlobStartMarks, type StartMarks, TableStartMarks } from '../../../../shared/jobs/store/StartMarks';
import { memoryLogger } from '../../../../shared/observability/log';
import { tableClient } from '../../../../shared/storage/clients';
import { azuriteConnectionString, uniqueName, uniqueTableName } from '../../../support/env';

/** Azurite runs on this machine: its clock and ours agree to well within this. */
const CLOCK_SLACK_MS = 2_000;

function blobDocs(prefix: string): BlobDocuments {
  return new BlobDocuments(BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient(uniqueName(prefix)));
}

function newIndex(prefix: string): JobIndex {
  const conn = { kind: 'connectionString' as const, settingName: 'test', connectionString: azuriteConnectionString() };
  return new JobIndex(tableClient(conn, uniqueTableName(prefix)), memoryLogger('index'));
}

const kinds: ReadonlyArray<readonly [string, () => StartMarks]> = [
  ['table rows', () => new TableStartMarks(newIndex('marks'))],
  ['blobs', () => new BlobStartMarks(blobDocs('marks'))],
];

for (const [kind, make] of kinds) {
  describe(`start marks in ${kind}`, () => {
    it('marks with the service time, moves the time when marked again, clears, and clears a missing mark', async () => {
      const marks = make();
      assert.deepEqual(await marks.list(), [], 'nothing marked yet (the table or container need not exist)');
      const before = Date.now();
      await Promise.all([marks.mark('job-a'), marks.mark('job-b')]);
      const after = Date.now();
      const first = await marks.list();
      assert.deepEqual(first.map((m) => m.jobId), ['job-a', 'job-b']);
      for (const m of first) {
        assert.ok(m.markedAt >= before - CLOCK_SLACK_MS && m.markedAt <= after + CLOCK_SLACK_MS, `${m.jobId} marked at ${m.markedAt}, between ${before} and ${after}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await marks.mark('job-a');
      const again = await marks.list();
      const at = (list: typeof again, jobId: string): number => list.find((m) => m.jobId === jobId)?.markedAt ?? assert.fail(`${jobId} not listed`);
      assert.ok(at(again, 'job-a') >= at(first, 'job-a') + 1_000, 'marking again moves the time');
      assert.equal(at(again, 'job-b'), at(first, 'job-b'), 'the other mark keeps its time');
      await marks.clear('job-a');
      await marks.clear('job-a');
      await marks.clear('never-marked');
      assert.deepEqual((await marks.list()).map((m) => m.jobId), ['job-b']);
    });

    it('refuses a job id that is not one before any request', async () => {
      const marks = make();
      await assert.rejects(() => marks.mark('../x'), /invalid job id/);
      await assert.rejects(() => marks.clear("a'b"), /invalid job id/);
    });
  });
}

describe('start marks in the job index table', () => {
  it('are never read as jobs: the index page, counts and keys skip their partition', async () => {
    const index = newIndex('marksiso');
    const marks = new TableStartMarks(index);
    const createdAt = new Date().toISOString();
    await index.put({ jobId: 'a-job', status: 'running', workType: 'sum', progress: null, errorCode: null, createdAt, updatedAt: createdAt });
    await Promise.all([marks.mark('a-job'), marks.mark('another-job')]);
    assert.deepEqual((await index.page({ limit: 10 })).rows.map((r) => r.jobId), ['a-job']);
    assert.deepEqual((await index.allKeys()).map((r) => r.jobId), ['a-job']);
    const counts = await index.counts();
    assert.equal(counts.total, 1);
    assert.equal(counts.running, 1);
    assert.deepEqual((await marks.list()).map((m) => m.jobId), ['a-job', 'another-job']);
  });

  it('takes over the blob marks an earlier version left, at the first listing, so no start goes unchecked', async () => {
    const docs = blobDocs('marksold');
    const old = new BlobStartMarks(docs);
    await Promise.all([old.mark('left-1'), old.mark('left-2')]);
    const index = newIndex('marksmove');
    const marks = new TableStartMarks(index, old);
    await marks.mark('new-1');
    assert.deepEqual((await marks.list()).map((m) => m.jobId), ['left-1', 'left-2', 'new-1']);
    assert.deepEqual(await old.list(), [], 'the blobs are gone once their rows exist');
    // The app's store over the same index and container does the same (its marks are the table's).
    const store = new JobStore(docs, 'unused', () => Promise.resolve(undefined), index);
    await store.markUnconfirmed('from-store');
    assert.deepEqual((await store.listUnconfirmed()).map((m) => m.jobId), ['from-store', 'left-1', 'left-2', 'new-1']);
    assert.deepEqual(await old.list(), [], 'the store wrote its mark as a row, not a blob');
  });

  it('stay blobs when the connection gives no table client (the index then fails, best effort; starts do not)', async () => {
    const docs = blobDocs('marksnotable');
    const index = new JobIndex(() => {
      throw new Error('CoordinatorStorage has no table endpoint');
    }, memoryLogger('index'));
    const store = new JobStore(docs, 'unused', () => Promise.resolve(undefined), index);
    await store.markUnconfirmed('blob-marked');
    assert.deepEqual((await new BlobStartMarks(docs).list()).map((m) => m.jobId), ['blob-marked']);
    assert.deepEqual((await store.listUnconfirmed()).map((m) => m.jobId), ['blob-marked']);
    await store.clearUnconfirmed('blob-marked');
    assert.deepEqual(await store.listUnconfirmed(), []);
  });
});
