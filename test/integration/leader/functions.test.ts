/**
 * The leader functions as deployed code: two development host processes (two apps sharing one
 * lease account, so each has its own timer) run the compiled leaderTimer, leaderApi and health
 * functions against the run's Azurite. Real HTTP, real timers, real processes. Keys are off (as
 * under `func start`), so the keyed GET /api/cluster answers without one.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { basename, join, resolve } from 'node:path';
import { after, describe, it } from 'node:test';

import { HOST_PROCESS_ENTRY } from 'devhost';
import { eventually } from 'devhost/testing';

import { azuriteConnectionString, uniqueName } from '../../support/env';
import { sleep } from './harness';

const OUT_DIR = join(__dirname, '..', '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
const READY = 'Development host listening on ';

interface Instance {
  readonly id: string;
  readonly baseUrl: string;
  readonly child: ChildProcess;
  readonly lines: string[];
  stop(): Promise<void>;
}

const started: Instance[] = [];
after(() => {
  for (const i of started) i.child.kill('SIGKILL');
});

async function startInstance(id: string, env: Record<string, string>): Promise<Instance> {
  const child = spawn(
    process.execPath,
    [HOST_PROCESS_ENTRY, REPO_ROOT, '--port', '0', '--host-id', `app-${id}`, '--instance-id', id, '--main', `${basename(OUT_DIR)}/functions/{leaderTimer,leaderApi,health}.js`],
    { env: { PATH: process.env.PATH ?? '', COORDINATOR_LOG_LEVEL: 'info', COORDINATOR_INSTANCE_ID: id, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const lines: string[] = [];
  const collect = (chunk: Buffer): void => {
    lines.push(...chunk.toString('utf8').split('\n'));
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((done) => child.once('exit', () => done()));
  const deadline = Date.now() + 30_000;
  let baseUrl: string | undefined;
  while (baseUrl === undefined) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`instance ${id} did not start:\n${lines.join('\n')}`);
    const line = lines.find((l) => l.startsWith(READY));
    baseUrl = line === undefined ? undefined : /(http:\/\/\S+)/.exec(line)?.[1];
    await sleep(50);
  }
  const instance: Instance = {
    id,
    baseUrl,
    child,
    lines,
    stop: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
  started.push(instance);
  return instance;
}

interface LeaderBody {
  holder: string | null;
  epoch: number | null;
  leaseState: string;
  instance: { id: string; role: string; epoch: number | null; passes: number };
  counters: { acquired: number };
  terms: Array<{ epoch: number; holder: string; endReason?: string }>;
  instances: Array<{ id: string; role: string; state: string }>;
}

async function getJson(url: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(url);
  return { status: res.status, body: await res.json() };
}

describe('leader functions on the development host', () => {
  it('exactly one of two instances leads; GET /api/cluster and /api/health say so; a graceful stop hands over at once and the history records it', async () => {
    const conn = azuriteConnectionString();
    const env = {
      AzureWebJobsStorage: conn,
      CoordinatorStorage: conn,
      LEADER_LEASE_CONTAINER: uniqueName('fn-lease'),
      LEADER_TIMER_SCHEDULE: '*/1 * * * * *',
      LEADER_RETRY_PERIOD_SECONDS: '0.5',
      LEADER_REQUEST_TIMEOUT_SECONDS: '1',
      LEADER_PASS_INTERVAL_SECONDS: '1',
      TASK_HUB_NAME: `leaderfn${Math.random().toString(36).slice(2, 10)}`,
    };
    const [a, b] = await Promise.all([startInstance('fn-a', env), startInstance('fn-b', env)]);

    const views = async (): Promise<LeaderBody[]> => Promise.all([a, b].map(async (i) => (await getJson(`${i.baseUrl}/api/cluster`)).body as LeaderBody));
    let both: LeaderBody[] = [];
    const deadline = Date.now() + 20_000;
    do {
      await sleep(300);
      both = await views();
    } while (Date.now() < deadline && !(both.some((v) => v.instance.role === 'leader') && both.every((v) => v.holder !== null && v.instance.role !== 'stopped')));
    const leaders = both.filter((v) => v.instance.role === 'leader');
    assert.equal(leaders.length, 1, JSON.stringify(both));
    const leader = leaders[0] as LeaderBody;
    for (const v of both) {
      assert.equal(v.holder, leader.instance.id, 'both instances report the same holder');
      assert.equal(v.epoch, leader.instance.epoch);
      assert.equal(v.leaseState, 'leased');
    }
    // The leader runs passes on its own interval as well as on its ticks.
    await sleep(2_500);
    const leaderInstance = leader.instance.id === a.id ? a : b;
    const follower = leaderInstance === a ? b : a;
    const again = (await getJson(`${leaderInstance.baseUrl}/api/cluster`)).body as LeaderBody;
    assert.ok(again.instance.passes >= 2, `passes: ${again.instance.passes}`);

    const health = await getJson(`${follower.baseUrl}/api/health`);
    assert.equal(health.status, 200);
    assert.deepEqual(health.body, { status: 'ok', instance: follower.id, role: 'follower', storage: { reachable: true } });

    const stoppedAt = Date.now();
    await leaderInstance.stop();
    assert.ok(
      leaderInstance.lines.some((l) => l.includes('"event":"leader.released"')),
      'the stopping leader released its lease',
    );
    let taken: LeaderBody | undefined;
    while (Date.now() - stoppedAt < 10_000) {
      const v = (await getJson(`${follower.baseUrl}/api/cluster`)).body as LeaderBody;
      // The lease record in the answer may be up to 2 s old (a cached read); the role is live.
      if (v.instance.role === 'leader' && v.holder === follower.id) {
        taken = v;
        break;
      }
      await sleep(100);
    }
    assert.ok(taken !== undefined, 'the follower never took over');
    assert.equal(taken.holder, follower.id);
    assert.ok((taken.epoch ?? 0) > (leader.epoch ?? 0));
    // The history beside the lease: the new term, and the old one ended by its release.
    const records = await eventually(async () => {
      const v = (await getJson(`${follower.baseUrl}/api/cluster`)).body as LeaderBody;
      const newTerm = v.terms.find((t) => t.epoch === taken?.epoch);
      const oldTerm = v.terms.find((t) => t.epoch === leader.epoch);
      const gone = v.instances.find((i) => i.id === leaderInstance.id);
      return newTerm !== undefined && oldTerm?.endReason !== undefined && gone?.state === 'stopped' ? { v, newTerm, oldTerm } : undefined;
    }, 10_000, 'the term history and heartbeats to show the handover');
    assert.equal(records.newTerm.holder, follower.id);
    assert.deepEqual(records.oldTerm, { ...records.oldTerm, holder: leaderInstance.id, endReason: 'released' });
    assert.ok(records.v.instances.some((i) => i.id === follower.id && i.role === 'leader' && i.state === 'alive'), JSON.stringify(records.v.instances));
    await follower.stop();
  });
});
