/**
 * The shared run (batchOrchestration.ts) replayed by the durable-functions SDK's own executor on the
 * development host's Durable episode logic (devhost/testing runOrchestration), activities scripted:
 * each job's plan outcome becomes its entry of the output, a refused job is finished, a recorded
 * outcome that asks for delivery is delivered, and a resume calls the plans again as repeats. A job
 * that goes on alone (a sub-orchestration) is covered on the host: test/integration/jobs/run/sharedRuns.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ActivityScript, completesAfter, runOrchestration } from 'devhost/testing';

import { type JobSummary } from '../../../../shared/jobs/JobSummary';
import { type AggregateInput } from '../../../../shared/jobs/run/aggregation';
import {
  type BatchCustomStatus,
  type BatchOutput,
  type BatchState,
  JOB_BATCH_ORCHESTRATOR,
  JOB_BATCH_PLAN,
  jobBatchOrchestration,
} from '../../../../shared/jobs/run/batchOrchestration';
import { type DeliverInput, type PlanInput, type PlanOutcome } from '../../../../shared/jobs/run/JobActivities';
import { JOB_ACTIVITIES, RESUME_EVENT } from '../../../../shared/jobs/run/jobOrchestration';
import { smallRun } from '../support/smallRun';

const START = new Date('2026-01-01T00:00:00.000Z');
const NONE = { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } };


function summary(jobId: string, status: JobSummary['status'] = 'completed'): JobSummary {
  return { jobId, workType: 'sum', status, progress: NONE, result: { sum: 6 }, epoch: 4, finishedAt: START.toISOString() };
}

/** Plan outcomes by job id: done (recorded), stood down, refused. */
const plans: ActivityScript = (input) =>
  (input as PlanInput[]).map((p): PlanOutcome => {
    if (p.run.jobId === 'gone') return { ok: false, standDown: { ...summary('gone', 'failed'), superseded: { reason: 'another start' } } };
    if (p.run.jobId === 'bad') return { ok: false, error: { code: 'UNKNOWN_WORK_TYPE', message: 'no such work type' } };
    return { ok: true, cancelled: false, chunkCount: 1, itemCount: 3, ledger: { next: 1, inFlight: [], highestDispatch: 1, progress: NONE }, summary: summary(p.run.jobId) };
  });

