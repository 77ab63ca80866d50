/**
 * Benchmark: failover in an idle app. N instances of one app (one host id, as `npm start --instances
 * N` runs them; the extensions host unless --host devhost), the shipped host.json and settings, no
 * jobs; after `--idle` seconds the leader's instance is SIGKILLed and a queue submission is put on
 * the jobs queue at once. Measured per trial, from the kill: when a survivor holds the lease with a
 * newer epoch (GET /api/leader on the survivors every 250 ms), and when that job is seen completed
 * (its status, GET /api/jobs/{id} at its Retry-After). Then the killed instance is started again and
 * the next trial waits idle again. The goal (issue 49): a new leader within L + 5 s (20 s at L = 15 s).
 *
 * Variants (`--variants shipped,...`) change only host.json: `singleton15` sets the WebJobs
 * listener lock to its shortest (`listenerLockPeriod` and `listenerLockRecoveryPollingInterval`
 * 15 s), which decides how soon the timer trigger fires on another instance.
 *
 * Run: `npm run bench -- idle-failover [--instances 3] [--trials 3] [--idle 45] [--variants shipped]`.
 */
import { type AppCluster, benchHostName, instanceIds, percentile, secs, sleep, startAppCluster } from './appCluster';
import { type Bench, type BenchContext } from './index';

interface Variant {
  readonly name: string;
  readonly hostJson?: Readonly<Record<string, unknown>>;
}

const VARIANTS: Readonly<Record<string, Variant>> = {
  shipped: { name: 'shipped' },
  singleton15: { name: 'singleton15', hostJson: { singleton: { listenerLockPeriod: '00:00:15', listenerLockRecoveryPollingInterval: '00:00:15' } } },
};

interface Trial {
  readonly leaderMs: number | undefined;
  readonly jobMs: number | undefined;
}

async function leaderOf(cluster: AppCluster, id: string): Promise<{ holder?: string; epoch?: number; leaseState?: string } | undefined> {
  const res = await cluster.call('GET', '/api/leader', undefined, id).catch(() => undefined);
  return res?.status === 200 ? (res.json) : undefined;
}

async function runVariant(ctx: BenchContext, variant: Variant, o: { instances: number; trials: number; idleSeconds: number }): Promise<Trial[]> {
  const cluster = await startAppCluster(ctx.connectionString, {
    instances: o.instances,
    label: `idle${variant.name}`,
    host: ctx.host,
    ...(variant.hostJson === undefined ? {} : { hostJson: variant.hostJson }),
  });
  const trials: Trial[] = [];
  try {
    for (let t = 1; t <= o.trials; t++) {
      const holder = await cluster.leader(120_000);
      ctx.note(`${variant.name} trial ${t}: ${holder} leads; idle ${o.idleSeconds} s`);
      await sleep(o.idleSeconds * 1000);
      const before = await leaderOf(cluster, holder);
      const survivors = instanceIds(o.instances).filter((id) => id !== holder);
      const killedAt = performance.now();
      await cluster.kill(holder);
      const jobId = `idle-${variant.name}-${t}`;
      await cluster.submitToQueue({ jobId, workType: 'sum', items: [1, 2, 3] });
      let leaderMs: number | undefined;
      let jobMs: number | undefined;
      const deadline = killedAt + 180_000;
      while (performance.now() < deadline && (leaderMs === undefined || jobMs === undefined)) {
        if (leaderMs === undefined) {
          for (const id of survivors) {
            const view = await leaderOf(cluster, id);
            if (view?.holder !== undefined && survivors.includes(view.holder) && view.leaseState === 'leased' && (view.epoch ?? 0) > (before?.epoch ?? 0)) {
              leaderMs = performance.now() - killedAt;
              break;
            }
          }
        }
        if (jobMs === undefined) {
          const res = await cluster.call('GET', `/api/jobs/${jobId}`, undefined, survivors[0]).catch(() => undefined);
          if (res?.status === 200 && !['pending', 'running'].includes(String(res.json.status))) jobMs = performance.now() - killedAt;
        }
        await sleep(250);
      }
      ctx.note(`${variant.name} trial ${t}: new leader ${leaderMs === undefined ? 'none' : `${secs(leaderMs)} s`}, job done ${jobMs === undefined ? 'no' : `${secs(jobMs)} s`} after the kill`);
      trials.push({ leaderMs, jobMs });
      await cluster.restart(holder);
    }
  } finally {
    await cluster.stop();
  }
  return trials;
}

export const idleFailoverBench: Bench = {
  name: 'idle-failover',
  description: 'an idle app of N instances: the leader killed, then how soon a survivor leads and a queued job completes',
  async run(ctx) {
    const num = (name: string, fallback: number): number => Number(ctx.options.get(name) ?? fallback);
    const o = { instances: num('instances', 3), trials: num('trials', 3), idleSeconds: num('idle', 45) };
    const names = (ctx.options.get('variants') ?? 'shipped').split(',');
    const lines = [
      `${o.instances} instances of one app on the ${benchHostName(ctx.host)}, idle ${o.idleSeconds} s, the leader SIGKILLed, a queue job sent at once; ${o.trials} trials a variant.`,
      '',
      '| host.json | trials | kill -> new leader p50 / max | kill -> queued job completed p50 / max | trials without a new leader in 180 s |',
      '|---|---:|---:|---:|---:|',
    ];
    for (const name of names) {
      const variant = VARIANTS[name];
      if (variant === undefined) throw new Error(`unknown variant ${name}; known: ${Object.keys(VARIANTS).join(', ')}`);
      const trials = await runVariant(ctx, variant, o);
      const got = (xs: Array<number | undefined>): number[] => xs.filter((x): x is number => x !== undefined);
      const leader = got(trials.map((t) => t.leaderMs));
      const job = got(trials.map((t) => t.jobMs));
      const pm = (xs: number[]): string => (xs.length === 0 ? '-' : `${secs(percentile(xs, 50))} / ${secs(Math.max(...xs))} s`);
      lines.push(`| ${name} | ${trials.length} | ${pm(leader)} | ${pm(job)} | ${trials.length - leader.length} |`);
    }
    return { title: 'Idle failover: the leader of an idle app killed', lines };
  },
};
