/**
 * The start marks (shared/jobs/store/StartMarks.ts) against the run's Azurite, both kinds through
 * the real SDK clients: rows of the job index's table (the app's) and blobs of the results container
 * (a store without an index). Both keep one contract: a mark names one start of a job, marking again
 * is an upsert, clearing a start's mark leaves the job's other starts' marks (a superseded plan cannot
 * remove its successor's), a clear of a missing mark is success, a purge clears them all, and a list
 * answers every mark in job order. The table's marks are never read as jobs (the index's page, counts
 * and keys ask for the `jobs` partition only); without a table client (a connection with no table
 * endpoint) the app keeps them in blobs.
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
    it('marks a start of a job, clears only the start named, clears a missing mark, and clears every start of a job', async () => {
      const marks = make();
      assert.deepEqual(await marks.list(), [], 'nothing marked yet (the table or container need not exist)');
      await Promise.all([marks.mark('job-b', 's1'), marks.mark('job-a', 's1'), marks.mark('job-a-z', 's9')]);
      await marks.mark('job-a', 's1');
      assert.deepEqual(await marks.list(), [
        { jobId: 'job-a', startId: 's1' },
        { jobId: 'job-a-z', startId: 's9' },
        { jobId: 'job-b', startId: 's1' },
      ]);
      // A take-over's new start is marked; the earlier start's plan then removes its own mark only.
      await marks.mark('job-a', 's2');
      await marks.clear('job-a', 's1');
      await marks.clear('job-a', 's1');
      await marks.clear('never-marked', 's1');
      assert.deepEqual((await marks.list()).filter((m) => m.jobId === 'job-a'), [{ jobId: 'job-a', startId: 's2' }]);
      await marks.mark('job-b', 's2');
      await marks.clearJob('job-b');
      await marks.clearJob('job-a');
      assert.deepEqual(await marks.list(), [{ jobId: 'job-a-z', startId: 's9' }], 'a purge of job-a leaves job-a-z');
    });

    it('refuses a job id that is not one before any request', async () => {
      const marks = make();
      await assert.rejects(() => marks.mark('../x', 's1'), /invalid job id/);
      await assert.rejects(() => marks.clear("a'b", 's1'), /invalid job id/);
      await assert.rejects(() => marks.mark('a', 'x/y'), /invalid start id/);
      await assert.rejects(() => marks.clear('a', "s'1"), /invalid start id/);
    });
  });
}

describe('start marks in the job index table', () => {
  it('are never read as jobs: the index page, counts and keys skip their partition', async () => {
    const index = newIndex('marksiso');
    const marks = new TableStartMarks(index);
    const createdAt = new Date().toISOString();
    await index.put({ jobId: 'a-job', status: 'running', workType: 'sum', progress: null, errorCode: null, createdAt, updatedAt: createdAt });
    await Promise.all([marks.mark('a-job', 's1'), marks.mark('another-job', 's1')]);
    assert.deepEqual((await index.page({ limit: 10 })).rows.map((r) => r.jobId), ['a-job']);
    assert.deepEqual((await index.allKeys()).map((r) => r.jobId), ['a-job']);
    const counts = await index.counts();
    assert.equal(counts.total, 1);
    assert.equal(counts.running, 1);
    assert.deepEqual((await marks.list()).map((m) => m.jobId), ['a-job', 'another-job']);
  });

  it('stay blobs when the connection gives no table client (the index then fails, best effort; starts do not)', async () => {
    const docs = blobDocs('marksnotable');
    const index = new JobIndex(() => {
      throw new Error('CoordinatorStorage has no table endpoint');
    }, memoryLogger('index'));
    const store = new JobStore(docs, 'unused', () => Promise.resolve(undefined), index);
    await store.markUnconfirmed('blob-marked', 's1');
    assert.deepEqual((await new BlobStartMarks(docs).list()).map((m) => m.jobId), ['blob-marked']);
    assert.deepEqual((await store.listUnconfirmed()).map((m) => m.jobId), ['blob-marked']);
    await store.clearUnconfirmed('blob-marked', 's1');
    assert.deepEqual(await store.listUnconfirmed(), []);
  });
});
