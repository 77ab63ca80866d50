/**
 * Benchmark: scale in jobs. Bursts of N small `sum` jobs (20 items each) on one instance of the real
 * app (a development-host process, shipped host.json and settings), submitted at once, 16 requests in
 * flight: by HTTP (POST /api/jobs) and by queue (base64 messages straight onto the jobs queue). Per
 * burst: the time from the first submission to the last job's recorded completion, jobs/s, POST ->
 * completed p50 / p99 (the summary's `finishedAt`), storage transactions per job (every request the
 * instance makes, counted by a proxy in front of Azurite), the leader pass's longest duration seen
 * (GET /api/cluster every second), `GET /api/jobs?limit=100` latency with the burst stored, and the CPU
 * milliseconds a job of the Azurite process and of the app's host process over the burst (from the
 * first submission to the last completion, read from /proc: Linux only). Azurite is one Node.js
 * thread, busy 82-90% of a 1,000-job burst on a 2-core machine: its CPU a job is what the burst's
 * time follows.
 *
 * Every burst starts on empty storage (an Azurite of its own, a new instance), as the scale issue
 * measured: on one shared account a burst paid for what the ones before it left stored.
 * Baseline, same run, same settings, its own empty Azurite: N trivial orchestrations (one activity
 * each) started through the standard durable-functions client at the same concurrency
 * (bench/fixtures/trivialApp.ts): the ceiling the intake sits under. Completion is read from storage by the bench itself (final
 * summaries, the development host's instance blobs), outside the count.
 *
 * Run: `npm run bench -- jobs-scale [--sizes 10,100,1000] [--via http,queue] [--breakdown 1 [--log-file F]]` (--breakdown prints the
 * transactions per job by kind of request and where the jobs' time went; --log-file F keeps each burst's log lines in F.<via><n>).
 */
import { writeFileSync } from 'node:fs';

import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import { connectionStringFor, startAzurite } from 'devhost/testing';

import { type AppCluster, type BenchHost, jobTimelines, monitor, percentile, secs, sleep, startAppCluster } from './appCluster';
import { type Bench } from './index';
import { byKindPerJob, countingProxy, endpointPorts } from './jobsThroughput';
import { processCpuMs } from './processCpu';

/** A small job of the bursts (jobs-scale, burst-failover): a `sum` of 20 items, submitted 16 at a time. */
export const ITEMS = Array.from({ length: 20 }, (_, i) => i + 1);
export const SUM = ITEMS.reduce((a, b) => a + b, 0);
export const IN_FLIGHT = 16;

