/**
 * Benchmark: does a small job wait behind a huge one? On the real app (host processes, the extensions host unless --host devhost,
 * as `npm start` runs them, shipped host.json and settings, one Azurite), a 4-item `sum` job's
 * POST -> `completed` latency alone (median of a few, the baseline), then the same job submitted
 * as soon as a huge `noop` job (items by itemsBlob, chunks of 100) shows `running`, and again once the
 * status API counts all the huge job's chunks (this pipeline dispatches them all first). For the huge job
 * it also prints POST -> first chunk result (the first `results/` blob) and POST -> `completed`,
 * and the most messages the work-items queue held (its approximate count, peeked every second).
 *
 * Not measured: several small jobs at once; instances other than `--instances` (1 by default, as `npm start`).
 *
 * Run: `npm run bench -- fairness [--big-items 500000] [--small-jobs 3] [--instances 1]`.
 */
import {
  type AppCluster,
  type Json,
  monitor,
  percentile,
  runJob,
  secs,
  sleep,
  startAppCluster,
  submitJob,
  uploadItems,
  waitForJob,
  workItemsDepth,
} from './appCluster';
import { type Bench } from './index';

const SMALL = (jobId: string): Json & { jobId: string } => ({ jobId, workType: 'sum', items: [1, 2, 3, 4] });


/** POST a small job now and wait for it: POST -> completed in ms. */
async function smallBehind(cluster: AppCluster, jobId: string, note: (message: string) => void): Promise<number> {
  const postedAt = await submitJob(cluster, SMALL(jobId));
  const small = await waitForJob(cluster, jobId, 900_000, { note });
  if (small.view.status !== 'completed') throw new Error(`small job ${jobId} ended ${String(small.view.status)}`);
  return small.finishedAt - postedAt;
}

async function firstResultExists(cluster: AppCluster, jobId: string): Promise<boolean> {
  const page = await cluster.results.listBlobsFlat({ prefix: `jobs/${jobId}/results/` }).byPage({ maxPageSize: 1 }).next();
  return page.done !== true && page.value.segment.blobItems.length > 0;
}

