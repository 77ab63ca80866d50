/**
 * A leader paused (SIGSTOP) between its last check and its act, on real development host processes
 * with the real app, Durable backend and Azurite. The leader's storage goes through a proxy that
 * holds the request its start makes after every check has passed (the Durable backend reading the
 * instance as it starts it); the test stops the process there, lets the other instance take the
 * lease with a newer epoch, resumes the old leader and only then lets the held request through, so
 * the act lands after the newer epoch exists:
 * - the newer leader takes the start over as a new start under the next instance id (`job-<id>.2`),
 *   so the stale start can only land on an instance of its own (`job-<id>`), whose run stands down:
 * - while the newer leader's run of the job is in progress, the job runs once, under the newer epoch;
 * - after the job finished, the stale start landing does not touch the finished run's history
 *   (Durable would replace a finished instance of the same id): the job is not run again, its
 *   stored result is untouched, and the status still shows the exact result.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { durableRequests } from './support/durableRequests';
import { pauseInstance } from './support/pauseProcess';
import { proxiedScenarios, sumOf } from './support/realApp';

describe('a leader paused between its check and its act', () => {
  const scenarios = proxiedScenarios();
  // A test that fails while its old leader is paused must not leave a stopped process behind (the
  // scenario's stop continues the host it started, not the extensions host's worker).
  const pausedInstances: Array<ReturnType<typeof pauseInstance>> = [];
  after(() => {
    for (const paused of pausedInstances) paused.resume();
  });

  async function pausedInItsStart(jobId: string, items: number[]) {
    const { s, proxy } = await scenarios.start();
    const old = await s.start(`stale-a-${jobId.slice(-3)}`, proxy.connectionString);
    const oldTerm = await s.leading(old);
    const next = await s.start(`stale-b-${jobId.slice(-3)}`);
    // The development host: the start's own read of the instance blob, after the intake's status check
    // of the same blob. The real extension's provider reads the instance's row as often as its client
    // is asked (status checks and the start's own dedupe read look alike), so there the hold is the
    // start's first write, its start message: sent only after the provider's own check found no instance.
    const durable = durableRequests(s);
    let reads = 0;
    const hold = proxy.hold((r) =>
      durable.host === 'devhost' ? durable.instanceRead(r, `job-${jobId}`) && ++reads === 2 : durable.startMessage(r, `job-${jobId}`),
    );
    await s.submitByQueue({ jobId, workType: 'sum', items, options: { chunkSize: 10 } });
    const held = await hold.held;
    const paused = pauseInstance(old);
    pausedInstances.push(paused);
    const oldEpoch = oldTerm.instance.epoch ?? 0;
    const newTerm = await s.leading(next, oldEpoch, 90_000);
    return { s, proxy, old, paused, next, held, oldEpoch, newEpoch: newTerm.instance.epoch ?? 0 };
  }

  /** Resumes the old leader, then lets its held request through; resolves once storage answered it. */
  async function resume(p: Awaited<ReturnType<typeof pausedInItsStart>>): Promise<void> {
    p.paused.resume();
    const status = await p.held.release();
    assert.ok(status !== undefined, 'the held read reached storage: the stale start went on');
  }

  it('refuses the stale start while the newer leader runs the job', async () => {
    const jobId = 'stale-while-running';
    const items = Array.from({ length: 60 }, (_, i) => i * i - 300);
    const p = await pausedInItsStart(jobId, items);
    await resume(p);
    // The stale start is answered within a second or two; give it time to land before judging.
    await new Promise((r) => setTimeout(r, 5_000));
    const done = await p.s.finished(p.next, jobId, 120_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    assert.equal(done.epoch, p.newEpoch, 'the job ran under the newer epoch');
    const stalePlans = p.s.events('job.planned', jobId).filter((e) => e.epoch === p.oldEpoch);
    assert.deepEqual(stalePlans, [], 'a run of the old epoch planned the job');
    assert.equal(new Set(p.s.events('job.planned', jobId).map((e) => e.startId)).size, 1, 'the job was planned by more than one run');
    // The newer leader's start has an instance id of its own; the old leader's start, landing after it
    // resumed, made only its own instance, whose run stood down.
    const instance = await p.s.instance(p.next, `job-${jobId}.2`);
    assert.equal(instance?.input?.run?.epoch, p.newEpoch, 'the job runs under the newer epoch\'s own instance');
    await eventually(
      () => Promise.resolve(p.s.events('job.plan_refused', jobId).some((e) => e.epoch === p.oldEpoch) ? true : undefined),
      60_000,
      'the stale run to stand down',
    );
    assert.equal((await p.s.instance(p.next, `job-${jobId}`))?.input?.run?.epoch, p.oldEpoch, 'the stale start landed on its own instance');
  });

  it('does not run a finished job again when a stale start lands after it finished', async () => {
    const jobId = 'stale-after-finish';
    const items = Array.from({ length: 45 }, (_, i) => 7 * i - 100);
    const p = await pausedInItsStart(jobId, items);
    const done = await p.s.finished(p.next, jobId, 150_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    const stored = await p.s.resultsBlob(`jobs/${jobId}/result.json`);
    assert.ok(stored !== undefined);
    // The job shows its recorded outcome at once; its run (the newer leader's start, the next
    // instance id) finishes in Durable a hop later.
    const working = `job-${jobId}.2`;
    const finished = await eventually(async () => {
      const instance = await p.s.instance(p.next, working);
      return instance?.runtimeStatus === 'Completed' ? instance : undefined;
    }, 10_000, 'the run to complete');
    assert.equal(finished.input?.run?.epoch, p.newEpoch);

    await resume(p);
    // The stale start lands on an instance id of its own, never on the finished one: wait until
    // that execution, the old epoch's, has ended too.
    await eventually(
      async () => {
        const instance = await p.s.instance(p.next, `job-${jobId}`);
        const ended = ['Completed', 'Failed', 'Terminated'].includes(instance?.runtimeStatus ?? '');
        return instance?.input?.run?.epoch === p.oldEpoch && ended ? true : undefined;
      },
      60_000,
      'the stale start to land and end',
    );
    // The finished run's history is still the run that did the work.
    const kept = await p.s.instance(p.next, working);
    assert.equal(kept?.runtimeStatus, 'Completed');
    assert.equal(kept?.input?.run?.epoch, p.newEpoch, 'the finished run was replaced by the stale start');
    const stoodDown = p.s.events('job.plan_refused', jobId).filter((e) => e.epoch === p.oldEpoch);
    assert.equal(stoodDown.length, 1, 'the stale run stood down at its plan step');
    await new Promise((r) => setTimeout(r, 3_000));
    const after = await p.s.finished(p.next, jobId, 60_000);
    assert.equal(after.status, 'completed', JSON.stringify(after));
    assert.deepEqual(after.result, sumOf(items));
    assert.equal(after.epoch, p.newEpoch);
    const plans = p.s.events('job.planned', jobId);
    assert.equal(plans.length, 1, `the finished job was planned again: ${JSON.stringify(plans)}`);
    assert.equal((await p.s.resultsBlob(`jobs/${jobId}/result.json`))?.etag, stored.etag, 'the stored result was written again');
  });
});
