/**
 * Benchmark: recovery from a killed worker. Three host processes (the extensions host unless --host devhost) as
 * `npm start --instances 3` runs them (one app, one host id), one Azurite, the shipped host.json and
 * settings (or `--batch-size N`: host.json's queues batchSize N, newBatchThreshold N/2). The job is
 * `slowsum` (bench/fixtures/slowSumApp.ts: `sum`, exact, with `--item-ms` of waiting per item, the items
 * of a chunk side by side), so every chunk takes seconds and the killed instance surely holds chunks:
 * some claimed (a worker claims a chunk after 2 s on it) and some received but not yet claimed. With
 * `sum` itself a chunk took microseconds and the kill found the victim holding none.
 * Once 20% of the chunks have results, an instance is SIGKILLed: a non-leader in trials 1, 3, ..., the
 * leader (GET /api/leader) in trials 2, 4, ...; the one of that kind holding the most claimed chunks
 * (read from the claim blobs). Measured: kill -> `completed` (seen by polling GET /api/jobs/{id}),
 * and the job's whole duration against the same job run without a kill in the same run (the
 * baseline), so the extra time the kill caused is printed too. Each trial checks the result is exact
 * (count N, sum N(N+1)/2) and every chunk has exactly one result. The target is L + 30 s
 * (L = LEADER_LEASE_SECONDS). A trial that does not complete in time is reported with where its
 * missing chunks are (claimed by whom, or never claimed) and its job is cancelled.
 *
 * Run: `npm run bench -- recovery [--trials 2] [--items 4800] [--chunk-size 8] [--item-ms 3000]
 * [--batch-size 8] [--trial-timeout 120]` (seconds from the kill after which a trial counts as not recovered).
 */
import { type HostProcess } from 'devhost/testing';

import { type AppCluster, claimedUnfinished, type Json, listNames, runJob, secs, sleep, startAppCluster, submitJob, uploadItems, waitForJob } from './appCluster';
import { type Bench } from './index';

interface Trial {
  readonly target: 'non-leader' | 'leader';
  readonly killed: string;
  readonly wasLeader: boolean;
  /** Claimed-but-unfinished chunks the killed instance held when killed. */
  readonly held: number;
  /** Chunk results present when it was killed, of `chunks`. */
  readonly doneAtKill: number;
  /** The job's phase per GET /api/jobs/{id} when the victim was chosen. */
  readonly phase: string;
  readonly killAfterPostMs: number;
  /** Undefined when the job did not complete within the trial's time limit. */
  readonly killToCompletedMs?: number;
  readonly totalMs?: number;
  /** Chunks with more than one claim (dispatched or delivered again). */
  readonly reclaimed: number;
  readonly exact: boolean;
  readonly status: string;
}

function sumTo(n: number): bigint {
  return (BigInt(n) * BigInt(n + 1)) / 2n;
}

/** Exact result and one result per chunk; a string saying what is wrong, or undefined. */
async function checkJob(cluster: AppCluster, jobId: string, view: Json, items: number, chunks: number): Promise<string | undefined> {
  const result = view.result as { count?: unknown; sum?: unknown } | undefined;
  const progress = (view.progress as { chunks?: { total?: number; done?: number; failed?: number } } | undefined)?.chunks;
  const results = await listNames(cluster.results, `jobs/${jobId}/results/`);
  const problems: string[] = [];
  if (view.status !== 'completed') problems.push(`status ${String(view.status)}`);
  if (result?.count !== items) problems.push(`count ${String(result?.count)} (expected ${items})`);
  if (String(result?.sum) !== sumTo(items).toString()) problems.push(`sum ${String(result?.sum)} (expected ${sumTo(items)})`);
  if (progress?.total !== chunks || progress.done !== chunks || (progress.failed ?? 0) !== 0) problems.push(`progress ${JSON.stringify(progress)}`);
  if (results.length !== chunks || new Set(results).size !== chunks) problems.push(`${results.length} result blobs for ${chunks} chunks`);
  return problems.length === 0 ? undefined : problems.join('; ');
}

