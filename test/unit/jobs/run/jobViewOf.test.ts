/**
 * A shared run's instance seen as one of its jobs' (jobViewOf) and the jobs an instance shows
 * (jobsShownBy): what the status reader, the start checks, the retention sweep and the index walk
 * read of a job that ran in a shared run.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { nextStartStep } from '../../../../shared/jobs/intake/startSteps';
import { type JobSummary } from '../../../../shared/jobs/JobSummary';
import { jobsShownBy, jobViewOf, type OrchestrationSnapshot, runOf } from '../../../../shared/jobs/run/OrchestrationClient';
import { type StartRecord } from '../../../../shared/jobs/store/JobStore';
import { smallRun } from '../support/smallRun';

const AT = new Date('2026-01-01T00:00:00.000Z');
const SHARED = 'batch-0b6f1d6e-6a9e-4a57-9a59-5b1f1b3f5e21';


function snapshot(instanceId: string, input: unknown, output: unknown = null): OrchestrationSnapshot {
  return { instanceId, runtimeStatus: 'Completed', input, output, customStatus: { phase: 'done' }, createdTime: AT, lastUpdatedTime: AT };
}

const done = (jobId: string): JobSummary => ({
  jobId,
  workType: 'sum',
  status: 'completed',
  progress: { chunks: { total: 1, done: 1, failed: 0 }, items: { total: 1, done: 1, failed: 0 } },
  epoch: 1,
  finishedAt: AT.toISOString(),
});

describe('jobViewOf and jobsShownBy', () => {
  it('shows a shared run as each of its jobs\' own instance: its run, its summary; undefined for a job it does not hold', () => {
    const shared = snapshot(SHARED, { runs: [{ run: smallRun('a') }, { run: smallRun('b') }] }, { a: done('a') });
    const a = jobViewOf(shared, 'a');
    assert.equal(runOf(a)?.startId, 'start-a');
    assert.deepEqual(a?.output, done('a'));
    assert.equal(a?.instanceId, SHARED, 'still named by the shared run');
    assert.equal(jobViewOf(shared, 'b')?.output, null, 'no outcome for b yet');
    assert.equal(jobViewOf(shared, 'c'), undefined);
    const own = snapshot('job-a', { run: smallRun('a') });
    assert.equal(jobViewOf(own, 'a'), own, 'a job run\'s own instance as it is');
    assert.equal(jobViewOf(undefined, 'a'), undefined);
  });

  it('shows a job whose plan stood down as superseded in a running shared run as a run that stood down: the start checks take it over at once', () => {
    const running = { ...snapshot(SHARED, { runs: [{ run: smallRun('a') }, { run: smallRun('b') }] }), runtimeStatus: 'Running' };
    const status = { phase: 'running', epoch: 1, generation: 1, wait: 2, stoodDown: ['b'], alone: ['a'] };
    const shared = { ...running, customStatus: status };
    const start: StartRecord = { v: 1, jobId: 'b', fingerprint: 'f'.repeat(64), state: 'active', startId: 'start-b', generation: 1, instance: SHARED, epoch: 1, holder: 'leader', at: AT.toISOString(), run: smallRun('b') };
    assert.deepEqual(nextStartStep(jobViewOf(shared, 'b'), start, 2, AT), { kind: 'take_over', reason: 'its run stood down' });
    // The job that went on alone is past its plan: confirmed.
    assert.deepEqual(nextStartStep(jobViewOf(shared, 'a'), { ...start, jobId: 'a', startId: 'start-a', run: smallRun('a') }, 2, AT), { kind: 'confirmed' });
  });

  it('lists the jobs an instance shows: a job run\'s one (with its generation), a shared run\'s each (generation 0), others none', () => {
    const shared = snapshot(SHARED, { runs: [{ run: smallRun('a') }, { run: smallRun('b') }] });
    assert.deepEqual(jobsShownBy(shared).map((j) => [j.jobId, j.generation, runOf(j.snapshot)?.jobId]), [['a', 0, 'a'], ['b', 0, 'b']]);
    assert.deepEqual(jobsShownBy(snapshot('job-a.3', { run: smallRun('a') })).map((j) => [j.jobId, j.generation]), [['a', 3]]);
    assert.deepEqual(jobsShownBy(snapshot('report-builder', {})), []);
    assert.deepEqual(jobsShownBy(snapshot('batch-not-a-uuid', { runs: [{ run: smallRun('a') }] })), []);
  });
});
