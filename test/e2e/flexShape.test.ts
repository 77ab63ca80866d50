/**
 * The app in Flex Consumption's shape (scripts/flexShape.ts, `npm start -- --flex`), on real host
 * processes (the extensions host unless E2E_HOST=devhost): five instances of one app (one host id),
 * each loading one scale group's functions only, as the platform scales them (docs/deploy.md, "What
 * runs where on Flex Consumption"): `timer-1` (leaderTimer), `durable-1` (the orchestrations and
 * activities), `http-1` (the API) and `worker-1`, `worker-2` (workItemsWorker). Shown here:
 * - a job POSTed to the HTTP group is planned by the Durable group, worked by the workers and
 *   completes exact;
 * - the leader's instance SIGKILLed: another instance holds the lease within L + 5 s (20 s at the
 *   shipped 15 s lease) and a queue submission sent right after the kill completes;
 * - the leader's whole scale group scaled in to zero (SIGTERM to each of its instances: the worker
 *   group, or the HTTP group, whichever leads then): an instance of another group leads within 3 s
 *   (the workers campaign once an invocation hands them a Durable client: AppRoot.offer builds the
 *   runtime, which nothing else does on an instance of the worker's group), and a queue submission
 *   made then completes once the group is back (read from storage).
 * - a burst of 40 small jobs by queue (shared runs) completes exact, planned on the Durable group
 *   and worked on the workers.
 * Not shown here: a worker killed mid-job in this shape, and the short chaos run in it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { eventually, type HostProcess } from 'devhost/testing';

import { type FlexGroup, flexInstances } from '../../scripts/flexShape';
import { e2eHostName } from './support/appHost';
import { createRealAppRoot, Scenario, sumOf } from './support/realApp';

/** The shipped lease (LEADER_LEASE_SECONDS) and issue 49's bound on a failover after a kill. */
const FAILOVER_BOUND_MS = 15_000 + 5_000;
/** docs/leader-election.md's bound on a graceful stop's handover. */
const GRACEFUL_BOUND_MS = 3_000;

