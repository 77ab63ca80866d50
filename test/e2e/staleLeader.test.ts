/**
 * A leader paused (SIGSTOP) between its last check and its act, on real development host processes
 * with the real app, Durable backend and Azurite. The leader's storage goes through a proxy that
 * holds the request its start makes after every check has passed (the Durable backend reading the
 * instance as it starts it); the test stops the process there, lets the other instance take the
 * lease with a newer epoch, resumes the old leader and only then lets the held request through, so
 * the act lands after the newer epoch exists:
 * - while the newer leader's run of the job is in progress, the stale start is refused (the
 *   instance that runs is the newer epoch's, the job runs once);
 * - after the job finished, the stale start replaces the finished instance (Durable's rule for a
 *   finished id) but does nothing: the job is not run again, its stored result is untouched, and
 *   the status still shows the exact result.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { proxiedScenarios, sumOf } from './support/realApp';

describe('a leader paused between its check and its act', () => {
  const scenarios = proxiedScenarios();

  async function pausedInItsStart(jobId: string, items: number[]) {
    const { s, proxy } = await scenarios.start();
    const old = await s.start(`stale-a-${jobId.slice(-3)}`, proxy.connectionString);
    const oldTerm = await s.leading(old);
    const next = await s.start(`stale-b-${jobId.slice(-3)}`);
    // The start's own read of the instance comes after the intake's status check of the same blob.
    let reads = 0;
    const hold = proxy.hold((r) => r.method === 'GET' && r.path === s.instancePath(jobId) && ++reads === 2);
    await s.submitByQueue({ jobId, workType: 'sum', items, options: { chunkSize: 10 } });
    const held = await hold.held;
    old.child.kill('SIGSTOP');
    const oldEpoch = oldTerm.instance.epoch ?? 0;
    const newTerm = await s.leading(next, oldEpoch, 90_000);
    return { s, proxy, old, next, held, oldEpoch, newEpoch: newTerm.instance.epoch ?? 0 };
  }

  /** Resumes the old leader, then lets its held request through; resolves once storage answered it. */
  async function resume(p: Awaited<ReturnType<typeof pausedInItsStart>>): Promise<void> {
    p.old.child.kill('SIGCONT');
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
    // The old leader's start went on after it resumed and Durable refused it: the job's instance is the newer epoch's.
    const instance = await p.s.instance(p.next, `job-${jobId}`);
    assert.equal(instance?.input?.run?.epoch, p.newEpoch, 'an orchestration was created with the old epoch');
    const refused = p.old.events('intake.start_failed').filter((e) => e.jobId === jobId && e.epoch === p.oldEpoch);
    assert.equal(refused.length, 1, 'the stale start was tried and refused');
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
    // The job shows its recorded outcome at once; its run finishes in Durable a hop later.
    await eventually(async () => ((await p.s.instance(p.next, `job-${jobId}`))?.runtimeStatus === 'Completed' ? true : undefined), 10_000, 'the run to complete');

    await resume(p);
    // The stale start lands on the finished instance, which Durable replaces (its rule for a finished
    // id): wait until that execution, the old epoch's, has ended too.
    await eventually(
      async () => {
        const instance = await p.s.instance(p.next, `job-${jobId}`);
        const ended = ['Completed', 'Failed', 'Terminated'].includes(instance?.runtimeStatus ?? '');
        return instance?.input?.run?.epoch === p.oldEpoch && ended ? true : undefined;
      },
      60_000,
      'the stale start to land and end',
    );
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
