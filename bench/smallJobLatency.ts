/**
 * Benchmark: how long a small job takes from its HTTP submission to `completed`, on one instance of
 * the real app (a host process, the extensions host unless --host devhost, and its pass interval), where the time goes (until the
 * leader takes it, `pending` -> anything else; until it completes), and what an idle instance
 * costs in storage transactions per second (every request counted by a proxy in front of Azurite).
 * Two host.json variants in the same run: the shipped one, and the previous polling ceilings
 * (Durable `maxQueuePollingInterval` 5 s, queues `maxPollingInterval` 2 s) as the baseline. The
 * POST's own round trip is the HTTP floor.
 *
 * Run: `npm run bench -- small-job-latency [--jobs 20] [--idle-seconds 30]`.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { connectionStringFor, eventually, startHostProcess } from 'devhost/testing';

import { startExtHostProcess } from '../scripts/extHostProcess';
import { type BenchHost } from './appCluster';
import { type Bench } from './index';
import { countingProxy, endpointPorts } from './jobsThroughput';

const OUT_DIR = join(__dirname, '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
const KEY = 'bench-key-not-a-secret';

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

export interface SmallJobLatencyFigures {
  readonly jobs: number;
  /** Storage transactions per second of the idle instance (leader, no job). */
  readonly idleTransactionsPerSecond: number;
  readonly postMs: { p50: number; p99: number };
  readonly takenMs: { p50: number; p99: number; max: number };
  readonly completedMs: { p50: number; p99: number; max: number };
}

type HostJson = { extensions: { queues: Record<string, unknown>; durableTask: { storageProvider: Record<string, unknown> } } };

