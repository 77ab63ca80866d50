/**
 * Benchmark: scale in jobs, as a client sees it. Bursts of N small `sum` jobs (20 items each, in 1, 2
 * or 4 chunks) on one instance of the real app (the extensions host unless --host devhost; shipped
 * host.json and settings), on an empty account each:
 * - by HTTP: POST /api/jobs with the client's own job id, 16 in flight; each client then follows its
 *   own `Location`, first after the 202's `Retry-After`, then after each answer's, and its job is
 *   done when that client sees it ended (the answer it got). POST latency p50 / p99;
 * - by queue: base64 messages straight onto the jobs queue, 16 in flight; followed by the list's
 *   counts (`GET /api/jobs?counts=true&limit=1` every second), done when they show N ended.
 * Baseline, same host, same run, an empty account of its own: N trivial orchestrations (one activity
 * each) started through the standard durable-functions client at the same concurrency
 * (bench/fixtures/trivialApp.ts), each followed by its client the same way (its status route answers
 * `Retry-After: 1` until the instance has ended). Per burst: first submission -> last seen ended,
 * the ratio to the baseline, POST p50 / p99, status reads a job, storage transactions per job
 * (every request the instance makes, counted by a proxy in front of Azurite), the longest leader
 * pass, the list's first page (limit 100) p50 / max while the burst runs (every 2 s), and whether
 * every job ended exact (read from storage after the burst, outside the count).
 *
 * Run: `npm run bench -- jobs-scale [--sizes 10,100,1000] [--via http,queue] [--chunks 1,2,4]
 * [--host extensions|devhost] [--breakdown 1 [--log-file F]]` (--breakdown prints the transactions
 * per job by kind of request and where the jobs' time went; --log-file F keeps each burst's log lines).
 */
import { writeFileSync } from 'node:fs';

import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import { connectionStringFor, startAzurite } from 'devhost/testing';

import { type AppCluster, type BenchHost, benchHostName, jobTimelines, type Json, monitor, percentile, secs, sleep, startAppCluster } from './appCluster';
import { type Bench } from './index';
import { byKindPerJob, countingProxy, endpointPorts } from './jobsThroughput';
import { processCpuMs } from './processCpu';

/** A small job of the bursts (jobs-scale, burst-failover): a `sum` of 20 items, submitted 16 at a time. */
export const ITEMS = Array.from({ length: 20 }, (_, i) => i + 1);
export const SUM = ITEMS.reduce((a, b) => a + b, 0);
export const IN_FLIGHT = 16;


interface CpuPerJob {
  readonly azuriteMs: number | undefined;
  readonly hostMs: number | undefined;
  /** The bench's own process: the counting proxy in front of Azurite, the clients, the probes. */
  readonly benchMs: number | undefined;
}

export async function inFlight<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) await work(items[next++] as T);
    }),
  );
}

/** Waits until `done(id)` holds for every id, probing in submission order (jobs end roughly in order). */
export async function waitAll(ids: readonly string[], done: (id: string) => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  const open = [...ids];
  while (open.length > 0) {
    if (performance.now() > deadline) throw new Error(`${open.length} of ${ids.length} not finished after ${timeoutMs / 1000} s (first: ${open[0]})`);
    // The oldest few at once; stop at the first that is still running.
    const head = open.slice(0, 16);
    const finished = await Promise.all(head.map(done));
    const firstOpen = finished.indexOf(false);
    open.splice(0, firstOpen < 0 ? head.length : firstOpen);
    if (firstOpen >= 0) await sleep(250);
  }
}

/** One burst's storage: an Azurite of its own (empty), the counting proxy in front of it, one instance of the app. */
interface Account {
  readonly cluster: AppCluster;
  readonly proxy: Awaited<ReturnType<typeof countingProxy>>;
  readonly connectionString: string;
  /** The longest leader pass seen since the account started (GET /api/cluster every second). */
  readonly maxPassMs: () => number;
  /** Starts counting CPU time; the answer gives each process's CPU milliseconds a job since then. */
  readonly cpuFrom: () => (n: number) => CpuPerJob;
}