describe('shared run (replayed by the durable-functions SDK)', () => {
  it('answers each job\'s outcome: recorded by its plan, a stand-down\'s, or finished here when refused; delivers what asked for it', async () => {
    const delivered: DeliverInput[] = [];
    const state: BatchState = { runs: [{ run: smallRun('done', { deliver: true }) }, { run: smallRun('gone', { deliver: true }) }, { run: smallRun('bad') }] };
    const result = await runOrchestration(jobBatchOrchestration, {
      name: JOB_BATCH_ORCHESTRATOR,
      input: state,
      activities: {
        [JOB_BATCH_PLAN]: plans,
        [JOB_ACTIVITIES.finish]: (input) => input,
        [JOB_ACTIVITIES.deliver]: (input) => (delivered.push(input as DeliverInput), undefined),
      },
      start: START,
    });
    assert.equal(result.runtimeStatus, 'Completed');
    const output = result.output as BatchOutput;
    assert.deepEqual(Object.keys(output).sort(), ['bad', 'done', 'gone']);
    assert.equal(output.done?.status, 'completed');
    assert.ok(output.gone?.superseded !== undefined, 'a stand-down answers its superseded marker');
    assert.equal(output.bad?.status, 'failed');
    assert.equal(output.bad?.error?.code, 'UNKNOWN_WORK_TYPE');
    // One call plans every job; the refused one is finished (recorded); only the recorded outcome that asked is delivered.
    assert.equal(result.calls.filter((c) => c.name === JOB_BATCH_PLAN).length, 1);
    assert.deepEqual((result.calls.find((c) => c.name === JOB_BATCH_PLAN)?.input as PlanInput[]).map((p) => p.run.jobId), ['done', 'gone', 'bad']);
    assert.deepEqual(result.calls.filter((c) => c.name === JOB_ACTIVITIES.finish).map((c) => (c.input as JobSummary).jobId), ['bad']);
    assert.deepEqual(delivered.map((d) => d.summary.jobId), ['done']);
    const last = result.episodes.at(-1)?.customStatus as BatchCustomStatus;
    assert.equal(last.phase, 'done');
    assert.equal(last.epoch, 4);
  });

  it('delivers a stand-down that answers the recorded outcome (a repeat of a plan that recorded it and died), as a job run does; never a superseded one', async () => {
    const delivered: DeliverInput[] = [];
    const state: BatchState = { runs: [{ run: smallRun('again', { deliver: true }) }, { run: smallRun('gone', { deliver: true }) }] };
    const finished: ActivityScript = (input) =>
      (input as PlanInput[]).map((p): PlanOutcome =>
        p.run.jobId === 'again' ? { ok: false, standDown: summary('again') } : { ok: false, standDown: { ...summary('gone', 'failed'), superseded: { reason: 'another start' } } },
      );
    const result = await runOrchestration(jobBatchOrchestration, {
      name: JOB_BATCH_ORCHESTRATOR,
      input: state,
      activities: { [JOB_BATCH_PLAN]: finished, [JOB_ACTIVITIES.deliver]: (input) => (delivered.push(input as DeliverInput), undefined) },
      start: START,
    });
    assert.equal(result.runtimeStatus, 'Completed');
    assert.equal((result.output as BatchOutput).again?.status, 'completed');
    assert.deepEqual(delivered.map((d) => d.summary.jobId), ['again']);
  });

  it('aggregates a job cancelled before its plan finished it as cancelled (recorded, then delivered), as a job run does', async () => {
    const delivered: DeliverInput[] = [];
    const state: BatchState = { runs: [{ run: smallRun('done') }, { run: smallRun('cx', { deliver: true }) }] };
    const cancelled: ActivityScript = (input, call) =>
      (plans(input, call) as PlanOutcome[]).map((o, i) =>
        (input as PlanInput[])[i]?.run.jobId === 'cx' ? { ok: true, cancelled: true, chunkCount: 0, itemCount: 0, ledger: { next: 0, inFlight: [], highestDispatch: 0, progress: NONE } } : o,
      );
    const result = await runOrchestration(jobBatchOrchestration, {
      name: JOB_BATCH_ORCHESTRATOR,
      input: state,
      activities: {
        [JOB_BATCH_PLAN]: cancelled,
        [JOB_ACTIVITIES.aggregate]: (input) => ({ ...summary((input as AggregateInput).run.jobId, (input as AggregateInput).cancelled ? 'cancelled' : 'completed') }),
        [JOB_ACTIVITIES.deliver]: (input) => (delivered.push(input as DeliverInput), undefined),
      },
      start: START,
    });
    assert.equal(result.runtimeStatus, 'Completed');
    const aggregated = result.calls.filter((c) => c.name === JOB_ACTIVITIES.aggregate).map((c) => c.input as AggregateInput);
    assert.deepEqual(aggregated.map((a) => [a.run.jobId, a.cancelled]), [['cx', true]]);
    assert.equal((result.output as BatchOutput).cx?.status, 'cancelled');
    assert.equal((result.output as BatchOutput).done?.status, 'completed');
    assert.deepEqual(delivered.map((d) => [d.summary.jobId, d.summary.status]), [['cx', 'cancelled']]);
  });

  it('calls the plans again, as repeats, when a resume comes while they are out (the stall check\'s rule for job runs)', async () => {
    const state: BatchState = { runs: [{ run: smallRun('a') }, { run: smallRun('b') }] };
    let calls = 0;
    const result = await runOrchestration(jobBatchOrchestration, {
      name: JOB_BATCH_ORCHESTRATOR,
      input: state,
      // The first call's answer comes only after 10 minutes (held by a dead instance); the repeat answers at once.
      activities: { [JOB_BATCH_PLAN]: (input, call) => (calls++ === 0 ? completesAfter(600_000, plans(input, call)) : plans(input, call)) },
      events: [{ at: new Date(START.getTime() + 20_000), name: RESUME_EVENT, input: { generation: 1, wait: 1 } }],
      start: START,
    });
    assert.equal(result.runtimeStatus, 'Completed');
    const planCalls = result.calls.filter((c) => c.name === JOB_BATCH_PLAN).map((c) => c.input as PlanInput[]);
    assert.equal(planCalls.length, 2);
    assert.deepEqual(planCalls[0]?.map((p) => p.repeat), [undefined, undefined]);
    assert.deepEqual(planCalls[1]?.map((p) => p.repeat), [1, 1], 'each plan is called again as a repeat (it takes its job\'s call lease first)');
    assert.deepEqual(Object.keys(result.output as BatchOutput).sort(), ['a', 'b']);
    const waits = result.episodes.map((e) => (e.customStatus as BatchCustomStatus | undefined)?.wait);
    assert.ok(waits.includes(2), 'the repeated call counts as the next wait');
  });
});
