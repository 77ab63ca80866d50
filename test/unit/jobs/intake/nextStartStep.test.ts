/**
 * The pass's judgment of a recorded start from what Durable shows (JobIntake.nextStartStep): when a
 * start is confirmed, waited for, or taken over (new start id, this epoch, the next instance id).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { INTAKE } from '../../../../shared/jobs/intake/intakeTerms';
import { nextStartStep } from '../../../../shared/jobs/intake/startSteps';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { type JobSummary } from '../../../../shared/jobs/JobSummary';
import { type OrchestrationSnapshot } from '../../../../shared/jobs/run/OrchestrationClient';
import { type StartRecord } from '../../../../shared/jobs/store/JobStore';

const NOW = new Date('2026-03-01T12:00:00.000Z');

function start(epoch = 5, startId = 's-current'): StartRecord {
  const run: JobRun = {
    jobId: 'j1',
    workType: 'sum',
    fingerprint: 'f'.repeat(64),
    options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300 },
    source: { kind: 'inline', items: [1] },
    epoch,
    holder: 'leader',
    submittedAt: NOW.toISOString(),
    via: 'queue',
    startId,
  };
  const at = NOW.toISOString();
  return { v: 1, jobId: 'j1', fingerprint: run.fingerprint, state: 'active', startId, generation: 1, epoch, holder: 'leader', at, run };
}

interface InstanceOptions {
  readonly startId?: string;
  readonly ageSeconds?: number;
  readonly phase?: string;
  readonly output?: unknown;
  /** The run's custom status says its plan stood down as superseded. */
  readonly superseded?: boolean;
}

function instance(runtimeStatus: string, options: InstanceOptions = {}): OrchestrationSnapshot {
  const created = new Date(NOW.getTime() - (options.ageSeconds ?? 1) * 1000);
  return {
    instanceId: 'job-j1',
    runtimeStatus,
    input: { run: { startId: options.startId ?? 's-current' } },
    output: options.output ?? null,
    customStatus:
      options.phase === undefined && options.superseded === undefined
        ? null
        : { ...(options.phase === undefined ? {} : { phase: options.phase }), ...(options.superseded === true ? { superseded: true } : {}) },
    createdTime: created,
    lastUpdatedTime: created,
  };
}

const summary = (superseded?: string): JobSummary => ({
  jobId: 'j1',
  workType: 'sum',
  status: superseded === undefined ? 'completed' : 'failed',
  progress: { chunks: { total: 1, done: 1, failed: 0 }, items: { total: 1, done: 1, failed: 0 } },
  epoch: 5,
  finishedAt: NOW.toISOString(),
  ...(superseded === undefined ? {} : { superseded: { reason: superseded } }),
});

describe('judging a recorded start (nextStartStep)', () => {
  it('confirms a start once its run is past the plan step, or finished with the job\'s outcome', () => {
    for (const phase of ['running', 'aggregating']) {
      assert.deepEqual(nextStartStep(instance('Running', { phase }), start(), 5, NOW), { kind: 'confirmed' });
    }
    assert.deepEqual(nextStartStep(instance('ContinuedAsNew'), start(), 5, NOW), { kind: 'confirmed' });
    assert.deepEqual(nextStartStep(instance('Completed', { output: summary() }), start(), 5, NOW), { kind: 'confirmed' });
    assert.deepEqual(nextStartStep(instance('Failed'), start(), 5, NOW), { kind: 'confirmed' });
    // A late start of a finished job answered the recorded summary: the job is done, whoever's start that was.
    const answeredLate = instance('Completed', { startId: 's-stale', output: summary() });
    assert.deepEqual(nextStartStep(answeredLate, start(), 5, NOW), { kind: 'confirmed' });
  });

  it('waits while the run is planning or freshly Pending, and while another start holds the id without being stuck', () => {
    assert.deepEqual(nextStartStep(instance('Running', { phase: 'planning' }), start(), 5, NOW), { kind: 'wait' });
    assert.deepEqual(nextStartStep(instance('Pending', { ageSeconds: INTAKE.stuckPendingSeconds - 1 }), start(), 5, NOW), { kind: 'wait' });
    assert.deepEqual(nextStartStep(instance('Running', { startId: 's-stale' }), start(), 5, NOW), { kind: 'wait' });
    assert.deepEqual(nextStartStep(instance('Pending', { startId: 's-stale' }), start(), 5, NOW), { kind: 'wait' });
  });

  it('starts again as a new start under the next instance id when the instance is missing or its run stood down, whatever the epoch', () => {
    // Never under the same instance id: the earlier start may still land (a frozen leader's startNew in
    // flight), and on a finished instance Durable would replace the history of the run that did the work.
    for (const epoch of [4, 5]) {
      assert.deepEqual(nextStartStep(undefined, start(epoch), 5, NOW), { kind: 'take_over', reason: 'no instance' });
      const stoodDown = nextStartStep(instance('Completed', { output: summary('superseded') }), start(epoch), 5, NOW);
      assert.deepEqual(stoodDown, { kind: 'take_over', reason: 'its run stood down' });
    }
    const staleStoodDown = nextStartStep(instance('Completed', { startId: 's-stale', output: summary('superseded') }), start(4), 5, NOW);
    assert.deepEqual(staleStoodDown, { kind: 'take_over', reason: 'its run stood down' });
  });

  it('moves the job to the next generation at once when its run stood down superseded but Durable still shows it Running', () => {
    // The plan held by the dead leader answers only when it comes back (20 s or more): no waiting for it.
    const stoodDown = nextStartStep(instance('Running', { phase: 'done', superseded: true }), start(4), 5, NOW);
    assert.deepEqual(stoodDown, { kind: 'take_over', reason: 'its run stood down' });
    // Seen by a leader of the run's own epoch, which has lost the lease since: it waits, as before.
    assert.deepEqual(nextStartStep(instance('Running', { phase: 'done', superseded: true }), start(5), 5, NOW), { kind: 'wait' });
    // Done but not superseded (it answered the job's recorded outcome, or failed): nothing to restart.
    assert.deepEqual(nextStartStep(instance('Running', { phase: 'done' }), start(4), 5, NOW), { kind: 'wait' });
    // Another start's run stood down: not this start's business.
    assert.deepEqual(nextStartStep(instance('Running', { startId: 's-stale', phase: 'done', superseded: true }), start(5), 5, NOW), { kind: 'wait' });
  });

  it('moves the job to the next instance generation when its instance is stuck Pending, or Pending under an older epoch', () => {
    const stuck = nextStartStep(instance('Pending', { ageSeconds: INTAKE.stuckPendingSeconds + 1 }), start(5), 5, NOW);
    assert.deepEqual(stuck, { kind: 'take_over', reason: 'stuck Pending' });
    const inherited = nextStartStep(instance('Pending', { ageSeconds: 1 }), start(4), 5, NOW);
    assert.deepEqual(inherited, { kind: 'take_over', reason: 'Pending under an older epoch' });
    const stale = instance('Pending', { startId: 's-stale', ageSeconds: INTAKE.stuckPendingSeconds + 1 });
    const blocked = nextStartStep(stale, start(5), 5, NOW);
    assert.equal(blocked.kind, 'take_over');
  });
});
