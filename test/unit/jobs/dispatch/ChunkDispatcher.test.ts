/**
 * The dispatcher on the in-memory pipeline and a virtual clock: the window, fair share between jobs,
 * cancel, and recovery from workers killed before or after claiming, with the queue's 10-minute
 * receive visibility of the real host.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ChunkDispatcher, DISPATCH_DEFAULTS, LATE_CALL_MS, nextPollMs, STEP_WAIT } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { type DispatchPolicy, emptyLedger } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { type ChunkStore } from '../../../../shared/jobs/dispatch/PipelineStore';
import { JOB_LIMITS } from '../../../../shared/jobs/jobLimits';
import { createLogger } from '../../../../shared/observability/log';
import { MemoryPipeline } from '../support/MemoryPipeline';
import { SimCluster, type SimJob } from '../support/SimCluster';

const range = (n: number): number[] => Array.from({ length: n }, (_, i) => i + 1);
const sumTo = (n: number): number => (n * (n + 1)) / 2;
/** The shipped lease duration: the bar is completion within L + 30 s of a kill. */
const L_MS = 15_000;

function cluster(policy: Partial<DispatchPolicy> = {}): SimCluster {
  return new SimCluster({ ...DISPATCH_DEFAULTS, ...policy });
}

describe('ChunkDispatcher: the window', () => {
  it('puts the first window on the queue at the plan step and never more than the window of one job in flight', async () => {
    const sim = cluster({ window: 16 });
    sim.addWorker('w1', 8, () => 200);
    sim.addWorker('w2', 8, () => 300);
    const job = await sim.submit('big', range(10_000), 10);
    assert.equal(sim.store.depth('big'), 16, 'the first window is queued by the plan step itself');
    let maxDepth = 0;
    await sim.runUntil(600_000, () => {
      maxDepth = Math.max(maxDepth, sim.store.depth('big'));
      return job.doneAt !== undefined;
    });
    assert.ok(job.doneAt !== undefined, 'the job finished');
    assert.ok(maxDepth <= 16, `at most the window queued (saw ${maxDepth})`);
    assert.ok(job.maxInFlight <= 16);
    assert.equal(sim.exactSum('big'), sumTo(10_000));
    assert.equal(job.ledger.progress.chunks.done, 1000);
    assert.equal(sim.store.results.size, 1000);
  });

  it('shows progress from the first result, long before the job ends', async () => {
    const sim = cluster({ window: 8 });
    sim.addWorker('w1', 8, () => 1000);
    const job = await sim.submit('j', range(400), 10);
    await sim.runUntil(3_000, () => job.ledger.progress.chunks.done > 0);
    assert.ok(job.ledger.progress.chunks.done > 0 && sim.t <= 2_000, `first result counted at ${sim.t} ms`);
    assert.equal(job.doneAt, undefined);
  });

  it('a chunk too big for a queue message travels as a blob its message names', async () => {
    const sim = cluster({ window: 2 });
    sim.addWorker('w1', 8, () => 10);
    const big = 'x'.repeat(JOB_LIMITS.maxMessageJsonBytes);
    sim.store.stage('blobby', [big], 1);
    const step = await sim.dispatcher.pass({
      job: { jobId: 'blobby', workType: 'sum', epoch: 1, options: { chunkSize: 1, attempts: 3, deadlineSeconds: 300 } },
      chunkCount: 1, itemCount: 1, ledger: { next: 0, inFlight: [], progress: { chunks: { total: 1, done: 0, failed: 0 }, items: { total: 1, done: 0, failed: 0 } }, highestDispatch: 1 },
      at: new Date(0).toISOString(),
    });
    assert.equal(step.sent, 1);
    const message = sim.store.sent[0];
    assert.equal(message?.items, undefined);
    assert.deepEqual(await sim.store.readChunkItems(message?.itemsRef ?? ''), [big]);
  });
});