/**
 * Runs `work` on an empty account: a new Azurite (its own data folder), the proxy, one instance, its
 * lease taken. Every burst starts from empty storage, as a new user's does: Azurite's requests slow
 * down as its account fills (`azurite-size`), so a burst measured after another on one account pays
 * for the blobs and messages the first one left (the HTTP burst, measured third, did).
 */
async function onEmptyAccount<T>(host: BenchHost, work: (account: Account) => Promise<T>): Promise<T> {
  const azurite = await startAzurite();
  let hub = '';
  const proxy = await countingProxy(endpointPorts(azurite.connectionString), () => hub);
  let cluster: AppCluster | undefined;
  let probe: { stop(): Promise<void> } | undefined;
  try {
    const ports = proxy.ports;
    const proxied = connectionStringFor('127.0.0.1', ports.blob, ports.queue, ports.table);
    const started = await startAppCluster(proxied, { instances: 1, label: 'scale', host, main: 'bench/fixtures/trivialApp.js' });
    cluster = started;
    hub = started.names.taskHub;
    let maxPassMs = 0;
    probe = monitor(1_000, async () => {
      const res = await started.call('GET', '/api/cluster');
      const pass = (res.json.instance as { lastPass?: { durationMs?: number } | null } | undefined)?.lastPass;
      if (typeof pass?.durationMs === 'number') maxPassMs = Math.max(maxPassMs, pass.durationMs);
    });
    await started.leader();
    await sleep(3_000);
    proxy.reset();
    maxPassMs = 0;
    const cpuFrom = (): ((n: number) => CpuPerJob) => {
      const host = (): number | undefined => {
        const times = [...started.instances.values()].map((h) => processCpuMs(h.child.pid));
        return times.some((t) => t === undefined) ? undefined : times.reduce((a: number, t) => a + (t ?? 0), 0);
      };
      const [azurite0, host0, bench0] = [processCpuMs(azurite.pid), host(), processCpuMs(process.pid)];
      const per = (from: number | undefined, to: number | undefined, n: number): number | undefined =>
        from === undefined || to === undefined ? undefined : (to - from) / n;
      return (n) => ({ azuriteMs: per(azurite0, processCpuMs(azurite.pid), n), hostMs: per(host0, host(), n), benchMs: per(bench0, processCpuMs(process.pid), n) });
    };
    return await work({ cluster: started, proxy, connectionString: azurite.connectionString, maxPassMs: () => maxPassMs, cpuFrom });
  } finally {
    await probe?.stop();
    await cluster?.stop();
    await proxy.close();
    await azurite.stop();
  }
}