export const fairnessBench: Bench = {
  name: 'fairness',
  description: 'a 4-item job\'s POST -> completed alone vs right after a huge noop job started; the huge job\'s first result, completion and queue depth',
  async run(ctx) {
    const bigItems = Number(ctx.options.get('big-items') ?? 500_000);
    const smallJobs = Number(ctx.options.get('small-jobs') ?? 3);
    const instances = Number(ctx.options.get('instances') ?? 1);
    const chunkSize = 100;
    const bigChunks = Math.ceil(bigItems / chunkSize);
    const cluster = await startAppCluster(ctx.connectionString, { instances, label: 'fair', host: ctx.host });
    try {
      await cluster.leader();
      const itemsBlob = await uploadItems(cluster, 'big.json', Array.from({ length: bigItems }, (_, i) => i));
      // Warm-up (queues, containers, first orchestration), then the small job alone.
      await runJob(cluster, SMALL('fair-warmup'), 120_000);
      const alone: number[] = [];
      for (let i = 0; i < smallJobs; i++) {
        const r = await runJob(cluster, SMALL(`fair-alone-${i}`), 120_000);
        if (r.view.status !== 'completed') throw new Error(`small job ended ${String(r.view.status)}`);
        alone.push(r.finishedAt - r.postedAt);
        // Arrivals at random moments of the leader's pass cycle.
        await sleep(300 + Math.random() * 2_000);
      }
      ctx.note(`fairness: small job alone, median ${secs(percentile(alone, 50))} s; now the big job (${bigItems} noop items, ${bigChunks} chunks)`);

      const bigPostedAt = await submitJob(cluster, { jobId: 'fair-big', workType: 'noop', itemsBlob, options: { chunkSize } });
      let firstResultAt: number | undefined;
      let maxQueued = 0;
      const firstResult = monitor(250, async () => {
        if (firstResultAt === undefined && (await firstResultExists(cluster, 'fair-big'))) firstResultAt = performance.now();
      });
      const depth = monitor(1_000, async () => {
        maxQueued = Math.max(maxQueued, await workItemsDepth(cluster));
      });
      try {
        // "Started": the status API shows the big job running (the leader took it, its orchestration runs).
        for (;;) {
          const res = await cluster.call('GET', '/api/jobs/fair-big');
          if (res.json.status === 'running') break;
          if (res.json.status !== 'pending') throw new Error(`big job ended ${String(res.json.status)} before it ran`);
          await sleep(100);
        }
        const bigRunningAt = performance.now();
        const behind = await smallBehind(cluster, 'fair-behind', ctx.note);
        ctx.note(`fairness: small job submitted as the big one showed running: ${secs(behind)} s`);
        // A second one once the status API counts all the big job's chunks (dispatched, for this pipeline),
        // unless the big job finished first: where a backlog would sit, if there is one.
        let planned: { at: number; latencyMs: number } | undefined;
        for (;;) {
          const view = (await cluster.call('GET', '/api/jobs/fair-big')).json;
          const total = (view.progress as { chunks?: { total?: number } } | null | undefined)?.chunks?.total;
          if (view.status !== 'running') break;
          if (total === bigChunks) {
            const at = performance.now();
            planned = { at, latencyMs: await smallBehind(cluster, 'fair-behind-planned', ctx.note) };
            ctx.note(`fairness: small job submitted once the big one counted all its chunks: ${secs(planned.latencyMs)} s`);
            break;
          }
          await sleep(250);
        }
        const big = await waitForJob(cluster, 'fair-big', 900_000, { note: ctx.note });
        const bigCount = (big.view.result as { count?: unknown } | undefined)?.count;
        if (big.view.status !== 'completed' || bigCount !== bigItems) throw new Error(`big job ended ${String(big.view.status)} with count ${String(bigCount)}`);
        await firstResult.stop();
        await depth.stop();
        const aloneMedian = percentile(alone, 50);
        const behindMs = behind;
        return {
          title: 'Fairness: a small job behind a huge one',
          lines: [
            `${instances} instance(s), shipped host.json and settings; small job: sum of 4 items inline; huge job: noop of ${bigItems} items by itemsBlob in ${bigChunks} chunks of ${chunkSize}.`,
            '',
            '| small job | POST -> completed (s) |',
            '|---|---:|',
            `| alone (baseline), median of ${alone.length} | ${secs(aloneMedian)} (all: ${alone.map(secs).join(', ')}) |`,
            `| submitted when the huge job showed running (${secs(bigRunningAt - bigPostedAt)} s after its POST) | ${secs(behindMs)} |`,
            planned === undefined
              ? '| submitted once the huge job counted all its chunks | (the huge job finished first) |'
              : `| submitted once the huge job counted all its chunks (${secs(planned.at - bigPostedAt)} s after its POST) | ${secs(planned.latencyMs)} |`,
            '',
            `Behind the huge job the small one took ${(behindMs / aloneMedian).toFixed(1)}x its latency alone when submitted as the huge job started` +
              (planned === undefined ? '.' : `, ${(planned.latencyMs / aloneMedian).toFixed(1)}x once all the huge job's chunks were counted.`),
            '',
            '| huge job | |',
            '|---|---:|',
            `| POST -> first chunk result blob (s) | ${firstResultAt === undefined ? 'not seen' : secs(firstResultAt - bigPostedAt)} |`,
            `| POST -> completed (s) | ${secs(big.finishedAt - bigPostedAt)} |`,
            `| items/s, POST -> completed | ${Math.round(bigItems / ((big.finishedAt - bigPostedAt) / 1000))} |`,
            `| most messages on the work-items queue (approximate count, peeked every 1 s) | ${maxQueued} |`,
          ],
        };
      } finally {
        await firstResult.stop();
        await depth.stop();
      }
    } finally {
      await cluster.stop();
    }
  },
};
