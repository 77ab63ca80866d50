/**
 * A leader paused (SIGSTOP) between its last check and its act, whose start lands after the newer
 * leader's run finished the job, on real host processes (the extensions host, or the development host
 * with E2E_HOST=devhost) with the real app and Azurite (the pause and the hold:
 * test/e2e/support/staleLeader.ts). The stale start lands on an instance id of its own, not on the
 * finished run's (Durable would replace a finished instance of the same id), and its run stands down:
 * the job is not run again, its stored result is untouched, and the status still shows the exact
 * result. (Split from staleLeader.test.ts, see there.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { proxiedScenarios, sumOf } from './support/realApp';
import { pausedLeaders, staleStartWindowMs } from './support/staleLeader';

describe('a leader paused between its check and its act, resumed after the job finished', () => {
  const scenarios = proxiedScenarios();
  const leaders = pausedLeaders(scenarios);

  it('does not run a finished job again when a stale start lands after it finished', async () => {
    const jobId = 'stale-after-finish';
    const items = Array.from({ length: 45 }, (_, i) => 7 * i - 100);
    const p = await leaders.pausedInItsStart(jobId, items);
    const done = await p.s.finished(p.next, jobId, 150_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    // The outcome recorded (its result inline: a small result without errors stores no result blob).
    assert.ok((await p.s.resultsBlob(`jobs/${jobId}/final.json`)) !== undefined);
    // The job shows its recorded outcome at once; its run (the newer leader's start, the next
    // instance id) finishes in Durable a hop later.
    const working = `job-${jobId}.2`;
    const finished = await eventually(async () => {
      const instance = await p.s.instance(p.next, working);
      return instance?.runtimeStatus === 'Completed' ? instance : undefined;
    }, 10_000, 'the run to complete');
    assert.equal(finished.input?.run?.epoch, p.newEpoch);

    await leaders.resume(p);
    // The stale start lands on an instance id of its own, never on the finished one: wait until
    // that execution, the old epoch's, has ended too (on the real extension possibly only after the
    // control-queue visibility timeout: support/staleLeader.ts).
    await eventually(
      async () => {
        const instance = await p.s.instance(p.next, `job-${jobId}`);
        const ended = ['Completed', 'Failed', 'Terminated'].includes(instance?.runtimeStatus ?? '');
        return instance?.input?.run?.epoch === p.oldEpoch && ended ? true : undefined;
      },
      staleStartWindowMs(),
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
    assert.equal(p.s.events('job.aggregated', jobId).length, 1, 'the finished job was aggregated again');
  });
});
