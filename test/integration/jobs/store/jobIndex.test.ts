/**
 * The job index (shared/jobs/store/JobIndex.ts) against the run's Azurite, through the real TableClient:
 * its rows follow a job's status changes, the leader's upkeep puts a stale index right within its
 * bound (UPKEEP_SCHEDULE with INDEX_UPKEEP, on a moved clock), and a list over 10,000 rows is correct: order, filters,
 * counts, and continuations that neither repeat nor skip while new jobs arrive between pages.
 * No timing is asserted; the first page's latency is printed as a [diagnostic] line.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { TableClient } from '@azure/data-tables';
import { BlobServiceClient } from '@azure/storage-blob';

import { appRoot } from '../../../../shared/app/appRoot';
import { jobStatusPath } from '../../../../shared/app/jobComponents';
import { INDEX_UPKEEP } from '../../../../shared/jobs/api/IndexUpkeep';
import { JobList } from '../../../../shared/jobs/api/JobList';
import { type JobListEntry, type JobStatus, type JobView } from '../../../../shared/jobs/api/jobViews';
import { jobCoordinationPass, UPKEEP_SCHEDULE } from '../../../../shared/jobs/intake/jobCoordinationPass';
import { encodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { durableOrchestrationClient } from '../../../../shared/jobs/run/OrchestrationClient';
import { INDEX_PARTITION, type IndexEntry, indexKey, JobIndex, type RowEntity } from '../../../../shared/jobs/store/JobIndex';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../../shared/observability/log';
import { tableClient } from '../../../../shared/storage/clients';
import { registerTestWorkTypes } from '../../../fixtures/ops/testWorkTypes';
import { azuriteConnectionString, uniqueName, uniqueTableName } from '../../../support/env';
import { type JobsHost, startJobsHost } from '../support/jobsHost';
import { jobsScenario } from '../support/jobsScenario';

type Row = Omit<RowEntity, 'partitionKey'>;

describe('job index (Azure Table on Azurite)', () => {
  let h: JobsHost;
  let table: TableClient;
  const { passUntilQueueEmpty, finished } = jobsScenario(() => h);

  before(async () => {
    h = await startJobsHost('jidx');
    // The app's own table, read and written behind its back through a client of our own.
    table = TableClient.fromConnectionString(azuriteConnectionString(), h.env.JOB_INDEX_TABLE ?? '', { allowInsecureConnection: true });
  });
  after(async () => {
    await h.stop();
  });

  async function rowsOf(jobId: string): Promise<Row[]> {
    const rows: Row[] = [];
    try {
      for await (const e of table.listEntities<Row>({ queryOptions: { filter: `PartitionKey eq '${INDEX_PARTITION}' and jobId eq '${jobId}'` } })) {
        rows.push(e);
      }
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode !== 404) throw err;
    }
    return rows;
  }

  async function listed(query: string): Promise<{ jobs: JobListEntry[]; continuation?: string; counts?: Record<string, number> }> {
    const res = await h.request('GET', `/api/jobs${query}`);
    assert.equal(res.status, 200, res.text);
    return res.json as { jobs: JobListEntry[]; continuation?: string; counts?: Record<string, number> };
  }

  it('writes a job\'s row where its status changes: submitted (pending), finished (its outcome), purged (gone)', async () => {
    const submitted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'ix-life', workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } }));
    assert.equal(submitted.status, 202, submitted.text);
    const [pending] = await rowsOf('ix-life');
    assert.equal(pending?.status, 'pending');
    assert.equal(pending.workType, 'sum');
    assert.equal(pending.rowKey, indexKey(pending.createdAt, 'ix-life'), 'the key is the inverted creation time, then the job id');
    assert.equal(pending.progress, '');

    await passUntilQueueEmpty();
    const view = await finished('ix-life');
    assert.equal(view.status, 'completed');
    const rows = await rowsOf('ix-life');
    assert.equal(rows.length, 1, 'one row per job');
    assert.equal(rows[0]?.status, 'completed');
    assert.equal(rows[0].createdAt, pending.createdAt);
    assert.deepEqual(JSON.parse(rows[0].progress), view.progress);
    const page = await listed('?workType=sum');
    assert.deepEqual(page.jobs.find((j) => j.jobId === 'ix-life')?.status, 'completed');
    assert.deepEqual((await listed('?workType=noop')).jobs.filter((j) => j.jobId === 'ix-life'), [], 'filtered by work type');

    const purged = await h.request('DELETE', '/api/jobs/ix-life?purge=true');
    assert.equal(purged.status, 200, purged.text);
    assert.deepEqual(await rowsOf('ix-life'), [], 'a purged job has no row');
  });

  it('a failed or rejected job carries its error code in its row and its list entry; others carry none', async () => {
    registerTestWorkTypes();
    await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'ix-rejected', workType: 'no-such-type', items: [1] }));
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'ix-failed', workType: 'explode', items: ['boom', 'boom'], options: { chunkSize: 1, attempts: 1 } }));
    assert.equal(posted.status, 202, posted.text);
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'ix-fine', workType: 'noop', items: [1] }))).status, 202);
    await passUntilQueueEmpty();
    const views = new Map<string, JobView>();
    for (const jobId of ['ix-rejected', 'ix-failed', 'ix-fine']) views.set(jobId, await finished(jobId));
    assert.equal(views.get('ix-rejected')?.status, 'rejected');
    assert.equal(views.get('ix-failed')?.status, 'failed');
    const listedJobs = (await listed('?limit=100')).jobs;
    for (const [jobId, view] of views) {
      const code = view.error?.code ?? null;
      if (jobId !== 'ix-fine') assert.ok(code !== null, `${jobId} has an error code: ${JSON.stringify(view)}`);
      assert.equal((await rowsOf(jobId))[0]?.errorCode ?? '', code ?? '', `${jobId}'s row`);
      assert.equal(listedJobs.find((j) => j.jobId === jobId)?.errorCode, code, `${jobId}'s list entry`);
    }
  });

  it('refuses a malformed workType filter with 400 INVALID_WORK_TYPE_FILTER, and counts jobs per status when asked', async () => {
    for (const bad of ['Sum', 'a b', '-x', 'x'.repeat(41)]) {
      const res = await h.request('GET', `/api/jobs?workType=${encodeURIComponent(bad)}`);
      assert.equal(res.status, 400, bad);
      assert.equal((res.json as { code: string }).code, 'INVALID_WORK_TYPE_FILTER', bad);
    }
    assert.equal((await listed('?workType=no-such-type')).jobs.length, 0, 'a well-formed name nobody used lists nothing');
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'ix-count', workType: 'noop', items: [1] }))).status, 202);
    const page = await listed('?counts=true&limit=1');
    assert.ok(page.counts !== undefined, 'counts when asked');
    const total = Object.entries(page.counts).filter(([k]) => k !== 'total' && k !== 'at').reduce((n, [, v]) => n + v, 0);
    assert.equal(page.counts.total, total);
    assert.ok((page.counts.pending ?? 0) >= 1, JSON.stringify(page.counts));
    assert.equal((await listed('')).counts, undefined, 'no counts unless asked');
  });

  it(`puts a stale index right within the bound: pending/running rows within ${UPKEEP_SCHEDULE.refreshEveryMs / 1000} s, missing rows within ${UPKEEP_SCHEDULE.walkEveryMs / 60_000} min`, async () => {
    for (const jobId of ['ix-wrong', 'ix-dropped']) {
      assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId, workType: 'noop', items: [1] }))).status, 202);
    }
    await passUntilQueueEmpty();
    assert.equal((await finished('ix-wrong')).status, 'completed');
    assert.equal((await finished('ix-dropped')).status, 'completed');
    // The schedule's clock is ours; the pass, Durable and the storage are real.
    let now = 1_000_000;
    // Waits for its upkeep to end (not WAIT_BESIDE_MS): the rows are read right after each pass.
    const pass = jobCoordinationPass(appRoot().jobs, () => h.client, () => now, Number.POSITIVE_INFINITY);
    const ctx = { epoch: 900, holder: 'ix-leader', signal: new AbortController().signal, progress: () => undefined };
    await pass(ctx); // The leader's first pass: its first refresh, and the walk's clock starts.

    // Stale on purpose, through the real TableClient: a finished job's row says running, another's
    // row is gone, and a row names a job that never existed.
    const [wrong] = await rowsOf('ix-wrong');
    assert.ok(wrong !== undefined);
    // Its last write is older than INDEX_UPKEEP.refreshAfterMs: the write of its job's end was lost.
    const lostAt = new Date(Date.now() - INDEX_UPKEEP.refreshAfterMs - 1_000).toISOString();
    await table.upsertEntity({ ...wrong, partitionKey: INDEX_PARTITION, status: 'running', progress: '', updatedAt: lostAt }, 'Replace');
    const [dropped] = await rowsOf('ix-dropped');
    assert.ok(dropped !== undefined);
    await table.deleteEntity(INDEX_PARTITION, dropped.rowKey);
    const ghostAt = new Date(Date.now() - 60_000).toISOString();
    const ghostKey = indexKey(ghostAt, 'ix-ghost') ?? '';
    await table.createEntity({ partitionKey: INDEX_PARTITION, rowKey: ghostKey, jobId: 'ix-ghost', status: 'pending', workType: 'noop', createdAt: ghostAt, updatedAt: ghostAt, progress: '' });

    now += UPKEEP_SCHEDULE.refreshEveryMs - 1;
    await pass(ctx);
    assert.equal((await rowsOf('ix-wrong'))[0]?.status, 'running', 'not refreshed before its interval (the test would prove nothing otherwise)');

    now += 1;
    await pass(ctx);
    assert.equal((await rowsOf('ix-wrong'))[0]?.status, 'completed', `a wrong running row is put right within ${UPKEEP_SCHEDULE.refreshEveryMs} ms`);
    assert.deepEqual(await rowsOf('ix-ghost'), [], 'a row of a job that does not exist goes');
    assert.deepEqual(await rowsOf('ix-dropped'), [], 'a missing row waits for the walk');

    now = 1_000_000 + UPKEEP_SCHEDULE.walkEveryMs;
    await pass(ctx);
    const restored = await rowsOf('ix-dropped');
    assert.equal(restored.length, 1, 'the walk restores a missing row');
    assert.equal(restored[0]?.status, 'completed');
    assert.equal(restored[0].rowKey, dropped.rowKey);
  });

  it('a refresh begins no check past its budget but its first round, and the next carries on where it stopped', async () => {
    // 30 rows that say pending, of jobs that never existed, written long enough ago to be checked.
    const at = new Date(Date.now() - INDEX_UPKEEP.refreshAfterMs - 60_000).toISOString();
    const ghosts = Array.from({ length: 30 }, (_, i) => `ix-budget-${String(i).padStart(2, '0')}`);
    for (const jobId of ghosts) {
      const rowKey = indexKey(at, jobId) ?? '';
      await table.createEntity({ partitionKey: INDEX_PARTITION, rowKey, jobId, status: 'pending', workType: 'noop', createdAt: at, updatedAt: at, progress: '' });
    }
    const upkeep = appRoot().jobs.indexUpkeep;
    const orchestrations = durableOrchestrationClient(h.client);
    const left = async (): Promise<number> => (await Promise.all(ghosts.map(rowsOf))).filter((rows) => rows.length > 0).length;
    const checks: number[] = [];
    // A 1 ms budget: each refresh checks its first round (8 reads at once) and begins nothing after.
    for (let refresh = 0; refresh < 10 && (await left()) > 0; refresh++) {
      checks.push((await upkeep.repairIndex(orchestrations, { budgetMs: 1 })).checked);
    }
    assert.equal(await left(), 0, `every ghost row removed; checks per refresh: ${checks.join(', ')}`);
    assert.ok(checks.length >= 4 && checks.every((n) => n <= 8), `at most one round per refresh: ${checks.join(', ')}`);
  });

  it('checks a pending row only once older than the jobs queue\'s current wait (its job is still on the queue), a running one as before', async () => {
    // Rows of jobs that never existed, last written 10 s past refreshAfterMs: each check removes one.
    const at = new Date(Date.now() - INDEX_UPKEEP.refreshAfterMs - 10_000).toISOString();
    const row = async (jobId: string, status: 'pending' | 'running'): Promise<void> => {
      const rowKey = indexKey(at, jobId) ?? '';
      await table.createEntity({ partitionKey: INDEX_PARTITION, rowKey, jobId, status, workType: 'noop', createdAt: at, updatedAt: at, progress: '' });
    };
    await row('ix-wait-pending', 'pending');
    await row('ix-wait-running', 'running');
    const upkeep = appRoot().jobs.indexUpkeep;
    const orchestrations = durableOrchestrationClient(h.client);
    // Submissions wait 60 s on the queue: the pending row (40 s old) is its job's, rightly pending.
    await upkeep.repairIndex(orchestrations, { queueWaitMs: 60_000 });
    assert.equal((await rowsOf('ix-wait-pending')).length, 1, 'a pending row younger than the queue wait is left alone');
    assert.deepEqual(await rowsOf('ix-wait-running'), [], 'a running row is checked as before (its job does not exist: removed)');
    // The queue drained (no wait): the same row is checked.
    await upkeep.repairIndex(orchestrations, { queueWaitMs: 0 });
    assert.deepEqual(await rowsOf('ix-wait-pending'), []);
  });

  it('leaves the upkeep for later while passes take submissions, for at most UPKEEP_SCHEDULE.maxDeferMs', async () => {
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'ix-burst-stale', workType: 'noop', items: [1] }))).status, 202);
    await passUntilQueueEmpty();
    assert.equal((await finished('ix-burst-stale')).status, 'completed');
    let now = 5_000_000;
    // Waits for its upkeep to end (not WAIT_BESIDE_MS): the rows are read right after each pass.
    const pass = jobCoordinationPass(appRoot().jobs, () => h.client, () => now, Number.POSITIVE_INFINITY);
    const ctx = { epoch: 901, holder: 'ix-leader', signal: new AbortController().signal, progress: () => undefined };
    await pass(ctx); // Its first refresh, before the row goes wrong.
    const [row] = await rowsOf('ix-burst-stale');
    assert.ok(row !== undefined);
    const lostAt = new Date(Date.now() - INDEX_UPKEEP.refreshAfterMs - 1_000).toISOString();
    await table.upsertEntity({ ...row, partitionKey: INDEX_PARTITION, status: 'running', progress: '', updatedAt: lostAt }, 'Replace');
    const submit = async (from: number): Promise<void> => {
      for (let i = from; i < from + 3; i++) {
        assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: `ix-burst-${i}`, workType: 'noop', items: [i] }))).status, 202);
      }
    };
    // Submissions wait on the jobs queue when the refresh is due: the pass takes them, the upkeep waits.
    await submit(0);
    now += UPKEEP_SCHEDULE.refreshEveryMs;
    assert.ok(((await pass(ctx))?.received ?? 0) > 0);
    assert.equal((await rowsOf('ix-burst-stale'))[0]?.status, 'running', 'no upkeep in a pass that took submissions');
    // Still taking submissions, but the upkeep has waited maxDeferMs: it runs.
    await submit(3);
    now += UPKEEP_SCHEDULE.maxDeferMs;
    assert.ok(((await pass(ctx))?.received ?? 0) > 0);
    assert.equal((await rowsOf('ix-burst-stale'))[0]?.status, 'completed');
    await passUntilQueueEmpty();
  });

  it('lists 10,000 jobs from the index: newest first, filtered, counted, and paged without repeats or gaps while jobs arrive', async () => {
    const conn = azuriteConnectionString();
    const index = new JobIndex(tableClient({ kind: 'connectionString', settingName: 'test', connectionString: conn }, uniqueTableName('ixbig')), memoryLogger('index'));
    const store = JobStore.onBlobs(BlobServiceClient.fromConnectionString(conn), uniqueName('ixbig-res'), index);
    const jobList = new JobList({ store, logger: memoryLogger('api'), statusPath: jobStatusPath });
    const orchestrations = durableOrchestrationClient(h.client);
    const statuses: JobStatus[] = ['completed', 'completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected', 'completed'];
    const base = Date.parse('2026-01-01T00:00:00.000Z');
    const entries: IndexEntry[] = [];
    for (let i = 0; i < 10_000; i++) {
      // Three jobs to a millisecond: equal times are ordered by job id.
      const createdAt = new Date(base - Math.floor(i / 3) * 1000).toISOString();
      const status: JobStatus = i % 500 === 7 ? 'running' : (statuses[i % statuses.length] ?? 'completed');
      const progress = { chunks: { total: 1, done: 1, failed: 0 }, items: { total: i, done: i, failed: 0 } };
      entries.push({ jobId: `big-${String(9999 - i).padStart(5, '0')}`, status, workType: i % 4 === 0 ? 'noop' : 'sum', progress, errorCode: null, createdAt, updatedAt: createdAt });
    }
    const started = Date.now();
    await index.putMany(entries);
    console.log(`[diagnostic] inserted ${entries.length} index rows in ${Date.now() - started} ms (transactions of 100)`);
    const order = (a: IndexEntry, b: IndexEntry): number => (indexKey(a.createdAt, a.jobId) ?? '').localeCompare(indexKey(b.createdAt, b.jobId) ?? '');
    const oracle = [...entries].sort(order);
    assert.ok(oracle[0] !== undefined && oracle[1] !== undefined && oracle[0].createdAt === oracle[1].createdAt && oracle[0].jobId < oracle[1].jobId);

    const timed = async <T>(what: string, call: () => Promise<T>): Promise<T> => {
      const t0 = performance.now();
      const value = await call();
      console.log(`[diagnostic] ${what}: ${(performance.now() - t0).toFixed(1)} ms with ${entries.length} jobs indexed`);
      return value;
    };
    const first = await timed('first page (limit 100)', () => jobList.list(orchestrations));
    await timed('first page again (limit 100)', () => jobList.list(orchestrations));
    assert.deepEqual(first.jobs.map((j) => j.jobId), oracle.slice(0, 100).map((e) => e.jobId), 'newest first, then by job id');
    assert.deepEqual(first.jobs[0], { ...oracle[0] }, 'a row as it was written');
    assert.ok(first.continuation !== undefined);

    for (const [status, workType] of [['failed', undefined], [undefined, 'noop'], ['rejected', 'noop'], ['running', undefined]] as const) {
      const page = await timed(`first page, status=${status ?? '*'} workType=${workType ?? '*'}`, () =>
        jobList.list(orchestrations, status, { limit: '50', ...(workType === undefined ? {} : { workType }) }),
      );
      const expected = oracle.filter((e) => (status === undefined || e.status === status) && (workType === undefined || e.workType === workType));
      assert.deepEqual(page.jobs.map((j) => j.jobId), expected.slice(0, 50).map((e) => e.jobId), `status=${status} workType=${workType}`);
      assert.equal(page.continuation !== undefined, expected.length > 50);
    }

    const counts = await timed('counts', () => jobList.counts());
    for (const status of new Set(statuses)) assert.equal(counts[status], entries.filter((e) => e.status === status).length, status);
    assert.equal(counts.total, entries.length);

    // Every page, with newer jobs arriving between the reads: they never shift a later page.
    const seen: string[] = [];
    let continuation: string | undefined;
    let arrivals = 0;
    do {
      const page = await jobList.list(orchestrations, undefined, { limit: '700', ...(continuation === undefined ? {} : { continuation }) });
      seen.push(...page.jobs.map((j) => j.jobId));
      continuation = page.continuation;
      const at = new Date(base + 60_000 + arrivals * 1000).toISOString();
      await index.putMany([0, 1, 2].map((k) => ({ jobId: `new-${arrivals}-${k}`, status: 'completed', workType: 'sum', progress: null, errorCode: null, createdAt: at, updatedAt: at })));
      arrivals += 1;
    } while (continuation !== undefined);
    assert.equal(new Set(seen).size, seen.length, 'no job twice');
    assert.deepEqual(seen, oracle.map((e) => e.jobId), 'every job that existed at the first read, in order, and none that arrived later');
    const fresh = await jobList.list(orchestrations, undefined, { limit: '3' });
    assert.deepEqual(fresh.jobs.map((j) => j.jobId), [0, 1, 2].map((k) => `new-${arrivals - 1}-${k}`), 'new jobs appear on a new first page');
    await index.table.deleteTable();
  });

  it('shows a job only once it is indexed: a started run with no index row appears after the walk', async () => {
    // What a job whose index writes all failed looks like: a run with no row at all.
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'ix-late', workType: 'noop', items: [1] }))).status, 202);
    await passUntilQueueEmpty();
    await finished('ix-late');
    const [row] = await rowsOf('ix-late');
    assert.ok(row !== undefined);
    await table.deleteEntity(INDEX_PARTITION, row.rowKey);
    assert.equal((await listed('?limit=1000')).jobs.some((j) => j.jobId === 'ix-late'), false, 'not indexed: not listed');
    await appRoot().jobs.indexUpkeep.walkIndex(durableOrchestrationClient(h.client));
    assert.equal((await listed('?limit=1000')).jobs.find((j) => j.jobId === 'ix-late')?.status, 'completed');
  });
});