async function chooseVictim(cluster: AppCluster, jobId: string, chunks: number, target: Trial['target'], leader: string): Promise<{ id: string; held: number; done: number; phase: string }> {
  // Steady state first (results flowing), then the first moment the wanted kind of instance holds claimed chunks.
  const enoughDone = Math.max(1, Math.ceil(chunks * 0.2));
  let giveUpAt = Infinity;
  for (;;) {
    // The phase the status API shows at the kill (this pipeline may still be dispatching then); read
    // before the claims, so the kill follows the claim snapshot as closely as possible.
    const phase = String((await cluster.call('GET', `/api/jobs/${jobId}`).catch(() => undefined))?.json.phase);
    const { holders, results } = await claimedUnfinished(cluster, jobId);
    if (results >= chunks) throw new Error('the job finished before an instance could be killed: use more --items');
    const held = new Map<string, number>();
    for (const holder of holders.values()) held.set(holder, (held.get(holder) ?? 0) + 1);
    if (results >= enoughDone) {
      const candidates = [...held].filter(([id]) => cluster.instances.has(id) && (target === 'leader' ? id === leader : id !== leader)).sort((a, b) => b[1] - a[1]);
      const best = candidates[0];
      if (best !== undefined) return { id: best[0], held: best[1], done: results, phase };
      // Workers claim only chunks they have been on for 2 s: a chunk received in the last 2 s is held
      // without a claim. After 5 s without a claimed holder (--item-ms too short), kill the target anyway.
      giveUpAt = Math.min(giveUpAt, performance.now() + 5_000);
      if (performance.now() > giveUpAt) {
        const id = target === 'leader' ? leader : ([...cluster.instances.keys()].find((k) => k !== leader) ?? leader);
        return { id, held: 0, done: results, phase };
      }
    }
    await sleep(150);
  }
}

/** Where the time after the kill went, from every instance's log lines (the victim's up to its kill): seconds from the kill. */
function afterKill(hosts: readonly HostProcess[], jobId: string, killedAtEpoch: number): string {
  const done: number[] = [];
  const marks: string[] = [];
  for (const host of hosts) {
    for (const line of host.lines()) {
      if (!line.includes(`"jobId":"${jobId}"`)) continue;
      const event = /"event":"([^"]+)"/.exec(line)?.[1];
      const at = (Date.parse(/"ts":"([^"]+)"/.exec(line)?.[1] ?? '') - killedAtEpoch) / 1000;
      if (!Number.isFinite(at) || at < 0) continue;
      if (event === 'workitem.done') done.push(at);
      else if (event === 'job.chunks_resent' || event === 'job.resume_requested') {
        const reasons = ['silent', 'unclaimed', 'overtaken', 'deadline', 'idleMs']
          .map((r) => [r, new RegExp(`"${r}":(\\d+)`).exec(line)?.[1]] as const)
          .filter(([, n]) => n !== undefined);
        marks.push(`${at.toFixed(1)} ${event}${reasons.map(([r, n]) => ` ${r} ${n}`).join('')}`);
      }
    }
  }
  const buckets = new Map<number, number>();
  for (const at of done) {
    const from = Math.floor(at / 5) * 5;
    buckets.set(from, (buckets.get(from) ?? 0) + 1);
  }
  const perFive = [...buckets].sort((a, b) => a[0] - b[0]).map(([from, n]) => `${from}-${from + 5} s: ${n}`).join(', ');
  return `after the kill, chunks done per 5 s: ${perFive}; ${marks.sort((a, b) => parseFloat(a) - parseFloat(b)).join('; ') || 'no re-sends logged'}`;
}

