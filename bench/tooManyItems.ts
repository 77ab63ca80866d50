/**
 * Benchmark (a stress of the plan): N jobs at once on one instance of the real app (shipped host.json),
 * each naming an items blob just under the 64 MiB limit that holds far more items than a job may
 * (`[0,0,...]`, about 33 million), so each must fail `ITEMS_TOO_MANY`; a good `sum` job is submitted
 * alongside and must complete exact. Meanwhile `/api/health` is asked every 50 ms and `/api/leader`
 * every second. Prints per refused job the time from its POST to `failed`, the good job's time and
 * result, health p50/p99/max, the leader's epochs seen (one epoch: the lease was kept), and the
 * stall check's resumes and the plan calls the instance logged.
 *
 * The baseline in the same run: the good job alone on the same instance before the stress.
 *
 * Run: `npm run bench -- too-many-items [--jobs 8] [--timeout-seconds 120]`.
 */
import { type AppCluster, monitor, percentile, secs, startAppCluster, submitJob, waitForJob } from './appCluster';
import { type Bench } from './index';

/** `[0,0,...,0]` of about `bytes` bytes: (bytes - 1) / 2 items of one digit. */
function zerosBody(bytes: number): { body: Buffer; items: number } {
  const items = Math.floor((bytes - 1) / 2);
  const body = Buffer.alloc(items * 2 + 1, 0x30);
  body[0] = 0x5b;
  for (let i = 2; i < body.length - 1; i += 2) body[i] = 0x2c;
  body[body.length - 1] = 0x5d;
  return { body, items };
}

function countLines(cluster: AppCluster, event: string): number {
  let n = 0;
  for (const host of cluster.instances.values()) for (const line of host.lines()) if (line.includes(`"event":"${event}"`)) n += 1;
  return n;
}

export const tooManyItemsBench: Bench = {
  name: 'too-many-items',
  description: 'N jobs at once naming a 63 MiB items blob of ~33 million items (each must fail ITEMS_TOO_MANY) beside a good job',
  async run(ctx) {
    const jobs = Number(ctx.options.get('jobs') ?? '8');
    const timeoutMs = Number(ctx.options.get('timeout-seconds') ?? '120') * 1000;
    const cluster = await startAppCluster(ctx.connectionString, { instances: 1, label: 'tmi', host: ctx.host });
    const lines: string[] = [];
    try {
      const { body, items } = zerosBody(63 * 1024 * 1024);
      await cluster.inputs.getBlockBlobClient('huge.json').uploadData(body, { concurrency: 4 });
      const hugeBlob = `${cluster.names.inputsContainer}/huge.json`;
      ctx.note(`uploaded huge.json: ${body.length} bytes, ${items} items`);
      await cluster.leader();
      const goodItems = Array.from({ length: 2_000 }, (_, i) => i + 1);
      const expected = goodItems.reduce((a, b) => a + b, 0);
      const good = (jobId: string): Record<string, unknown> => ({ jobId, workType: 'sum', items: goodItems, options: { chunkSize: 100 } });

      // Baseline: the good job alone.
      const alonePosted = await submitJob(cluster, good('alone'));
      const alone = await waitForJob(cluster, 'alone', 60_000);
      const aloneMs = alone.finishedAt - alonePosted;

      const health: number[] = [];
      const healthFailures: string[] = [];
      const epochs = new Set<string>();
      const healthProbe = monitor(50, async () => {
        const t = performance.now();
        const res = await cluster.call('GET', '/api/health').catch((err: unknown) => ({ status: 0, json: { error: String(err) } }));
        health.push(performance.now() - t);
        if (res.status !== 200) healthFailures.push(`${res.status}`);
      });
      const leaderProbe = monitor(1_000, async () => {
        const res = await cluster.call('GET', '/api/leader');
        if (typeof res.json.holder === 'string') epochs.add(`${res.json.holder}@${String(res.json.epoch)}`);
      });
      const resumesBefore = countLines(cluster, 'job.resume_requested');
      const started = performance.now();
      const posted = new Map<string, number>();
      await Promise.all(
        Array.from({ length: jobs }, async (_, j) => {
          const jobId = `huge-${j}`;
          posted.set(jobId, await submitJob(cluster, { jobId, workType: 'noop', itemsBlob: hugeBlob }));
        }),
      );
      const goodPosted = await submitJob(cluster, good('beside'));
      const besideWait = waitForJob(cluster, 'beside', timeoutMs).catch(() => undefined);
      const outcomes = await Promise.all(
        [...posted.keys()].map(async (jobId) => {
          try {
            const { view, finishedAt } = await waitForJob(cluster, jobId, timeoutMs, { note: ctx.note });
            const error = view.error as { code?: string } | null;
            return { jobId, status: String(view.status), code: error?.code ?? '-', ms: finishedAt - (posted.get(jobId) ?? started) };
          } catch (err) {
            return { jobId, status: 'not ended', code: String(err).slice(0, 80), ms: NaN };
          }
        }),
      );
      const beside = await besideWait;
      await healthProbe.stop();
      await leaderProbe.stop();
      const besideResult = (beside?.view.result ?? null) as unknown;
      const resumes = countLines(cluster, 'job.resume_requested') - resumesBefore;
      const refused = outcomes.filter((o) => o.status === 'failed' && o.code === 'ITEMS_TOO_MANY');
      const times = outcomes.map((o) => o.ms).filter(Number.isFinite);

      lines.push(`${jobs} jobs naming one ${(body.length / 1024 / 1024).toFixed(1)} MiB items blob of ${items.toLocaleString('en-US')} items (limit 1,000,000), one instance, shipped settings`);
      lines.push('');
      lines.push('| figure | value |');
      lines.push('|---|---:|');
      lines.push(`| refused ITEMS_TOO_MANY | ${refused.length} of ${jobs} |`);
      lines.push(`| POST -> failed: first / median / last | ${secs(Math.min(...times))} / ${secs(percentile(times, 50))} / ${secs(Math.max(...times))} s |`);
      lines.push(`| good job alone (baseline) | ${secs(aloneMs)} s |`);
      lines.push(`| good job beside them | ${beside === undefined ? 'not ended' : `${secs(beside.finishedAt - goodPosted)} s, ${String(beside.view.status)}, result ${JSON.stringify(besideResult)} (expected ${expected})`} |`);
      lines.push(`| /api/health p50 / p99 / max (${health.length} asks) | ${percentile(health, 50).toFixed(0)} / ${percentile(health, 99).toFixed(0)} / ${Math.max(...health).toFixed(0)} ms; ${healthFailures.length} not 200 |`);
      lines.push(`| leader terms seen | ${[...epochs].join(', ')} |`);
      lines.push(`| stall-check resumes | ${resumes} |`);
      lines.push('');
      for (const o of outcomes) if (o.status !== 'failed' || o.code !== 'ITEMS_TOO_MANY') lines.push(`- ${o.jobId}: ${o.status} ${o.code}`);
      lines.push(`(whole stress ${secs(performance.now() - started)} s)`);
      return { title: `Too many items: ${jobs} jobs over the limit at once`, lines };
    } finally {
      await cluster.stop();
    }
  },
};
