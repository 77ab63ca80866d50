/**
 * LandedResults (results written in this process wake a step of their job waiting here) and the
 * step's use of it: a step that has sent every chunk looks again as soon as the results it waits for
 * have landed in this process, and at its own poll otherwise; and it reads none of the results that
 * landed here.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ChunkDispatcher, DISPATCH_DEFAULTS, type StepOutcome } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { emptyLedger } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { LandedResults } from '../../../../shared/jobs/dispatch/LandedResults';
import { resultEntryOf } from '../../../../shared/jobs/store/ChunkBlobs';
import { type ChunkResult } from '../../../../shared/jobs/store/JobStore';
import { createLogger } from '../../../../shared/observability/log';
import { MemoryPipeline } from '../support/MemoryPipeline';

/** A chunk's result as a worker writes it. */
function result(jobId: string, chunk: number, partial: ChunkResult['partial'] = 1): ChunkResult {
  return { jobId, chunk, status: 'ok', itemCount: 1, itemsFailed: 0, partial, itemErrors: [], attempt: 1, dispatch: 1, writtenBy: 'w', writtenAt: '' };
}

describe('LandedResults', () => {
  it('counts a job\'s results from when a watch begins, and wakes a wait once its target is reached', async () => {
    const landed = new LandedResults();
    landed.landed(result('a', 0)); // nobody watches: dropped
    const watch = landed.watch('a');
    assert.equal(watch.count(), 0);
    const started = performance.now();
    const waited = watch.until(2, 5_000);
    landed.landed(result('b', 0));
    landed.landed(result('a', 1));
    assert.equal(watch.count(), 1);
    landed.landed(result('a', 2));
    await waited;
    assert.ok(performance.now() - started < 1_000, 'woken, not timed out');
    assert.equal(watch.count(), 2);
    assert.deepEqual(watch.results().map((e) => e.chunk), [1, 2]);
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
    landed.landed(result('a', 0));
    one.close();
    landed.landed(result('a', 1));
    assert.equal(two.count(), 2);
    two.close();
    landed.landed(result('a', 2));
    assert.equal(landed.watch('a').count(), 0);
  });

  it('gives each result the entry a read of its stored metadata answers (a partial too big for metadata left out, as there)', () => {
    const landed = new LandedResults();
    const watch = landed.watch('a');
    const small = result('a', 3, { sum: 7 });
    const big = { ...result('a', 4, { text: 'x'.repeat(8 * 1024) }), status: 'failed' as const, itemsFailed: 1, error: { code: 'CHUNK_FAILED', message: 'no' } };
    landed.landed(small);
    landed.landed(big);
    assert.deepEqual(watch.results(), [
      { chunk: 3, status: 'ok', itemCount: 1, itemsFailed: 0, partial: { sum: 7 } },
      { chunk: 4, status: 'failed', itemCount: 1, itemsFailed: 1, errorCode: 'CHUNK_FAILED' },
    ]);
    assert.deepEqual(watch.results(), [resultEntryOf(small), resultEntryOf(big)]);
    watch.close();
  });
});

describe('ChunkDispatcher.step with LandedResults (real time)', () => {
  const job = { jobId: 'lr', workType: 'sum', epoch: 1, options: { chunkSize: 1, attempts: 3, deadlineSeconds: 300 } };

  interface Run {
    readonly endedAtMs: number;
    readonly done: number;
    readonly cancelled: boolean;
    /** Chunks whose result the step read (metadata or listing) once it was stored. */
    readonly readAfterWrite: number;
    readonly landed: StepOutcome['landed'];
  }

  /**
   * A job of `chunks` chunks, all sent; each is done 40 ms into the step (chunk i at 40 + 360 i ms: one poll, 250 ms, between two) by
   * a worker of this process when `here(i)`, else of another; `cancelAt`: the job is cancelled just
   * before that chunk is done.
   */
  async function run(chunks: number, here: (chunk: number) => boolean, cancelAt?: number): Promise<Run> {
    const store = new MemoryPipeline(() => Date.now());
    const landed = new LandedResults();
    let readAfterWrite = 0;
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
          readAfterWrite += c.filter((chunk) => store.results.has(`lr/${chunk}`)).length;
          return store.observeChunks(j, c, w);
        },
      },
      queue: store,
      items: store,
      policy: { ...DISPATCH_DEFAULTS, window: 8 },
      logger: createLogger('test', () => undefined),
      instanceId: 'test',
      landed,
    });
    store.stage('lr', Array.from({ length: chunks }, () => 1), 1);
    const at = (): string => new Date().toISOString();
    const first = await dispatcher.pass({ job, chunkCount: chunks, itemCount: chunks, ledger: emptyLedger(chunks, chunks), at: at() });
    const began = performance.now();
    const workers = Array.from(
      { length: chunks },
      (_, chunk) =>
        new Promise<void>((resolve) =>
          setTimeout(() => {
            if (chunk === cancelAt) store.cancelled.add('lr');
            void store.writeChunkResult(result('lr', chunk)).then(() => {
              if (here(chunk)) landed.landed(result('lr', chunk));
              resolve();
            });
          }, 40 + 360 * chunk),
        ),
    );
    const out = await dispatcher.step({ job, chunkCount: chunks, itemCount: chunks, ledger: first.ledger, at: at() });
    const endedAtMs = performance.now() - began;
    await Promise.all(workers);
    return { endedAtMs, done: out.ledger.progress.chunks.done, cancelled: out.cancelled, readAfterWrite, landed: out.landed };
  }

  it('ends as soon as a result written in this process lands, without reading it; one written elsewhere is read at its next poll (250 ms)', async () => {
    const here = await run(1, () => true);
    assert.equal(here.done, 1);
    assert.ok(here.endedAtMs < 200, `the step ended ${Math.round(here.endedAtMs)} ms in (its quiet poll is 250 ms)`);
    assert.equal(here.readAfterWrite, 0, 'the result that landed here was not read');
    assert.deepEqual(here.landed, [resultEntryOf(result('lr', 0))], 'the aggregation gets the entry a read of its metadata answers');
    const elsewhere = await run(1, () => false);
    assert.equal(elsewhere.done, 1);
    assert.ok(elsewhere.endedAtMs >= 245, `no signal: seen at the poll, ${Math.round(elsewhere.endedAtMs)} ms in`);
    assert.equal(elsewhere.readAfterWrite, 1, 'read once, at the poll that found it');
  });

  it('still sees a cancel when every result it waits for landed here', async () => {
    const out = await run(1, () => true, 0);
    assert.equal(out.cancelled, true, 'the cancel marker is read although the result was not');
    assert.equal(out.readAfterWrite, 0);
  });

  it('hands the aggregation every result its passes saw, read or landed here, not only the last pass\'s', async () => {
    // Chunk 0 is written elsewhere (read by the poll at 250 ms), chunk 1 here at 400 ms (not read).
    const out = await run(2, (chunk) => chunk === 1);
    assert.equal(out.done, 2);
    assert.deepEqual(out.landed?.map((e) => e.chunk).sort(), [0, 1]);
    assert.equal(out.readAfterWrite, 1, 'chunk 0 read once, chunk 1 not at all');
  });
});