export const jobsScaleBench: Bench = {
  name: 'jobs-scale',
  description: 'bursts of small jobs (10 .. 10,000) by HTTP and by queue on one instance, followed as clients follow them, against plain Durable starts of a trivial orchestration',
  async run(ctx) {
    const sizes = (ctx.options.get('sizes') ?? '10,100,1000').split(',').map(Number);
    const vias = (ctx.options.get('via') ?? 'http,queue').split(',');
    const chunkCounts = (ctx.options.get('chunks') ?? '1,2,4').split(',').map(Number);
    if (chunkCounts.some((c) => !(c >= 1 && ITEMS.length % c === 0))) throw new Error(`--chunks must divide ${ITEMS.length}: ${chunkCounts.join(',')}`);
    const breakdown = ctx.options.has('breakdown');
    const lines: string[] = [];
    const rows: BurstFigures[] = [];
    let burst = 0;
    for (const n of sizes) {
      burst += 1;
      let trivialMs = Number.NaN;
      // Baseline: trivial orchestrations started through the standard client, IN_FLIGHT at a time, each followed by its client.
      await onEmptyAccount(ctx.host, async ({ cluster, proxy, maxPassMs, cpuFrom }) => {
        const ids = Array.from({ length: n }, (_, i) => `t${burst}-${i}`);
        const clients = new ClientFollows(cluster);
        const t0 = performance.now();
        const cpu = cpuFrom();
        await inFlight(ids, IN_FLIGHT, async (id) => {
          const started = await clients.submit('PUT', `/api/trivial/${id}`, undefined);
          clients.follow(id, `/api/trivial/${id}`, started.retryAfterMs);
        });
        const seen = await clients.all(Math.max(600_000, n * 120));
        trivialMs = Math.max(...[...seen.values()].map((v) => v.at)) - t0;
        rows.push(figures({ label: 'trivial orchestrations', chunks: undefined, n, wallMs: trivialMs, baselineMs: trivialMs, clients, proxy, maxPassMs, cpu: cpu(n), wrong: 0 }));
        ctx.note(`${n} trivial orchestrations: ${secs(trivialMs)} s`);
      });
      for (const chunks of chunkCounts) {
        for (const via of vias) {
          await onEmptyAccount(ctx.host, async ({ cluster, proxy, connectionString, maxPassMs, cpuFrom }) => {
            const ids = Array.from({ length: n }, (_, i) => `${via[0]}${burst}c${chunks}-${i}`);
            const clients = new ClientFollows(cluster);
            const jobsQueue = QueueServiceClient.fromConnectionString(connectionString).getQueueClient(cluster.names.jobsQueue);
            const list = listProbe(cluster);
            const t0 = performance.now();
            const cpu = cpuFrom();
            await inFlight(ids, IN_FLIGHT, async (jobId) => {
              const submission = { jobId, workType: 'sum', items: ITEMS, options: { chunkSize: ITEMS.length / chunks } };
              if (via === 'http') {
                const accepted = await clients.submit('POST', '/api/jobs', submission);
                clients.follow(jobId, new URL(accepted.location ?? `/api/jobs/${jobId}`, 'http://x').pathname, accepted.retryAfterMs);
              } else {
                await jobsQueue.sendMessage(Buffer.from(JSON.stringify(submission)).toString('base64'));
              }
            });
            ctx.note(`${n} by ${via} in ${chunks} chunk(s): submitted in ${secs(performance.now() - t0)} s`);
            const timeoutMs = Math.max(900_000, n * 500);
            const lastSeen = via === 'http' ? Math.max(...[...(await clients.all(timeoutMs)).values()].map((v) => v.at)) : await countsShowEnded(cluster, n, timeoutMs);
            const wallMs = lastSeen - t0;
            const listed = await list.stop();
            const wrong = await inexact(connectionString, cluster.names.resultsContainer, ids);
            rows.push(figures({ label: `jobs by ${via}`, chunks, n, wallMs, baselineMs: trivialMs, clients, proxy, maxPassMs, cpu: cpu(n), wrong, listed }));
            ctx.note(`${n} by ${via} in ${chunks} chunk(s): last seen ended ${secs(wallMs)} s after the first submission (${(wallMs / trivialMs).toFixed(2)}x)`);
            if (breakdown) {
              const stages = ['intake.started', 'job.planned', 'workitem.done', 'job.aggregated'];
              const timelines = jobTimelines(cluster, ids, 0, stages);
              const rowsOf = stages.map((stage) => {
                const ms = ids.map((id) => (timelines.get(id)?.[stage] ?? NaN) - (clients.postedAt(id) ?? NaN)).filter((v) => Number.isFinite(v));
                return `  ${stage.padEnd(16)} p10 ${secs(percentile(ms, 10))} s, p50 ${secs(percentile(ms, 50))} s, p90 ${secs(percentile(ms, 90))} s (${ms.length} jobs)`;
              });
              ctx.note(`${n} by ${via}, submission -> first log line of each stage:\n${rowsOf.join('\n')}`);
              const logFile = ctx.options.get('log-file');
              if (logFile !== undefined && logFile !== '') {
                const file = `${logFile}.${via}${n}c${chunks}`;
                writeFileSync(file, [...cluster.instances.values()].flatMap((h) => h.lines()).join('\n'));
                ctx.note(`the instance's log lines: ${file}`);
              }
              ctx.note(`${n} by ${via}, transactions per job by kind:\n${byKindPerJob(proxy.counter, n, 40)}`);
            }
          });
        }
      }
    }
    lines.push(`Small sum jobs (${ITEMS.length} items) in bursts, ${IN_FLIGHT} submissions in flight, one instance, shipped settings, the app on the ${benchHostName(ctx.host)}.`);
    lines.push('By HTTP each client follows its Location at the Retry-After it is given; by queue the list\'s counts are read every second; done is when the client saw it.');
    lines.push('');
    lines.push(
      '| burst | chunks | n | first submission -> last seen ended | vs trivial | POST p50 / p99 | status reads a job | transactions per job | ' +
        'Azurite CPU per job | longest pass | list p50 / max while it ran |',
    );
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) lines.push(r.line);
    const wrong = rows.reduce((a, r) => a + r.wrong, 0);
    lines.push('');
    lines.push(wrong === 0 ? 'Every job completed with its exact sum.' : `${wrong} jobs did not complete exact.`);
    if (wrong > 0) throw new Error(lines.join('\n'));
    return { title: 'Jobs scale, as a client sees it: bursts of small jobs against plain Durable starts', lines };
  },
};

