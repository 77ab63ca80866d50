/**
 * What one chunk costs a worker in storage calls, on the in-memory pipeline (the Azurite behaviour is
 * in test/integration/jobs/worker/workItemsWorker.test.ts): a first delivery of a first send that finishes
 * quickly costs the result's create and, once a second per job, the cancel marker's read; a
 * redelivery or a re-sent chunk checks for an existing result first; a slow chunk is claimed, then
 * beats on its claim.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type WorkItemMessage } from '../../../../shared/jobs/messageCodec';
import { CANCEL_CHECK_MS, WorkItemProcessor } from '../../../../shared/jobs/worker/WorkItemProcessor';
import { createLogger } from '../../../../shared/observability/log';
import { type SumPartial, sumWorkType } from '../../../../shared/worktypes/sumWorkType';
import { type Json, type WorkType } from '../../../../shared/worktypes/WorkType';
import { builtInWorkTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { MemoryPipeline } from '../support/MemoryPipeline';

const T0 = Date.parse('2026-01-01T00:00:00Z');

function message(chunk: number, dispatch = 1, workType = 'sum'): WorkItemMessage {
  return { v: 1, jobId: 'cost', chunk, workType, firstIndex: chunk * 2, itemCount: 2, attempts: 3, epoch: 1, dispatch, items: [chunk, chunk + 1] };
}

function worker(
  store: MemoryPipeline,
  clock: { t: number },
  extra: { claimAfterMs?: number; slowMs?: number; also?: WorkType<SumPartial, Json> } = {},
): WorkItemProcessor {
  const slow: WorkType<SumPartial, Json> = {
    ...sumWorkType,
    name: 'slow',
    process: async (item, ctx) => {
      await new Promise((r) => setTimeout(r, extra.slowMs ?? 0));
      return sumWorkType.process(item, ctx);
    },
  };
  return new WorkItemProcessor({
    store,
    inputs: {
      blob: () => {
        throw new Error('the sum work type reads no blobs');
      },
    },
    registry: extra.also === undefined ? builtInWorkTypes().register(slow) : builtInWorkTypes().register(slow).register(extra.also),
    logger: createLogger('test', () => undefined),
    instanceId: 'w',
    now: () => new Date(clock.t),
    ...(extra.claimAfterMs === undefined ? {} : { claimAfterMs: extra.claimAfterMs }),
  });
}

function callsOf(store: MemoryPipeline): Record<string, number> {
  const calls = Object.fromEntries(store.calls);
  store.calls.clear();
  return calls;
}

describe('WorkItemProcessor: storage calls per chunk', () => {
  it('a quick first delivery of a first send: the result only, and the cancel marker once per CANCEL_CHECK_MS (5 s) per job', async () => {
    const clock = { t: T0 };
    const store = new MemoryPipeline(() => clock.t);
    const w = worker(store, clock);
    assert.equal(await w.handle(message(0), { dequeueCount: 1 }), 'written');
    assert.deepEqual(callsOf(store), { isCancelled: 1, writeChunkResult: 1 });
    assert.equal(await w.handle(message(1), { dequeueCount: 1 }), 'written');
    assert.deepEqual(callsOf(store), { writeChunkResult: 1 }, 'the cancel marker was read under 5 s ago');
    store.cancelled.add('cost');
    clock.t += CANCEL_CHECK_MS;
    assert.equal(await w.handle(message(2), { dequeueCount: 1 }), 'cancelled');
    assert.deepEqual(callsOf(store), { isCancelled: 1 });
    assert.equal(store.claims.size, 0, 'nothing ran long enough to be claimed');
  });

  it('asks a store that keeps its own reads of the marker (the app\'s) every time: a cancel is never seen twice as late', async () => {
    const clock = { t: T0 };
    const store = Object.assign(new MemoryPipeline(() => clock.t), { cancelsCached: true });
    const w = worker(store, clock);
    assert.equal(await w.handle(message(0), { dequeueCount: 1 }), 'written');
    store.cancelled.add('cost');
    assert.equal(await w.handle(message(1), { dequeueCount: 1 }), 'cancelled', 'the store\'s answer is taken as it is');
    assert.deepEqual(callsOf(store), { isCancelled: 2, writeChunkResult: 1 });
  });

  it('a redelivery or a re-sent chunk checks for its result before any work', async () => {
    const clock = { t: T0 };
    const store = new MemoryPipeline(() => clock.t);
    const w = worker(store, clock);
    assert.equal(await w.handle(message(0), { dequeueCount: 1 }), 'written');
    callsOf(store);
    assert.equal(await w.handle(message(0), { dequeueCount: 2 }), 'duplicate');
    assert.deepEqual(callsOf(store), { chunkResultExists: 1 });
    assert.equal(await w.handle(message(0, 2), { dequeueCount: 1 }), 'duplicate');
    assert.deepEqual(callsOf(store), { chunkResultExists: 1 });
    // A copy sent again in its round (unclaimed: its fast failure wrote no claim) says so: checked first.
    assert.equal(await w.handle({ ...message(0), resent: true }, { dequeueCount: 1 }), 'duplicate');
    assert.deepEqual(callsOf(store), { chunkResultExists: 1 });
    // A first send delivered twice (a retried step sent it again): worked again, its result discarded.
    assert.equal(await w.handle(message(0), { dequeueCount: 1 }), 'duplicate');
    assert.deepEqual(callsOf(store), { writeChunkResult: 1 });
  });

  it('a chunk still running after claimAfterMs is claimed, with its start as the claim time', async () => {
    const clock = { t: T0 };
    const store = new MemoryPipeline(() => clock.t);
    const w = worker(store, clock, { claimAfterMs: 30, slowMs: 150 });
    const handled = w.handle(message(4, 1, 'slow'), { dequeueCount: 1 });
    // The work began at T0; the claim is written 30 ms later, when the clock says a minute on.
    await new Promise((r) => setTimeout(r, 5));
    clock.t += 60_000;
    assert.equal(await handled, 'written');
    const claim = [...store.claims.values()][0];
    assert.deepEqual([store.claims.size, claim?.chunk, claim?.dispatch, claim?.claimedBy], [1, 4, 1, 'w']);
    assert.equal(claim?.claimedAt, new Date(T0).toISOString(), 'the deadline runs from when the work began');
    assert.equal(claim?.beatAt, new Date(T0 + 60_000).toISOString());
    assert.equal(store.calls.get('claimChunk'), 1);
  });

  it('a failure faster than the first claim, not the last attempt, leaves a claim before the message goes back to the queue', async () => {
    const clock = { t: T0 };
    const store = new MemoryPipeline(() => clock.t);
    const failing: WorkType<SumPartial, Json> = {
      ...sumWorkType,
      name: 'fails',
      process: () => {
        throw new Error('backend refused');
      },
    };
    const w = worker(store, clock, { also: failing });
    await assert.rejects(w.handle(message(3, 1, 'fails'), { dequeueCount: 1 }), /backend refused/);
    const claim = [...store.claims.values()][0];
    // Without it the dispatcher takes the chunk for unclaimed (15 s) and sends a copy beside the
    // queue's redelivery (10 s visibility, then a poll): a third call of a chunk allowed two attempts.
    assert.deepEqual([store.claims.size, claim?.chunk, claim?.dispatch, claim?.beatAt], [1, 3, 1, new Date(T0).toISOString()]);
    assert.equal(store.results.size, 0, 'the attempt records nothing: the queue delivers it again');
    callsOf(store);
    // The last attempt records the failure; the claim it leaves is its own delivery's.
    assert.equal(await w.handle(message(3, 1, 'fails'), { dequeueCount: 3 }), 'failed_recorded');
    assert.equal(store.results.get('cost/3')?.status ?? [...store.results.values()][0]?.status, 'failed');
  });
});
