/**
 * The orchestration's activities against Azurite: planning (one message per chunk, blob items and
 * their refusals, cancelled before planning), re-dispatch and expiry of late chunks (late: claimed
 * by a worker and silent past the deadline; never a chunk still waiting unclaimed), and aggregation
 * from metadata and from blobs; the plan step's fence (a finished job, a start the start record no
 * longer names, a newer leader epoch: the run stands down and dispatches nothing) and the final
 * summary, recorded once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { JobActivities } from '../../../shared/jobs/JobActivities';
import { type JobRun, type JobSummary, type WorkItemMessage } from '../../../shared/jobs/JobRun';
import { type StartRecord } from '../../../shared/jobs/JobStore';
import { decodeQueueMessage } from '../../../shared/jobs/JobSubmission';
import { type SumPartial, sumWorkType } from '../../../shared/worktypes/sumWorkType';
import { type Json, type WorkType } from '../../../shared/worktypes/WorkType';
import { builtInWorkTypes } from '../../../shared/worktypes/WorkTypeRegistry';
import { uniqueName } from '../../support/env';
import { jobPipeline, jobRun } from './support/jobPipeline';

describe('job activities (Azurite)', () => {
  it('plans one message per chunk with the chunk\'s place in the job, base64 JSON like any queue client sends', async () => {
    const p = await jobPipeline('plan');
    const items = Array.from({ length: 95 }, (_, i) => i);
    const planned = await p.activities.plan(jobRun('plan-job', 'sum', { kind: 'inline', items }, { chunkSize: 20 }));
    assert.deepEqual(planned, { ok: true, cancelled: false, chunkCount: 5, itemCount: 95 });
    const messages = await p.drainMessages();
    const bodies = messages.map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage).sort((a, b) => a.chunk - b.chunk);
    assert.deepEqual(
      bodies.map((b) => [b.chunk, b.firstIndex, b.itemCount, b.items?.[0], b.dispatch, b.epoch]),
      [
        [0, 0, 20, 0, 1, 3],
        [1, 20, 20, 20, 1, 3],
        [2, 40, 20, 40, 1, 3],
        [3, 60, 20, 60, 1, 3],
        [4, 80, 15, 80, 1, 3],
      ],
    );
  });

  it('stands a run down at its plan step, dispatching nothing, unless its start record names it and its epoch is current', async () => {
    const p = await jobPipeline('fence');
    let leaseEpoch: number | undefined = 3;
    const activities = new JobActivities({
      store: p.store,
      workItems: p.workItems,
      registry: p.registry,
      logger: p.logger,
      instanceId: 'test-instance',
      leaseEpoch: () => Promise.resolve(leaseEpoch),
    });
    const items = { kind: 'inline' as const, items: [4, 5, 6] };
    const run: JobRun = { ...jobRun('fenced', 'sum', items), startId: 'start-a' };
    const record = (startId: string, epoch: number): StartRecord => {
      const at = new Date().toISOString();
      const base = { v: 1 as const, jobId: 'fenced', fingerprint: run.fingerprint, state: 'active' as const, generation: 1, at };
      return { ...base, holder: 'x', startId, epoch, run: { ...run, startId, epoch } };
    };
    const created = await p.store.createStart(record('start-b', 4));
    assert.notEqual(created, 'exists');
    const superseded = async (r: JobRun): Promise<string | undefined> => {
      const outcome = await activities.plan(r);
      return !outcome.ok && 'standDown' in outcome ? outcome.standDown.superseded?.reason : 'planned';
    };
    assert.match((await superseded(run)) ?? '', /names start start-b of epoch 4/);
    const current = await p.store.readStart('fenced');
    assert.ok(current !== undefined);
    assert.notEqual(await p.store.replaceStart(record('start-a', 3), current.etag), 'conflict');
    leaseEpoch = 4;
    assert.match((await superseded(run)) ?? '', /leader epoch 4 is newer than the run's 3/);
    assert.equal((await p.drainMessages()).length, 0, 'a stood-down run dispatched chunks');
    leaseEpoch = 3;
    assert.equal(await superseded(run), 'planned');
    assert.equal((await p.drainMessages()).length, 1);

    // Once the job's final summary is recorded, any run (whatever its start) answers it and does nothing.
    const final: JobSummary = {
      jobId: 'fenced',
      workType: 'sum',
      status: 'completed',
      progress: { chunks: { total: 1, done: 1, failed: 0 }, items: { total: 3, done: 3, failed: 0 } },
      result: { count: 3, sum: 15, min: 4, max: 6 },
      epoch: 3,
      finishedAt: new Date().toISOString(),
    };
    assert.deepEqual(await activities.finish(final), final);
    assert.deepEqual(await activities.finish({ ...final, epoch: 9, status: 'cancelled' }), final, 'the first recorded summary stays');
    for (const late of [run, { ...run, startId: 'start-z', epoch: 1 }, { ...run, startId: undefined }]) {
      assert.deepEqual(await activities.plan(late), { ok: false, standDown: final });
    }
    assert.equal((await p.drainMessages()).length, 0);
  });

  it('reads items from a blob and reports a missing, malformed or refused blob as the job\'s error', async () => {
    const p = await jobPipeline('blob');
    const inputs = p.blobs.getContainerClient(uniqueName('inputs'));
    await inputs.create();
    const put = async (name: string, text: string) => inputs.getBlockBlobClient(name).upload(text, Buffer.byteLength(text));
    await put('good.json', JSON.stringify(Array.from({ length: 12 }, (_, i) => i)));
    await put('object.json', '{"items":[1]}');
    await put('broken.json', '[1, 2');
    await put('floats.json', '[1, 2.5]');
    const src = (blob: string) => ({ kind: 'blob' as const, container: inputs.containerName, blob });
    assert.deepEqual(await p.activities.plan(jobRun('b1', 'sum', src('good.json'), { chunkSize: 5 })), { ok: true, cancelled: false, chunkCount: 3, itemCount: 12 });
    const code = async (blob: string) => {
      const outcome = await p.activities.plan(jobRun('b2', 'sum', src(blob)));
      return outcome.ok ? 'ok' : 'error' in outcome ? outcome.error.code : 'stood down';
    };
    assert.equal(await code('missing.json'), 'ITEMS_BLOB_NOT_FOUND');
    assert.equal(await code('object.json'), 'ITEMS_BLOB_INVALID');
    assert.equal(await code('broken.json'), 'ITEMS_BLOB_INVALID');
    assert.equal(await code('floats.json'), 'ITEM_REJECTED');
  });

  it('refuses to plan a different job under an id whose results an earlier job left behind, and re-plans the same job', async () => {
    const p = await jobPipeline('reuse');
    const first = jobRun('reused-id', 'sum', { kind: 'inline', items: [1, 2, 3] });
    assert.equal((await p.activities.plan(first)).ok, true);
    assert.equal((await p.activities.plan(first)).ok, true, 'a retried plan of the same job goes on');
    const other = { ...jobRun('reused-id', 'sum', { kind: 'inline', items: [7] }), fingerprint: 'e'.repeat(64) };
    const refused = await p.activities.plan(other);
    assert.equal(refused.ok, false);
    assert.equal(!refused.ok && 'error' in refused ? refused.error.code : undefined, 'DUPLICATE_JOB_ID');
  });

  it('does not dispatch a job cancelled before planning', async () => {
    const p = await jobPipeline('precancel');
    await p.store.markCancelled('pc-job', 'test');
    assert.deepEqual(await p.activities.plan(jobRun('pc-job', 'sum', { kind: 'inline', items: [1] })), { ok: true, cancelled: true, chunkCount: 0, itemCount: 0 });
    assert.equal((await p.drainMessages()).length, 0);
  });

  it('re-dispatches and then expires only claimed chunks silent past the deadline, never a chunk still waiting unclaimed', async () => {
    // Item 13 makes every delivery of chunk 1 fail before its last attempt: a worker that took the
    // chunk and never finished it (its claim stays, no result).
    const dies: WorkType<SumPartial, Json> = { ...sumWorkType, name: 'dies-on-13', process: (item, ctx) => (item === 13 ? Promise.reject(new Error('worker died')) : sumWorkType.process(item, ctx)) };
    let clock = new Date('2026-03-01T10:00:00.000Z');
    const t0 = clock.getTime();
    const at = (seconds: number) => new Date(t0 + seconds * 1000).toISOString();
    const p = await jobPipeline('redo', builtInWorkTypes().register(dies), () => clock);
    const items = Array.from({ length: 40 }, (_, i) => i);
    const run = jobRun('redo-job', 'dies-on-13', { kind: 'inline', items }, { chunkSize: 10, attempts: 2, deadlineSeconds: 300 });
    const check = async (seconds: number) => p.activities.progress({ jobId: 'redo-job', chunkCount: 4, itemCount: 40, at: at(seconds), deadlineSeconds: 300 });
    const redispatch = async (seconds: number) => p.activities.redispatch({ run, chunkCount: 4, itemCount: 40, at: at(seconds) });
    await p.activities.plan(run);
    const byChunk = new Map((await p.drainMessages()).map((m) => [(decodeQueueMessage(m.messageText) as WorkItemMessage).chunk, m]));
    const message = (chunk: number) => byChunk.get(chunk) ?? assert.fail(`no message for chunk ${chunk}`);

    // t0: chunk 0 done; chunk 1 claimed, its worker dies. Chunks 2 and 3 wait in the queue.
    assert.equal(await p.deliver(message(0)), 'written');
    await assert.rejects(p.deliver(message(1)), /worker died/);
    // Its worker's heartbeat stopped with it: late once silent for 20 s, not after the 300 s deadline.
    assert.equal((await check(19)).late, 0, 'silent for less than 20 s');
    assert.equal((await check(21)).late, 1, 'silent for 20 s: late long before the deadline');
    // t0 + 200 s: chunk 3 is claimed (its worker is still busy at t0 + 301 s).
    clock = new Date(t0 + 200_000);
    const listedAt200 = await p.store.listJob('redo-job');
    assert.deepEqual(listedAt200.claims.map((c) => c.chunk).sort(), [0, 1]);
    await p.store.claimChunk('redo-job', 3, 1, { claimedAt: clock.toISOString(), claimedBy: 'busy-worker', dequeueCount: 1 });

    let progress = await check(301);
    assert.equal(progress.late, 1, 'only chunk 1: chunk 2 is unclaimed, chunk 3 was claimed 101 s ago');
    assert.deepEqual(await redispatch(301), { redispatched: 1, expired: 0, highestDispatch: 2 });
    const again = (await p.drainMessages()).map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage);
    assert.deepEqual(
      again.map((m) => [m.chunk, m.dispatch]),
      [[1, 2]],
    );
    // The re-sent message waits in the queue: chunk 1 is not late again, nor is the unclaimed chunk 2, even days later.
    progress = await check(301);
    assert.equal(progress.late, 0);
    assert.equal((await check(86_400 * 3)).late, 1, 'chunk 3, claimed and silent for days, is late; chunk 2 never');
    assert.deepEqual(await redispatch(400), { redispatched: 0, expired: 0, highestDispatch: 2 }, 'nothing late at t0 + 400 s');
    assert.equal((await p.drainMessages()).length, 0);
    assert.equal(await p.store.chunkResultExists('redo-job', 2), false, 'an unclaimed chunk is never expired');

    // t0 + 1000 s: the re-sent chunk 1 is claimed and its worker dies too; chunk 3 finishes.
    clock = new Date(t0 + 1_000_000);
    await assert.rejects(p.worker.handle(again[0], { dequeueCount: 1 }), /worker died/);
    assert.equal(await p.deliver(message(3)), 'written');
    assert.equal((await check(1_019)).late, 0);
    assert.equal((await check(1_021)).late, 1, 'its heartbeat has been silent for 20 s');
    // Out of attempts (2 dispatches): recorded failed, nothing sent.
    assert.deepEqual(await redispatch(1_300), { redispatched: 0, expired: 1, highestDispatch: 2 });
    assert.equal((await p.drainMessages()).length, 0, 'expiring sends nothing');
    const expired = await p.store.readChunkResult('redo-job', 1);
    assert.deepEqual([expired?.status, expired?.error?.code, expired?.dispatch], ['failed', 'DEADLINE_EXCEEDED', 2]);
    // Chunk 1's first message comes back (the queue's redelivery): its result exists, it is skipped.
    assert.equal(await p.deliver(message(1), 2), 'duplicate');

    // Chunk 2 is finally delivered, long after every deadline: it ran, it counts.
    clock = new Date(t0 + 5_000_000);
    assert.equal(await p.deliver(message(2)), 'written');
    progress = await check(5_000);
    assert.deepEqual(progress.chunks, { total: 4, done: 3, failed: 1 });
    assert.deepEqual(progress.items, { total: 40, done: 30, failed: 10 });
    const summary = await p.activities.aggregate({ run, chunkCount: 4, itemCount: 40, cancelled: false });
    assert.equal(summary.status, 'completed_with_errors');
    assert.deepEqual(summary.result, { count: 30, sum: 45 + 245 + 345, min: 0, max: 39 });
    const stored = JSON.parse((await p.store.readJobResultText('redo-job')) ?? '{}') as { chunkErrors: Array<{ chunk: number; code: string }> };
    assert.deepEqual(
      stored.chunkErrors.map((e) => [e.chunk, e.code]),
      [[1, 'DEADLINE_EXCEEDED']],
    );
  });

  it('keeps a chunk whose worker beats on time, however long it runs; re-dispatches it once the beats stop', async () => {
    const clock = new Date('2026-03-01T10:00:00.000Z');
    const t0 = clock.getTime();
    const at = (seconds: number) => new Date(t0 + seconds * 1000).toISOString();
    const p = await jobPipeline('beats', builtInWorkTypes(), () => clock);
    const run = jobRun('beat-job', 'sum', { kind: 'inline', items: [1, 2, 3, 4] }, { chunkSize: 2, attempts: 3, deadlineSeconds: 600 });
    const check = async (seconds: number) => p.activities.progress({ jobId: 'beat-job', chunkCount: 2, itemCount: 4, at: at(seconds), deadlineSeconds: 600 });
    await p.activities.plan(run);
    await p.drainMessages();
    // Chunk 0's worker beats every 5 s for 200 s (a long chunk); chunk 1's worker claimed at t0 and died.
    const claim = { claimedAt: at(0), dequeueCount: 1 };
    await p.store.claimChunk('beat-job', 0, 1, { ...claim, claimedBy: 'alive', beatAt: at(0) });
    await p.store.claimChunk('beat-job', 1, 1, { ...claim, claimedBy: 'dead', beatAt: at(0) });
    for (let s = 5; s <= 200; s += 5) {
      await p.store.beatClaim('beat-job', 0, 1, { ...claim, beatAt: at(s) });
      if (s === 15) assert.equal((await check(s + 4)).late, 0, 'both silent for less than 20 s');
    }
    const beats = (await p.store.listJob('beat-job')).claims.find((c) => c.chunk === 0);
    assert.equal(beats?.beatAt, at(200), 'the listing sees the latest beat');
    assert.equal(beats?.claimedAt, at(0), 'a beat keeps the claim time');
    assert.equal((await check(204)).late, 1, 'only the silent chunk 1, though both were claimed 204 s ago');
    assert.deepEqual(await p.activities.redispatch({ run, chunkCount: 2, itemCount: 4, at: at(204) }), { redispatched: 1, expired: 0, highestDispatch: 2 });
    assert.deepEqual((await p.drainMessages()).map((m) => [(decodeQueueMessage(m.messageText) as WorkItemMessage).chunk, (decodeQueueMessage(m.messageText) as WorkItemMessage).dispatch]), [[1, 2]]);
    // Chunk 0's beats stop at 200 s: late at 220 s, still far inside its 600 s deadline.
    assert.equal((await check(219)).late, 0);
    assert.equal((await check(220)).late, 1);
  });

  it('a worker beats on its claim while it processes a chunk', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held: WorkType<SumPartial, Json> = { ...sumWorkType, name: 'held', process: async (item, ctx) => (await gate, sumWorkType.process(item, ctx)) };
    const p = await jobPipeline('live-beats', builtInWorkTypes().register(held));
    const run = jobRun('live-beat-job', 'held', { kind: 'inline', items: [1, 2] }, { chunkSize: 2 });
    await p.activities.plan(run);
    const [message] = await p.drainMessages();
    const delivered = p.deliver(message ?? assert.fail('no message'));
    const first = await eventuallyClaim(p, 'live-beat-job');
    // Two beats (5 s apart) while the chunk is held.
    await new Promise((r) => setTimeout(r, 11_000));
    const later = (await p.store.listJob('live-beat-job')).claims[0];
    assert.ok(Date.parse(later?.beatAt ?? '') - Date.parse(first.beatAt ?? '') >= 9_000, `${first.beatAt} -> ${later?.beatAt}`);
    release();
    assert.equal(await delivered, 'written');
  });

  it('counts a re-dispatched chunk once when its late original finishes first', async () => {
    let clock = new Date('2026-03-01T10:00:00.000Z');
    const t0 = clock.getTime();
    const p = await jobPipeline('late-original', builtInWorkTypes(), () => clock);
    const run = jobRun('lo-job', 'sum', { kind: 'inline', items: [1, 2, 3, 4] }, { chunkSize: 2, attempts: 3, deadlineSeconds: 60 });
    await p.activities.plan(run);
    const first = (await p.drainMessages()).sort((a, b) => (decodeQueueMessage(a.messageText) as WorkItemMessage).chunk - (decodeQueueMessage(b.messageText) as WorkItemMessage).chunk);
    assert.equal(await p.deliver(first[0] ?? assert.fail()), 'written');
    // Chunk 1's worker is slow: it claimed at t0 and is still running at t0 + 61 s.
    await p.store.claimChunk('lo-job', 1, 1, { claimedAt: clock.toISOString(), claimedBy: 'slow-worker', dequeueCount: 1 });
    assert.deepEqual(await p.activities.redispatch({ run, chunkCount: 2, itemCount: 4, at: new Date(t0 + 61_000).toISOString() }), { redispatched: 1, expired: 0, highestDispatch: 2 });
    const [copy] = await p.drainMessages();
    // The slow original finishes first, then the copy arrives.
    clock = new Date(t0 + 70_000);
    assert.equal(await p.deliver(first[1] ?? assert.fail()), 'written');
    assert.equal(await p.deliver(copy ?? assert.fail()), 'duplicate');
    const summary = await p.activities.aggregate({ run, chunkCount: 2, itemCount: 4, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.deepEqual(summary.result, { count: 4, sum: 10, min: 1, max: 4 });
    assert.equal((await p.store.readChunkResult('lo-job', 1))?.dispatch, 1);
  });

  it('lets the event loop run while it folds many chunk results', async () => {
    // Other work in the process (the leader's lease renewals) must not wait for a whole fold.
    const folds: number[] = [];
    let foldsWhenOtherWorkRan: number | undefined;
    const counting: WorkType<{ n: number }, { n: number }> = {
      name: 'counting',
      description: 'counts items; notes when other work gets to run during the fold',
      validateItem: () => undefined,
      process: () => ({ n: 1 }),
      empty: () => ({ n: 0 }),
      combine: (a, b) => ({ n: a.n + b.n }),
      finish: (t) => t,
    };
    const p = await jobPipeline('yield', builtInWorkTypes().register(counting));
    const run = jobRun('yield-job', 'counting', { kind: 'inline', items: Array.from({ length: 120 }, () => 0) }, { chunkSize: 1 });
    await p.activities.plan(run);
    const messages = await p.drainMessages();
    for (let i = 0; i < messages.length; i += 12) await Promise.all(messages.slice(i, i + 12).map(async (m) => p.deliver(m)));
    // From here on (the registry holds this object), the first fold schedules other work, which
    // must get to run before the fold's last chunk.
    counting.combine = (a, b) => {
      if (folds.length === 0) setImmediate(() => (foldsWhenOtherWorkRan = folds.length));
      folds.push(folds.length);
      return { n: a.n + b.n };
    };
    const summary = await p.activities.aggregate({ run, chunkCount: 120, itemCount: 120, cancelled: false });
    assert.deepEqual(summary.result, { n: 120 });
    assert.equal(folds.length, 120);
    assert.ok(foldsWhenOtherWorkRan !== undefined && foldsWhenOtherWorkRan < 120, `other work ran after ${foldsWhenOtherWorkRan} of 120 folds`);
  });

  it('aggregates partials too large for metadata by reading their blobs, and keeps a large result out of the summary', async () => {
    const p = await jobPipeline('largepartial');
    const texts = p.blobs.getContainerClient(uniqueName('texts'));
    await texts.create();
    // Many distinct words make a partial bigger than blob metadata can hold.
    const words = Array.from({ length: 1_500 }, (_, i) => `w${i.toString(36)}x`).join(' ');
    await texts.getBlockBlobClient('many.txt').upload(words, words.length);
    const run = jobRun('lp-job', 'wordcount', { kind: 'inline', items: [`${texts.containerName}/many.txt`] });
    await p.activities.plan(run);
    for (const m of await p.drainMessages()) await p.deliver(m);
    const listing = await p.store.listJob('lp-job');
    assert.equal(listing.results[0]?.partial, undefined, 'the partial did not fit metadata');
    const summary = await p.activities.aggregate({ run, chunkCount: 1, itemCount: 1, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.ok(summary.result !== undefined, 'the finished result (top 10 words) is small');
    assert.equal((summary.result as { distinctWords: number }).distinctWords, 1_500);
  });
});

async function eventuallyClaim(p: Awaited<ReturnType<typeof jobPipeline>>, jobId: string): Promise<{ beatAt?: string }> {
  for (let i = 0; i < 100; i++) {
    const claim = (await p.store.listJob(jobId)).claims[0];
    if (claim?.beatAt !== undefined) return claim;
    await new Promise((r) => setTimeout(r, 50));
  }
  return assert.fail('no claim with a heartbeat');
}
