/**
 * Benchmark: failover in an idle app. N instances of one app (one host id, as `npm start --instances
 * N` runs them; the extensions host unless --host devhost), the shipped host.json and settings, no
 * jobs; after `--idle` seconds the leader's instance is SIGKILLed and a queue submission is put on
 * the jobs queue at once. Measured per trial, from the kill: when a survivor holds the lease with a
 * newer epoch (GET /api/leader on the survivors every 250 ms), and when that job is seen completed
 * (its status, GET /api/jobs/{id} every 250 ms). Then every instance is started again (the job's
 * work items handed the survivors a Durable client, which an idle app's instances do not have) and
 * the next trial waits idle again. The goal (issue 49): a new leader within L + 5 s (20 s at L = 15 s).
 *
 * Variants (`--variants shipped,...`) change only host.json: `singleton15` sets the WebJobs
 * listener lock to its shortest (`listenerLockPeriod` and `listenerLockRecoveryPollingInterval`
 * 15 s), which decides how soon the timer trigger fires on another instance.
 *
 * `--replace`: the killed instance is started again at once (a new process under the same instance
 * id), as the platform replaces the only instance of an idle Flex Consumption app (`--instances 1`).
 *
 * Run: `npm run bench -- idle-failover [--instances 3] [--trials 3] [--idle 45] [--variants shipped,nowatch,singleton15] [--replace 1]`.
 */
import { type AppCluster, benchHostName, instanceIds, percentile, secs, sleep, startAppCluster } from './appCluster';
import { type Bench, type BenchContext } from './index';

interface Variant {
  readonly name: string;
  readonly hostJson?: Readonly<Record<string, unknown>>;
  readonly env?: Record<string, string>;
}

const VARIANTS: Readonly<Record<string, Variant>> = {
  shipped: { name: 'shipped' },
  nowatch: { name: 'nowatch', env: { LEADER_WATCH_INTERVAL_SECONDS: '0' } },
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

/** The instance that says it leads (its own GET /api/cluster), once one does: the lease record alone may name a holder restarted since. */
async function leading(cluster: AppCluster, instances: number): Promise<string> {
  const deadline = performance.now() + 180_000;
  for (;;) {
    for (const id of instanceIds(instances)) {
      const res = await cluster.call('GET', '/api/cluster', undefined, id).catch(() => undefined);
      const role = (res?.json.instance as { role?: string } | undefined)?.role;
      if (role === 'leader') return id;
    }
    if (performance.now() > deadline) throw new Error('no instance led within 180 s');
    await sleep(500);
  }
}

async function runVariant(ctx: BenchContext, variant: Variant, o: { instances: number; trials: number; idleSeconds: number; replace: boolean }): Promise<Trial[]> {
  const cluster = await startAppCluster(ctx.connectionString, {
    instances: o.instances,
    label: `idle${variant.name}`,
    host: ctx.host,
    ...(variant.hostJson === undefined ? {} : { hostJson: variant.hostJson }),
    ...(variant.env === undefined ? {} : { env: variant.env }),
  });
  const trials: Trial[] = [];
  try {
    for (let t = 1; t <= o.trials; t++) {
      const holder = await leading(cluster, o.instances);
      ctx.note(`${variant.name} trial ${t}: ${holder} leads; idle ${o.idleSeconds} s`);
      await sleep(o.idleSeconds * 1000);
      const before = await leaderOf(cluster, holder);
      // --replace: the platform's way when the app's only instance dies: a new one is started in its place.
      const survivors = o.replace ? [holder] : instanceIds(o.instances).filter((id) => id !== holder);
      const killedAt = performance.now();
      await cluster.kill(holder);
      if (o.replace) await cluster.restart(holder);
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
      // Fresh processes for the next trial: the job's work items handed the survivors a Durable
      // client (they campaign now), which an idle app's instances do not have.
      for (const id of instanceIds(o.instances)) {
        await cluster.kill(id);
        await cluster.restart(id);
      }
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
    const o = { instances: num('instances', 3), trials: num('trials', 3), idleSeconds: num('idle', 45), replace: ctx.options.has('replace') };
    const names = (ctx.options.get('variants') ?? 'shipped').split(',');
    const lines = [
      `${o.instances} instances of one app on the ${benchHostName(ctx.host)}, idle ${o.idleSeconds} s, the leader SIGKILLed${o.replace ? ' and a new instance started in its place at once' : ''}, a queue job sent at once; ${o.trials} trials a variant.`,
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