export async function measureSmallJobLatency(
  connectionString: string,
  host: BenchHost,
  jobs: number,
  idleSeconds: number,
  adjust: (h: HostJson) => void = () => undefined,
): Promise<SmallJobLatencyFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-latency-'));
  symlinkSync(OUT_DIR, join(dir, 'app'), 'dir');
  const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as HostJson;
  adjust(hostJson);
  writeFileSync(join(dir, 'host.json'), JSON.stringify(hostJson));
  const suffixForHub = Date.now().toString(36);
  const proxy = await countingProxy(endpointPorts(connectionString), () => `Lat${suffixForHub}`);
  const proxied = connectionStringFor('127.0.0.1', proxy.ports.blob, proxy.ports.queue, proxy.ports.table);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'bench-latency', main: 'app/functions/*.js' }));
  const suffix = suffixForHub;
  const launch = {
    appRoot: dir,
    hostId: `bench-latency-${suffix}`.slice(0, 32),
    instanceId: 'bench-1',
    env: {
      FUNCTIONS_WORKER_RUNTIME: 'node',
      AzureWebJobsStorage: proxied,
      CoordinatorStorage: proxied,
      TASK_HUB_NAME: `Lat${suffix}`,
      JOBS_QUEUE: `lat-jobs-${suffix}`,
      WORK_ITEMS_QUEUE: `lat-wi-${suffix}`,
      JOB_RESULTS_CONTAINER: `lat-res-${suffix}`,
      LEADER_LEASE_CONTAINER: `lat-lease-${suffix}`,
      DEVHOST_HOST_KEYS: KEY,
      COORDINATOR_LOG_LEVEL: 'warn',
    },
  };
  const app =
    host === 'extensions' ? await startExtHostProcess({ ...launch, timeoutMs: 120_000 }) : await startHostProcess({ ...launch, timeoutMs: 60_000 });
  const call = async (method: string, path: string, body?: string): Promise<{ status: number; json: Record<string, unknown> }> => {
    const res = await fetch(`${app.baseUrl}${path}`, { method, headers: { 'x-functions-key': KEY, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body }) });
    return { status: res.status, json: (await res.json()) as Record<string, unknown> };
  };
  try {
    await eventually(async () => (((await call('GET', '/api/cluster')).json.instance as { role?: string } | undefined)?.role === 'leader' ? true : undefined), 60_000, 'the instance to lead');
    // Idle: let start-up traffic settle (and the back-offs reach their ceilings), then count.
    await new Promise((r) => setTimeout(r, 15_000));
    proxy.reset();
    const idleFrom = performance.now();
    await new Promise((r) => setTimeout(r, idleSeconds * 1000));
    const idleTransactionsPerSecond = Math.round((proxy.counter.total / ((performance.now() - idleFrom) / 1000)) * 100) / 100;
    const post: number[] = [];
    const taken: number[] = [];
    const completed: number[] = [];
    for (let i = 0; i < jobs; i++) {
      const jobId = `lat-${i}`;
      const t0 = performance.now();
      const posted = await call('POST', '/api/jobs', JSON.stringify({ jobId, workType: 'sum', items: [1, 2, 3, 4] }));
      post.push(performance.now() - t0);
      if (posted.status !== 202) throw new Error(`POST answered ${posted.status}: ${JSON.stringify(posted.json)}`);
      let takenAt: number | undefined;
      for (;;) {
        const status = String((await call('GET', `/api/jobs/${jobId}`)).json.status);
        if (takenAt === undefined && status !== 'pending') takenAt = performance.now() - t0;
        if (status === 'completed') break;
        if (!['pending', 'running'].includes(status)) throw new Error(`job ${jobId} ended ${status}`);
        if (performance.now() - t0 > 60_000) throw new Error(`job ${jobId} still ${status} after 60 s`);
        await new Promise((r) => setTimeout(r, 25));
      }
      completed.push(performance.now() - t0);
      taken.push(takenAt ?? completed.at(-1) ?? NaN);
      // Submissions arrive at random moments of the leader's pass cycle, not right after a pass.
      await new Promise((r) => setTimeout(r, 300 + Math.random() * 2_000));
    }
    const r = (n: number): number => Math.round(n);
    return {
      jobs,
      idleTransactionsPerSecond,
      postMs: { p50: r(percentile(post, 50)), p99: r(percentile(post, 99)) },
      takenMs: { p50: r(percentile(taken, 50)), p99: r(percentile(taken, 99)), max: r(Math.max(...taken)) },
      completedMs: { p50: r(percentile(completed, 50)), p99: r(percentile(completed, 99)), max: r(Math.max(...completed)) },
    };
  } finally {
    await app.stop();
    await proxy.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The shipped host.json's polling ceilings, as its row names them. */
const shippedCeilings = (() => {
  const h = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as HostJson;
  return { durable: String(h.extensions.durableTask.storageProvider.maxQueuePollingInterval), queues: String(h.extensions.queues.maxPollingInterval) };
})();

export const smallJobLatencyBench: Bench = {
  name: 'small-job-latency',
  description: 'a 4-item job from POST to completed, and an idle instance\'s storage transactions/s: shipped host.json vs the previous polling ceilings',
  async run(ctx) {
    const jobs = Number(ctx.options.get('jobs') ?? 20);
    const idle = Number(ctx.options.get('idle-seconds') ?? 30);
    ctx.note(`small-job-latency: ${jobs} jobs of 4 items, one after another, twice (shipped host.json, then the previous polling ceilings)`);
    const shipped = await measureSmallJobLatency(ctx.connectionString, ctx.host, jobs, idle);
    const previous = await measureSmallJobLatency(ctx.connectionString, ctx.host, jobs, idle, (h) => {
      h.extensions.durableTask.storageProvider.maxQueuePollingInterval = '00:00:05';
      h.extensions.queues.maxPollingInterval = '00:00:02';
    });
    const row = (name: string, f: SmallJobLatencyFigures): string =>
      `| ${name} | ${f.postMs.p50} | ${f.takenMs.p50} (p99 ${f.takenMs.p99}) | ${f.completedMs.p50} | ${f.completedMs.p99} (max ${f.completedMs.max}) | ${f.idleTransactionsPerSecond} |`;
    return {
      title: 'Small job latency and idle cost (4 items, one instance)',
      lines: [
        '| host.json | POST answered p50 ms (HTTP floor) | taken by the leader p50 ms | POST -> completed p50 ms | POST -> completed p99 ms | idle storage transactions/s |',
        '|---|---:|---:|---:|---:|---:|',
        row(`shipped (Durable polling ceiling ${shippedCeilings.durable}, queues ${shippedCeilings.queues})`, shipped),
        row('ceilings Durable 5 s, queues 2 s: baseline', previous),
        '',
        `${jobs} jobs per variant, one at a time, 0.3-2.3 s apart (p99 is nearest-rank: the slowest job below 100 jobs); ` +
          `completed p50 ${Math.round((shipped.completedMs.p50 / Math.max(1, previous.completedMs.p50)) * 100) / 100}x the baseline's, ` +
          `p99 ${Math.round((shipped.completedMs.p99 / Math.max(1, previous.completedMs.p99)) * 100) / 100}x, ` +
          `idle cost ${Math.round((shipped.idleTransactionsPerSecond / Math.max(0.01, previous.idleTransactionsPerSecond)) * 100) / 100}x (idle measured over ${idle} s after 15 s of settling).`,
      ],
    };
  },
};
