/**
 * The live page and the job list with many jobs stored: the app on the extensions host unless --host devhost (one
 * instance, shipped host.json), its job index filled with N finished jobs' rows (100, then 10,000:
 * the rows the app itself writes, put through the index's own batch write; the jobs' other records
 * are not made, and the list reads only the index for finished jobs), then Debian's chromium opens
 * /api/dashboard and the figures are taken the way a person meets them:
 *
 * - first render: navigation start -> the job table shows its first page (50 rows);
 * - refreshes: the durations of the page's own requests to /api/jobs and /api/cluster while it
 *   stays open (Resource Timing), p50 and max;
 * - Older: a click -> the second page shown;
 * - the API: GET /api/jobs?limit=100&counts=true (counts scan the index, shared 5 s) and
 *   `coordinator list` (bin/coordinator.js, a process of its own) wall time.
 *
 * The 100-row figures are the baseline measured in the same run; the table gives each size's ratio
 * to it.
 *
 * Run: `npm run bench -- live-page [--sizes 100,10000] [--watch-seconds 10]`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

import { TableClient } from '@azure/data-tables';

import { type IndexEntry, JobIndex } from '../shared/jobs/store/JobIndex';
import { memoryLogger } from '../shared/observability/log';
import { launchBrowser } from '../test/support/browser';
import { type AppCluster, percentile, REPO_ROOT, sleep, startAppCluster } from './appCluster';
import { type Bench } from './index';

const FINISHED = ['completed', 'completed', 'completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'] as const;

interface PageFigures {
  readonly rows: number;
  readonly firstRenderMs: number;
  readonly jobsRefresh: { p50: number; max: number; n: number };
  readonly clusterRefresh: { p50: number; max: number; n: number };
  readonly olderMs: number;
  readonly apiMs: number;
  readonly cliMs: number;
}

function entry(i: number, base: number): IndexEntry {
  const status = FINISHED[i % FINISHED.length] ?? 'completed';
  const at = new Date(base + i * 1_000).toISOString();
  const failed = status === 'failed' || status === 'rejected';
  return {
    jobId: `lp-${String(i).padStart(6, '0')}`,
    status,
    workType: i % 3 === 0 ? 'wordcount' : 'sum',
    progress: failed ? null : { chunks: { total: 2, done: 2, failed: 0 }, items: { total: 20, done: 20, failed: status === 'completed_with_errors' ? 1 : 0 } },
    errorCode: status === 'failed' ? 'CHUNKS_FAILED' : status === 'rejected' ? 'UNKNOWN_WORK_TYPE' : null,
    createdAt: at,
    updatedAt: at,
  };
}

async function measure(cluster: AppCluster, rows: number, watchMs: number): Promise<PageFigures> {
  const browser = await launchBrowser({ width: 1400, height: 1100 });
  try {
    const { page } = browser;
    const url = `${cluster.instances.values().next().value?.baseUrl ?? ''}/api/dashboard`;
    const t0 = performance.now();
    await page.goto(url);
    await page.locator('#jobs tbody tr').nth(49).waitFor({ timeout: 120_000 });
    const firstRenderMs = performance.now() - t0;
    await page.evaluate(() => performance.clearResourceTimings());
    await sleep(watchMs);
    const timings = await page.evaluate(() =>
      performance.getEntriesByType('resource').map((e) => ({ name: e.name, duration: e.duration })),
    );
    const stats = (part: string): { p50: number; max: number; n: number } => {
      const d = timings.filter((t) => new URL(t.name).pathname === part).map((t) => t.duration);
      return { p50: d.length === 0 ? NaN : percentile(d, 50), max: d.length === 0 ? NaN : Math.max(...d), n: d.length };
    };
    const label = await page.locator('#page-label').textContent();
    const o0 = performance.now();
    await page.locator('#older').click();
    await page.locator('#page-label', { hasText: '(page 2)' }).waitFor({ timeout: 60_000 });
    const olderMs = performance.now() - o0;
    if (!/jobs 1–50 \(page 1\)/.test(label ?? '')) throw new Error(`the first page said "${label ?? ''}"`);

    const a0 = performance.now();
    const api = await cluster.call('GET', '/api/jobs?limit=100&counts=true');
    const apiMs = performance.now() - a0;
    const total = (api.json.counts as { total?: number } | undefined)?.total;
    if (api.status !== 200 || total !== rows) throw new Error(`GET /api/jobs answered ${api.status} with counts.total ${String(total)}, expected ${rows}`);

    const c0 = performance.now();
    const cli = spawnSync(process.execPath, [join(REPO_ROOT, 'bin', 'coordinator.js'), 'list', '--url', url.replace(/\/api\/dashboard$/, '')], { encoding: 'utf8', timeout: 120_000 });
    const cliMs = performance.now() - c0;
    if (cli.status !== 0 || !cli.stderr.includes(`${rows} jobs`)) throw new Error(`coordinator list: exit ${String(cli.status)}: ${cli.stderr.slice(0, 300)}`);
    return { rows, firstRenderMs, jobsRefresh: stats('/api/jobs'), clusterRefresh: stats('/api/cluster'), olderMs, apiMs, cliMs };
  } finally {
    await browser.close();
  }
}

export const livePageBench: Bench = {
  name: 'live-page',
  description: 'the live page (chromium) and the job list with 100 and 10,000 jobs stored',
  async run(ctx) {
    const sizes = (ctx.options.get('sizes') ?? '100,10000').split(',').map(Number).sort((a, b) => a - b);
    const watchMs = Number(ctx.options.get('watch-seconds') ?? '10') * 1000;
    const table = `livepage${Date.now().toString(36)}`;
    const cluster = await startAppCluster(ctx.connectionString, { instances: 1, label: 'live', host: ctx.host, env: { JOB_INDEX_TABLE: table } });
    const index = new JobIndex(TableClient.fromConnectionString(ctx.connectionString, table, { allowInsecureConnection: true }), memoryLogger('bench'));
    const figures: PageFigures[] = [];
    try {
      await cluster.leader();
      const base = Date.parse('2026-11-01T00:00:00.000Z');
      let filled = 0;
      for (const n of sizes) {
        const s0 = performance.now();
        await index.putMany(Array.from({ length: n - filled }, (_, k) => entry(filled + k, base)));
        ctx.note(`live-page: ${n} rows in the index (${((performance.now() - s0) / 1000).toFixed(1)} s to write ${n - filled})`);
        filled = n;
        // The counts are shared for 5 s: let the ones read before the fill expire.
        await sleep(6_000);
        figures.push(await measure(cluster, n, watchMs));
      }
    } finally {
      await cluster.stop();
    }
    const base = figures[0];
    const ms = (v: number): string => (Number.isNaN(v) ? '-' : `${v.toFixed(0)} ms`);
    const ratio = (v: number, b: number | undefined): string => (b === undefined || b === 0 || Number.isNaN(v) ? '' : ` (${(v / b).toFixed(1)}x)`);
    const lines = [
      '| jobs stored | first render (50 rows) | page refresh /api/jobs p50 / max | /api/cluster p50 / max | Older (page 2) | GET /api/jobs?limit=100&counts=true | coordinator list |',
      '|---|---|---|---|---|---|---|',
      ...figures.map(
        (f) =>
          `| ${f.rows.toLocaleString('en-US')} | ${ms(f.firstRenderMs)}${ratio(f.firstRenderMs, base?.firstRenderMs)} | ` +
          `${ms(f.jobsRefresh.p50)} / ${ms(f.jobsRefresh.max)} (${f.jobsRefresh.n})${ratio(f.jobsRefresh.p50, base?.jobsRefresh.p50)} | ` +
          `${ms(f.clusterRefresh.p50)} / ${ms(f.clusterRefresh.max)} (${f.clusterRefresh.n}) | ` +
          `${ms(f.olderMs)}${ratio(f.olderMs, base?.olderMs)} | ${ms(f.apiMs)}${ratio(f.apiMs, base?.apiMs)} | ${ms(f.cliMs)}${ratio(f.cliMs, base?.cliMs)} |`,
      ),
      '',
      `Ratios: against the ${base?.rows ?? '-'}-row run, same app and Azurite. Refreshes: the page's own requests over ${watchMs / 1000} s (count in brackets).`,
    ];
    return { title: 'Live page and job list with many jobs stored', lines };
  },
};
