/**
 * Jobs end to end on the development host against Azurite: submissions by HTTP and by plain queue
 * messages, the leader's coordination pass starting orchestrations, the Durable backend running
 * them, the queue trigger running the worker, and the status API reporting results; cancels,
 * re-dispatch, deadlines, failing chunks and continue-as-new. The run's lifecycle (resumes, the
 * recorded outcome, bad input, purge and retention) is in jobLifecycle.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { appRoot } from '../../../shared/app/appRoot';
import { type JobView } from '../../../shared/jobs/api/jobViews';
import { instanceIdFor } from '../../../shared/jobs/jobIds';
import { type JobRun } from '../../../shared/jobs/JobRun';
import { encodeQueueMessage } from '../../../shared/jobs/messageCodec';
import { initialState } from '../../../shared/jobs/run/jobOrchestration';
import { workTypes } from '../../../shared/worktypes/WorkTypeRegistry';
import { azuriteConnectionString, uniqueName } from '../../support/env';
import { eventually, type JobsHost, startJobsHost } from './support/jobsHost';
import { expectedSum, jobsScenario } from './support/jobsScenario';


describe('jobs end to end (development host, Durable backend, Azurite)', () => {
  let h: JobsHost;
  const blobs = () => BlobServiceClient.fromConnectionString(azuriteConnectionString());
  const { passUntilQueueEmpty, finished, epoch } = jobsScenario(() => h);

  before(async () => {
    h = await startJobsHost('e2e');
  });
  after(async () => {
    await h.stop();
  });

  it('completes a sum over 10,000 integers submitted by HTTP, and one by a plain queue message, exactly', async () => {
    const httpItems = Array.from({ length: 10_000 }, (_, i) => ((i * 7919) % 199) - 99);
    const queueItems = Array.from({ length: 10_000 }, (_, i) => ((i * 37) % 201) - 100 + (i === 4_321 ? 5_000 : 0));
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ workType: 'sum', items: httpItems, options: { chunkSize: 500 } }));
    assert.equal(posted.status, 202, posted.text);
    const httpJobId = (posted.json as { jobId: string }).jobId;

    // What any queue client sends: base64 JSON, no job id (one is derived from the message id).
    const sent = await h.jobsQueue.sendMessage(encodeQueueMessage({ workType: 'sum', items: queueItems, options: { chunkSize: 400 } }));
    const queueJobId = `q-${sent.messageId}`;

    await passUntilQueueEmpty();
    const [viaHttp, viaQueue] = await Promise.all([finished(httpJobId), finished(queueJobId)]);
    assert.equal(viaHttp.status, 'completed', JSON.stringify(viaHttp));
    assert.deepEqual(viaHttp.result, expectedSum(httpItems));
    assert.deepEqual(viaHttp.progress, { chunks: { total: 20, done: 20, failed: 0 }, items: { total: 10_000, done: 10_000, failed: 0 } });
    assert.equal(viaHttp.epoch, epoch());
    assert.equal(viaQueue.status, 'completed', JSON.stringify(viaQueue));
    assert.deepEqual(viaQueue.result, expectedSum(queueItems));
    assert.equal(viaQueue.progress?.chunks.total, 25);

    const full = await h.request('GET', `/api/jobs/${httpJobId}/result`);
    assert.equal(full.status, 200);
    // A small result without errors is kept in the final summary alone; the document is built from it.
    const results = blobs().getContainerClient(h.env.JOB_RESULTS_CONTAINER ?? '');
    const resultBlob = results.getBlockBlobClient(`jobs/${httpJobId}/result.json`);
    assert.equal(await resultBlob.exists(), false, 'a result blob was stored for a small result');
    const final = JSON.parse((await results.getBlobClient(`jobs/${httpJobId}/final.json`).downloadToBuffer()).toString('utf8')) as { finishedAt: string };
    const document = JSON.stringify({
      jobId: httpJobId,
      workType: 'sum',
      status: 'completed',
      progress: viaHttp.progress,
      result: expectedSum(httpItems),
      chunkErrors: [],
      itemErrors: [],
      epoch: epoch(),
      finishedAt: final.finishedAt,
    });
    assert.equal(full.text, document, 'the document the blob would have held, byte for byte');
    // A result blob written beside it by a run that lost the race to record its summary is not the job's.
    const stray = JSON.stringify({ jobId: httpJobId, status: 'cancelled' });
    await resultBlob.upload(stray, stray.length);
    assert.equal((await h.request('GET', `/api/jobs/${httpJobId}/result`)).text, document, 'the summary decides');
  });

  it('completes a job whose 10,000 items (beyond the safe integer range) travel in a blob', async () => {
    const inputs = blobs().getContainerClient(uniqueName('e2e-inputs'));
    await inputs.create();
    const items: Array<number | string> = Array.from({ length: 10_000 }, (_, i) => (i % 10 === 0 ? `${BigInt(2) ** BigInt(60) + BigInt(i)}` : -i));
    const text = JSON.stringify(items);
    await inputs.getBlockBlobClient('big/items.json').upload(text, Buffer.byteLength(text));
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'blob-job', workType: 'sum', itemsBlob: `${inputs.containerName}/big/items.json`, options: { chunkSize: 1000 } }));
    assert.equal(posted.status, 202, posted.text);
    await passUntilQueueEmpty();
    const view = await finished('blob-job');
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, expectedSum(items));
    assert.equal(typeof (view.result as { sum: unknown }).sum, 'string', 'a sum beyond 2^53 is a decimal string');
  });

  it('cancels a job before it starts, and refuses to cancel a finished one', async () => {
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'cancel-early', workType: 'sum', items: [1, 2, 3] }));
    assert.equal(posted.status, 202);
    const cancel = await h.request('DELETE', '/api/jobs/cancel-early');
    assert.equal(cancel.status, 202, cancel.text);
    await passUntilQueueEmpty();
    const view = await finished('cancel-early');
    assert.equal(view.status, 'cancelled');
    assert.deepEqual(view.progress?.chunks, { total: 0, done: 0, failed: 0 }, 'nothing was dispatched');
    const again = await h.request('DELETE', '/api/jobs/cancel-early');
    assert.equal(again.status, 409);
    assert.equal((again.json as { code: string }).code, 'JOB_ALREADY_FINISHED');
  });

  it('cancels a running job: it ends cancelled with the chunks done so far, and its later chunks are skipped', async () => {
    // Chunks wait until the job is cancelled: however fast or slow the polling, it is still running then.
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    workTypes.register({
      name: 'e2e-held',
      description: 'each item waits until the test lets it go',
      validateItem: () => undefined,
      process: async () => {
        await released;
        return { count: 1 };
      },
      empty: () => ({ count: 0 }),
      combine: (a, b) => ({ count: Number(a.count) + Number(b.count) }),
      finish: (total) => total,
    });
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'cancel-running', workType: 'e2e-held', items: new Array(400).fill(0), options: { chunkSize: 1 } }));
    assert.equal(posted.status, 202);
    await passUntilQueueEmpty();
    await eventually(
      async () => {
        const view = (await h.request('GET', '/api/jobs/cancel-running')).json as JobView;
        // Planned (all chunks on the queue) and running; a job cancelled while planning dispatches nothing.
        return view.status === 'running' && view.phase === 'running' ? view : undefined;
      },
      30_000,
      'the job to be planned and running',
    );
    const cancel = await h.request('DELETE', '/api/jobs/cancel-running');
    assert.equal(cancel.status, 202, cancel.text);
    release();
    const view = await finished('cancel-running');
    assert.equal(view.status, 'cancelled', JSON.stringify(view));
    const done = view.progress?.chunks.done ?? -1;
    assert.ok(done < 400, `cancelled before the end (${done} of 400 chunks done)`);
    assert.deepEqual(view.result, { count: done }, 'the result covers exactly the chunks done');
  });

  it('keeps a large result out of the status and serves it at resultUrl', async () => {
    // A plug-in registered on the app's own registry, as the README's "Add a work type" shows.
    workTypes.register({
      name: 'e2e-big-result',
      description: 'a result over the inline limit',
      validateItem: () => undefined,
      process: (item) => ({ n: Number(item) }),
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
      finish: (total) => ({ n: total.n, padding: 'x'.repeat(10_000) }),
    });
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'big-result', workType: 'e2e-big-result', items: [1, 2, 3] }));
    assert.equal(posted.status, 202, posted.text);
    await passUntilQueueEmpty();
    const view = await finished('big-result');
    assert.equal(view.status, 'completed');
    assert.equal(view.result, undefined);
    assert.equal(view.resultUrl, `${h.baseUrl}/api/jobs/big-result/result`, 'absolute, like statusUrl');
    const full = await h.request('GET', new URL(view.resultUrl ?? '').pathname);
    assert.equal(full.status, 200);
    assert.equal((full.json as { result: { n: number; padding: string } }).result.n, 6);
    const results = blobs().getContainerClient(h.env.JOB_RESULTS_CONTAINER ?? '');
    assert.equal(full.text, (await results.getBlobClient('jobs/big-result/result.json').downloadToBuffer()).toString('utf8'), 'served from its blob');
  });

  it('re-dispatches a chunk stuck past its deadline and counts it once when the stuck copy finishes too', async () => {
    // A plug-in whose first call for item "stuck" hangs until released: its message stays invisible
    // (the host renews it while the invocation runs), so only the deadline, counted from the
    // worker's claim on the chunk, brings the chunk back.
    let release: (() => void) | undefined;
    let stuckOnce = false;
    workTypes.register({
      name: 'e2e-stuck-once',
      description: 'hangs once on the item "stuck"',
      validateItem: () => undefined,
      process: async (item) => {
        if (item === 'stuck' && !stuckOnce) {
          stuckOnce = true;
          await new Promise<void>((resolve) => {
            release = resolve;
          });
        }
        return { n: 1 };
      },
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
      finish: (total) => total,
    });
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'stuck-job', workType: 'e2e-stuck-once', items: ['a', 'b', 'stuck', 'c'], options: { chunkSize: 1, deadlineSeconds: 5 } }));
    assert.equal(posted.status, 202, posted.text);
    await passUntilQueueEmpty();
    const view = await finished('stuck-job', 60_000);
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, { n: 4 });
    const store = appRoot().jobs.store;
    assert.equal((await store.chunks.readChunkResult('stuck-job', 2))?.dispatch, 2, 'the re-dispatched copy wrote chunk 2');
    assert.equal((await store.chunks.readChunkResult('stuck-job', 0))?.dispatch, 1);
    const listing = await store.chunks.listJob('stuck-job');
    assert.deepEqual(listing.claims.map((c) => [c.chunk, c.dispatch]), [[2, 1]], 'only the stuck chunk ran long enough to be claimed');
    const dispatches = await Promise.all([0, 1, 2, 3].map(async (c) => (await store.chunks.readChunkResult('stuck-job', c))?.dispatch));
    assert.deepEqual(dispatches, [1, 1, 2, 1], 'only the claimed, stuck chunk was sent again');
    // The stuck first copy finishes now: its result is discarded, the job's result stands.
    assert.ok(release !== undefined);
    release();
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await store.chunks.readChunkResult('stuck-job', 2))?.dispatch, 2);
    assert.deepEqual(((await h.request('GET', '/api/jobs/stuck-job')).json as JobView).result, { n: 4 });
  });

  it('does not re-dispatch or expire chunks that wait in a backlog past the deadline: the deadline runs from a worker\'s claim', async () => {
    // 96 chunks of 2.5 s each (long enough for their workers to claim them, after 2 s) on one host
    // taking at most 24 messages at a time (host.json batchSize 16 + newBatchThreshold 8), one chunk to
    // a message (each item, a chunk, is 30 KB of JSON: two do not fit the 48 KiB a message holds): the
    // last chunks wait in the queue at least 7.5 s, past the 5 s deadline, and a single attempt leaves
    // no room for a mistaken expiry to be repaired.
    workTypes.register({
      name: 'e2e-backlog',
      description: 'each item takes 2.5 s',
      validateItem: () => undefined,
      process: async () => {
        await new Promise((r) => setTimeout(r, 2_500));
        return { n: 1 };
      },
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
      finish: (total) => total,
    });
    const inputs = blobs().getContainerClient(uniqueName('e2e-inputs'));
    await inputs.createIfNotExists();
    const text = JSON.stringify(Array.from({ length: 96 }, () => 'x'.repeat(30 * 1024)));
    await inputs.getBlockBlobClient('backlog.json').upload(text, Buffer.byteLength(text));
    const submission = { jobId: 'backlog-job', workType: 'e2e-backlog', itemsBlob: `${inputs.containerName}/backlog.json`, options: { chunkSize: 1, deadlineSeconds: 5, attempts: 1 } };
    const posted = await h.request('POST', '/api/jobs', JSON.stringify(submission));
    assert.equal(posted.status, 202, posted.text);
    await passUntilQueueEmpty();
    const view = await finished('backlog-job', 90_000);
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, { n: 96 });
    assert.deepEqual(view.progress?.chunks, { total: 96, done: 96, failed: 0 });
    const listing = await appRoot().jobs.store.chunks.listJob('backlog-job');
    assert.equal(listing.claims.length, 96, 'one claim per chunk, all of its first dispatch');
    assert.ok(listing.claims.every((c) => c.dispatch === 1));
    const claimed = listing.claims.map((c) => Date.parse(c.claimedAt));
    const spread = (Math.max(...claimed) - Math.min(...claimed)) / 1000;
    assert.ok(spread > 5, `the last chunk waited past the deadline before a worker took it (${spread} s after the first)`);
  });

  it('records a chunk that keeps failing on the delivery the host counts as its last attempt, so the job finishes', async () => {
    let calls = 0;
    workTypes.register({
      name: 'e2e-always-fails',
      description: 'processing always throws',
      validateItem: () => undefined,
      process: () => {
        calls += 1;
        throw new Error('backend refused');
      },
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
      finish: (total) => total,
    });
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'always-fails', workType: 'e2e-always-fails', items: [7], options: { attempts: 2 } }));
    assert.equal(posted.status, 202, posted.text);
    await passUntilQueueEmpty();
    // The host redelivers after host.json's visibilityTimeout (10 s) with dequeueCount 2.
    const view = await finished('always-fails', 60_000);
    assert.equal(view.status, 'failed', JSON.stringify(view));
    assert.equal(view.error?.code, 'CHUNK_FAILED');
    assert.match(view.error?.message ?? '', /attempt 2 of 2: backend refused/);
    assert.equal(calls, 2, 'one call per delivery, none after the failure was recorded');
    assert.equal((await appRoot().jobs.store.chunks.readChunkResult('always-fails', 0))?.attempt, 2);
  });

  it('continues as new on the real Durable backend, carrying its state, and still aggregates exactly', async () => {
    // Each item waits until the orchestration has continued as new twice: however slow the queue
    // polling (host.json maxQueuePollingInterval), the job outlives its first two executions.
    const generationOf = async (): Promise<number> => {
      const custom = (await h.client.getStatus(instanceIdFor('generations'))).customStatus as { generation?: number } | null;
      return custom?.generation ?? 0;
    };
    workTypes.register({
      name: 'e2e-slow',
      description: 'each item waits for the third execution',
      validateItem: () => undefined,
      process: async (item) => {
        while ((await generationOf()) < 3) await new Promise((r) => setTimeout(r, 200));
        return { n: Number(item) };
      },
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
      finish: (total) => total,
    });
    const run: JobRun = {
      jobId: 'generations',
      workType: 'e2e-slow',
      fingerprint: 'g'.repeat(64),
      options: { chunkSize: 2, attempts: 3, deadlineSeconds: 300 },
      source: { kind: 'inline', items: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] },
      epoch: 99,
      holder: 'e2e',
      submittedAt: new Date().toISOString(),
      via: 'queue',
      startId: 'start-1',
    };
    // Started as the pass starts a job, with few enough steps per execution to need several executions.
    await h.client.startNew('jobOrchestrator', { instanceId: instanceIdFor(run.jobId), input: initialState(run, 2) });
    const view = await finished('generations', 60_000);
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, { n: 78 });
    assert.equal(view.epoch, 99);
    assert.equal(view.createdAt, run.submittedAt, 'createdAt is the submission, not the last execution\'s restarted createdTime');
    // The job shows its recorded outcome as soon as it is written; the run finishes a Durable hop later.
    const status = await eventually(async () => {
      const s = await h.client.getStatus(instanceIdFor(run.jobId));
      return (s.customStatus as { phase?: string } | null)?.phase === 'done' ? s : undefined;
    }, 10_000, 'the run to finish');
    const custom = status.customStatus as { generation: number; phase: string };
    assert.ok(custom.generation >= 3, `ran ${custom.generation} executions`);
  });
});
