/**
 * Benchmark: what an idle instance costs, and how fast the first job after an idle spell runs.
 * One instance of the real app (a host process as `npm start` runs it, the extensions host unless --host devhost: the shipped
 * host.json and local.settings.sample.json), every storage request of the process counted by the
 * same proxy as jobs-throughput (bench/jobsThroughput.ts `countingProxy`, by kind of request).
 *
 * Per variant, in this order: start, wait until the instance leads, let the start-up traffic and the
 * back-offs settle (`--settle-seconds`), count every storage transaction for `--idle-minutes`
 * (nothing else happens), then submit a 4-item `sum` job by POST /api/jobs and time POST ->
 * `completed`; then `--after-idle` - 1 more such jobs, each after `--gap-seconds` of idle (long
 * enough for every back-off to reach its ceiling again); then a burst: `--burst` jobs one after
 * another, 0.3-2.3 s apart, as small-job-latency submits them. The instance's own figure from
 * GET /api/cluster (the app's storage transactions per minute) is read at the end of the idle count.
 *
 * Variants (`--variants`, comma-separated): `shipped` (host.json as it is), `defaults` (the
 * extension's and the host's default polling ceilings: Durable `maxQueuePollingInterval` 30 s,
 * queues `maxPollingInterval` 1 min; the baseline), `fast` (ceilings for the lowest latency:
 * Durable 0.25 s, queues 0.5 s), `durable30` (Durable at its default 30 s, queues as shipped) and
 * `queues2` (queues 2 s, Durable as shipped): the neighbours of the shipped ceilings.
 *
 * Run: `npm run bench -- idle-cost [--idle-minutes 10] [--settle-seconds 90] [--after-idle 5] [--gap-seconds 120] [--burst 20] [--variants shipped,defaults]`;
 * a quick check: `--idle-minutes 1 --after-idle 2 --gap-seconds 60 --burst 5`.
 */
import { connectionStringFor } from 'devhost/testing';

import { type AppCluster, jobTimeline, percentile, sleep, startAppCluster } from './appCluster';
import { type Bench, type BenchContext } from './index';
import { countingProxy, endpointPorts } from './jobsThroughput';

interface Variant {
  readonly name: string;
  readonly label: string;
  readonly queues?: Record<string, unknown>;
  readonly durable?: Record<string, unknown>;
}

const VARIANTS: readonly Variant[] = [
  { name: 'shipped', label: 'shipped host.json' },
  {
    name: 'defaults',
    label: 'default polling (Durable 30 s, queues 1 min): baseline',
    queues: { maxPollingInterval: '00:01:00' },
    durable: { maxQueuePollingInterval: '00:00:30' },
  },
  {
    name: 'durable30',
    label: 'Durable at its default 30 s, queues as shipped (5 s)',
    durable: { maxQueuePollingInterval: '00:00:30' },
  },
  {
    name: 'queues2',
    label: 'Durable as shipped (10 s), queues 2 s',
    queues: { maxPollingInterval: '00:00:02' },
  },
  {
    name: 'fast',
    label: 'fast ceilings (Durable 0.25 s, queues 0.5 s)',
    queues: { maxPollingInterval: '00:00:00.500' },
    durable: { maxQueuePollingInterval: '00:00:00.250' },
  },
];

/** A kind of request (bench/jobsThroughput.ts kindOf) sorted into the groups the report sums. */
export function groupOf(kind: string): string {
  const [service = '', method = '', path = ''] = kind.split(' ');
  if (path.startsWith('<hub>')) {
    if (service === 'queue' && method === 'GET' && path.includes('-control-')) return 'Durable control queue receives';
    if (service === 'queue' && method === 'GET' && path.includes('-workitems')) return 'Durable work-item queue receives';
    return 'Durable, other';
  }
  if (path.startsWith('azure-webjobs-hosts')) return 'host: timer lock';
  // The cluster's names (bench/appCluster.ts): work-items-<suffix>, jobs-<suffix>.
  if (service === 'queue' && path.startsWith('work-items-')) return method === 'GET' && path.endsWith('/messages') ? 'work-items trigger receives' : 'work-items, other';
  if (service === 'queue' && path.startsWith('jobs-')) return 'jobs queue (leader pass)';
  return `app: ${service}`;
}

