/**
 * The leader's stall check (StalledJobs): which runs it asks to resume, and how often. The
 * orchestration client is a scripted list of instances on a manual clock; the check against the
 * real Durable backend is in test/integration/jobs/jobLifecycle.test.ts, and a held control message
 * after a SIGKILL in test/e2e/workerKilled.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type JobCustomStatus } from '../../../../shared/jobs/JobSummary';
import { type ResumeRequest } from '../../../../shared/jobs/run/jobOrchestration';
import { type OrchestrationClient, type OrchestrationSnapshot } from '../../../../shared/jobs/run/OrchestrationClient';
import { backoffMs, STALL_CHECK, StalledJobs } from '../../../../shared/jobs/run/StalledJobs';
import { memoryLogger } from '../../../../shared/observability/log';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

function status(generation: number, wait: number, phase: JobCustomStatus['phase'] = 'running', repeat?: number): Partial<JobCustomStatus> {
  return { phase, generation, wait, epoch: 3, ...(repeat === undefined ? {} : { repeat }) };
}

function snapshotOf(instanceId: string, customStatus: unknown, lastUpdated: number): OrchestrationSnapshot {
  return { instanceId, runtimeStatus: 'Running', input: null, output: null, customStatus, createdTime: new Date(T0), lastUpdatedTime: new Date(lastUpdated) };
}

class ScriptedClient {
  instances: OrchestrationSnapshot[] = [];
  readonly raised: Array<{ instanceId: string; request: ResumeRequest }> = [];
  /** Instances whose raise fails (finished since the listing: Durable answers 410). */
  readonly refuse = new Set<string>();
  listings = 0;
  /** Status reads of one instance. */
  reads = 0;
  /** ...by instance id. */
  readonly readsOf = new Map<string, number>();

  set(instanceId: string, customStatus: unknown, lastUpdated: number): void {
    const snapshot = snapshotOf(instanceId, customStatus, lastUpdated);
    this.instances = [...this.instances.filter((i) => i.instanceId !== instanceId), snapshot];
  }

  client(): OrchestrationClient {
    const unused = (): Promise<never> => Promise.reject(new Error('not used by the stall check'));
    return {
      getStatus: (instanceId) => {
        this.reads += 1;
        this.readsOf.set(instanceId, (this.readsOf.get(instanceId) ?? 0) + 1);
        return Promise.resolve(this.instances.find((i) => i.instanceId === instanceId));
      },
      start: unused,
      raiseCancel: unused,
      list: unused,
      purge: unused,
      listActive: () => {
        this.listings += 1;
        return Promise.resolve([...this.instances]);
      },
      raiseResume: (instanceId, request) => {
        if (this.refuse.has(instanceId)) return Promise.reject(new Error('HTTP 410: the instance has finished'));
        this.raised.push({ instanceId, request });
        return Promise.resolve();
      },
    };
  }
}

function setup(): { clock: { now: number }; scripted: ScriptedClient; stalls: StalledJobs; logger: ReturnType<typeof memoryLogger> } {
  const clock = { now: T0 };
  const logger = memoryLogger();
  return { clock, scripted: new ScriptedClient(), stalls: new StalledJobs({ logger, now: () => clock.now }), logger };
}