/** One row of the table. */
function figures(r: {
  label: string;
  chunks: number | undefined;
  n: number;
  wallMs: number;
  baselineMs: number;
  clients: ClientFollows;
  proxy: Account['proxy'];
  maxPassMs: () => number;
  cpu: CpuPerJob;
  wrong: number;
  listed?: { p50Ms: number; maxMs: number };
}): BurstFigures {
  const posts = r.clients.submitMs();
  const post = posts.length === 0 ? '-' : `${(percentile(posts, 50) / 1000).toFixed(2)} / ${(percentile(posts, 99) / 1000).toFixed(2)} s`;
  const reads = r.clients.reads === 0 ? '-' : (r.clients.reads / r.n).toFixed(1);
  const pass = r.maxPassMs();
  const list = r.listed === undefined ? '-' : `${r.listed.p50Ms.toFixed(0)} / ${r.listed.maxMs.toFixed(0)} ms`;
  const cpu = r.cpu.azuriteMs === undefined ? '-' : `${r.cpu.azuriteMs.toFixed(1)} ms`;
  const line =
    `| ${r.label} | ${r.chunks ?? '-'} | ${r.n} | ${secs(r.wallMs)} s | ${(r.wallMs / r.baselineMs).toFixed(2)}x | ${post} | ${reads} | ` +
    `${(r.proxy.counter.total / r.n).toFixed(1)} | ${cpu} | ${(pass / 1000).toFixed(1)} s | ${list} |`;
  return { wrong: r.wrong, line };
}

interface BurstFigures {
  readonly wrong: number;
  readonly line: string;
}

/** The clients of a burst: each submits, then follows its own status URL at the Retry-After it is given. */
class ClientFollows {
  readonly #cluster: AppCluster;
  readonly #postedWall = new Map<string, number>();
  readonly #submitMs: number[] = [];
  readonly #follows: Array<Promise<void>> = [];
  readonly #seen = new Map<string, { at: number; view: Json }>();
  reads = 0;

  constructor(cluster: AppCluster) {
    this.#cluster = cluster;
  }

  /** When the job's submission was sent, as Date.now() (the instances' log lines are wall-clock). */
  postedAt(id: string): number | undefined {
    return this.#postedWall.get(id);
  }

  submitMs(): number[] {
    return this.#submitMs;
  }