interface VariantFigures {
  readonly variant: Variant;
  readonly idleMinutes: number;
  readonly perMinute: number;
  readonly groups: ReadonlyMap<string, number>;
  readonly kinds: ReadonlyMap<string, number>;
  readonly appReported: unknown;
  readonly afterIdleMs: readonly number[];
  readonly burstMs: readonly number[];
}

const STAGES = ['job.submitted', 'intake.started', 'job.planned', 'workitem.done', 'job.aggregated'];

/** Where a job's time went (ms from its POST to each step's first log line), from the instance's log lines. */
function timeline(cluster: AppCluster, jobId: string, postedEpochMs: number): string {
  return Object.entries(jobTimeline(cluster, jobId, postedEpochMs, STAGES))
    .map(([event, ms]) => `${event} ${ms === undefined ? '-' : Math.round(ms)}`)
    .join(', ');
}

const postedAt = new Map<string, number>();

async function timeJob(cluster: AppCluster, jobId: string): Promise<number> {
  postedAt.set(jobId, Date.now());
  const t0 = performance.now();
  const posted = await cluster.call('POST', '/api/jobs', { jobId, workType: 'sum', items: [1, 2, 3, 4] });
  if (posted.status !== 202) throw new Error(`POST answered ${posted.status}: ${JSON.stringify(posted.json)}`);
  for (;;) {
    const status = String((await cluster.call('GET', `/api/jobs/${jobId}`)).json.status);
    if (status === 'completed') return performance.now() - t0;
    if (!['pending', 'running'].includes(status)) throw new Error(`job ${jobId} ended ${status}`);
    if (performance.now() - t0 > 120_000) throw new Error(`job ${jobId} still ${status} after 120 s`);
    await sleep(25);
  }
}

async function measureVariant(ctx: BenchContext, variant: Variant, o: { idleMinutes: number; settleSeconds: number; afterIdle: number; gapSeconds: number; burst: number }): Promise<VariantFigures> {
  let hub = '';
  const proxy = await countingProxy(endpointPorts(ctx.connectionString), () => hub);
  const proxied = connectionStringFor('127.0.0.1', proxy.ports.blob, proxy.ports.queue, proxy.ports.table);
  const cluster = await startAppCluster(proxied, {
    instances: 1,
    label: `idle${variant.name}`,
    host: ctx.host,
    ...(variant.queues === undefined ? {} : { queues: variant.queues }),
    ...(variant.durable === undefined ? {} : { durableStorageProvider: variant.durable }),
  });
  hub = cluster.names.taskHub;
  try {
    await cluster.leader();
    ctx.note(`${variant.name}: leading; settling ${o.settleSeconds} s, then counting ${o.idleMinutes} idle minutes`);
    await sleep(o.settleSeconds * 1000);
    proxy.reset();
    const from = performance.now();
    await sleep(o.idleMinutes * 60_000);
    const minutes = (performance.now() - from) / 60_000;
    const kinds = new Map(proxy.counter.byKind);
    const total = proxy.counter.total;
    const appReported = (await cluster.call('GET', '/api/cluster')).json.storageRequests;
    const groups = new Map<string, number>();
    for (const [kind, n] of kinds) {
      const group = groupOf(kind);
      groups.set(group, (groups.get(group) ?? 0) + n / minutes);
    }
    const afterIdleMs: number[] = [];
    for (let i = 0; i < o.afterIdle; i++) {
      if (i > 0) await sleep(o.gapSeconds * 1000);
      afterIdleMs.push(await timeJob(cluster, `idle-${i}`));
      const jobId = `idle-${i}`;
      const where = timeline(cluster, jobId, postedAt.get(jobId) ?? NaN);
      ctx.note(`${variant.name}: job after ${i === 0 ? `${o.idleMinutes} min` : `${o.gapSeconds} s`} idle: ${Math.round(afterIdleMs.at(-1) ?? NaN)} ms (${where})`);
    }
    const burstMs: number[] = [];
    for (let i = 0; i < o.burst; i++) {
      burstMs.push(await timeJob(cluster, `burst-${i}`));
      if (ctx.options.has('timeline')) ctx.note(`${variant.name}: burst-${i} ${Math.round(burstMs.at(-1) ?? NaN)} ms (${timeline(cluster, `burst-${i}`, postedAt.get(`burst-${i}`) ?? NaN)})`);
      await sleep(300 + Math.random() * 2_000);
    }
    return { variant, idleMinutes: minutes, perMinute: total / minutes, groups, kinds: new Map([...kinds].map(([k, n]) => [k, n / minutes])), appReported, afterIdleMs, burstMs };
  } finally {
    await cluster.stop();
    await proxy.close();
  }
}

