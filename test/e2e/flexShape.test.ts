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
 * - a burst of 40 small jobs by queue (shared runs) completes exact, planned on the Durable group
 *   and worked on the workers;
 * - a worker that does not lead SIGKILLed (its .NET host and Node.js worker) while it holds a claimed
 *   chunk of a running 400-chunk job, its result write held at its storage proxy: the other worker
 *   does the chunk again (storage names it as the writer) and the job completes exact within L + 30 s
 *   of the kill, test/e2e/workerKilled.test.ts's bound (20.6-21.1 s in four runs);
 * - the HTTP group scaled in to zero (SIGTERM to http-1): a job submitted by queue then is planned on
 *   the Durable group and completes exact with no API instance up (read from storage); the API, once
 *   back, shows it completed; when http-1 held the lease then, another group's instance leads within
 *   3 s of the SIGTERM;
 * - the worker group scaled in to zero while one of its instances holds the lease (the lease is
 *   first handed over gracefully until a worker holds it, when it does not already): that instance
 *   releases it and its release rings the work-items doorbell (seen on the queue), nothing of a job
 *   queued then is done while the group is down, and once the platform scales the group out again
 *   for the doorbell (the test starts worker-1, as the platform would) a new leader follows within
 *   3 s of its start and the job completes. Another group's instance takes over meanwhile only if it
 *   campaigns: the API's once it has served a submission, the timer's at a firing, which needs the
 *   timer's listener lock (a timer instance restarted after a kill waits up to the WebJobs SDK's
 *   1-minute recovery poll for it: 30.5 s in a run that waited for that instead of a worker).
 * The short chaos run in this shape is test/chaos/chaosShortFlex.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';
import { eventually, type HostProcess } from 'devhost/testing';

import { type FlexGroup, flexInstances } from '../../scripts/flexShape';
import { isWakeMessage } from '../../shared/jobs/messageCodec';
import { type ProxiedRequest, startStorageProxy, type StorageProxy } from '../support/storageProxy';
import { e2eHostName } from './support/appHost';
import { assertRedoneBySurvivor, BOUND_MS } from './support/killWorker';
import { processTree, signalAll } from './support/pauseProcess';
import { createRealAppRoot, Scenario, sumOf } from './support/realApp';

/** The shipped lease (LEADER_LEASE_SECONDS) and issue 49's bound on a failover after a kill. */
const FAILOVER_BOUND_MS = 15_000 + 5_000;
/** docs/leader-election.md's bound on a graceful stop's handover. */
const GRACEFUL_BOUND_MS = 3_000;

