/**
 * Benchmark: the leader killed in the middle of a burst. Two instances of the real app (development
 * host processes, shipped host.json and settings) on an Azurite of their own, N small `sum` jobs (20
 * items) sent at once as queue messages (16 in flight), and the leader SIGKILLed `--kill-after`
 * seconds after the first submission: it dies holding starts whose plans have not run, starts it
 * was making, and Durable messages it had taken (past the admission bound the rest of the burst
 * waits on the jobs queue, JobIntake).
 * The other instance takes the lease once it expires, its start checks take the dead leader's
 * marked starts over a few at a time, and Durable's messages come back after their visibility
 * timeouts. Figures: the time from the first submission to the last job's recorded completion, the
 * kill -> next leader time (its `leader.acquired` log line; GET /api/leader's first answer naming it
 * when that line does not come within 5 s, marked "api"), and what the dead leader had done by then (from its log).
 * Every job must complete exact, and be planned by one start (one `job.planned` start id a job):
 * either failing fails the bench.
 *
 * Baseline, same run, same settings, its own empty Azurite: the same burst on two instances with no kill.
 *
 * Run: `npm run bench -- burst-failover [--jobs 1000] [--kill-after 8] [--breakdown 1] [--no-kill 1 | --no-baseline 1] [--log-file F]`. --breakdown puts the
 * counting proxy in front of the instances' storage and prints each burst's storage transactions per
 * job by kind of request (the bench's sends and its reads of the final summaries go straight to
 * Azurite and are not counted; its GET /api/leader polls after a kill are, as the app's read of the
 * lease blob) and the Azurite CPU a job (everything Azurite did, the bench's sends and reads too); --no-kill
 * runs the baseline only, --no-baseline the killed burst only; --log-file F keeps every instance's log
 * lines (the killed one's too) in F.baseline and F.kill.
 */
import { writeFileSync } from 'node:fs';

import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';
import { connectionStringFor, type HostProcess, startAzurite } from 'devhost/testing';

import { type AppCluster, type BenchHost, percentile, secs, sleep, startAppCluster } from './appCluster';
import { type Bench } from './index';
import { IN_FLIGHT, inFlight, ITEMS, SUM, waitAll } from './jobsScale';
import { byKindPerJob, countingProxy, endpointPorts } from './jobsThroughput';
import { processCpuMs } from './processCpu';

interface Run {
  readonly label: string;
  readonly wallMs: number;
  readonly p50Ms: number;
  readonly wrong: number;
  /** Jobs whose `job.planned` lines name more than one start id (planned by two starts). */
  readonly plannedTwice: number;
  readonly kill?: {
    readonly atMs: number;
    readonly nextLeaderMs: number;
    /** Where nextLeaderMs comes from: the new leader's `leader.acquired` line, or GET /api/leader's first answer naming it. */
    readonly nextLeaderFrom: 'log' | 'api';
    readonly lastCompletedMs: number;
    /** What the dead leader's log shows by its kill. */
    readonly started: number;
    readonly completed: number;
    /** Starts the next leader's checks made again (intake.start_repaired). */
    readonly repaired: number;
  };
}

/** Jobs planned under more than one start id, from every instance's log (the dead one's kept). */
function plannedTwice(hosts: readonly HostProcess[]): number {
  const starts = new Map<string, Set<unknown>>();
  for (const planned of hosts.flatMap((h) => h.events('job.planned'))) {
    const jobId = String(planned.jobId);
    starts.set(jobId, (starts.get(jobId) ?? new Set()).add(planned.startId));
  }
  return [...starts.values()].filter((s) => s.size > 1).length;
}