export const recoveryBench: Bench = {
  name: 'recovery',
  description: 'kill -> completed for an exact sum job of slow chunks when an instance holding chunks is SIGKILLed (3 instances), vs the same job without a kill',
  async run(ctx) {
    const trials = Number(ctx.options.get('trials') ?? 2);
    const items = Number(ctx.options.get('items') ?? 4_800);
    const chunkSize = Number(ctx.options.get('chunk-size') ?? 8);
    const itemMs = Number(ctx.options.get('item-ms') ?? 3_000);
    const batchSize = ctx.options.has('batch-size') ? Number(ctx.options.get('batch-size')) : undefined;
    // Past this (from the kill) a trial counts as not recovered; the job is cancelled so the next trial runs alone.
    const trialTimeoutMs = Number(ctx.options.get('trial-timeout') ?? 120) * 1000;
    if (!Number.isInteger(trials) || trials < 1 || !Number.isInteger(items) || items < 1 || !Number.isInteger(chunkSize) || chunkSize < 1) {
      throw new Error('--trials, --items and --chunk-size must be positive whole numbers');
    }
    if (!Number.isInteger(itemMs) || itemMs < 0 || (batchSize !== undefined && (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 32))) {
      throw new Error('--item-ms must be a whole number of milliseconds and --batch-size 1 to 32 (the host\'s limit)');
    }
    const chunks = Math.ceil(items / chunkSize);
    const cluster = await startAppCluster(ctx.connectionString, {
      instances: 3,
      label: 'rec',
      host: ctx.host,
      main: 'bench/fixtures/slowSumApp.js',
      env: { BENCH_SLOWSUM_ITEM_MS: String(itemMs) },
      ...(batchSize === undefined ? {} : { queues: { batchSize, newBatchThreshold: Math.floor(batchSize / 2) } }),
    });
    try {
      const leaseSeconds = Number(cluster.settings.LEADER_LEASE_SECONDS ?? 15);
      const targetMs = (leaseSeconds + 30) * 1000;
      const itemsBlob = await uploadItems(
        cluster,
        'slowsum.json',
        Array.from({ length: items }, (_, i) => i + 1),
      );
      const submission = (jobId: string): Json & { jobId: string } => ({ jobId, workType: 'slowsum', itemsBlob, options: { chunkSize } });
      ctx.note(`recovery: 3 instances up; leader ${await cluster.leader()}; baseline job of ${items} items in ${chunks} chunks`);
      // Warm the instances (queues, containers, first orchestration) so the baseline is not the first job.
      await runJob(cluster, { jobId: 'rec-warmup', workType: 'sum', items: [1, 2, 3] }, 120_000);
      const base = await runJob(cluster, submission('rec-baseline'), 600_000);
      const baselineProblem = await checkJob(cluster, 'rec-baseline', base.view, items, chunks);
      if (baselineProblem !== undefined) throw new Error(`baseline job wrong: ${baselineProblem}`);
      const baselineMs = base.finishedAt - base.postedAt;
      ctx.note(`recovery: baseline ${secs(baselineMs)} s`);

      const results: Trial[] = [];
      const timelines: string[] = [];
      for (let t = 0; t < trials; t++) {
        const target: Trial['target'] = t % 2 === 0 ? 'non-leader' : 'leader';
        for (const id of ['instance-1', 'instance-2', 'instance-3']) await cluster.restart(id);
        const leader = await cluster.leader(90_000);
        const jobId = `rec-trial-${t}`;
        const postedAt = await submitJob(cluster, submission(jobId));
        const victim = await chooseVictim(cluster, jobId, chunks, target, leader);
        const victimHost = cluster.instances.get(victim.id);
        const killedAt = performance.now();
        const killedAtEpoch = Date.now();
        await cluster.kill(victim.id);
        ctx.note(`recovery: trial ${t + 1}: killed ${victim.id} (${victim.id === leader ? 'leader' : 'non-leader'}) holding ${victim.held} claimed chunks, ${victim.done}/${chunks} done`);
        const finished = await waitForJob(cluster, jobId, trialTimeoutMs, { note: ctx.note }).catch(() => undefined);
        timelines.push(`trial ${t + 1}: ${afterKill([...cluster.instances.values(), ...(victimHost === undefined ? [] : [victimHost])], jobId, killedAtEpoch)}`);
        const claims = await listNames(cluster.results, `jobs/${jobId}/claims/`);
        const perChunk = new Map<string, number>();
        for (const name of claims) {
          const chunk = /claims\/(\d+)-/.exec(name)?.[1] ?? name;
          perChunk.set(chunk, (perChunk.get(chunk) ?? 0) + 1);
        }
        const reclaimed = [...perChunk.values()].filter((n) => n > 1).length;
        const common = { target, killed: victim.id, wasLeader: victim.id === leader, held: victim.held, doneAtKill: victim.done, phase: victim.phase, killAfterPostMs: killedAt - postedAt, reclaimed };
        if (finished === undefined) {
          // Where the missing chunks are: claimed (by whom) or never claimed (a message the dead instance took and never claimed).
          const left = await claimedUnfinished(cluster, jobId);
          const byHolder = new Map<string, number>();
          for (const h of left.holders.values()) byHolder.set(h, (byHolder.get(h) ?? 0) + 1);
          const unfinished = chunks - left.results;
          const stuck = `${unfinished} chunks without a result: ${[...byHolder].map(([h, n]) => `${n} claimed by ${h}`).join(', ') || 'none claimed'}, ${unfinished - left.holders.size} never claimed`;
          ctx.note(`recovery: trial ${t + 1} not completed after ${secs(trialTimeoutMs)} s from the kill; ${stuck}; cancelling it`);
          await cluster.call('DELETE', `/api/jobs/${jobId}`).catch(() => undefined);
          results.push({ ...common, exact: false, status: `not completed after ${secs(trialTimeoutMs)} s: ${stuck}` });
          continue;
        }
        const problem = await checkJob(cluster, jobId, finished.view, items, chunks);
        if (problem !== undefined) ctx.note(`recovery: trial ${t + 1} NOT exact: ${problem}`);
        results.push({
          ...common,
          killToCompletedMs: finished.finishedAt - killedAt,
          totalMs: finished.finishedAt - postedAt,
          exact: problem === undefined,
          status: problem ?? String(finished.view.status),
        });
      }
      const yes = (ok: boolean): string => (ok ? 'yes' : '**no**');
      const hostJson =
        batchSize === undefined ? 'shipped host.json and settings' : `host.json with queues batchSize ${batchSize} and newBatchThreshold ${Math.floor(batchSize / 2)}, shipped settings`;
      const lines = [
        `slowsum job (exact sum, ${itemMs} ms per item) of ${items} items (1..${items}) in ${chunks} chunks of ${chunkSize} by itemsBlob; ` +
          `3 instances (one app), ${hostJson}; L = ${leaseSeconds} s, target L + 30 = ${secs(targetMs)} s.`,
        '',
        '| trial | killed | chunks held at kill | chunks done at kill | phase at kill | kill after POST (s) | kill -> completed (s) | POST -> completed (s) | extra vs baseline (s) | chunks claimed again | exact, each chunk once | kill -> completed <= target | extra <= target |',
        '|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---|',
        `| baseline (no kill) | - | - | - | - | - | - | ${secs(baselineMs)} | 0 | - | yes | - | - |`,
        ...results.map((r, i) => {
          const who = `${r.killed} (${r.wasLeader ? 'leader' : 'non-leader'})`;
          const at = `${r.held} | ${r.doneAtKill}/${chunks} | ${r.phase} | ${secs(r.killAfterPostMs)}`;
          if (r.killToCompletedMs === undefined || r.totalMs === undefined) {
            return `| ${i + 1} | ${who} | ${at} | > ${secs(trialTimeoutMs)} | - | - | ${r.reclaimed} | **no**: ${r.status} | **no** | **no** |`;
          }
          const extra = r.totalMs - baselineMs;
          const exact = r.exact ? 'yes' : `**no**: ${r.status}`;
          return `| ${i + 1} | ${who} | ${at} | ${secs(r.killToCompletedMs)} | ${secs(r.totalMs)} | ${secs(extra)} | ${r.reclaimed} | ${exact} | ${yes(r.killToCompletedMs <= targetMs)} | ${yes(extra <= targetMs)} |`;
        }),
        '',
        ...timelines,
        '',
        'kill -> completed runs from the SIGKILL to the first status poll (every 200 ms) that saw `completed`; it includes the work the job had left, done by 2 instances instead of 3.',
        'extra vs baseline = (POST -> completed with the kill) - (POST -> completed of the same job with no kill, same run): the time the kill cost.',
        '"Chunks held" are chunks whose latest claim blob names the killed instance and that had no result in the snapshot taken just before the kill; it',
        'also held chunks received in its last 2 s, not yet claimed. "Claimed again" counts chunks with more than one claim blob (re-dispatched).',
        'A trial not completed within the time limit is diagnosed: the chunks without a result, claimed (by whom) or never claimed (delivered to an instance',
        'that died before claiming them: their queue message stays invisible until its visibility timeout, 10 minutes on the Functions host).',
      ];
      return { title: 'Recovery from a killed instance (3 instances, slow exact sum job)', lines };
    } finally {
      await cluster.stop();
    }
  },
};