describe(`the app in Flex Consumption's shape (one instance per scale group), on the ${e2eHostName()}`, () => {
  const roots = new Map<FlexGroup, { dir: string; remove(): void }>();
  let s: Scenario | undefined;
  const hosts = new Map<string, HostProcess>();
  /** Each worker instance reaches storage through a proxy of its own (the kill-mid-job test holds one's result write). */
  const proxies = new Map<string, StorageProxy>();
  const hostId = `flex-${Date.now().toString(36)}`.slice(0, 32);

  /** Starts (or starts again, as the platform replaces or scales out an instance) one instance of the shape. */
  const startInstance = async (instanceId: string): Promise<HostProcess> => {
    assert.ok(s !== undefined);
    const root = roots.get(flexInstances().find((f) => f.instanceId === instanceId)?.group ?? 'http');
    assert.ok(root !== undefined, instanceId);
    const started = await s.start(instanceId, proxies.get(instanceId)?.connectionString ?? s.conn, root.dir, {}, hostId);
    hosts.set(instanceId, started);
    return started;
  };

  before(
    async () => {
      for (const group of ['http', 'durable', 'timer', 'worker'] as const) {
        roots.set(group, createRealAppRoot({}, `app/scripts/flex/${group}Group.js`));
      }
      s = new Scenario(roots.get('http')?.dir ?? '');
      for (const { group, instanceId } of flexInstances()) {
        if (group === 'worker') proxies.set(instanceId, await startStorageProxy(s.conn));
        await startInstance(instanceId);
      }
    },
    { timeout: 600_000 },
  );
  after(async () => {
    await s?.stopAll();
    await Promise.all([...proxies.values()].map((p) => p.close()));
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
  const running = (h: HostProcess): boolean => h.child.exitCode === null && h.child.signalCode === null;
  /** SIGTERM to an instance (the platform scaling it in), resolved once it has exited. */
  const scaleIn = async (instanceId: string): Promise<void> => {
    const member = host(instanceId);
    member.child.kill('SIGTERM');
    await new Promise((resolve) => (running(member) ? member.child.once('exit', resolve) : resolve(undefined)));
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
    await startInstance(old.holder);
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

  it('a worker SIGKILLed while it holds claimed chunks of a running job: the other worker redoes them and the job completes exact within L + 30 s', async (t) => {
    assert.ok(s !== undefined);
    const scenario = s;
    const jobId = 'flex-worker-killed';
    // The victim: a worker that does not lead (the leader's kill is the test above), its result write held at the proxy.
    const leads = newestTerm()?.holder;
    const victimId = ['worker-1', 'worker-2'].find((id) => id !== leads) ?? 'worker-1';
    const survivorId = victimId === 'worker-1' ? 'worker-2' : 'worker-1';
    const proxy = proxies.get(victimId);
    assert.ok(proxy !== undefined);
    const hold = proxy.hold((r) => r.method === 'PUT' && r.path.includes(`/${scenario.names.results}/jobs/${jobId}/results/`));
    // 4,000 items in 400 chunks, as test/e2e/workerKilled.test.ts: both workers busy for seconds.
    const items = Array.from({ length: 4_000 }, (_, i) => i * 3 + 1);
    await s.submitByHttp(host('http-1'), { jobId, workType: 'sum', items, options: { chunkSize: 10 } });
    const held = await hold.within(60_000, `${victimId} never wrote a result of ${jobId}`);
    const heldChunk = /\/results\/(\d{5})/.exec(held.request.path)?.[1];
    assert.ok(heldChunk !== undefined, held.request.path);
    // Killed once it has claimed the chunk (a worker claims a chunk it has been on for 2 s): its claim goes silent.
    const claimOf = (r: ProxiedRequest & { status: number | undefined }): boolean => r.method === 'PUT' && r.path.includes(`/jobs/${jobId}/claims/${heldChunk}-`) && r.status === 201;
    await eventually(() => Promise.resolve(proxy.requests().some(claimOf) ? true : undefined), 15_000, `${victimId}'s claim on chunk ${heldChunk}`);
    const victim = host(victimId);
    const doneBefore = ['worker-1', 'worker-2'].flatMap((id) => host(id).events('workitem.done').filter((e) => e.jobId === jobId)).length;
    const killedAt = Date.now();
    // The whole instance: the .NET host and its Node.js worker (the app's code).
    signalAll(processTree(victim.child.pid ?? -1), 'SIGKILL');
    await victim.kill();
    assert.ok(held.clientGone || victim.child.signalCode === 'SIGKILL');
    const view = await s.finished(host('http-1'), jobId, BOUND_MS + 15_000);
    const afterMs = Date.now() - killedAt;
    t.diagnostic(`${victimId} killed holding chunk ${heldChunk} (claimed; ${doneBefore} of 400 chunks done by then); ${jobId} ${view.status} ${(afterMs / 1000).toFixed(1)} s after the kill`);
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, sumOf(items));
    assert.deepEqual(view.progress?.chunks, { total: 400, done: 400, failed: 0 });
    assert.ok(afterMs <= BOUND_MS, `completed ${afterMs} ms after the kill; the bound is ${BOUND_MS} ms`);
    // The chunk it died on was done again, by the other worker (storage says who wrote it).
    await assertRedoneBySurvivor({ s, victim }, jobId, heldChunk);
    const written = JSON.parse((await s.resultsBlob(`jobs/${jobId}/results/${heldChunk}.json`))?.text ?? '{}') as { writtenBy?: string };
    assert.equal(written.writtenBy, survivorId);
    await startInstance(victimId);
  });

  it('a queue submission made while the HTTP group is scaled in to zero completes exact, read from storage', async (t) => {
    assert.ok(s !== undefined);
    const held = newestTerm();
    const stoppedAt = Date.now();
    await scaleIn('http-1');
    const submittedAt = Date.now();
    const items = Array.from({ length: 120 }, (_, i) => 1_000 - i * 17);
    await s.submitByQueue({ jobId: 'flex-no-api', workType: 'sum', items, options: { chunkSize: 25 } });
    const summary = await finalOf('flex-no-api');
    const tookMs = Date.now() - submittedAt;
    // No instance of the HTTP group ran at any time of it.
    assert.ok(!running(host('http-1')), 'http-1 stayed down');
    const leader = newestTerm();
    t.diagnostic(`http-1 scaled in; flex-no-api ${summary.status} ${(tookMs / 1000).toFixed(1)} s after its submission; ${leader?.holder ?? 'nobody'} leads`);
    assert.equal(summary.status, 'completed');
    assert.equal(String(summary.result?.sum), String(sumOf(items).sum));
    assert.ok(host('durable-1').events('job.planned').some((e) => e.jobId === 'flex-no-api'), 'planned on durable-1');
    assert.notEqual(leader?.holder, 'http-1');
    if (held?.holder === 'http-1') {
      // It led: its release handed the lease over, as a scale-in does (docs/leader-election.md's 3 s).
      assert.ok(leader !== undefined && leader.epoch > held.epoch, 'a new term after http-1');
      t.diagnostic(`http-1 led epoch ${held.epoch}; ${leader.holder} leads ${leader.at - stoppedAt} ms after its SIGTERM`);
      assert.ok(leader.at - stoppedAt <= GRACEFUL_BOUND_MS, `handover took ${leader.at - stoppedAt} ms (bound ${GRACEFUL_BOUND_MS})`);
    }
    // The group scales out again on demand; its API then shows the job as it ended.
    const back = await startInstance('http-1');
    const view = await s.finished(back, 'flex-no-api', 30_000);
    assert.equal(view.status, 'completed');
    assert.deepEqual(view.result, sumOf(items));
  });

  it('the worker group scaled in to zero while it holds the lease: it releases, rings the doorbell, the first worker scaled out again leads within 3 s and a queue submission completes', async (t) => {
    assert.ok(s !== undefined);
    const groupOf = (instanceId: string): FlexGroup | undefined => flexInstances().find((f) => f.instanceId === instanceId)?.group;
    const leaderAbove = (epoch: number): Promise<{ holder: string; epoch: number; at: number }> =>
      eventually(() => Promise.resolve(((term) => (term !== undefined && term.epoch > epoch ? term : undefined))(newestTerm())), 60_000, `a leader above epoch ${epoch}`);
    // The lease handed over gracefully until a worker holds it: a release rings the work-items
    // doorbell, and the worker that takes the doorbell's message campaigns.
    let old = await eventually(() => Promise.resolve(newestTerm()), 60_000, 'a leader');
    const handovers: string[] = [];
    while (groupOf(old.holder) !== 'worker') {
      assert.ok(handovers.length < 5, `no worker led after ${handovers.join(', ')}`);
      const from = old;
      await scaleIn(from.holder);
      old = await leaderAbove(from.epoch);
      handovers.push(`${from.holder} to ${old.holder}`);
      await startInstance(from.holder);
    }
    const members = flexInstances().filter((f) => f.group === 'worker');
    const stoppedAt = Date.now();
    await Promise.all(members.map(({ instanceId }) => scaleIn(instanceId)));
    await s.submitByQueue({ jobId: 'flex-scaled-in', workType: 'sum', items: [1, 2, 3, 4, 5, 6, 7], options: { chunkSize: 3 } });
    const released = members.flatMap((m) => host(m.instanceId).events('leader.released')).filter((e) => Number(e.epoch) === old.epoch);
    assert.equal(released.length, 1, `${old.holder} released epoch ${old.epoch} as it stopped`);
    // The release rang the work-items doorbell, which is how the platform learns the group is wanted
    // again (it scales a queue-triggered group out on its queue's messages).
    const workItems = QueueServiceClient.fromConnectionString(s.conn).getQueueClient(s.names.workItems);
    const rangAt = await eventually(
      async () => ((await workItems.peekMessages({ numberOfMessages: 32 })).peekedMessageItems.some((m) => isWakeMessage(m.messageText) || isWakeMessage(Buffer.from(m.messageText, 'base64').toString('utf8'))) ? Date.now() : undefined),
      GRACEFUL_BOUND_MS,
      "the doorbell on the work-items queue after the worker group's release",
    );
    // Nothing of the job is done while the group is scaled in (only a worker does chunks).
    assert.equal(await s.resultsBlob('jobs/flex-scaled-in/final.json'), undefined, 'no worker, no result');
    // The platform scales the group out again for the doorbell: its first instance takes over (or
    // the timer's instance did already, at a firing: it campaigns once its listener lock is its).
    const first = members[0]?.instanceId ?? 'worker-1';
    await startInstance(first);
    const upAt = Date.now();
    const next = await leaderAbove(old.epoch);
    const handoverMs = next.at - stoppedAt;
    const arranged = handovers.length === 0 ? '' : ` (handed over first: ${handovers.join(', ')})`;
    t.diagnostic(
      `${old.holder} led${arranged}; the worker group stopped (released epoch ${old.epoch} ${Date.parse(String(released[0]?.ts)) - stoppedAt} ms after the SIGTERM, ` +
        `the doorbell seen at ${rangAt - stoppedAt} ms); ${first} started again, up at ${upAt - stoppedAt} ms; ${next.holder} leads ${handoverMs} ms after the SIGTERM, ${next.at - upAt} ms after ${first} was up`,
    );
    assert.ok(next.at - upAt <= GRACEFUL_BOUND_MS, `${next.holder} led ${next.at - upAt} ms after ${first} was up (bound ${GRACEFUL_BOUND_MS})`);
    for (const { instanceId } of members.slice(1)) await startInstance(instanceId);
    const summary = await finalOf('flex-scaled-in');
    assert.equal(summary.status, 'completed');
    assert.equal(String(summary.result?.sum), '28');
  });
});