async function burst(host: BenchHost, n: number, killAfterMs: number | undefined, note: (m: string) => void, breakdown: boolean, logFile?: string): Promise<Run> {
  const azurite = await startAzurite();
  let hub = '';
  let proxy: Awaited<ReturnType<typeof countingProxy>> | undefined;
  let cluster: AppCluster | undefined;
  // The killed leader's process keeps what it printed: its log stays readable after the kill.
  let dead: HostProcess | undefined;
  try {
    // With --breakdown the instances talk to Azurite through the counting proxy (the bench's own sends and reads do not).
    proxy = breakdown ? await countingProxy(endpointPorts(azurite.connectionString), () => hub) : undefined;
    const through = proxy === undefined ? azurite.connectionString : connectionStringFor('127.0.0.1', proxy.ports.blob, proxy.ports.queue, proxy.ports.table);
    cluster = await startAppCluster(through, { instances: 2, label: 'failover', host });
    const c = cluster;
    hub = c.names.taskHub;
    const leader = await c.leader();
    await sleep(3_000);
    proxy?.reset();
    const azuriteCpu0 = processCpuMs(azurite.pid);
    const jobsQueue = QueueServiceClient.fromConnectionString(azurite.connectionString).getQueueClient(c.names.jobsQueue);
    const ids = Array.from({ length: n }, (_, i) => `f${killAfterMs === undefined ? 'b' : 'k'}-${i}`);
    const posted = new Map<string, number>();
    const wall0 = Date.now();
    const sending = inFlight(ids, IN_FLIGHT, async (jobId) => {
      posted.set(jobId, Date.now());
      await jobsQueue.sendMessage(Buffer.from(JSON.stringify({ jobId, workType: 'sum', items: ITEMS })).toString('base64'));
    });
    let kill: Run['kill'] | undefined;
    dead = killAfterMs === undefined ? undefined : c.instances.get(leader);
    if (killAfterMs !== undefined) {
      await sleep(Math.max(0, wall0 + killAfterMs - Date.now()));
      const killedAt = Date.now();
      await c.kill(leader);
      note(`burst-failover: ${leader} (the leader) killed ${secs(killedAt - wall0)} s after the first submission`);
      const nextLeader = await c.leader(180_000);
      const answeredMs = Date.now() - killedAt;
      // When it took the lease, from its own log (GET /api/leader on a loaded instance can answer late;
      // the lease record it reads is written before the line, which comes through a pipe: waited for a moment).
      const acquiredLines = (): Array<Record<string, unknown>> =>
        (c.instances.get(nextLeader)?.events('leader.acquired') ?? []).filter((e) => Date.parse(String(e.ts)) >= killedAt);
      for (let waited = 0; acquiredLines().length === 0 && waited < 5_000; waited += 100) await sleep(100);
      const [first] = acquiredLines();
      const nextLeaderFrom = first === undefined ? 'api' : 'log';
      const nextLeaderMs = first === undefined ? answeredMs : Date.parse(String(first.ts)) - killedAt;
      // A `takeoverWaitMs` says it had campaigned and seen the lease held; without one its first try
      // won: it had served nothing that hands out a Durable client and campaigned once its timer fired
      // (docs/leader-election.md: the host moves the timer's listener lock after up to a minute).
      const campaigned = first === undefined ? 'unknown' : typeof first.takeoverWaitMs === 'number' ? 'yes' : 'no, its timer started it';
      note(
        `burst-failover: ${nextLeader} took the lease ${secs(nextLeaderMs)} s after the kill ` +
          `(${nextLeaderFrom}; GET /api/leader named it after ${secs(answeredMs)} s; campaigning before: ${campaigned})`,
      );
      kill = {
        atMs: killedAt - wall0,
        nextLeaderMs,
        nextLeaderFrom,
        lastCompletedMs: NaN,
        started: dead?.events('intake.started').length ?? 0,
        completed: dead?.events('job.aggregated').length ?? 0,
        repaired: 0,
      };
    }
    await sending;
    const finals = new Map<string, { finishedAt: number; ok: boolean }>();
    // Read straight from Azurite: the bench's own polls are not the app's transactions.
    const results = BlobServiceClient.fromConnectionString(azurite.connectionString).getContainerClient(c.names.resultsContainer);
    await waitAll(ids, async (jobId) => {
      const body = await results.getBlobClient(`jobs/${jobId}/final.json`).downloadToBuffer().catch(() => undefined);
      if (body === undefined) return false;
      const summary = JSON.parse(body.toString('utf8')) as { finishedAt?: string; status?: string; result?: { sum?: unknown } };
      finals.set(jobId, { finishedAt: Date.parse(summary.finishedAt ?? ''), ok: summary.status === 'completed' && summary.result?.sum === SUM });
      return true;
    }, Math.max(900_000, n * 500));
    const lastFinished = Math.max(...ids.map((id) => finals.get(id)?.finishedAt ?? NaN));
    if (proxy !== undefined) {
      const cpu = processCpuMs(azurite.pid);
      note(
        `burst-failover ${killAfterMs === undefined ? 'no kill' : 'kill'}: ${(proxy.counter.total / n).toFixed(1)} transactions a job, ` +
          `Azurite CPU ${cpu === undefined || azuriteCpu0 === undefined ? '-' : ((cpu - azuriteCpu0) / n).toFixed(1)} ms a job; by kind:\n` +
          byKindPerJob(proxy.counter, n, 60),
      );
    }
    const survivors = [...c.instances.values()];
    const latencies = ids.map((id) => (finals.get(id)?.finishedAt ?? NaN) - (posted.get(id) ?? NaN));
    return {
      label: killAfterMs === undefined ? 'no kill (baseline)' : `leader killed at ${secs(killAfterMs)} s`,
      wallMs: lastFinished - wall0,
      p50Ms: percentile(latencies, 50),
      wrong: ids.filter((id) => finals.get(id)?.ok !== true).length,
      plannedTwice: plannedTwice([...(dead === undefined ? [] : [dead]), ...survivors]),
      ...(kill === undefined
        ? {}
        : { kill: { ...kill, lastCompletedMs: lastFinished - wall0 - kill.atMs, repaired: survivors.reduce((a, h) => a + h.events('intake.start_repaired').length, 0) } }),
    };
  } finally {
    // Kept whatever happened (a burst that timed out is the one whose logs say why).
    if (logFile !== undefined && logFile !== '' && cluster !== undefined) {
      const file = `${logFile}.${killAfterMs === undefined ? 'baseline' : 'kill'}`;
      writeFileSync(file, [...(dead === undefined ? [] : [dead]), ...cluster.instances.values()].flatMap((h) => h.lines()).join('\n'));
      note(`burst-failover: the instances' log lines: ${file}`);
    }
    await cluster?.stop();
    await proxy?.close();
    await azurite.stop();
  }
}