describe('ChunkDispatcher: fair share and cancel', () => {
  async function smallJobLatency(window: number, behindBig: boolean): Promise<number> {
    const sim = cluster({ window });
    sim.addWorker('w1', 8, () => 1000);
    sim.addWorker('w2', 8, () => 1000);
    if (behindBig) {
      await sim.submit('big', range(100_000), 10);
      await sim.runUntil(5_000, () => false);
    }
    const small = await sim.submit('small', range(4), 2);
    await sim.runUntil(sim.t + 3_600_000, () => small.doneAt !== undefined);
    assert.equal(sim.exactSum('small'), 10);
    return (small.doneAt ?? Infinity) - small.submittedAt;
  }

  it('a small job behind a 10,000-chunk job finishes in about its time alone plus a few chunk durations', async () => {
    const alone = await smallJobLatency(64, false);
    const behind = await smallJobLatency(64, true);
    // Two workers of 8 (up to 12 each) take 1 s per chunk: ahead of the small job are at most the big
    // job's window of 64 chunks, about 3 chunk durations.
    assert.ok(behind <= alone + 5_000, `alone ${alone} ms, behind the big job ${behind} ms`);
    // Without a window (every chunk queued at once, as before) it waits for the whole backlog.
    const unwindowed = await smallJobLatency(10_000, true);
    assert.ok(unwindowed > 100_000, `without a window it waited ${unwindowed} ms`);
  });

  it('ten concurrent jobs interleave: each keeps its window, all finish exactly, none waits for the others to end', async () => {
    const sim = cluster({ window: 16 });
    for (let w = 0; w < 3; w++) sim.addWorker(`w${w}`, 8, () => 500);
    const jobs: SimJob[] = [];
    for (let j = 0; j < 10; j++) jobs.push(await sim.submit(`j${j}`, range(2_000), 10));
    let maxDepth = 0;
    await sim.runUntil(3_600_000, () => {
      maxDepth = Math.max(maxDepth, sim.store.depth());
      return jobs.every((j) => j.doneAt !== undefined);
    });
    for (const [i, j] of jobs.entries()) {
      assert.ok(j.doneAt !== undefined, `job ${i} finished`);
      assert.equal(sim.exactSum(`j${i}`), sumTo(2_000));
      assert.ok(j.maxInFlight <= 16);
    }
    assert.ok(maxDepth <= 160, `at most ten windows queued (saw ${maxDepth})`);
    // Shared fairly: the first and the last to finish are close, not one after the other.
    const ends = jobs.map((j) => j.doneAt ?? 0).sort((a, b) => a - b);
    assert.ok((ends[0] ?? 0) > 0.8 * (ends[9] ?? 0), `first job done at ${ends[0]} ms, last at ${ends[9]} ms`);
  });

  it('a cancel stops dispatch at the next step, and leaves at most a window of messages to skip', async () => {
    const sim = cluster({ window: 32 });
    sim.addWorker('w1', 8, () => 500);
    const job = await sim.submit('c', range(100_000), 10);
    await sim.runUntil(10_000, () => false);
    const sentBefore = sim.store.sent.length;
    sim.cancel('c');
    await sim.runUntil(sim.t + 5_000, () => job.doneAt !== undefined);
    assert.equal(job.cancelled, true);
    assert.ok(sim.store.sent.length === sentBefore, 'nothing sent after the cancel marker');
    assert.ok(sim.store.depth('c') <= 32, `left ${sim.store.depth('c')} messages for workers to skip`);
  });
});

