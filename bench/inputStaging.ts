/**
 * Benchmark: what planning the largest inputs costs the process that leads. N itemsBlobs of a
 * million 63-character strings (62.9 MiB each, just under the 64 MiB limit) are read at once, in
 * one process where a real LeaseElector (BlobLeaseStore on Azurite, the shipped timing) leads:
 * first by `stageInput` (streamed, sliced, cut into segments), then by the whole-array baseline
 * (download whole, `JSON.parse`, depth check, validate every item: what the planner's `loadItems`
 * did). For each: wall time, the event loop's worst and p99 delay, the elector's renewals, renewal
 * failures and lost terms, and peak memory. Staging runs first so the baseline's memory does not
 * linger into its figures.
 *
 * Run: `npm run bench -- input-staging [--jobs 8]`.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';

import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';

import { loadSettings } from '../shared/config/settings';
import { stageInput } from '../shared/jobs/input/InputStager';
import { BlobInputStore } from '../shared/jobs/input/InputStore';
import { type JobRun } from '../shared/jobs/JobRun';
import { MAX_NESTING_DEPTH, nestingDepthExceeds } from '../shared/jobs/JobSubmission';
import { BlobLeaseStore } from '../shared/leader/BlobLeaseStore';
import { LeaseElector } from '../shared/leader/LeaseElector';
import { memoryLogger } from '../shared/observability/log';
import { builtInWorkTypes } from '../shared/worktypes/WorkTypeRegistry';
import { LARGEST_ITEMS, largestItemsBlobBody } from '../test/support/largestItemsBlob';
import { type Bench } from './index';

const ITEMS = LARGEST_ITEMS;


interface Phase {
  readonly label: string;
  readonly seconds: number;
  readonly maxDelayMs: number;
  readonly p99DelayMs: number;
  readonly renewals: number;
  readonly renewFailures: number;
  readonly lost: number;
  readonly peakRssMiB: number;
  readonly peakHeapMiB: number;
  readonly error?: string;
}

/** The whole-array read the planner did before staging (kept here as the baseline). */
async function wholeArray(inputs: ContainerClient, blob: string): Promise<number> {
  const text = (await inputs.getBlobClient(blob).downloadToBuffer()).toString('utf8');
  const parsed = JSON.parse(text) as unknown;
  if (!Array.isArray(parsed) || nestingDepthExceeds(parsed, MAX_NESTING_DEPTH - 1)) throw new Error(`${blob}: refused`);
  const type = builtInWorkTypes().get('noop');
  let rejected = 0;
  for (const value of parsed) if (type?.validateItem(value) !== undefined) rejected += 1;
  if (rejected > 0) throw new Error(`${blob}: ${rejected} rejected`);
  return parsed.length;
}