interface BurstFigures {
  readonly label: string;
  readonly n: number;
  readonly wallMs: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly txPerJob: number;
  readonly maxPassMs: number;
  readonly listMs: number | undefined;
  readonly wrong: number;
  /** CPU milliseconds a job of Azurite's process, and of the app's host process, over the burst (Linux only). */
  readonly cpu: CpuPerJob;
}

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
  description: 'bursts of small jobs (10 .. 10,000) by HTTP and by queue on one instance, against plain Durable starts of a trivial orchestration',
  async run(ctx) {
    const sizes = (ctx.options.get('sizes') ?? '10,100,1000').split(',').map(Number);
    const vias = (ctx.options.get('via') ?? 'http,queue').split(',');
    const breakdown = ctx.options.has('breakdown');
    const lines: string[] = [];
    const rows: BurstFigures[] = [];
    let burst = 0;
    for (const n of sizes) {
      burst += 1;
      // Baseline: trivial orchestrations started through the standard client, IN_FLIGHT at a time.
      await onEmptyAccount(ctx.host, async ({ cluster, proxy, connectionString, cpuFrom }) => {
        const instances = BlobServiceClient.fromConnectionString(connectionString).getContainerClient(`${cluster.names.taskHub.toLowerCase()}-instances`);
        const ids = Array.from({ length: n }, (_, i) => `t${burst}-${i}`);
        const t0 = performance.now();
        const cpu = cpuFrom();
        let retried = 0;
        await inFlight(ids, IN_FLIGHT, async (id) => {
          for (let attempt = 1; ; attempt++) {
            const res = await cluster.call('PUT', `/api/trivial/${id}`);
            if (res.status === 202) return;
            if (attempt >= 5) throw new Error(`trivial start answered ${res.status}: ${JSON.stringify(res.json).slice(0, 300)}`);
            retried += 1;
            await sleep(500 * attempt);
          }
        });
        if (retried > 0) lines.push(`${n} trivial orchestrations: ${retried} starts failed (5xx) and were sent again.`);
        await waitAll(ids, async (id) => {
          const body = await instances.getBlobClient(id).downloadToBuffer().catch(() => undefined);
          try {
            return body !== undefined && (JSON.parse(body.toString('utf8')) as { runtimeStatus?: string }).runtimeStatus === 'Completed';
          } catch {
            return false; // read while it was being replaced: asked again
          }
        }, Math.max(600_000, n * 120));
        const wallMs = performance.now() - t0;
        rows.push({ label: 'trivial orchestrations', n, wallMs, p50Ms: NaN, p99Ms: NaN, txPerJob: proxy.counter.total / n, maxPassMs: NaN, listMs: undefined, wrong: 0, cpu: cpu(n) });
        ctx.note(`${n} trivial orchestrations: ${secs(wallMs)} s`);
      });
      for (const via of vias) {
        await onEmptyAccount(ctx.host, async ({ cluster, proxy, connectionString, maxPassMs, cpuFrom }) => {
          const results: ContainerClient = BlobServiceClient.fromConnectionString(connectionString).getContainerClient(cluster.names.resultsContainer);
          const jobsQueue = QueueServiceClient.fromConnectionString(connectionString).getQueueClient(cluster.names.jobsQueue);
          const finals = new Map<string, { finishedAt: number; ok: boolean }>();
          const finalOf = async (jobId: string): Promise<boolean> => {
            if (finals.has(jobId)) return true;
            const body = await results.getBlobClient(`jobs/${jobId}/final.json`).downloadToBuffer().catch(() => undefined);
            if (body === undefined) return false;
            const summary = JSON.parse(body.toString('utf8')) as { finishedAt?: string; status?: string; result?: { sum?: unknown } };
            finals.set(jobId, { finishedAt: Date.parse(summary.finishedAt ?? ''), ok: summary.status === 'completed' && summary.result?.sum === SUM });
            return true;
          };
          const ids = Array.from({ length: n }, (_, i) => `${via[0]}${burst}-${i}`);
          const posted = new Map<string, number>();
          let retried = 0;
          const t0 = performance.now();
          const wall0 = Date.now();
          const cpu = cpuFrom();
          await inFlight(ids, IN_FLIGHT, async (jobId) => {
            const submission = { jobId, workType: 'sum', items: ITEMS };
            posted.set(jobId, Date.now());
            if (via === 'http') {
              // A 503 says "try again" (storage did not answer in time): a client does, and it is counted.
              for (let attempt = 1; ; attempt++) {
                const res = await cluster.call('POST', '/api/jobs', submission);
                if (res.status === 202) break;
                if (res.status !== 503 || attempt >= 5) throw new Error(`POST /api/jobs answered ${res.status}: ${JSON.stringify(res.json)}`);
                retried += 1;
                await sleep(500 * attempt);
              }
            } else {
              await jobsQueue.sendMessage(Buffer.from(JSON.stringify(submission)).toString('base64'));
            }
          });
          ctx.note(`${n} by ${via}: submitted in ${secs(performance.now() - t0)} s${retried > 0 ? ` (${retried} POSTs answered 503 and were sent again)` : ''}`);
          if (retried > 0) lines.push(`${n} by ${via}: ${retried} POSTs answered 503 SERVICE_UNAVAILABLE and were sent again.`);
          // 15 minutes, or half a second a job for the largest bursts.
          await waitAll(ids, finalOf, Math.max(900_000, n * 500));
          const cpuPerJob = cpu(n);
          const wallMs = Math.max(...ids.map((id) => finals.get(id)?.finishedAt ?? NaN)) - wall0;
          const latencies = ids.map((id) => (finals.get(id)?.finishedAt ?? NaN) - (posted.get(id) ?? NaN));
          const tx = proxy.counter.total;
          const longestPass = maxPassMs();
          const l0 = performance.now();
          const list = await cluster.call('GET', '/api/jobs?limit=100');
          const listMs = list.status === 200 ? performance.now() - l0 : undefined;
          rows.push({
            label: `jobs by ${via}`,
            n,
            wallMs,
            p50Ms: percentile(latencies, 50),
            p99Ms: percentile(latencies, 99),
            txPerJob: tx / n,
            maxPassMs: longestPass,
            listMs,
            wrong: ids.filter((id) => finals.get(id)?.ok !== true).length,
            cpu: cpuPerJob,
          });
          ctx.note(`${n} by ${via}: last completed ${secs(wallMs)} s after the first submission`);
          if (breakdown) {
            // Where a job's time went: submission -> each stage's first log line, percentiles over the burst.
            const stages = ['intake.started', 'job.planned', 'workitem.done', 'job.aggregated'];
            const timelines = jobTimelines(cluster, ids, 0, stages);
            const at = ids.map((id) => ({ t0: posted.get(id) ?? NaN, tl: timelines.get(id) ?? {} }));
            const rowsOf = stages.map((stage) => {
              const ms = at.map(({ t0: from, tl }) => (tl[stage] ?? NaN) - from).filter((v) => Number.isFinite(v));
              return `  ${stage.padEnd(16)} p10 ${secs(percentile(ms, 10))} s, p50 ${secs(percentile(ms, 50))} s, p90 ${secs(percentile(ms, 90))} s (${ms.length} jobs)`;
            });
            ctx.note(`${n} by ${via}, submission -> first log line of each stage:\n${rowsOf.join('\n')}`);
            const logFile = ctx.options.get('log-file');
            if (logFile !== undefined && logFile !== '') {
              const file = `${logFile}.${via}${n}`;
              writeFileSync(file, [...cluster.instances.values()].flatMap((h) => h.lines()).join('\n'));
              ctx.note(`the instance's log lines: ${file}`);
            }
            ctx.note(`${n} by ${via}, transactions per job by kind:\n${byKindPerJob(proxy.counter, n, 40)}`);
          }
        });
      }
    }
    lines.push(`Small sum jobs (${ITEMS.length} items) in bursts, ${IN_FLIGHT} submissions in flight, one instance, shipped settings.`);
    lines.push('');
    lines.push(
      '| burst | n | first submission -> last completed | per second | POST -> completed p50 / p99 | transactions per job | ' +
        'Azurite CPU per job | host CPU per job | bench CPU per job | longest pass | list (limit 100) |',
    );
    lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      const p = Number.isNaN(r.p50Ms) ? '-' : `${secs(r.p50Ms)} / ${secs(r.p99Ms)} s`;
      const pass = Number.isNaN(r.maxPassMs) ? '-' : `${(r.maxPassMs / 1000).toFixed(1)} s`;
      const list = r.listMs === undefined ? '-' : `${r.listMs.toFixed(0)} ms`;
      const ms = (v: number | undefined): string => (v === undefined ? '-' : `${v.toFixed(1)} ms`);
      const rate = (r.n / (r.wallMs / 1000)).toFixed(1);
      lines.push(
        `| ${r.label} | ${r.n} | ${secs(r.wallMs)} s | ${rate} | ${p} | ${r.txPerJob.toFixed(1)} | ${ms(r.cpu.azuriteMs)} | ${ms(r.cpu.hostMs)} | ${ms(r.cpu.benchMs)} | ${pass} | ${list} |`,
      );
    }
    const wrong = rows.reduce((a, r) => a + r.wrong, 0);
    lines.push('');
    lines.push(wrong === 0 ? 'Every job completed with its exact sum.' : `${wrong} jobs did not complete exact.`);
    if (wrong > 0) throw new Error(lines.join('\n'));
    return { title: 'Jobs scale: bursts of small jobs against plain Durable starts', lines };
  },
};