describe('ChunkDispatcher: recovery from a dead worker (the host holds a received message for 10 minutes)', () => {
  for (const batchSize of [1, 8, 32]) {
    it(`a worker SIGKILLed mid-chunk, batch size ${batchSize}: the job completes exactly within L + 30 s of the kill`, async () => {
      const sim = cluster();
      // Chunks of 5 s: long enough that workers claim them (after 2 s) and beat on the claims.
      const victim = sim.addWorker('victim', batchSize, () => 5000);
      sim.addWorker('survivor-1', batchSize, () => 5000);
      sim.addWorker('survivor-2', batchSize, () => 5000);
      // Work for a few rounds of the three workers, so what the kill costs is not hidden by the job's length.
      const chunks = 6 * batchSize;
      const job = await sim.submit('k', range(chunks * 10), 10);
      await sim.runUntil(60_000, () => victim.held.filter((h) => h.claimedAt !== undefined).length === batchSize);
      assert.ok(victim.held.some((h) => h.claimedAt !== undefined), 'the victim holds claimed chunks');
      victim.alive = false;
      const killedAt = sim.t;
      await sim.runUntil(killedAt + 15 * 60_000);
      assert.ok(job.doneAt !== undefined, 'the job finished');
      const after = (job.doneAt ?? 0) - killedAt;
      assert.ok(after <= L_MS + 30_000, `completed ${after} ms after the kill`);
      assert.equal(sim.exactSum('k'), sumTo(chunks * 10));
      assert.equal(job.ledger.progress.chunks.done, chunks);
      assert.equal(job.ledger.progress.chunks.failed, 0);
    });
  }

  it('a worker that dies after receiving, before claiming: its chunks are seen as unclaimed and sent again in seconds', async () => {
    const sim = cluster();
    const job = await sim.submit('u', range(200), 10);
    const victim = sim.addWorker('victim', 32, () => 500);
    victim.dieOnReceive = true;
    await sim.runUntil(1_000, () => !victim.alive);
    assert.equal(victim.alive, false);
    sim.addWorker('late', 8, () => 500);
    const diedAt = sim.t;
    await sim.runUntil(diedAt + 15 * 60_000);
    const after = (job.doneAt ?? Infinity) - diedAt;
    assert.ok(after <= L_MS + 30_000, `completed ${after} ms after the death`);
    assert.equal(sim.exactSum('u'), sumTo(200));
    assert.equal(job.ledger.highestDispatch, 1, 'unclaimed re-sends are not attempts');
    // Copies sent again say so (the worker checks for a result before working them); first sends do not.
    const copies = sim.store.sent.filter((m) => m.resent === true);
    assert.ok(copies.length > 0 && copies.length < sim.store.sent.length, `${copies.length} of ${sim.store.sent.length} marked resent`);
    assert.equal(sim.store.sent.filter((m) => m.resent !== true).length, 20, 'each of the 20 chunks sent once unmarked');
  });

  it('a chunk whose every worker dies is recorded failed after its attempts, and the job still ends', async () => {
    const sim = cluster({ window: 4 });
    // Every worker that takes chunk 3 dies holding it; the rest is quick.
    const killers = new Set<string>();
    const job = await sim.submit('f', range(40), 10, 2);
    for (let i = 0; i < 4; i++) sim.addWorker(`w${i}`, 1, (_job, chunk) => (chunk === 3 ? 10 * 60_000 : 100));
    await sim.runUntil(15 * 60_000, () => {
      for (const w of sim.workers) {
        if (w.alive && w.held.some((h) => h.m.message.chunk === 3 && h.claimedAt !== undefined && !killers.has(w.id))) {
          killers.add(w.id);
          w.alive = false;
        }
      }
      return job.doneAt !== undefined;
    });
    assert.ok(job.doneAt !== undefined);
    assert.deepEqual(job.ledger.progress.chunks, { total: 4, done: 3, failed: 1 });
    assert.equal(sim.store.results.get('f/3')?.error?.code, 'DEADLINE_EXCEEDED');
    assert.equal(killers.size, 2, 'one worker per attempt');
  });

  it('a saturated queue costs a few duplicate messages, no lost attempt and no failed chunk', async () => {
    const sim = cluster({ window: 64 });
    sim.addWorker('slow', 1, () => 2_000);
    const job = await sim.submit('s', range(640), 10);
    await sim.runUntil(30 * 60_000);
    assert.ok(job.doneAt !== undefined);
    assert.deepEqual(job.ledger.progress.chunks, { total: 64, done: 64, failed: 0 });
    assert.equal(sim.exactSum('s'), sumTo(640));
    const duplicates = sim.store.sent.length - 64;
    // Each waiting chunk is re-sent at 15, 45, 105 s, ... of waiting: logarithmic in the wait.
    assert.ok(duplicates <= 64 * 3, `${duplicates} duplicate messages`);
  });
});