const r0 = (n: number): string => (Number.isFinite(n) ? String(Math.round(n)) : '-');
const r1 = (n: number): string => (Number.isFinite(n) ? (Math.round(n * 10) / 10).toFixed(1) : '-');

export const idleCostBench: Bench = {
  name: 'idle-cost',
  description: 'an idle instance\'s storage transactions per minute by kind, and a 4-item job\'s latency after idle and in a burst: shipped host.json vs the default polling ceilings',
  async run(ctx) {
    const num = (name: string, fallback: number): number => Number(ctx.options.get(name) ?? fallback);
    const o = { idleMinutes: num('idle-minutes', 10), settleSeconds: num('settle-seconds', 90), afterIdle: num('after-idle', 5), gapSeconds: num('gap-seconds', 120), burst: num('burst', 20) };
    const names = (ctx.options.get('variants') ?? 'shipped,defaults').split(',');
    const unknown = names.filter((n) => !VARIANTS.some((v) => v.name === n));
    if (unknown.length > 0) throw new Error(`unknown variant ${unknown.join(', ')}; known: ${VARIANTS.map((v) => v.name).join(', ')}`);
    const figures: VariantFigures[] = [];
    for (const name of names) {
      const variant = VARIANTS.find((v) => v.name === name) as Variant;
      figures.push(await measureVariant(ctx, variant, o));
    }
    const baseline = figures.find((f) => f.variant.name === 'defaults');
    const groups = [...new Set(figures.flatMap((f) => [...f.groups.keys()]))].sort();
    const lines = [
      `| variant | idle transactions/min | first job after ${o.idleMinutes} min idle, ms | after idle p50 ms (${o.afterIdle} jobs) | burst p50 ms | burst p99 ms | app's own figure (GET /api/cluster) |`,
      '|---|---:|---:|---:|---:|---:|---|',
      ...figures.map(
        (f) =>
          `| ${f.variant.label} | ${r1(f.perMinute)} | ${r0(f.afterIdleMs[0] ?? NaN)} | ${r0(percentile(f.afterIdleMs, 50))} | ${r0(percentile(f.burstMs, 50))} | ${r0(percentile(f.burstMs, 99))} | ${JSON.stringify(f.appReported ?? null)} |`,
      ),
      '',
      `Idle transactions per minute by group (${figures.map((f) => f.variant.name).join(' / ')}):`,
      '',
      `| group | ${figures.map((f) => f.variant.name).join(' | ')} |`,
      `|---|${figures.map(() => '---:').join('|')}|`,
      ...groups.map((g) => `| ${g} | ${figures.map((f) => r1(f.groups.get(g) ?? 0)).join(' | ')} |`),
      '',
    ];
    for (const f of figures) {
      lines.push(`Kinds of request, ${f.variant.name} (per minute, the most frequent first):`, '');
      for (const [kind, n] of [...f.kinds].sort((a, b) => b[1] - a[1]).slice(0, 25)) lines.push(`- ${r1(n)} ${kind}`);
      lines.push('');
    }
    if (baseline !== undefined) {
      for (const f of figures.filter((x) => x !== baseline)) {
        lines.push(
          `${f.variant.name} against the default polling: idle ${r1(f.perMinute / Math.max(0.1, baseline.perMinute))}x the transactions, ` +
            `first job after idle ${r1((f.afterIdleMs[0] ?? NaN) / Math.max(1, baseline.afterIdleMs[0] ?? NaN))}x the time, ` +
            `after-idle p50 ${r1(percentile(f.afterIdleMs, 50) / Math.max(1, percentile(baseline.afterIdleMs, 50)))}x, burst p50 ${r1(percentile(f.burstMs, 50) / Math.max(1, percentile(baseline.burstMs, 50)))}x.`,
        );
      }
    }
    lines.push(
      `Idle counted over ${o.idleMinutes} min after ${o.settleSeconds} s of settling; after-idle jobs: the first right after the count, then one every ${o.gapSeconds} s of idle; ` +
        `burst: ${o.burst} jobs one at a time, 0.3-2.3 s apart; p99 is nearest-rank (the slowest below 100 jobs). Each job is POST -> a status poll (every 25 ms) seeing completed.`,
    );
    return { title: 'Idle cost and the first job after idle (one instance)', lines };
  },
};
