/**
 * The orchestration's activities against Azurite: planning (staged items, the first window of
 * messages, blob items and their refusals, cancelled before planning), steps (re-sending and expiring
 * chunks whose worker went silent, re-sending unclaimed ones in the same round), and aggregation
 * from metadata and from blobs; the plan step's fence (a finished job, a start the start record no
 * longer names, a newer leader epoch: the run stands down and dispatches nothing) and the final
 * summary, recorded once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { LATE_CALL_MS } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { type DispatchLedger } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { type JobSummary } from '../../../../shared/jobs/JobSummary';
import { decodeQueueMessage,type WorkItemMessage } from '../../../../shared/jobs/messageCodec';
import { type PlanOutcome } from '../../../../shared/jobs/run/JobActivities';
import { type StartRecord } from '../../../../shared/jobs/store/JobStore';
import { type SumPartial, sumWorkType } from '../../../../shared/worktypes/sumWorkType';
import { type Json, type WorkType } from '../../../../shared/worktypes/WorkType';
import { builtInWorkTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { uniqueName } from '../../../support/env';
import { jobPipeline, jobRun } from '../support/jobPipeline';

describe('job activities (Azurite)', () => {
  it('plans one message per chunk with the chunk\'s place in the job, base64 JSON like any queue client sends', async () => {
    const p = await jobPipeline('plan');
    const items = Array.from({ length: 95 }, (_, i) => i);
    const planned = await p.plan(jobRun('plan-job', 'sum', { kind: 'inline', items }, { chunkSize: 20 }));
    assert.deepEqual(counts(planned), { ok: true, cancelled: false, chunkCount: 5, itemCount: 95 });
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
    // The plans' reads of the final summary.
    let finalReads = 0;
    const store = new Proxy(p.store, {
      get(target, key) {
        if (key === 'readFinal') finalReads += 1;
        const value: unknown = Reflect.get(target, key, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    // The starts the plans told this process's intake they confirmed.
    const told: string[] = [];
    const activities = p.makeActivities({ leaseEpoch: () => Promise.resolve(leaseEpoch), store, startConfirmed: (jobId) => told.push(jobId) });
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
      const outcome = await activities.plan({ run: r, at: new Date().toISOString() });
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
    assert.equal(finalReads, 1, 'only the run its start record did not name read the final summary');
    assert.equal(await superseded(run), 'planned');
    assert.equal(finalReads, 1, 'the first call of the plan of the job\'s first start read the final summary');
    assert.deepEqual(told, ['fenced'], 'only the plan past its fence told the intake, once it removed the mark');
    const [sent] = await p.drainMessages();
    // The plan's instance dies after staging, the lease moves on with it, the plan is retried: the
    // start got past its fence and staged, so it goes on, sending again only what has no result yet
    // (and a new start of the job still stands down).
    leaseEpoch = 5;
    assert.equal(await superseded(run), 'planned', 'a retried plan of a start that staged its input goes on');
    assert.equal((await p.drainMessages()).length, 1, 'the retry sends the chunk without a result again');
    assert.equal(await p.deliver(sent ?? assert.fail('no first window')), 'written');
    assert.match((await superseded({ ...run, startId: 'start-c' })) ?? '', /names start start-a of epoch 3/);
    const retried = await activities.plan({ run, at: new Date().toISOString() });
    assert.ok(retried.ok && !('standDown' in retried));
    assert.deepEqual([retried.ledger.progress.chunks.done, retried.ledger.inFlight.length], [1, 0], 'the finished chunk is counted');
    assert.equal((await p.drainMessages()).length, 0, 'and not sent again');
    // Every chunk had its result at the plan's first pass: the plan aggregated the job and recorded its summary.
    const final: JobSummary = retried.summary ?? assert.fail('the plan did not aggregate a job whose every chunk had its result');
    assert.equal(final.status, 'completed');
    assert.deepEqual(final.result, { count: 3, sum: 15, min: 4, max: 6 });

    // Once the job's final summary is recorded, any run (whatever its start) answers it and does nothing:
    // a redelivery of the plan (late: LATE_CALL_MS), a repeat, or a run of another start.
    assert.deepEqual(await activities.finish({ ...final, epoch: 9, status: 'cancelled' }), final, 'the first recorded summary stays');
    const lateAt = new Date(Date.now() - LATE_CALL_MS - 1_000).toISOString();
    const now = new Date().toISOString();
    const calls = [
      { run, at: lateAt },
      { run, at: now, repeat: 1 },
      { run: { ...run, startId: 'start-z', epoch: 1 }, at: now },
    ];
    for (const call of calls) assert.deepEqual(await activities.plan(call), { ok: false, standDown: final }, JSON.stringify(call));
    assert.equal((await p.drainMessages()).length, 0);
  });

  it('prepares a small job at intake for the leader to send its first window; the plan counts that window in flight and sends it again only once unclaimed', async () => {
    const p = await jobPipeline('prestage');
    let leaseEpoch: number | undefined = 3;
    const activities = p.makeActivities({ leaseEpoch: () => Promise.resolve(leaseEpoch) });
    const items = { kind: 'inline' as const, items: Array.from({ length: 25 }, (_, i) => i) };
    const run: JobRun = { ...jobRun('pre', 'sum', items, { chunkSize: 10 }), startId: 'start-1' };
    const staged = await activities.prestage(run);
    assert.deepEqual([staged?.chunkCount, staged?.itemCount, staged?.unstaged], [3, 25, true]);
    // Its three chunks fit the first window: the items stay in the run, nothing is stored.
    assert.deepEqual(await inputBlobs(p, 'pre'), [], 'a job whose chunks fit the first window was staged at intake');
    const windowAt = Date.parse(staged?.firstWindowAt ?? '');
    assert.ok(Math.abs(windowAt - Date.now()) < 5_000, `firstWindowAt ${staged?.firstWindowAt}`);
    assert.equal((await p.drainMessages()).length, 0, 'nothing is sent before the run is started');
    assert.equal(await activities.sendFirstWindow(run, staged ?? assert.fail('not staged')), 3);
    const window = await p.drainMessages();
    assert.deepEqual(window.map((m) => (decodeQueueMessage(m.messageText) as WorkItemMessage).chunk).sort(), [0, 1, 2]);
    assert.equal(await p.deliver(window[0] ?? assert.fail('no message')), 'written');

    // The run's plan, a moment later, with what the intake recorded in the run's input: no lease-epoch
    // check (the intake made it), the window in flight since firstWindowAt, nothing sent again. It
    // answers with the job unfinished (these tests' plan does not wait), so it stages the input for
    // the steps that follow.
    leaseEpoch = 4;
    const planned = await activities.plan({ run, at: new Date(windowAt + 500).toISOString(), prestaged: staged });
    assert.ok(planned.ok && !('standDown' in planned), JSON.stringify(planned));
    assert.deepEqual([planned.ledger.progress.chunks.done, planned.ledger.inFlight.length], [1, 2]);
    assert.equal((await p.drainMessages()).length, 0, 'the plan sent the leader\'s window again');
    assert.deepEqual((await inputBlobs(p, 'pre')).sort(), ['jobs/pre/input/00000.json', 'jobs/pre/input/manifest.json']);
    // Chunks of that window nobody claimed (the leader died before sending them) go out again after unclaimedSeconds.
    const later = await activities.plan({ run, at: new Date(windowAt + 16_000).toISOString(), prestaged: staged });
    assert.ok(later.ok && !('standDown' in later));
    const resent = await p.drainMessages();
    assert.deepEqual(resent.map((m) => (decodeQueueMessage(m.messageText) as WorkItemMessage).items), [[10, 11, 12, 13, 14, 15, 16, 17, 18, 19], [20, 21, 22, 23, 24]]);

    // A newer epoch or a cancel: nothing staged, nothing sent; the plan decides.
    const fresh = (jobId: string): JobRun => ({ ...jobRun(jobId, 'sum', items, { chunkSize: 10 }), startId: `start-${jobId}` });
    assert.equal(await activities.prestage(fresh('pre-stale')), undefined, 'staged under a newer lease epoch');
    leaseEpoch = 3;
    await p.store.markCancelled('pre-cancelled', 'test');
    assert.equal(await activities.prestage(fresh('pre-cancelled')), undefined, 'staged a cancelled job');
    assert.notEqual(await activities.prestage(fresh('pre-own')), undefined, 'a start of the current epoch, not cancelled, was not staged');
    // Staged, then the leader was paused and a newer epoch leads by the time it would send: it sends nothing.
    const paused = fresh('pre-paused');
    const pausedStaged = await activities.prestage(paused);
    leaseEpoch = 4;
    assert.equal(await activities.sendFirstWindow(paused, pausedStaged ?? assert.fail('not staged')), 0);
    assert.equal((await p.drainMessages()).length, 0);

    // A pass whose staging budget is spent (`mayStage` false) still prepares a job that needs no staging.
    leaseEpoch = 3;
    assert.equal((await activities.prestage(fresh('pre-budget'), undefined, false))?.unstaged, true);
    // More chunks than the first window holds: staged at intake, as before (the steps read the rest from
    // it), and only while the pass may stage.
    const wide = await jobPipeline('prestage-wide', undefined, undefined, 2);
    const big = { ...jobRun('pre-wide', 'sum', items, { chunkSize: 10 }), startId: 'start-wide' };
    assert.equal(await wide.makeActivities().prestage(big, undefined, false), undefined, 'staged with the budget spent');
    const wideStaged = await wide.makeActivities().prestage(big);
    assert.deepEqual([wideStaged?.chunkCount, wideStaged?.unstaged], [3, undefined]);
    const wideInput = await inputBlobs(wide, 'pre-wide');
    assert.ok(wideInput.includes('jobs/pre-wide/input/manifest.json'), wideInput.join(', '));
  });

  it('never stages a small job whose plan sees every result: the plan aggregates it at its first pass, without listing the job', async () => {
    const p = await jobPipeline('prestage-done');
    const activities = p.makeActivities({ planWaitMs: 3_000 });
    const items = { kind: 'inline' as const, items: Array.from({ length: 25 }, (_, i) => i + 1) };
    const run: JobRun = { ...jobRun('pre-done', 'sum', items, { chunkSize: 10 }), startId: 'start-done' };
    const staged = await activities.prestage(run);
    assert.equal(staged?.unstaged, true);
    assert.equal(await activities.sendFirstWindow(run, staged ?? assert.fail('not prepared')), 3);
    for (const m of await p.drainMessages()) assert.equal(await p.deliver(m), 'written');
    // Every result landed before the plan: its first pass sees them all, and it aggregates from that
    // pass's reads, with no second pass and no listing of the job (counted on the real store).
    const chunks = p.store.chunks;
    const calls = { observe: 0, list: 0 };
    const observe = chunks.observeChunks.bind(chunks);
    const list = chunks.listJob.bind(chunks);
    chunks.observeChunks = (...args) => ((calls.observe += 1), observe(...args));
    chunks.listJob = (...args) => ((calls.list += 1), list(...args));
    const planned = await activities.plan({ run, at: new Date().toISOString(), prestaged: staged });
    assert.deepEqual(calls, { observe: 1, list: 0 });
    assert.ok(planned.ok && !('standDown' in planned), JSON.stringify(planned));
    assert.equal(planned.summary?.status, 'completed');
    assert.deepEqual(planned.summary?.result, { count: 25, sum: 325, min: 1, max: 25 });
    assert.deepEqual(await inputBlobs(p, 'pre-done'), [], 'a job finished within its plan was staged');
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
    assert.deepEqual(counts(await p.plan(jobRun('b1', 'sum', src('good.json'), { chunkSize: 5 }))), { ok: true, cancelled: false, chunkCount: 3, itemCount: 12 });
    const code = async (blob: string) => {
      const outcome = await p.plan(jobRun('b2', 'sum', src(blob)));
      return outcome.ok ? 'ok' : 'error' in outcome ? outcome.error.code : 'stood down';
    };
    assert.equal(await code('missing.json'), 'ITEMS_BLOB_NOT_FOUND');
    assert.equal(await code('object.json'), 'ITEMS_BLOB_INVALID');
    assert.equal(await code('broken.json'), 'ITEMS_BLOB_INVALID');
    assert.equal(await code('floats.json'), 'ITEM_REJECTED');
  });

  it('refuses to plan a different job under an id whose start record holds another, and re-plans the same job', async () => {
    const p = await jobPipeline('reuse');
    const first: JobRun = { ...jobRun('reused-id', 'sum', { kind: 'inline', items: [1, 2, 3] }), startId: 'start-first' };
    const { jobId, fingerprint, epoch, holder } = first;
    const start: StartRecord = { v: 1, jobId, fingerprint, state: 'active', startId: 'start-first', generation: 1, epoch, holder, at: new Date().toISOString(), run: first };
    assert.notEqual(await p.store.createStart(start), 'exists');
    assert.equal((await p.plan(first)).ok, true);
    assert.equal((await p.plan(first)).ok, true, 'a retried plan of the same job goes on');
    // The start record is the id's claim (the intake refuses a different submission under it:
    // DUPLICATE_JOB_ID): a run of another job under the id stands down at its plan, dispatching nothing.
    await p.drainMessages();
    const other: JobRun = { ...jobRun('reused-id', 'sum', { kind: 'inline', items: [7] }), fingerprint: 'e'.repeat(64), startId: 'start-other' };
    const refused = await p.plan(other);
    assert.ok(!refused.ok && 'standDown' in refused, JSON.stringify(refused));
    assert.match(refused.standDown.superseded?.reason ?? '', /names start start-first/);
    assert.equal((await p.drainMessages()).length, 0);
  });

  it('does not dispatch a job cancelled before planning', async () => {
    const p = await jobPipeline('precancel');
    await p.store.markCancelled('pc-job', 'test');
    assert.deepEqual(counts(await p.plan(jobRun('pc-job', 'sum', { kind: 'inline', items: [1] }))), { ok: true, cancelled: true, chunkCount: 0, itemCount: 0 });
    assert.equal((await p.drainMessages()).length, 0);
  });

  it('puts only the first window on the queue at plan time, and a step tops it up as results land', async () => {
    const p = await jobPipeline('window', builtInWorkTypes(), undefined, 3);
    const run = jobRun('win-job', 'sum', { kind: 'inline', items: Array.from({ length: 100 }, (_, i) => i) }, { chunkSize: 10 });
    const planned = await p.plan(run, T0);
    const ledger = ledgerOf(planned);
    const first = await p.drainMessages();
    assert.deepEqual(first.map((m) => chunkOf(m)).sort(), [0, 1, 2]);
    for (const m of first.slice(0, 2)) assert.equal(await p.deliver(m), 'written');
    const step = await p.step(run, { chunkCount: 10, itemCount: 100 }, ledger, at(1));
    assert.deepEqual([step.finished, step.sent, step.resent], [2, 2, 0]);
    assert.deepEqual(step.ledger.progress.items, { total: 100, done: 10 + 10, failed: 0 });
    assert.deepEqual((await p.drainMessages()).map((m) => chunkOf(m)).sort(), [3, 4]);
  });

  it('sends a chunk again once its worker\'s heartbeat is 20 s silent, then expires it after its attempts; counts each chunk once', async () => {
    // Item 13 makes every delivery of chunk 1 fail, after working on it long enough to claim it,
    // before its last attempt: a worker that took the chunk and never finished it (its claim stays,
    // its heartbeat stops, no result). Workers here claim after 50 ms instead of 2 s.
    const dies: WorkType<SumPartial, Json> = {
      ...sumWorkType,
      name: 'dies-on-13',
      process: async (item, ctx) => {
        if (item !== 13) return sumWorkType.process(item, ctx);
        await new Promise((r) => setTimeout(r, 300));
        throw new Error('worker died');
      },
    };
    let clock = new Date(T0);
    const p = await jobPipeline('redo', builtInWorkTypes().register(dies), () => clock, undefined, 50);
    const items = Array.from({ length: 40 }, (_, i) => i);
    const run = jobRun('redo-job', 'dies-on-13', { kind: 'inline', items }, { chunkSize: 10, attempts: 2, deadlineSeconds: 300 });
    const size = { chunkCount: 4, itemCount: 40 };
    let ledger = ledgerOf(await p.plan(run, T0));
    const byChunk = new Map((await p.drainMessages()).map((m) => [chunkOf(m), m]));
    const message = (chunk: number) => byChunk.get(chunk) ?? assert.fail(`no message for chunk ${chunk}`);

    // t0: chunks 0, 2 and 3 done; chunk 1 claimed, its worker dies.
    for (const c of [0, 2, 3]) assert.equal(await p.deliver(message(c)), 'written');
    await assert.rejects(p.deliver(message(1)), /worker died/);
    let step = await p.step(run, size, ledger, at(19));
    assert.deepEqual([step.finished, step.sent, step.resent], [3, 0, 0], 'silent for less than 20 s');
    ledger = step.ledger;
    step = await p.step(run, size, ledger, at(21));
    assert.equal(step.resent, 1, 'silent for 20 s: sent again long before the 300 s deadline');
    ledger = step.ledger;
    const again = (await p.drainMessages()).map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage);
    assert.deepEqual(again.map((m) => [m.chunk, m.dispatch]), [[1, 2]]);

    // t0 + 1000 s: the re-sent chunk is claimed and its worker dies too.
    clock = new Date(T0.getTime() + 1_000_000);
    await assert.rejects(p.worker.handle(again[0], { dequeueCount: 1 }), /worker died/);
    step = await p.step(run, size, ledger, at(1_019));
    assert.deepEqual([step.resent, step.expired], [0, 0]);
    ledger = step.ledger;
    step = await p.step(run, size, ledger, at(1_021));
    assert.deepEqual([step.resent, step.expired], [0, 1], 'out of attempts (2 rounds): recorded failed, nothing sent');
    ledger = step.ledger;
    assert.equal((await p.drainMessages()).length, 0, 'expiring sends nothing');
    const expired = await p.store.chunks.readChunkResult('redo-job', 1);
    assert.deepEqual([expired?.status, expired?.error?.code, expired?.dispatch], ['failed', 'DEADLINE_EXCEEDED', 2]);
    // Chunk 1's first message comes back (the queue's redelivery): its result exists, it is skipped.
    assert.equal(await p.deliver(message(1), 2), 'duplicate');
    step = await p.step(run, size, ledger, at(1_022));
    assert.equal(step.finished, 1);
    assert.deepEqual(step.ledger.progress, { chunks: { total: 4, done: 3, failed: 1 }, items: { total: 40, done: 30, failed: 10 } });
    assert.deepEqual([step.ledger.next, step.ledger.inFlight.length], [4, 0]);
    const summary = await p.activities.aggregate({ run, ...size, cancelled: false });
    assert.equal(summary.status, 'completed_with_errors');
    assert.deepEqual(summary.result, { count: 30, sum: 45 + 245 + 345, min: 0, max: 39 });
    const stored = JSON.parse((await p.store.readJobResultText('redo-job')) ?? '{}') as { chunkErrors: Array<{ chunk: number; code: string }> };
    assert.deepEqual(
      stored.chunkErrors.map((e) => [e.chunk, e.code]),
      [[1, 'DEADLINE_EXCEEDED']],
    );
  });

  it('sends an unclaimed chunk again in the same round (a worker received it and died before claiming)', async () => {
    const p = await jobPipeline('unclaimed');
    const run = jobRun('uc-job', 'sum', { kind: 'inline', items: [1, 2, 3, 4] }, { chunkSize: 2, attempts: 1 });
    const size = { chunkCount: 2, itemCount: 4 };
    let ledger = ledgerOf(await p.plan(run, T0));
    // The receiver of both messages died: they stay invisible on the queue for minutes on a real host.
    const lost = await p.drainMessages();
    assert.equal(lost.length, 2);
    let step = await p.step(run, size, ledger, at(14));
    assert.equal(step.resent, 0);
    ledger = step.ledger;
    step = await p.step(run, size, ledger, at(15));
    assert.equal(step.resent, 2);
    const copies = (await p.drainMessages()).map((m) => decodeQueueMessage(m.messageText) as WorkItemMessage);
    assert.deepEqual(copies.map((m) => [m.chunk, m.dispatch]).sort(), [[0, 1], [1, 1]], 'same round: a queue wait is not an attempt');
    for (const c of copies) assert.equal(await p.worker.handle(c, { dequeueCount: 1 }), 'written');
    step = await p.step(run, size, step.ledger, at(16));
    assert.deepEqual(step.ledger.progress.chunks, { total: 2, done: 2, failed: 0 });
  });

  it('keeps a chunk whose worker beats on time, however long it runs; sends it again once the beats stop', async () => {
    const p = await jobPipeline('beats', builtInWorkTypes(), () => new Date(T0));
    const run = jobRun('beat-job', 'sum', { kind: 'inline', items: [1, 2, 3, 4] }, { chunkSize: 2, attempts: 3, deadlineSeconds: 600 });
    const size = { chunkCount: 2, itemCount: 4 };
    let ledger = ledgerOf(await p.plan(run, T0));
    await p.drainMessages();
    // Chunk 0's worker beats every 5 s for 200 s (a long chunk); chunk 1's worker claimed at t0 and died.
    const claim = { claimedAt: at(0), dequeueCount: 1 };
    await p.store.chunks.claimChunk('beat-job', 0, 1, { ...claim, claimedBy: 'alive', beatAt: at(0) });
    await p.store.chunks.claimChunk('beat-job', 1, 1, { ...claim, claimedBy: 'dead', beatAt: at(0) });
    const resentAt = new Map<number, number[]>();
    const stepAt = async (s: number) => {
      const out = await p.step(run, size, ledger, at(s));
      ledger = out.ledger;
      for (const m of await p.drainMessages()) {
        const c = chunkOf(m);
        resentAt.set(c, [...(resentAt.get(c) ?? []), s]);
      }
    };
    for (let s = 5; s <= 200; s += 5) {
      await p.store.chunks.beatClaim('beat-job', 0, 1, { ...claim, beatAt: at(s) });
      await stepAt(s);
    }
    const beats = (await p.store.chunks.listJob('beat-job')).claims.find((c) => c.chunk === 0);
    assert.equal(beats?.beatAt, at(200), 'the listing sees the latest beat');
    assert.equal(beats?.claimedAt, at(0), 'a beat keeps the claim time');
    assert.equal(resentAt.get(0), undefined, 'the beating chunk 0 was never sent again');
    assert.equal(resentAt.get(1)?.[0], 20, 'the silent chunk 1 was sent again at 20 s');
    // Chunk 0's beats stop at 200 s: sent again at 220 s, far inside its 600 s deadline.
    await stepAt(219);
    assert.equal(resentAt.get(0), undefined);
    await stepAt(220);
    assert.deepEqual(resentAt.get(0), [220]);
  });

  it('a worker beats on its claim while it processes a chunk', async () => {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const held: WorkType<SumPartial, Json> = { ...sumWorkType, name: 'held', process: async (item, ctx) => (await gate, sumWorkType.process(item, ctx)) };
    const p = await jobPipeline('live-beats', builtInWorkTypes().register(held));
    const run = jobRun('live-beat-job', 'held', { kind: 'inline', items: [1, 2] }, { chunkSize: 2 });
    await p.plan(run);
    const [message] = await p.drainMessages();
    const delivered = p.deliver(message ?? assert.fail('no message'));
    const first = await eventuallyClaim(p, 'live-beat-job');
    // Two beats (5 s apart) while the chunk is held.
    await new Promise((r) => setTimeout(r, 11_000));
    const later = (await p.store.chunks.listJob('live-beat-job')).claims[0];
    assert.ok(Date.parse(later?.beatAt ?? '') - Date.parse(first.beatAt ?? '') >= 9_000, `${first.beatAt} -> ${later?.beatAt}`);
    release();
    assert.equal(await delivered, 'written');
  });

  it('counts a re-dispatched chunk once when its late original finishes first', async () => {
    let clock = new Date(T0);
    const t0 = clock.getTime();
    const p = await jobPipeline('late-original', builtInWorkTypes(), () => clock);
    const run = jobRun('lo-job', 'sum', { kind: 'inline', items: [1, 2, 3, 4] }, { chunkSize: 2, attempts: 3, deadlineSeconds: 60 });
    const ledger = ledgerOf(await p.plan(run, T0));
    const first = (await p.drainMessages()).sort((a, b) => (decodeQueueMessage(a.messageText) as WorkItemMessage).chunk - (decodeQueueMessage(b.messageText) as WorkItemMessage).chunk);
    assert.equal(await p.deliver(first[0] ?? assert.fail()), 'written');
    // Chunk 1's worker is slow: it claimed at t0 and is still running at t0 + 61 s.
    await p.store.chunks.claimChunk('lo-job', 1, 1, { claimedAt: clock.toISOString(), claimedBy: 'slow-worker', dequeueCount: 1 });
    const step = await p.step(run, { chunkCount: 2, itemCount: 4 }, ledger, new Date(t0 + 61_000).toISOString());
    assert.deepEqual([step.finished, step.resent, step.ledger.highestDispatch], [1, 1, 2]);
    const [copy] = await p.drainMessages();
    // The slow original finishes first, then the copy arrives.
    clock = new Date(t0 + 70_000);
    assert.equal(await p.deliver(first[1] ?? assert.fail()), 'written');
    assert.equal(await p.deliver(copy ?? assert.fail()), 'duplicate');
    const summary = await p.activities.aggregate({ run, chunkCount: 2, itemCount: 4, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.deepEqual(summary.result, { count: 4, sum: 10, min: 1, max: 4 });
    assert.equal((await p.store.chunks.readChunkResult('lo-job', 1))?.dispatch, 1);
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
    const p = await jobPipeline('yield', builtInWorkTypes().register(counting), undefined, 120);
    const run = jobRun('yield-job', 'counting', { kind: 'inline', items: Array.from({ length: 120 }, () => 0) }, { chunkSize: 1 });
    await p.plan(run);
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
    await p.plan(run);
    for (const m of await p.drainMessages()) await p.deliver(m);
    const listing = await p.store.chunks.listJob('lp-job');
    assert.equal(listing.results[0]?.partial, undefined, 'the partial did not fit metadata');
    const summary = await p.activities.aggregate({ run, chunkCount: 1, itemCount: 1, cancelled: false });
    assert.equal(summary.status, 'completed');
    assert.ok(summary.result !== undefined, 'the finished result (top 10 words) is small');
    assert.equal((summary.result as { distinctWords: number }).distinctWords, 1_500);
  });
});

async function eventuallyClaim(p: Awaited<ReturnType<typeof jobPipeline>>, jobId: string): Promise<{ beatAt?: string }> {
  for (let i = 0; i < 100; i++) {
    const claim = (await p.store.chunks.listJob(jobId)).claims[0];
    if (claim?.beatAt !== undefined) return claim;
    await new Promise((r) => setTimeout(r, 50));
  }
  return assert.fail('no claim with a heartbeat');
}

const T0 = new Date('2026-03-01T10:00:00.000Z');

function at(seconds: number): string {
  return new Date(T0.getTime() + seconds * 1000).toISOString();
}

function chunkOf(m: { messageText: string }): number {
  return (decodeQueueMessage(m.messageText) as WorkItemMessage).chunk;
}

function ledgerOf(planned: PlanOutcome): DispatchLedger {
  if (!planned.ok) return assert.fail(`not planned: ${JSON.stringify(planned)}`);
  return planned.ledger;
}

/** A plan outcome without its ledger. */
function counts(planned: PlanOutcome): unknown {
  if (!planned.ok) return planned;
  const { ledger: _ledger, ...rest } = planned;
  return rest;
}

/** The names of the job's staged input blobs (`jobs/<jobId>/input/`). */
async function inputBlobs(p: Awaited<ReturnType<typeof jobPipeline>>, jobId: string): Promise<string[]> {
  const names: string[] = [];
  for await (const b of p.blobs.getContainerClient(p.store.containerName).listBlobsFlat({ prefix: `jobs/${jobId}/input/` })) names.push(b.name);
  return names;
}