export const burstFailoverBench: Bench = {
  name: 'burst-failover',
  description: 'the leader killed in the middle of a burst of small jobs by queue on two instances, against the same burst without the kill',
  async run(ctx) {
    const n = Number(ctx.options.get('jobs') ?? '1000');
    const killAfterMs = Number(ctx.options.get('kill-after') ?? '8') * 1000;
    if (!Number.isInteger(n) || n < 1 || !Number.isFinite(killAfterMs) || killAfterMs < 0) throw new Error('--jobs must be a positive integer, --kill-after seconds');
    if (ctx.options.has('no-kill') && ctx.options.has('no-baseline')) throw new Error('--no-kill and --no-baseline together leave nothing to run');
    const breakdown = ctx.options.has('breakdown');
    const logFile = ctx.options.get('log-file');
    const baseline = ctx.options.has('no-baseline') ? undefined : await burst(ctx.host, n, undefined, ctx.note, breakdown, logFile);
    if (baseline !== undefined) ctx.note(`burst-failover: ${n} jobs without a kill: ${secs(baseline.wallMs)} s`);
    if (baseline !== undefined && ctx.options.has('no-kill')) {
      const only = `${secs(baseline.wallMs)} s, p50 ${secs(baseline.p50Ms)} s, ${baseline.wrong} not exact, ${baseline.plannedTwice} planned by two starts`;
      if (baseline.wrong > 0 || baseline.plannedTwice > 0) throw new Error(`${n} jobs without a kill: ${only}`);
      return { title: 'Burst failover: the baseline only (--no-kill)', lines: [`${n} jobs on two instances without a kill: ${only}.`] };
    }
    const killed = await burst(ctx.host, n, killAfterMs, ctx.note, breakdown, logFile);
    ctx.note(`burst-failover: ${n} jobs with the leader killed: ${secs(killed.wallMs)} s`);
    const lines: string[] = [
      `${n} small sum jobs (${ITEMS.length} items) sent at once as queue messages (${IN_FLIGHT} in flight), two instances, shipped settings.`,
      '',
      '| burst | first submission -> last completed | POST -> completed p50 | kill -> next leader | kill -> last completed | the dead leader had: started / completed | starts repaired | planned by two starts | not exact |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ];
    for (const r of baseline === undefined ? [killed] : [baseline, killed]) {
      const k = r.kill;
      const ratio = baseline === undefined ? '' : ` (${(r.wallMs / baseline.wallMs).toFixed(2)}x)`;
      lines.push(
        `| ${r.label} | ${secs(r.wallMs)} s${ratio} | ${secs(r.p50Ms)} s | ${k === undefined ? '-' : `${secs(k.nextLeaderMs)} s${k.nextLeaderFrom === 'api' ? ' (api)' : ''}`} | ` +
          `${k === undefined ? '-' : `${secs(k.lastCompletedMs)} s`} | ${k === undefined ? '-' : `${k.started} / ${k.completed}`} | ` +
          `${k === undefined ? '-' : k.repaired} | ${r.plannedTwice} | ${r.wrong} |`,
      );
    }
    const wrong = (baseline?.wrong ?? 0) + killed.wrong;
    const twice = (baseline?.plannedTwice ?? 0) + killed.plannedTwice;
    lines.push('');
    lines.push(wrong === 0 ? 'Every job completed with its exact sum.' : `${wrong} jobs did not complete exact.`);
    if (twice > 0) lines.push(`${twice} jobs were planned by two starts (the fence must make that impossible).`);
    if (wrong > 0 || twice > 0) throw new Error(lines.join('\n'));
    return { title: 'Burst failover: the leader killed in the middle of a burst', lines };
  },
};
