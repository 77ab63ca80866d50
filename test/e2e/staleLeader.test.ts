/**
 * A leader paused (SIGSTOP) between its last check and its act while the newer leader runs the job, on
 * real host processes (the extensions host, or the development host with E2E_HOST=devhost) with the
 * real app and Azurite (the pause and the hold: test/e2e/support/staleLeader.ts). The newer leader takes
 * the start over as a new start under the next instance id (`job-<id>.2`), so the stale start can only
 * land on an instance of its own (`job-<id>`), whose run stands down: the job runs once, under the newer
 * epoch. (The case of a stale start landing after the job finished is staleLeaderFinished.test.ts: the
 * two took up to 175 s of the runner's 180 s per file on the extensions host, where the stale start may
 * run only after the control-queue visibility timeout.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { proxiedScenarios, sumOf } from './support/realApp';
import { pausedLeaders, staleStartWindowMs } from './support/staleLeader';

describe('a leader paused between its check and its act', () => {
  const scenarios = proxiedScenarios();
  const leaders = pausedLeaders(scenarios);

  it('refuses the stale start while the newer leader runs the job', async () => {
    const jobId = 'stale-while-running';
    const items = Array.from({ length: 60 }, (_, i) => i * i - 300);
    const p = await leaders.pausedInItsStart(jobId, items);
    await leaders.resume(p);
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
      staleStartWindowMs(),
      'the stale run to stand down',
    );
    assert.equal((await p.s.instance(p.next, `job-${jobId}`))?.input?.run?.epoch, p.oldEpoch, 'the stale start landed on its own instance');
  });
});