describe('ChunkDispatcher.step: a long poll', () => {
  /** A dispatcher whose sleeps move a virtual clock, and which runs `during(t)` at each wake-up. */
  function polling(during: (t: number, store: MemoryPipeline) => Promise<void>) {
    let t = 0;
    const store = new MemoryPipeline(() => t);
    const passes: number[] = [];
    const deps: ConstructorParameters<typeof ChunkDispatcher>[0] = {
      chunks: { ...bind(store), observeChunks: async (jobId, chunks, withClaims) => (passes.push(t), store.observeChunks(jobId, chunks, withClaims)) },
      queue: store,
      items: store,
      // The jobs below are sized against a window of 64 (some chunks left to send after the first window).
      policy: { ...DISPATCH_DEFAULTS, window: 64 },
      logger: createLogger('test', () => undefined),
      instanceId: 'test',
      now: () => new Date(t),
      sleep: async (ms) => {
        t += ms;
        await during(t, store);
      },
    };
    const dispatcher = new ChunkDispatcher(deps);
    return { store, passes, dispatcher, now: () => t, deps };
  }

  function dispatcherDeps(p: { deps: ConstructorParameters<typeof ChunkDispatcher>[0] }): ConstructorParameters<typeof ChunkDispatcher>[0] {
    return p.deps;
  }

  function bind(store: MemoryPipeline): ChunkStore {
    return {
      chunkResultExists: (j, c) => store.chunkResultExists(j, c),
      writeChunkResult: (r) => store.writeChunkResult(r),
      isCancelled: (j) => store.isCancelled(j),
      claimChunk: (j, c, d, k) => store.claimChunk(j, c, d, k),
      beatClaim: (j, c, d, b) => store.beatClaim(j, c, d, b),
      writeChunkItems: (j, c, i) => store.writeChunkItems(j, c, i),
      readChunkItems: (n) => store.readChunkItems(n),
      observeChunks: (j, c, w) => store.observeChunks(j, c, w),
    };
  }

  const job = { jobId: 'lp', workType: 'sum', epoch: 1, options: { chunkSize: 1, attempts: 3, deadlineSeconds: 300 } };

  /** A worker finishing chunk `chunk` of job `lp` (one item, ok). */
  const finish = (store: MemoryPipeline, chunk: number): Promise<unknown> =>
    store.writeChunkResult({ jobId: 'lp', chunk, status: 'ok', itemCount: 1, itemsFailed: 0, partial: 1, itemErrors: [], attempt: 1, dispatch: 1, writtenBy: 'w', writtenAt: '' });

  /** Workers that have the job to themselves: every chunk on the queue is done by the next look. */
  const finishAllQueued = async (_t: number, store: MemoryPipeline): Promise<void> => {
    for (const m of store.queue.splice(0)) await finish(store, m.message.chunk);
  };

  /** Workers shared with other jobs: one queued chunk done every `everyMs`, the first at `firstAt`. */
  function finishOneEvery(everyMs: number, firstAt: number): (t: number, store: MemoryPipeline) => Promise<void> {
    let lastAt = firstAt - everyMs;
    return async (t, store) => {
      while (t - lastAt >= everyMs) {
        lastAt += everyMs;
        const m = store.queue.shift();
        if (m === undefined) break;
        await finish(store, m.message.chunk);
      }
    };
  }

  it('after a quiet spell looks again at 250, 500, then every 1,000 ms, and answers once a result lands after 2 s', async () => {
    const p = polling(async (t, store) => {
      if (t >= 2_000 && !store.results.has('lp/0')) {
        await finish(store, 0);
      }
    });
    // More chunks than the window: with every chunk sent the step would wait on for the rest.
    p.store.stage('lp', Array.from({ length: 100 }, () => 1), 1);
    const first = await p.dispatcher.pass({ job, chunkCount: 100, itemCount: 100, ledger: emptyLedger(100, 100), at: new Date(0).toISOString() });
    p.passes.length = 0;
    const out = await p.dispatcher.step({ job, chunkCount: 100, itemCount: 100, ledger: first.ledger, at: new Date(0).toISOString() });
    assert.equal(out.finished, 1);
    assert.deepEqual(p.passes, [0, 250, 750, 1_750, 2_750]);
  });

  it('refills the window as often as results land, down to every 50 ms, and answers after about 2 s', async () => {
    const p = polling(finishAllQueued);
    p.store.stage('lp', Array.from({ length: 1_000 }, () => 1), 1);
    const eight = new ChunkDispatcher({ ...dispatcherDeps(p), policy: { ...DISPATCH_DEFAULTS, window: 8 } });
    const first = await eight.pass({ job, chunkCount: 1_000, itemCount: 1_000, ledger: emptyLedger(1_000, 1_000), at: new Date(0).toISOString() });
    p.passes.length = 0;
    const out = await eight.step({ job, chunkCount: 1_000, itemCount: 1_000, ledger: first.ledger, at: new Date(0).toISOString() });
    // Quiet at first (250 ms); then 8 results per pass where one (an eighth of the window) was the
    // mark: the wait shrinks to 50 ms and stays there until 2 s are up.
    assert.deepEqual(p.passes.slice(0, 4), [0, 250, 300, 350]);
    assert.ok(p.passes.slice(2).every((t, i) => t - (p.passes[i + 1] ?? 0) === STEP_WAIT.minBusyPollMs), `passes at ${p.passes.join(', ')}`);
    assert.equal(p.passes.at(-1), 2_000);
    assert.equal(out.finished, 8 * (p.passes.length - 1), 'a whole window counted and sent again per pass after the first');
    assert.equal(out.ledger.next, 8 + out.finished);
  });

  it('looks less often at a job whose chunks finish slowly (workers shared with other jobs): about once a second', async () => {
    // One result every 250 ms, a 64-chunk window: an eighth of it (8) takes 2 s, so passes stay 1 s apart.
    const p = polling(finishOneEvery(250, 250));
    p.store.stage('lp', Array.from({ length: 1_000 }, () => 1), 1);
    const first = await p.dispatcher.pass({ job, chunkCount: 1_000, itemCount: 1_000, ledger: emptyLedger(1_000, 1_000), at: new Date(0).toISOString() });
    p.passes.length = 0;
    const out = await p.dispatcher.step({ job, chunkCount: 1_000, itemCount: 1_000, ledger: first.ledger, at: new Date(0).toISOString() });
    assert.deepEqual(p.passes, [0, 250, 1_250, 2_000], 'the last pass at the step\'s 2 s, then it answers');
    assert.equal(out.finished, 8);
  });

  it('a late call (asked for over 10 s before it starts: a redelivery, a retry, a resumed repeat) runs one pass and answers', async () => {
    const p = polling(finishAllQueued);
    p.store.stage('lp', Array.from({ length: 1_000 }, () => 1), 1);
    const first = await p.dispatcher.pass({ job, chunkCount: 1_000, itemCount: 1_000, ledger: emptyLedger(1_000, 1_000), at: new Date(0).toISOString() });
    await p.deps.sleep?.(LATE_CALL_MS + 1); // the window's results land meanwhile
    p.passes.length = 0;
    const late = await p.dispatcher.step({ job, chunkCount: 1_000, itemCount: 1_000, ledger: first.ledger, at: new Date(0).toISOString() });
    assert.deepEqual(p.passes, [LATE_CALL_MS + 1], 'one pass, no long poll');
    assert.deepEqual([late.finished, late.sent], [64, 64], 'it still counts and refills once');
    assert.equal(p.dispatcher.isLate(new Date(p.now() - LATE_CALL_MS).toISOString()), false, 'exactly 10 s is not late');
  });

  it('nextPollMs: the time an eighth of the window takes at the rate seen, within 50 ms and 1 s; quiet passes back off', () => {
    const none = { finished: 0, sent: 0, resent: 0, expired: 0 };
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, none, 100, 250), { pollMs: 250, quietMs: 500 });
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, none, 100, 1_000), { pollMs: 1_000, quietMs: 1_000 });
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, { ...none, sent: 64 }, 100, 1_000), { pollMs: 200, quietMs: 250 }, 'sent, no rate yet');
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, { ...none, finished: 2 }, 100, 1_000), { pollMs: 400, quietMs: 250 }, '2 per 100 ms: 8 take 400 ms');
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, { ...none, finished: 8 }, 100, 1_000), { pollMs: 100, quietMs: 200 }, 'then an empty pass waits twice that');
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, { ...none, finished: 32 }, 100, 250).pollMs, 50, 'floored at 50 ms');
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, { ...none, finished: 1 }, 500, 250).pollMs, 1_000, 'capped at 1 s');
    assert.deepEqual(nextPollMs(STEP_WAIT, 2, { ...none, finished: 1 }, 400, 250).pollMs, 400, 'a window under 8 waits for one result');
    assert.deepEqual(nextPollMs(STEP_WAIT, 64, { ...none, finished: 1 }, 100, 250, true).pollMs, 100, 'all sent: the next result is the mark');
  });

  it('once every chunk is sent, looks for the last results at the pace they come, not an eighth of a window later', async () => {
    // 12 chunks, all sent at once; one finishes every 100 ms from 250 ms on.
    const p = polling(finishOneEvery(100, 250));
    p.store.stage('lp', Array.from({ length: 12 }, () => 1), 1);
    const first = await p.dispatcher.pass({ job, chunkCount: 12, itemCount: 12, ledger: emptyLedger(12, 12), at: new Date(0).toISOString() });
    const out = await p.dispatcher.step({ job, chunkCount: 12, itemCount: 12, ledger: first.ledger, at: new Date(0).toISOString() });
    assert.equal(out.ledger.progress.chunks.done, 12);
    // The last result landed at 1,350 ms; an eighth of the 64-chunk window at 10/s would have waited 800 ms more.
    assert.ok(p.now() <= 1_450, `the step saw the last result at ${p.now()} ms`);
  });

  it('once every chunk is sent, waits past its 2 s for the last results (no Durable round trip before the aggregation), up to 5 s', async () => {
    // 40 chunks, all in the first window; one finishes every 100 ms from 250 ms on: the last at 4,150 ms.
    const p = polling(finishOneEvery(100, 250));
    p.store.stage('lp', Array.from({ length: 40 }, () => 1), 1);
    const first = await p.dispatcher.pass({ job, chunkCount: 40, itemCount: 40, ledger: emptyLedger(40, 40), at: new Date(0).toISOString() });
    const out = await p.dispatcher.step({ job, chunkCount: 40, itemCount: 40, ledger: first.ledger, at: new Date(0).toISOString() });
    assert.equal(out.ledger.progress.chunks.done, 40, `done ${out.ledger.progress.chunks.done} of 40 when the step answered at ${p.now()} ms`);
    assert.ok(p.now() <= 4_250, `the step saw the last result at ${p.now()} ms`);

    // With chunks left to send it answers after about 2 s as before (the orchestration records its ledger).
    const q = polling(finishOneEvery(100, 250));
    q.store.stage('lp', Array.from({ length: 100 }, () => 1), 1);
    const open = await q.dispatcher.pass({ job, chunkCount: 100, itemCount: 100, ledger: emptyLedger(100, 100), at: new Date(0).toISOString() });
    await q.dispatcher.step({ job, chunkCount: 100, itemCount: 100, ledger: open.ledger, at: new Date(0).toISOString() });
    assert.equal(q.now(), STEP_WAIT.busyReturnMs);

    // A job whose last chunks never finish (their workers died): the step still answers by 5 s.
    const untilOneSecond = finishOneEvery(100, 250);
    const stuck = polling(async (t, store) => {
      if (t < 1_000) await untilOneSecond(t, store);
    });
    stuck.store.stage('lp', Array.from({ length: 40 }, () => 1), 1);
    const sent = await stuck.dispatcher.pass({ job, chunkCount: 40, itemCount: 40, ledger: emptyLedger(40, 40), at: new Date(0).toISOString() });
    const waited = await stuck.dispatcher.step({ job, chunkCount: 40, itemCount: 40, ledger: sent.ledger, at: new Date(0).toISOString() });
    assert.ok(waited.finished > 0 && waited.ledger.progress.chunks.done < 40);
    assert.equal(stuck.now(), STEP_WAIT.maxWaitMs);
  });

  it('a first window whose caller just read the cancel marker observes nothing before sending; any other pass looks', async () => {
    const p = polling(() => Promise.resolve());
    p.store.stage('lp', [1, 2, 3], 1);
    const sent = await p.dispatcher.pass({ job, chunkCount: 3, itemCount: 3, ledger: emptyLedger(3, 3), at: new Date(0).toISOString() }, undefined, undefined, true);
    assert.deepEqual([sent.sent, p.passes.length], [3, 0], 'the first window read the job\'s chunks before sending');
    // The next pass looks (results and the cancel marker): a cancel since then stops it.
    p.store.cancelled.add('lp');
    const next = await p.dispatcher.pass({ job, chunkCount: 3, itemCount: 3, ledger: sent.ledger, at: new Date(0).toISOString() }, undefined, undefined, true);
    assert.deepEqual([next.cancelled, p.passes.length], [true, 1]);
    // Without the caller's word, a first pass looks too.
    const q = polling(() => Promise.resolve());
    q.store.stage('lp', [1], 1);
    q.store.cancelled.add('lp');
    const refused = await q.dispatcher.pass({ job, chunkCount: 1, itemCount: 1, ledger: emptyLedger(1, 1), at: new Date(0).toISOString() });
    assert.deepEqual([refused.cancelled, refused.sent, q.passes.length], [true, 0, 1]);
  });

  it('answers after its longest wait when nothing changes, and at once when the job is cancelled', async () => {
    const idle = polling(() => Promise.resolve());
    idle.store.stage('lp', [1], 1);
    const first = await idle.dispatcher.pass({ job, chunkCount: 1, itemCount: 1, ledger: emptyLedger(1, 1), at: new Date(0).toISOString() });
    const out = await idle.dispatcher.step({ job, chunkCount: 1, itemCount: 1, ledger: first.ledger, at: new Date(0).toISOString() });
    assert.deepEqual([out.finished, out.sent, out.cancelled], [0, 0, false]);
    assert.ok(idle.now() <= STEP_WAIT.maxWaitMs, `answered at ${idle.now()} ms`);
    assert.ok(idle.now() >= STEP_WAIT.maxWaitMs - STEP_WAIT.maxPollMs);

    const cancelled = polling((t, store) => {
      if (t >= 500) store.cancelled.add('lp');
      return Promise.resolve();
    });
    cancelled.store.stage('lp', [1], 1);
    const started = await cancelled.dispatcher.pass({ job, chunkCount: 1, itemCount: 1, ledger: emptyLedger(1, 1), at: new Date(0).toISOString() });
    const stopped = await cancelled.dispatcher.step({ job, chunkCount: 1, itemCount: 1, ledger: started.ledger, at: new Date(0).toISOString() });
    assert.equal(stopped.cancelled, true);
    assert.equal(cancelled.now(), 750);
  });
});