export const inputStagingBench: Bench = {
  name: 'input-staging',
  description: 'event-loop delay and lease renewals while the leader plans several 63 MiB itemsBlobs: staging vs the whole-array read',
  async run(ctx) {
    const jobs = Number(ctx.options.get('jobs') ?? '8');
    const conn = ctx.connectionString;
    const shipped = loadSettings({ CoordinatorStorage: conn }).leader;
    const connection = { kind: 'connectionString' as const, settingName: 'bench', connectionString: conn };
    const leaseStore = BlobLeaseStore.fromConnection(connection, 'bench-input-lease', 'coordinator', shipped.requestTimeoutMs);
    let leading = false;
    const elector = new LeaseElector({
      leaseSeconds: shipped.leaseSeconds,
      renewDeadlineMs: shipped.renewDeadlineMs,
      retryPeriodMs: shipped.retryPeriodMs,
      requestTimeoutMs: shipped.requestTimeoutMs,
      drainTimeoutMs: shipped.drainTimeoutMs,
      store: leaseStore,
      holder: 'bench',
      logger: memoryLogger('bench'),
      callbacks: {
        onStartedLeading: async (leadership) => {
          leading = true;
          await new Promise<void>((resolve) => leadership.signal.addEventListener('abort', () => resolve(), { once: true }));
        },
        onStoppedLeading: () => {
          leading = false;
        },
      },
    });
    elector.start();
    const blobs = BlobServiceClient.fromConnectionString(conn);
    const inputs = blobs.getContainerClient('bench-inputs');
    await inputs.createIfNotExists();
    await blobs.getContainerClient('bench-results').createIfNotExists();
    {
      const body = largestItemsBlobBody();
      ctx.note(`uploading ${jobs} items blobs of ${body.length} bytes`);
      for (let j = 0; j < jobs; j++) await inputs.getBlockBlobClient(`big-${j}.json`).uploadData(body, { concurrency: 4 });
    }
    while (!leading) await new Promise((resolve) => setTimeout(resolve, 100));
    const run = (j: number): JobRun => ({
      jobId: `bench-${j}`,
      workType: 'noop',
      fingerprint: 'f'.repeat(64),
      options: { chunkSize: 500, attempts: 3, deadlineSeconds: 300 },
      source: { kind: 'blob', container: inputs.containerName, blob: `big-${j}.json` },
      epoch: 1,
      holder: 'bench',
      submittedAt: new Date().toISOString(),
      via: 'queue',
      startId: `start-${j}`,
    });

    const measure = async (label: string, work: () => Promise<unknown>): Promise<Phase> => {
      // A quiet moment first, so the phase starts on a settled heap and a fresh renewal cycle.
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      const before = { ...elector.counters() };
      let peakRss = process.memoryUsage.rss();
      let peakHeap = 0;
      const sampler = setInterval(() => {
        const m = process.memoryUsage();
        peakRss = Math.max(peakRss, m.rss);
        peakHeap = Math.max(peakHeap, m.heapUsed + m.external);
      }, 20);
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      const started = performance.now();
      let error: string | undefined;
      try {
        await work();
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      } finally {
        delay.disable();
        clearInterval(sampler);
      }
      const after = elector.counters();
      ctx.note(`${label} done`);
      return {
        label,
        seconds: (performance.now() - started) / 1000,
        maxDelayMs: delay.max / 1e6,
        p99DelayMs: delay.percentile(99) / 1e6,
        renewals: after.renewed - before.renewed,
        renewFailures: after.renewFailures - before.renewFailures,
        lost: after.lost - before.lost,
        peakRssMiB: peakRss / 2 ** 20,
        peakHeapMiB: peakHeap / 2 ** 20,
        ...(error === undefined ? {} : { error }),
      };
    };

    const store = new BlobInputStore(blobs, 'bench-results');
    const registry = builtInWorkTypes();
    const indexes = Array.from({ length: jobs }, (_, j) => j);
    const staged = await measure('stageInput', () => Promise.all(indexes.map((j) => stageInput({ store, registry }, run(j)))));
    const whole = await measure('whole array (baseline)', () => Promise.all(indexes.map((j) => wholeArray(inputs, `big-${j}.json`))));
    await elector.stop();

    const row = (p: Phase) => {
      const cells = [p.label, p.seconds.toFixed(1), p.maxDelayMs.toFixed(0), p.p99DelayMs.toFixed(0), p.renewals, p.renewFailures, p.lost];
      cells.push(p.peakRssMiB.toFixed(0), p.peakHeapMiB.toFixed(0));
      return `| ${cells.join(' | ')} |${p.error === undefined ? '' : ` error: ${p.error}`}`;
    };
    const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(1)}x` : 'n/a');
    return {
      title: `Planning ${jobs} itemsBlobs of 62.9 MiB (${ITEMS} items each) at once on the leader's process`,
      lines: [
        '| read | s | event-loop delay max ms | p99 ms | renewals | renew failures | terms lost | peak RSS MiB | peak heap+external MiB |',
        '|---|---|---|---|---|---|---|---|---|',
        row(staged),
        row(whole),
        '',
        `Worst event-loop delay: the baseline's is ${ratio(whole.maxDelayMs, staged.maxDelayMs)} staging's ` +
          `(p99 ${ratio(whole.p99DelayMs, staged.p99DelayMs)}); peak heap+external ${ratio(whole.peakHeapMiB, staged.peakHeapMiB)}.`,
        `The elector's request timeout is ${shipped.requestTimeoutMs} ms: a renewal whose answer waits behind a longer stall fails.`,
        'The delay includes the monitor\'s 10 ms resolution, garbage collection, and whatever else runs on this machine.',
      ],
    };
  },
};