describe('StalledJobs (the leader asks stalled job runs to resume)', () => {
  it('asks a job run idle for 15 s to resume its current call, and leaves a busy run, other instances and finished runs alone', async () => {
    const { clock, scripted, stalls, logger } = setup();
    clock.now = T0 + 60_000;
    scripted.set('job-stuck', status(2, 7), clock.now - STALL_CHECK.stalledAfterMs);
    scripted.set('job-busy', status(1, 3), clock.now - STALL_CHECK.stalledAfterMs + 1_000);
    scripted.set('job-stuck.2', status(1, 1, 'planning'), clock.now - 40_000);
    scripted.set('job-ending', status(1, 9, 'done'), clock.now - 40_000);
    scripted.set('report-builder', status(1, 1), clock.now - 40_000);
    scripted.set('job-old-version', { phase: 'running', generation: 1 }, clock.now - 40_000);
    const raised = await stalls.check(scripted.client(), 5);
    // The longest silent first.
    assert.deepEqual(
      scripted.raised,
      [
        { instanceId: 'job-stuck.2', request: { generation: 1, wait: 1 } },
        { instanceId: 'job-stuck', request: { generation: 2, wait: 7 } },
      ],
    );
    assert.deepEqual(raised.map((r) => [r.jobId, r.idleMs, r.phase]), [['stuck', 40_000, 'planning'], ['stuck', 15_000, 'running']]);
    const logged = logger.lines.filter((l) => l.event === 'job.resume_requested');
    assert.equal(logged.length, 2);
    assert.equal(logged[0]?.level, 'warn');
    assert.equal(logged[0]?.jobId, 'stuck');
    assert.equal(logged[0]?.epoch, 5);
  });

  it('goes on to the next run when raising on one fails, and logs it', async () => {
    const { scripted, stalls, logger } = setup();
    scripted.set('job-finished-meanwhile', status(1, 3), T0 - 20_000);
    scripted.set('job-stuck', status(1, 4), T0 - 20_000);
    scripted.refuse.add('job-finished-meanwhile');
    const raised = await stalls.check(scripted.client(), 2);
    assert.deepEqual(raised.map((r) => r.instanceId), ['job-stuck']);
    assert.deepEqual(logger.lines.filter((l) => l.event === 'job.stall_check_failed').map((l) => l.instanceId), ['job-finished-meanwhile']);
  });

  it('lists the unfinished runs at a leadership\'s first check, then reads a followed run at most once per interval', async () => {
    const { clock, scripted, logger } = setup();
    // Silent, but its first plan call has not begun: looked at, never asked.
    const stalls = new StalledJobs({ logger, now: () => clock.now, startUnconfirmed: () => true });
    scripted.set('job-a', status(1, 1, 'planning'), T0 - 60_000);
    await stalls.check(scripted.client(), 1);
    assert.deepEqual([scripted.listings, scripted.reads], [1, 0], 'the first check lists');
    assert.equal(stalls.running, 1);
    clock.now += STALL_CHECK.intervalMs - 1;
    await stalls.check(scripted.client(), 1);
    assert.deepEqual([scripted.listings, scripted.reads], [1, 0], 'nothing within the interval');
    clock.now += 1;
    await stalls.check(scripted.client(), 1);
    assert.deepEqual([scripted.listings, scripted.reads], [1, 1], 'then its status alone, not another listing');
    clock.now += STALL_CHECK.intervalMs;
    await stalls.check(scripted.client(), 1);
    assert.deepEqual([scripted.listings, scripted.reads], [1, 2]);
    assert.deepEqual(scripted.raised, []);
  });

  it('follows the runs the intake starts without listing: reads one only once it could be silent past its wait, and stops once it finished', async () => {
    const { clock, scripted, stalls } = setup();
    await stalls.check(scripted.client(), 1);
    assert.equal(scripted.listings, 1);
    // Started just after the (empty) listing: it cannot be 15 s silent before T0 + 15 s.
    clock.now = T0 + 1;
    scripted.set('job-new', status(1, 1), T0 + 1);
    scripted.set('job-done', status(1, 3), T0 + 1);
    stalls.started('job-new');
    stalls.started('job-done');
    // Not a job run (another orchestration's id): not followed.
    stalls.started('report-builder');
    assert.equal(stalls.running, 2);
    for (clock.now = T0 + STALL_CHECK.intervalMs; clock.now <= T0 + 1 + STALL_CHECK.stalledAfterMs - STALL_CHECK.intervalMs; clock.now += STALL_CHECK.intervalMs) {
      assert.deepEqual(await stalls.check(scripted.client(), 1), []);
    }
    assert.deepEqual([scripted.listings, scripted.reads], [1, 0], 'an idle check makes no request');
    // One of them ended meanwhile.
    scripted.instances = scripted.instances.map((i) => (i.instanceId === 'job-done' ? { ...i, runtimeStatus: 'Completed' } : i));
    clock.now = T0 + 1 + STALL_CHECK.stalledAfterMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.instanceId), ['job-new']);
    assert.deepEqual([scripted.listings, scripted.reads], [1, 2]);
    assert.equal(stalls.running, 1, 'the finished run is no longer followed');
    // Asked: not read again within the same wait; the finished one never again.
    for (let n = 0; n < 2; n++) {
      clock.now += STALL_CHECK.intervalMs;
      await stalls.check(scripted.client(), 1);
    }
    assert.deepEqual([scripted.listings, scripted.reads], [1, 2]);
  });

  it('stops following, unread, a run that delivers nothing once this process saw its job\'s final recorded since it began to follow it', async () => {
    const clock = { now: T0 };
    const scripted = new ScriptedClient();
    const finals = new Map<string, number>();
    const stalls = new StalledJobs({ logger: memoryLogger(), now: () => clock.now, finalRecordedAt: (jobId) => finals.get(jobId) });
    await stalls.check(scripted.client(), 1);
    // An earlier job under the same id finished before the run began to be followed: says nothing of this run.
    finals.set('again', T0);
    clock.now = T0 + 1;
    for (const id of ['plain', 'delivering', 'unknown', 'again']) scripted.set(`job-${id}`, status(1, 1, 'planning'), clock.now);
    stalls.started('job-plain', false);
    stalls.started('job-delivering', true);
    stalls.started('job-unknown');
    stalls.started('job-again', false);
    // Each job's outcome is recorded here a moment later; the runs stay silent (their answers held).
    clock.now = T0 + 2;
    for (const id of ['plain', 'delivering', 'unknown']) finals.set(id, clock.now);
    clock.now = T0 + 1 + STALL_CHECK.stalledAfterMs;
    const raised = await stalls.check(scripted.client(), 1);
    assert.deepEqual(raised.map((r) => r.instanceId).sort(), ['job-again', 'job-delivering', 'job-unknown']);
    assert.equal(scripted.reads, 3, 'the run whose outcome is recorded here is not read');
    assert.equal(stalls.running, 3, 'nor followed');
  });

  it('follows a shared run it started: asks it to resume while its plans are out, then follows the runs of its jobs that went on alone', async () => {
    const { clock, scripted, stalls } = setup();
    const shared = 'batch-0b6f1d6e-6a9e-4a57-9a59-5b1f1b3f5e21';
    await stalls.check(scripted.client(), 1);
    clock.now = T0 + 1;
    scripted.set(shared, { phase: 'planning', epoch: 1, generation: 1, wait: 1 }, clock.now);
    stalls.startedShared(shared, ['a', 'b']);
    stalls.startedShared('batch-not-a-uuid', ['c']);
    assert.equal(stalls.running, 1);
    clock.now = T0 + 1 + STALL_CHECK.stalledAfterMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => [r.instanceId, r.jobId, r.wait]), [[shared, 'a', 1]]);
    // The plans answered: b went on alone; the shared run waits on it and is not asked again.
    clock.now += 1_000;
    scripted.set(shared, { phase: 'running', epoch: 1, generation: 1, wait: 3, alone: ['b'] }, clock.now);
    scripted.set('job-b', status(1, 1), clock.now);
    clock.now += STALL_CHECK.stalledAfterMs;
    assert.deepEqual(await stalls.check(scripted.client(), 1), []);
    assert.equal(stalls.running, 1, 'b\'s own run is followed from now, the shared run no longer');
    const sharedReads = scripted.readsOf.get(shared);
    // b's run goes on for minutes (it moves): the shared run, which cannot move before it, is not read again.
    for (let i = 0; i < 20; i++) {
      clock.now += STALL_CHECK.intervalMs;
      scripted.set('job-b', status(1, 2 + i), clock.now - 1_000);
      assert.deepEqual(await stalls.check(scripted.client(), 1), []);
    }
    assert.equal(scripted.readsOf.get(shared), sharedReads, 'not read while its job runs alone');
    clock.now += STALL_CHECK.stalledAfterMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.instanceId), ['job-b']);
  });

  it('leaves a shared run\'s plan call alone while any of its jobs\' plans holds its call lease, not only the first job\'s', async () => {
    const { clock, scripted, logger } = setup();
    const held = new Set(['second']);
    const stalls = new StalledJobs({ logger, now: () => clock.now, callHeld: (jobId) => Promise.resolve(held.has(jobId)) });
    const shared = 'batch-1c6f1d6e-6a9e-4a57-9a59-5b1f1b3f5e22';
    scripted.set(shared, { phase: 'planning', epoch: 1, generation: 1, wait: 1 }, T0);
    stalls.startedShared(shared, ['first', 'second', 'third']);
    for (let n = 1; n <= 4; n++) {
      clock.now = T0 + n * STALL_CHECK.stalledAfterMs * 2;
      assert.deepEqual(await stalls.check(scripted.client(), 1), [], `check ${n}: the second job's long plan is alive`);
    }
    // That plan's instance died: its lease runs out, and the next check asks the shared run to resume.
    held.delete('second');
    clock.now += STALL_CHECK.intervalMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => [r.instanceId, r.jobId]), [[shared, 'first']]);
  });

  it('leaves a shared run\'s first plan call to the intake only while every one of its starts is still marked', async () => {
    const { clock, scripted, logger } = setup();
    const marked = new Set(['m1', 'm2']);
    const stalls = new StalledJobs({ logger, now: () => clock.now, startUnconfirmed: (jobId) => marked.has(jobId) });
    const shared = 'batch-2c6f1d6e-6a9e-4a57-9a59-5b1f1b3f5e23';
    scripted.set(shared, { phase: 'planning', epoch: 1, generation: 1, wait: 1 }, T0);
    stalls.startedShared(shared, ['m1', 'm2']);
    clock.now = T0 + STALL_CHECK.stalledAfterMs * 2;
    assert.deepEqual(await stalls.check(scripted.client(), 1), [], 'not begun: queued behind other activities');
    // One plan began (the second job's: its mark went) and the call went silent: it is asked.
    marked.delete('m2');
    clock.now += STALL_CHECK.intervalMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.instanceId), [shared]);
  });

  it('lists again under a new epoch (a new leadership), every listEveryMs, and for at most 1/listShare of the time', async () => {
    const { clock, scripted, logger } = setup();
    let listingMs = 0;
    const client = scripted.client();
    const timed: OrchestrationClient = {
      ...client,
      listActive: async () => {
        clock.now += listingMs;
        return client.listActive();
      },
    };
    const stalls = new StalledJobs({ logger, now: () => clock.now });
    await stalls.check(timed, 1);
    clock.now += STALL_CHECK.intervalMs;
    await stalls.check(timed, 2);
    assert.equal(scripted.listings, 2, 'a new epoch lists at once');
    clock.now += STALL_CHECK.listEveryMs - STALL_CHECK.intervalMs;
    await stalls.check(timed, 2);
    assert.equal(scripted.listings, 2);
    clock.now += STALL_CHECK.intervalMs;
    // This listing takes a minute: the next one waits listShare minutes, not listEveryMs.
    listingMs = 60_000;
    await stalls.check(timed, 2);
    assert.equal(scripted.listings, 3);
    const listedAt = clock.now - listingMs;
    clock.now = listedAt + STALL_CHECK.listShare * listingMs - STALL_CHECK.intervalMs;
    await stalls.check(timed, 2);
    assert.equal(scripted.listings, 3);
    clock.now += STALL_CHECK.intervalMs;
    await stalls.check(timed, 2);
    assert.equal(scripted.listings, 4);
  });

  it('a listing only adds runs: one it does not show (started while it ran, or ended) is dropped only by a read that finds it gone', async () => {
    const { clock, scripted, logger } = setup();
    const client = scripted.client();
    const stalls = new StalledJobs({ logger, now: () => clock.now });
    stalls.started('job-ended-unseen');
    const starting: OrchestrationClient = {
      ...client,
      listActive: async () => {
        const listed = await client.listActive();
        // The intake starts a run while the listing is under way (the listing did not see it).
        clock.now += 100;
        scripted.set('job-meanwhile', status(1, 1), clock.now);
        stalls.started('job-meanwhile');
        return listed;
      },
    };
    clock.now += 1;
    await stalls.check(starting, 1);
    assert.equal(stalls.running, 2, 'neither is dropped by the listing');
    clock.now += STALL_CHECK.stalledAfterMs;
    assert.deepEqual((await stalls.check(client, 1)).map((r) => r.instanceId), ['job-meanwhile']);
    assert.equal(stalls.running, 1, 'the read found the other gone');
  });

  it('stops following a run still Pending after pendingFollowMs (the intake starts it again), and looks at the rest when a listing or a read fails', async () => {
    const { clock, scripted, logger } = setup();
    const client = scripted.client();
    let listingFails = true;
    const failing: OrchestrationClient = {
      ...client,
      listActive: () => (listingFails ? Promise.reject(new Error('HTTP 503')) : client.listActive()),
      getStatus: (id) => (id === 'job-unreadable' ? Promise.reject(new Error('HTTP 503')) : client.getStatus(id)),
    };
    const stalls = new StalledJobs({ logger, now: () => clock.now });
    scripted.instances = [{ ...snapshotOf('job-orphan', null, T0), runtimeStatus: 'Pending' }];
    stalls.started('job-orphan');
    stalls.started('job-unreadable');
    stalls.started('job-stuck');
    scripted.set('job-stuck', status(1, 2), T0);
    clock.now = T0 + STALL_CHECK.stalledAfterMs;
    // The listing fails: the followed runs are looked at all the same.
    assert.deepEqual((await stalls.check(failing, 1)).map((r) => r.jobId), ['stuck']);
    assert.ok(logger.lines.some((l) => l.event === 'job.stall_check_failed' && l.listing === true));
    assert.equal(stalls.running, 3, 'a Pending run is followed while young, an unreadable one kept');
    // Listed at the next check (the last one failed).
    listingFails = false;
    const listings = scripted.listings;
    clock.now += STALL_CHECK.intervalMs;
    await stalls.check(failing, 1);
    assert.equal(scripted.listings, listings + 1);
    clock.now = T0 + STALL_CHECK.pendingFollowMs;
    await stalls.check(failing, 1);
    assert.equal(stalls.running, 2, 'the orphan is no longer followed');
  });

  it('a run whose last call was a repeat is asked 15 s after its next call stalls, not after the repeat\'s back-off', async () => {
    const { clock, scripted, logger } = setup();
    const stalls = new StalledJobs({ logger, now: () => clock.now });
    clock.now = T0 + 3_600_000;
    await stalls.check(scripted.client(), 1);
    stalls.started('job-r');
    // Its call, made again a fourth time, is silent past its back-off: asked.
    scripted.set('job-r', status(1, 20, 'running', 4), clock.now);
    clock.now += backoffMs(STALL_CHECK.stalledAfterMs, 5);
    assert.equal((await stalls.check(scripted.client(), 1)).length, 1);
    // It takes the resume, that call answers, and its next call (no repeat) stalls at once.
    const movedAt = clock.now + 3_000;
    scripted.set('job-r', status(1, 22), movedAt);
    clock.now = movedAt + STALL_CHECK.stalledAfterMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.wait), [22]);
  });

  it('nudges the same call again only after another 15 s, and a new call as soon as it stalls', async () => {
    const { clock, scripted, stalls } = setup();
    scripted.set('job-a', status(1, 4), T0 - 20_000);
    await stalls.check(scripted.client(), 1);
    assert.equal(scripted.raised.length, 1);
    // The resume is not processed yet (the run still shows the same call): not nudged again at once...
    clock.now += STALL_CHECK.intervalMs;
    await stalls.check(scripted.client(), 1);
    assert.equal(scripted.raised.length, 1);
    // ...but again once another 15 s passed without the run moving.
    clock.now = T0 + STALL_CHECK.stalledAfterMs;
    await stalls.check(scripted.client(), 1);
    assert.equal(scripted.raised.length, 2);
    // The run moved on to its next call a second later and stalled there: nudged once that call is 15 s silent.
    const movedAt = clock.now + 1_000;
    scripted.set('job-a', status(1, 6), movedAt);
    clock.now = movedAt + STALL_CHECK.stalledAfterMs - 1;
    await stalls.check(scripted.client(), 1);
    assert.equal(scripted.raised.length, 2);
    clock.now += STALL_CHECK.intervalMs;
    await stalls.check(scripted.client(), 1);
    assert.deepEqual(scripted.raised.at(-1), { instanceId: 'job-a', request: { generation: 1, wait: 6 } });
  });

  it('leaves a run whose call holds the job\'s call lease alone, however long it is silent, and asks once the lease is gone', async () => {
    const { clock, scripted, logger } = setup();
    const held = new Set(['slow']);
    const stalls = new StalledJobs({ logger, now: () => clock.now, callHeld: (jobId) => Promise.resolve(held.has(jobId)) });
    scripted.set('job-slow', status(1, 1, 'planning'), T0);
    for (let n = 1; n <= 6; n++) {
      clock.now = T0 + n * STALL_CHECK.stalledAfterMs * 4;
      assert.deepEqual(await stalls.check(scripted.client(), 1), [], `check ${n}: a live call is slow, not lost`);
    }
    assert.equal(scripted.raised.length, 0);
    assert.equal(logger.lines.filter((l) => l.event === 'job.resume_requested').length, 0);
    // Its instance died: the lease runs out, and the next check asks.
    held.delete('slow');
    clock.now += STALL_CHECK.intervalMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.jobId), ['slow']);
  });

  it('examines a burst of silent runs a few at a time within its budget, the longest silent first, and the rest at the next pass', async () => {
    const { clock, scripted, logger } = setup();
    // Every lease read takes 50 ms of the check's clock (reads at once add up: the clock is shared), budget 500 ms.
    let reads = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    const callHeld = async (): Promise<boolean> => {
      reads += 1;
      inFlight += 1;
      mostInFlight = Math.max(mostInFlight, inFlight);
      await Promise.resolve();
      clock.now += 50;
      inFlight -= 1;
      return false;
    };
    const stalls = new StalledJobs({ logger, now: () => clock.now, callHeld, budgetMs: 500 });
    clock.now = T0 + 3_600_000;
    for (let i = 0; i < 100; i++) scripted.set(`job-r${i}`, status(1, 2), clock.now - 20_000 - i * 100);
    const first = await stalls.check(scripted.client(), 1);
    // One by one, 100 reads would hold the pass 5 s of this clock; here none begins past the budget.
    assert.ok(first.length > 0 && first.length < 100, `${first.length} asked in the first check`);
    assert.ok(reads <= first.length + STALL_CHECK.concurrency, `${reads} reads for ${first.length} asked`);
    assert.ok(mostInFlight > 1 && mostInFlight <= STALL_CHECK.concurrency, `${mostInFlight} reads at once`);
    assert.deepEqual(first[0]?.jobId, 'r99', 'the longest silent first');
    // The next pass (a second later, within the interval) goes on with the rest, until each was asked once.
    const asked = new Set(first.map((r) => r.jobId));
    for (let pass = 0; pass < 20 && asked.size < 100; pass++) {
      clock.now += 1_000;
      for (const r of await stalls.check(scripted.client(), 1)) {
        assert.ok(!asked.has(r.jobId), `${r.jobId} asked twice`);
        asked.add(r.jobId);
      }
    }
    assert.equal(asked.size, 100);
    assert.equal(scripted.raised.length, 100);
    // Once all were asked, the interval applies again.
    const listings = scripted.listings;
    clock.now += 1_000;
    assert.deepEqual(await stalls.check(scripted.client(), 1), []);
    assert.equal(scripted.listings, listings, 'no listing within the interval once nothing was left');
  });

  it('a check carried to the next pass reaches the runs it did not, not the live calls it read already', async () => {
    const { clock, scripted, logger } = setup();
    // 40 slow live calls (their lease held), silent the longest, and one lost call, silent the least.
    const held = new Set(Array.from({ length: 40 }, (_, i) => `live${i}`));
    const callHeld = async (jobId: string): Promise<boolean> => {
      await Promise.resolve();
      clock.now += 50;
      return held.has(jobId);
    };
    const stalls = new StalledJobs({ logger, now: () => clock.now, callHeld, budgetMs: 300 });
    clock.now = T0 + 3_600_000;
    for (let i = 0; i < 40; i++) scripted.set(`job-live${i}`, status(1, 2), clock.now - 60_000 - i * 100);
    scripted.set('job-lost', status(1, 2), clock.now - 16_000);
    const asked: string[] = [];
    for (let pass = 0; pass < 10 && asked.length === 0; pass++) {
      clock.now += 500;
      asked.push(...(await stalls.check(scripted.client(), 1)).map((r) => r.jobId));
    }
    assert.deepEqual(asked, ['lost'], 'the lost call is asked within a few passes, though 40 live calls are silent longer');
  });

  it('leaves a run whose first plan call has not begun (its start still marked) to the intake, and asks once the mark is gone', async () => {
    const { clock, scripted, logger } = setup();
    const marked = new Set(['queued', 'stepping']);
    const stalls = new StalledJobs({ logger, now: () => clock.now, startUnconfirmed: (jobId) => marked.has(jobId) });
    scripted.set('job-queued', status(1, 1, 'planning'), T0);
    // Past its plan: a mark left behind (its removal failed) does not hide a stalled step.
    scripted.set('job-stepping', status(1, 2, 'running'), T0);
    clock.now = T0 + STALL_CHECK.stalledAfterMs * 4;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.jobId), ['stepping']);
    marked.delete('queued');
    clock.now += STALL_CHECK.intervalMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.jobId), ['queued']);
  });

  it('waits twice the start -> plan lag before a run counts as stalled, when Durable\'s queues run that far behind (a burst)', async () => {
    const { clock, scripted, logger } = setup();
    let lagMs = 20_000;
    const stalls = new StalledJobs({ logger, now: () => clock.now, startLagMs: () => lagMs });
    clock.now = T0 + 3_600_000;
    scripted.set('job-queued-answer', status(1, 2), clock.now - 2 * lagMs + 1_000);
    assert.deepEqual(await stalls.check(scripted.client(), 1), [], 'silent 39 s behind a 20 s lag: its answer waits its turn');
    clock.now += STALL_CHECK.intervalMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.jobId), ['queued-answer'], 'silent past twice the lag');
    // Quiet again (a lag under half of stalledAfterMs): 15 s as always.
    lagMs = 3_000;
    // It took the resume and finished.
    scripted.instances = scripted.instances.map((i) => (i.instanceId === 'job-queued-answer' ? { ...i, runtimeStatus: 'Completed' } : i));
    scripted.set('job-quiet', status(1, 4), clock.now);
    stalls.started('job-quiet');
    clock.now += STALL_CHECK.stalledAfterMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.jobId), ['quiet']);
    const line = logger.lines.find((l) => l.event === 'job.resume_requested' && l.jobId === 'queued-answer');
    assert.equal(line?.stalledAfterMs, 2 * 20_000, 'the log line says how long it waited');
    // A lag of minutes raises the bound only to the control queue's visibility: a held message comes back by then.
    lagMs = 120_000;
    scripted.instances = scripted.instances.filter((i) => i.instanceId !== 'job-quiet');
    scripted.set('job-long-behind', status(1, 5), clock.now);
    stalls.started('job-long-behind');
    clock.now += STALL_CHECK.maxLagBoundMs - 1;
    assert.deepEqual(await stalls.check(scripted.client(), 1), []);
    clock.now += STALL_CHECK.intervalMs;
    assert.deepEqual((await stalls.check(scripted.client(), 1)).map((r) => r.jobId), ['long-behind']);
  });

  it('gives each repeat of a call twice as long as the one before (the run\'s status carries the count), up to the cap', async () => {
    const { clock, scripted, logger } = setup();
    const stalls = new StalledJobs({ logger, now: () => clock.now, intervalMs: 0 });
    clock.now = T0 + 3_600_000;
    await stalls.check(scripted.client(), 1);
    stalls.started('job-r');
    // The run makes its call again (`repeat`) at `at`; is it asked `silentMs` later?
    const askedAfter = async (repeat: number, silentMs: number): Promise<boolean> => {
      const at = clock.now + 1_000;
      scripted.set('job-r', status(1, 10 + repeat, 'planning', repeat === 0 ? undefined : repeat), at);
      clock.now = at + silentMs - 1;
      if ((await stalls.check(scripted.client(), 1)).length > 0) return false;
      clock.now = at + silentMs;
      return (await stalls.check(scripted.client(), 1)).length > 0;
    };
    assert.equal(await askedAfter(0, 15_000), true, 'the first call: 15 s, not sooner');
    assert.equal(await askedAfter(1, 30_000), true, 'the first repeat: 30 s');
    assert.equal(await askedAfter(2, 60_000), true);
    assert.equal(await askedAfter(3, 120_000), true);
    assert.equal(await askedAfter(4, 240_000), true);
    assert.equal(await askedAfter(9, 240_000), true, 'capped at maxBackoffMs');
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffMs(15_000, n)), [15_000, 30_000, 60_000, 120_000, 240_000, 240_000, 240_000, 240_000]);
  });
});