  /** One submission (a 503 is sent again, as a client would); its Location and Retry-After. */
  async submit(method: string, path: string, body: unknown): Promise<{ location: string | undefined; retryAfterMs: number }> {
    const id = path.split('/').pop() ?? '';
    for (let attempt = 1; ; attempt++) {
      const t = performance.now();
      const res = await this.#cluster.fetch(method, path, body);
      if (res.status === 202) {
        this.#submitMs.push(performance.now() - t);
        const key = (body as { jobId?: string } | undefined)?.jobId ?? id;
        this.#postedWall.set(key, Date.now() - (performance.now() - t));
        return { location: res.headers.get('location') ?? undefined, retryAfterMs: retryAfterMs(res.headers) };
      }
      if (res.status !== 503 || attempt >= 5) throw new Error(`${method} ${path} answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
      await sleep(500 * attempt);
    }
  }

  follow(id: string, path: string, firstWaitMs: number): void {
    this.#follows.push(
      (async () => {
        await sleep(firstWaitMs);
        for (;;) {
          this.reads += 1;
          const res = await this.#cluster.fetch('GET', path).catch(() => undefined);
          if (res !== undefined && res.status === 200) {
            const view = (await res.json()) as Json;
            const status = String(view.status ?? view.runtimeStatus);
            if (!['pending', 'running', 'Pending', 'Running'].includes(status)) {
              this.#seen.set(id, { at: performance.now(), view });
              return;
            }
            await sleep(retryAfterMs(res.headers));
          } else {
            await res?.text().catch(() => undefined);
            await sleep(1_000);
          }
        }
      })(),
    );
  }

  async all(timeoutMs: number): Promise<Map<string, { at: number; view: Json }>> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${this.#follows.length - this.#seen.size} clients still waiting after ${timeoutMs / 1000} s`)), timeoutMs);
    });
    try {
      await Promise.race([Promise.all(this.#follows), timeout]);
    } finally {
      clearTimeout(timer);
    }
    return this.#seen;
  }
}

/** A `Retry-After` in ms (1 s when absent or not a number of seconds). */
function retryAfterMs(headers: Headers): number {
  const seconds = Number(headers.get('retry-after') ?? Number.NaN);
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1000 : 1_000;
}

/** Reads the list's counts every second until they show `n` jobs ended; answers when it saw that. */
async function countsShowEnded(cluster: AppCluster, n: number, timeoutMs: number): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const res = await cluster.call('GET', '/api/jobs?counts=true&limit=1').catch(() => undefined);
    const counts = (res?.json.counts ?? {}) as Record<string, unknown>;
    const ended = ['completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'].reduce((a, k) => a + (typeof counts[k] === 'number' ? counts[k] : 0), 0);
    if (ended >= n) return performance.now();
    if (performance.now() > deadline) throw new Error(`the list's counts showed ${ended} of ${n} ended after ${timeoutMs / 1000} s: ${JSON.stringify(counts)}`);
    await sleep(1_000);
  }
}

/** The list's first page (limit 100), timed every 2 s while a burst runs. */
function listProbe(cluster: AppCluster): { stop(): Promise<{ p50Ms: number; maxMs: number }> } {
  const times: number[] = [];
  const probe = monitor(2_000, async () => {
    const t = performance.now();
    const res = await cluster.call('GET', '/api/jobs?limit=100');
    if (res.status === 200) times.push(performance.now() - t);
  });
  return {
    async stop() {
      await probe.stop();
      return { p50Ms: percentile(times, 50), maxMs: Math.max(...times) };
    },
  };
}

/** Jobs whose recorded summary is not `completed` with the exact sum (read from storage, outside the count). */
async function inexact(connectionString: string, container: string, ids: readonly string[]): Promise<number> {
  const results: ContainerClient = BlobServiceClient.fromConnectionString(connectionString).getContainerClient(container);
  let wrong = 0;
  await inFlight(ids, 32, async (jobId) => {
    const body = await results.getBlobClient(`jobs/${jobId}/final.json`).downloadToBuffer().catch(() => undefined);
    const summary = body === undefined ? undefined : (JSON.parse(body.toString('utf8')) as { status?: string; result?: { sum?: unknown } });
    if (summary?.status !== 'completed' || summary.result?.sum !== SUM) wrong += 1;
  });
  return wrong;
}
