/**
 * LandedResults (results written in this process wake a step of their job waiting here) and the
 * step's use of it: a step that has sent every chunk looks again as soon as the results it waits for
 * have landed in this process, and at its own poll otherwise.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ChunkDispatcher, DISPATCH_DEFAULTS } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { emptyLedger } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { LandedResults } from '../../../../shared/jobs/dispatch/LandedResults';
import { createLogger } from '../../../../shared/observability/log';
import { MemoryPipeline } from '../support/MemoryPipeline';

describe('LandedResults', () => {
  it('counts a job\'s results from when a watch begins, and wakes a wait once its target is reached', async () => {
    const landed = new LandedResults();
    landed.landed('a'); // nobody watches: dropped
    const watch = landed.watch('a');
    assert.equal(watch.count(), 0);
    const started = performance.now();
    const waited = watch.until(2, 5_000);
    landed.landed('b');
    landed.landed('a');
    assert.equal(watch.count(), 1);
    landed.landed('a');
    await waited;
    assert.ok(performance.now() - started < 1_000, 'woken, not timed out');
    assert.equal(watch.count(), 2);
    await watch.until(2, 5_000); // already reached: at once
    watch.close();
  });

  it('a wait ends after its time when the results do not come', async () => {
    const watch = new LandedResults().watch('a');
    const started = performance.now();
    await watch.until(1, 30);
    assert.ok(performance.now() - started >= 25);
    watch.close();
  });

  it('keeps nothing for a job once its last watch closes (a later watch starts from 0)', () => {
    const landed = new LandedResults();
    const one = landed.watch('a');
    const two = landed.watch('a');
    landed.landed('a');
    one.close();
    landed.landed('a');
    assert.equal(two.count(), 2);
    two.close();
    landed.landed('a');
    assert.equal(landed.watch('a').count(), 0);
  });
});

describe('ChunkDispatcher.step with LandedResults (real time)', () => {
  const job = { jobId: 'lr', workType: 'sum', epoch: 1, options: { chunkSize: 1, attempts: 3, deadlineSeconds: 300 } };

  async function run(signal: boolean): Promise<{ sawAtMs: number; done: number }> {
    const store = new MemoryPipeline(() => Date.now());
    const landed = new LandedResults();
    let sawAt = 0;
    const dispatcher = new ChunkDispatcher({
      chunks: {
        chunkResultExists: (j, c) => store.chunkResultExists(j, c),
        writeChunkResult: (r) => store.writeChunkResult(r),
        isCancelled: (j) => store.isCancelled(j),
        claimChunk: (j, c, d, k) => store.claimChunk(j, c, d, k),
        beatClaim: (j, c, d, b) => store.beatClaim(j, c, d, b),
        writeChunkItems: (j, c, i) => store.writeChunkItems(j, c, i),
        readChunkItems: (n) => store.readChunkItems(n),
        observeChunks: async (j, c, w) => {
          const seen = await store.observeChunks(j, c, w);
          if (store.results.has('lr/0') && sawAt === 0) sawAt = performance.now();
          return seen;
        },
      },
      queue: store,
      items: store,
      policy: { ...DISPATCH_DEFAULTS, window: 8 },
      logger: createLogger('test', () => undefined),
      instanceId: 'test',
      landed,
    });
    store.stage('lr', [1], 1);
    const first = await dispatcher.pass({ job, chunkCount: 1, itemCount: 1, ledger: emptyLedger(1, 1), at: new Date().toISOString() });
    const began = performance.now();
    // The job's one chunk is done 40 ms into the step, by a worker of this process (or of another).
    const worker = new Promise<void>((resolve) =>
      setTimeout(() => {
        void store
          .writeChunkResult({ jobId: 'lr', chunk: 0, status: 'ok', itemCount: 1, itemsFailed: 0, partial: 1, itemErrors: [], attempt: 1, dispatch: 1, writtenBy: 'w', writtenAt: '' })
          .then(() => {
            if (signal) landed.landed('lr');
            resolve();
          });
      }, 40),
    );
    const out = await dispatcher.step({ job, chunkCount: 1, itemCount: 1, ledger: first.ledger, at: new Date().toISOString() });
    await worker;
    return { sawAtMs: sawAt - began, done: out.ledger.progress.chunks.done };
  }

  it('sees a result written in this process as soon as it lands, and one written elsewhere at its next poll (250 ms)', async () => {
    const here = await run(true);
    assert.equal(here.done, 1);
    assert.ok(here.sawAtMs < 200, `the step saw the result ${Math.round(here.sawAtMs)} ms in (its quiet poll is 250 ms)`);
    const elsewhere = await run(false);
    assert.equal(elsewhere.done, 1);
    assert.ok(elsewhere.sawAtMs >= 245, `no signal: seen at the poll, ${Math.round(elsewhere.sawAtMs)} ms in`);
  });
});
