/**
 * The job store's own rules (store/JobStore.ts) on the in-memory twin of its container: start records
 * created once and replaced only over the version read, the final summary created once, a pending
 * record dropped only while pending, a confirmed start's mark gone, a purge that deletes the start
 * record (the id's claim) after the job's other blobs, and the blob names it refuses. The twin is held to the Azure container's behavior by
 * test/integration/jobs/store/documents.test.ts; the Azurite tests of the pipeline use the real one.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type JobRun } from '../../../../shared/jobs/JobRun';
import { type JobSummary } from '../../../../shared/jobs/JobSummary';
import { READ_RESULTS_UP_TO } from '../../../../shared/jobs/store/ChunkBlobs';
import { type JobRecord, JobStore, type StartRecord } from '../../../../shared/jobs/store/JobStore';
import { MemoryDocuments } from '../support/MemoryDocuments';

const AT = '2026-03-01T12:00:00.000Z';

function setup(): { docs: MemoryDocuments; store: JobStore } {
  const docs = new MemoryDocuments(() => Date.parse(AT));
  return { docs, store: new JobStore(docs, 'job-results', () => Promise.resolve(undefined)) };
}

function run(jobId: string, via: JobRun['via'] = 'queue', startId = 's1'): JobRun {
  return {
    jobId,
    workType: 'sum',
    fingerprint: 'f'.repeat(64),
    options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300 },
    source: { kind: 'inline', items: [1, 2] },
    epoch: 3,
    holder: 'leader',
    submittedAt: AT,
    via,
    startId,
  };
}

function startOf(r: JobRun, generation = 1): StartRecord {
  const startId = r.startId ?? 's1';
  return { v: 1, jobId: r.jobId, fingerprint: r.fingerprint, state: 'active', startId, generation, epoch: r.epoch, holder: r.holder, at: AT, run: r };
}

function pending(jobId: string): JobRecord {
  return { jobId, status: 'pending', createdAt: AT, updatedAt: AT, via: 'http', fingerprint: 'f'.repeat(64), workType: 'sum' };
}

function summary(jobId: string, sum: number): JobSummary {
  const counts = { total: 1, done: 1, failed: 0 };
  return { jobId, workType: 'sum', status: 'completed', progress: { chunks: counts, items: counts }, result: sum, epoch: 3, finishedAt: AT };
}

describe('JobStore on its container (in-memory twin)', () => {
  it('creates a start record once and replaces it only over the version read', async () => {
    const { store } = setup();
    const first = await store.createStart(startOf(run('j1')));
    assert.ok(typeof first === 'object');
    assert.equal(await store.createStart(startOf(run('j1', 'queue', 's2'))), 'exists', 'a second start record for the id loses');
    const read = await store.readStart('j1');
    assert.equal(read?.value.startId, 's1');
    const taken = await store.replaceStart(startOf(run('j1', 'queue', 's2'), 2), first.etag);
    assert.ok(typeof taken === 'object');
    assert.equal(await store.replaceStart(startOf(run('j1', 'queue', 's3'), 3), first.etag), 'conflict', 'a writer that read the older version loses');
    assert.equal((await store.readStart('j1'))?.value.startId, 's2');
  });

  it('keeps the first final summary: a later run of the job gets the stored one back', async () => {
    const { docs, store } = setup();
    const before = Date.now();
    assert.equal(store.finalRecordedAt('j2'), undefined);
    assert.deepEqual(await store.writeFinal(summary('j2', 3)), summary('j2', 3));
    const recorded = store.finalRecordedAt('j2');
    assert.ok(recorded !== undefined && recorded >= before, 'this process remembers when it saw the outcome recorded');
    assert.deepEqual(await store.writeFinal(summary('j2', 99)), summary('j2', 3));
    assert.deepEqual(await store.readFinal('j2'), summary('j2', 3));
    // Another process's store finds it recorded (its own write refused): it remembers too.
    const other = new JobStore(docs, 'job-results', () => Promise.resolve(undefined));
    assert.equal(other.finalRecordedAt('j2'), undefined);
    await other.writeFinal(summary('j2', 7));
    assert.ok(other.finalRecordedAt('j2') !== undefined);
  });

  it('a landed start: its mark goes, and nothing else (an HTTP submission\'s pending record stays, the start speaks for it)', async () => {
    const { store } = setup();
    await store.createRecord(pending('j3'));
    const landed = run('j3', 'http');
    await store.markUnconfirmed('j3', landed.startId ?? assert.fail('a run with a start id'));
    await store.markUnconfirmed('j4', 'another-start');
    // A start that replaced it (a take-over) has a mark of its own, which its predecessor's plan cannot remove.
    await store.markUnconfirmed('j3', 'its-successor');
    assert.deepEqual((await store.listUnconfirmed()).map((m) => [m.jobId, m.startId]), [
      ['j3', 'its-successor'],
      ['j3', 's1'],
      ['j4', 'another-start'],
    ]);
    await store.confirmStart(landed);
    assert.deepEqual((await store.listUnconfirmed()).map((m) => [m.jobId, m.startId]), [['j3', 'its-successor'], ['j4', 'another-start']]);
    assert.deepEqual(await store.readRecord('j3'), pending('j3'));

    const rejected: JobRecord = { ...pending('j5'), status: 'rejected', error: { code: 'INVALID_JOB', message: 'no' } };
    await store.createRecord(rejected);
    assert.deepEqual((await store.listRecords()).map((r) => [r.jobId, r.status, r.workType]), [['j3', 'pending', 'sum'], ['j5', 'rejected', 'sum']]);
  });

  it('purges everything a job left, its start record (the id\'s claim) after its other blobs, and nothing of another job', async () => {
    const { docs, store } = setup();
    await store.createStart(startOf(run('j6')));
    await store.markUnconfirmed('j6', 'start-1');
    await store.markUnconfirmed('j6', 'start-2');
    await store.chunks.writeChunkResult({
      jobId: 'j6', chunk: 0, status: 'ok', itemCount: 2, itemsFailed: 0, partial: 3, itemErrors: [], attempt: 1, dispatch: 1, writtenBy: 'w', writtenAt: AT,
    });
    await store.writeFinal(summary('j6', 3));
    await store.createStart(startOf(run('j7')));
    const deletes: string[] = [];
    const remove = docs.delete.bind(docs);
    docs.delete = (name: string) => {
      deletes.push(name);
      return remove(name);
    };
    assert.equal(await store.purgeJob('j6'), 3, 'start, result and final (its start marks go too, uncounted)');
    const blobs = deletes.filter((name) => name.startsWith('jobs/'));
    assert.equal(blobs.at(-1), JobStore.startBlob('j6'), 'the start record goes after the others: a purge cut short leaves the id held');
    assert.deepEqual([...docs.blobs.keys()], [JobStore.startBlob('j7')]);
    assert.deepEqual(await store.listUnconfirmed(), []);
  });

  it('observes a few chunks in flight by reading their results, more (or claims) by listing their group: the same view', async () => {
    const { docs, store } = setup();
    const result = (chunk: number, partial: number) => ({
      jobId: 'obs', chunk, status: 'ok' as const, itemCount: 2, itemsFailed: 0, partial, itemErrors: [], attempt: 1, dispatch: 1, writtenBy: 'w', writtenAt: AT,
    });
    await store.chunks.writeChunkResult(result(1, 5));
    await store.chunks.writeChunkResult(result(3, 7));
    const observe = async (chunks: number[], withClaims: boolean) => {
      docs.calls.clear();
      const seen = await store.chunks.observeChunks('obs', chunks, withClaims);
      return { results: seen.results.filter((r) => chunks.includes(r.chunk)), lists: docs.calls.get('list') ?? 0, reads: docs.calls.get('metadata') ?? 0 };
    };
    const few = Array.from({ length: READ_RESULTS_UP_TO }, (_, i) => i);
    const read = await observe(few, false);
    assert.deepEqual([read.lists, read.reads], [0, READ_RESULTS_UP_TO], 'a read of each, no listing');
    const many = Array.from({ length: READ_RESULTS_UP_TO + 1 }, (_, i) => i);
    const listed = await observe(many, false);
    assert.deepEqual([listed.lists, listed.reads], [1, 0], 'one listing of the group');
    assert.deepEqual(read.results, listed.results.filter((r) => few.includes(r.chunk)), 'the same entries, partials included');
    assert.deepEqual(read.results.map((r) => [r.chunk, r.status, r.partial]), [[1, 'ok', 5], [3, 'ok', 7]]);
    const claims = await observe([0, 1], true);
    assert.deepEqual([claims.lists, claims.reads], [2, 0], 'claims need the listings (results and claims)');
  });

  it('refuses a blob name made from an invalid job id', () => {
    assert.throws(() => JobStore.startBlob('../other'), /invalid job id/);
    assert.throws(() => JobStore.recordBlob(''), /invalid job id/);
  });
});