describe(`the app in Flex Consumption's shape (one instance per scale group), on the ${e2eHostName()}`, () => {
  const roots = new Map<FlexGroup, { dir: string; remove(): void }>();
  let s: Scenario | undefined;
  const hosts = new Map<string, HostProcess>();
  const hostId = `flex-${Date.now().toString(36)}`.slice(0, 32);

  before(
    async () => {
      for (const group of ['http', 'durable', 'timer', 'worker'] as const) {
        roots.set(group, createRealAppRoot({}, `app/scripts/flex/${group}Group.js`));
      }
      s = new Scenario(roots.get('http')?.dir ?? '');
      for (const { group, instanceId } of flexInstances()) {
        const root = roots.get(group);
        assert.ok(root !== undefined);
        hosts.set(instanceId, await s.start(instanceId, s.conn, root.dir, {}, hostId));
      }
    },
    { timeout: 600_000 },
  );
  after(async () => {
    await s?.stopAll();
    for (const root of roots.values()) root.remove();
  });

  const host = (instanceId: string): HostProcess => {
    const found = hosts.get(instanceId);
    assert.ok(found !== undefined, instanceId);
    return found;
  };
  /** The newest `leader.acquired` line of any instance (instances of no API group answer no /api/cluster). */
  const newestTerm = (): { holder: string; epoch: number; at: number } | undefined => {
    const terms = (s?.events('leader.acquired') ?? []).map((e) => ({ holder: String(e.holder), epoch: Number(e.epoch), at: Date.parse(String(e.ts)) }));
    return terms.sort((a, b) => b.epoch - a.epoch)[0];
  };
  const finalOf = async (jobId: string): Promise<{ status: string; result?: { sum?: unknown } }> =>
    eventually(
      async () => {
        const blob = await s?.resultsBlob(`jobs/${jobId}/final.json`);
        return blob === undefined ? undefined : (JSON.parse(blob.text) as { status: string; result?: { sum?: unknown } });
      },
      90_000,
      `${jobId}'s final summary`,
    );

  it('runs a job POSTed to the HTTP group on the Durable and worker groups, exact', async () => {
    assert.ok(s !== undefined);
    const items = Array.from({ length: 200 }, (_, i) => i * 3 - 50);
    await s.submitByHttp(host('http-1'), { jobId: 'flex-post', workType: 'sum', items, options: { chunkSize: 20 } });
    const done = await s.finished(host('http-1'), 'flex-post', 90_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.equal(String((done.result as { sum?: unknown } | undefined)?.sum), String(sumOf(items).sum));
    // Each group did its part: the plan on the Durable group, the chunks on the workers.
    assert.ok(host('durable-1').events('job.planned').some((e) => e.jobId === 'flex-post'), 'planned on durable-1');
    const workers = ['worker-1', 'worker-2'].flatMap((id) => host(id).events('workitem.done').filter((e) => e.jobId === 'flex-post'));
    assert.equal(workers.length, 10, 'every chunk done on a worker instance');
  });

  it("a new leader within L + 5 s of the leader's kill, and a queue submission sent at the kill completes", async (t) => {
    assert.ok(s !== undefined);
    const old = await eventually(() => Promise.resolve(newestTerm()), 60_000, 'a leader');
    const victim = host(old.holder);
    const killedAt = Date.now();
    victim.child.kill('SIGKILL');
    await s.submitByQueue({ jobId: 'flex-after-kill', workType: 'sum', items: [4, 5, 6] });
    const next = await eventually(
      () => Promise.resolve(((term) => (term !== undefined && term.epoch > old.epoch ? term : undefined))(newestTerm())),
      60_000,
      `a leader after ${old.holder}'s kill`,
    );
    const failoverMs = next.at - killedAt;
    t.diagnostic(`${old.holder} killed; ${next.holder} leads ${failoverMs} ms after`);
    assert.notEqual(next.holder, old.holder);
    assert.ok(failoverMs <= FAILOVER_BOUND_MS, `failover took ${failoverMs} ms (bound ${FAILOVER_BOUND_MS})`);
    const summary = await finalOf('flex-after-kill');
    assert.equal(summary.status, 'completed');
    assert.equal(String(summary.result?.sum), '15');
    // Started again for the later tests: the platform replaces an instance it lost.
    const group = flexInstances().find((f) => f.instanceId === old.holder)?.group;
    const root = group === undefined ? undefined : roots.get(group);
    assert.ok(root !== undefined);
    hosts.set(old.holder, await s.start(old.holder, s.conn, root.dir, {}, hostId));
  });

  it('runs a burst of 40 small jobs by queue exact, shared runs included', async () => {
    assert.ok(s !== undefined);
    const jobs = Array.from({ length: 40 }, (_, n) => ({ jobId: `flex-burst-${n}`, workType: 'sum', items: Array.from({ length: 20 }, (_, i) => n * 100 + i), options: { chunkSize: 10 } }));
    const scenario = s;
    await Promise.all(jobs.map((job) => scenario.submitByQueue(job)));
    for (const job of jobs) {
      const summary = await finalOf(job.jobId);
      assert.equal(summary.status, 'completed', job.jobId);
      assert.equal(String(summary.result?.sum), String(sumOf(job.items).sum), job.jobId);
    }
    // Planned on the Durable group only; worked on the workers only.
    const planned = host('durable-1').events('job.planned').filter((e) => String(e.jobId).startsWith('flex-burst-'));
    assert.ok(planned.length >= 40, `${planned.length} of the 40 planned on durable-1`);
    const worked = ['worker-1', 'worker-2'].flatMap((id) => host(id).events('workitem.done').filter((e) => String(e.jobId).startsWith('flex-burst-')));
    assert.ok(worked.length >= 80, `${worked.length} chunks done on the workers`);
  });

  it("the leader's scale group scaled in to zero: another group's instance leads within 3 s and a queue submission completes", async (t) => {
    assert.ok(s !== undefined);
    const old = await eventually(() => Promise.resolve(newestTerm()), 60_000, 'a leader');
    const group = flexInstances().find((f) => f.instanceId === old.holder)?.group;
    assert.ok(group !== undefined, old.holder);
    const members = flexInstances().filter((f) => f.group === group);
    const stoppedAt = Date.now();
    await Promise.all(
      members.map(async ({ instanceId }) => {
        const member = host(instanceId);
        member.child.kill('SIGTERM');
        await new Promise((resolve) => (member.child.exitCode === null ? member.child.once('exit', resolve) : resolve(undefined)));
      }),
    );
    await s.submitByQueue({ jobId: 'flex-scaled-in', workType: 'sum', items: [1, 2, 3, 4, 5, 6, 7], options: { chunkSize: 3 } });
    const next = await eventually(
      () => Promise.resolve(((term) => (term !== undefined && term.epoch > old.epoch ? term : undefined))(newestTerm())),
      60_000,
      `a leader after the ${group} group's scale-in`,
    );
    const handoverMs = next.at - stoppedAt;
    const released = members.flatMap((m) => host(m.instanceId).events('leader.released')).map((e) => `${String(e.epoch)} at ${Date.parse(String(e.ts)) - stoppedAt} ms`);
    t.diagnostic(`${old.holder} led; the ${group} group stopped (released: ${released.join(', ') || 'none'}); ${next.holder} leads ${handoverMs} ms after the SIGTERM`);
    assert.ok(!members.some((m) => m.instanceId === next.holder), `${next.holder} is of another group`);
    assert.ok(handoverMs <= GRACEFUL_BOUND_MS, `handover took ${handoverMs} ms (bound ${GRACEFUL_BOUND_MS})`);
    // The platform scales a group out again when it has work: the workers for the chunks, the API on demand.
    for (const { instanceId } of members) {
      const root = roots.get(group);
      assert.ok(root !== undefined);
      hosts.set(instanceId, await s.start(instanceId, s.conn, root.dir, {}, hostId));
    }
    const summary = await finalOf('flex-scaled-in');
    assert.equal(summary.status, 'completed');
    assert.equal(String(summary.result?.sum), '28');
  });
});
