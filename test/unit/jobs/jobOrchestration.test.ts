/**
 * The job orchestration replayed by the durable-functions SDK's own executor on the development
 * host's own Durable episode logic (devhost/testing runOrchestration: the extension's histories,
 * custom status and continue-as-new rules, in memory, on a virtual clock); activity results are
 * scripted per scenario.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ActivityCall, type ActivityScript, type OrchestrationRun, type RaisedEvent, runOrchestration } from 'devhost/testing';

import { type AggregateInput, type PlanOutcome, type ProgressInput, type ProgressOutcome, type RedispatchInput, type RedispatchOutcome } from '../../../shared/jobs/JobActivities';
import { CANCEL_EVENT, initialState, JOB_ACTIVITIES, JOB_ORCHESTRATOR, jobOrchestration, type OrchestrationState, POLL } from '../../../shared/jobs/jobOrchestration';
import { type JobCustomStatus, type JobRun, type JobSummary } from '../../../shared/jobs/JobRun';

const START = new Date('2026-01-01T00:00:00.000Z');

function run(options: Partial<JobRun['options']> = {}): JobRun {
  return {
    jobId: 'job1',
    workType: 'sum',
    fingerprint: 'f'.repeat(64),
    options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300, ...options },
    source: { kind: 'inline', items: [1, 2, 3] },
    epoch: 7,
    holder: 'instance-a',
    submittedAt: START.toISOString(),
    via: 'queue',
  };
}

function progress(chunkCount: number, done: number, failed = 0, cancelled = false, late = 0): ProgressOutcome {
  return {
    cancelled,
    late,
    chunks: { total: chunkCount, done, failed },
    items: { total: chunkCount * 10, done: done * 10, failed: failed * 10 },
  };
}

/** The aggregate activity's stand-in: echoes what the orchestration asked for. */
const aggregate: ActivityScript = (input) => {
  const a = input as AggregateInput;
  const summary: JobSummary = {
    jobId: a.run.jobId,
    workType: a.run.workType,
    status: a.cancelled ? 'cancelled' : 'completed',
    progress: { chunks: { total: a.chunkCount, done: a.chunkCount, failed: 0 }, items: { total: a.itemCount, done: a.itemCount, failed: 0 } },
    result: { count: a.itemCount },
    resultBlob: `jobs/${a.run.jobId}/result.json`,
    epoch: a.run.epoch,
    finishedAt: START.toISOString(),
  };
  return summary;
};

const planned = (chunkCount: number): ActivityScript => () => ({ ok: true, cancelled: false, chunkCount, itemCount: chunkCount * 10 }) satisfies PlanOutcome;

function callsOf(calls: readonly ActivityCall[], name: string): ActivityCall[] {
  return calls.filter((c) => c.name === name);
}

/** The finish activity's stand-in records nothing and answers the summary it was given. */
const echoFinish: ActivityScript = (input) => input;

/** Runs the job orchestration to its end; fails the test if the orchestration itself failed. */
async function runJob(input: OrchestrationState, activities: Readonly<Record<string, ActivityScript>>, events: readonly RaisedEvent[] = []): Promise<OrchestrationRun> {
  const result = await runOrchestration(jobOrchestration, {
    name: JOB_ORCHESTRATOR,
    input,
    activities: { [JOB_ACTIVITIES.finish]: echoFinish, ...activities },
    events,
    start: START,
  });
  assert.equal(result.runtimeStatus, 'Completed', JSON.stringify(result.output));
  return result;
}

function lastStatus(result: OrchestrationRun): JobCustomStatus {
  const last = result.episodes.at(-1);
  assert.ok(last !== undefined);
  return last.customStatus as JobCustomStatus;
}

describe('job orchestration (replayed by the durable-functions SDK)', () => {
  it('plans, polls with growing durable timers, and aggregates once every chunk has a result', async () => {
    let polls = 0;
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.progress]: () => progress(4, [0, 2, 4][polls++] ?? 4),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    const output = result.output as JobSummary;
    assert.equal(output.status, 'completed');
    assert.deepEqual(output.result, { count: 40 });
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.plan).length, 1);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.progress).length, 3);
    const agg = callsOf(result.calls, JOB_ACTIVITIES.aggregate);
    assert.equal(agg.length, 1);
    assert.deepEqual({ ...(agg[0]?.input as AggregateInput), run: undefined }, { run: undefined, chunkCount: 4, itemCount: 40, cancelled: false });
    // Two waits between three polls: 1 s, then 1.5 s.
    assert.deepEqual(
      result.timers.map((t) => t.fireAt.getTime() - t.createdAt.getTime()),
      [POLL.initialMs, POLL.initialMs * POLL.factor],
    );
    assert.equal(lastStatus(result).phase, 'done');
    assert.equal(lastStatus(result).epoch, 7);
    // While running, the custom status carried the progress the poll saw.
    const running = result.episodes.map((e) => e.customStatus as JobCustomStatus | undefined).filter((s) => s?.phase === 'running');
    const seen = running.map((s) => s?.progress.chunks.done).filter((v, i, all) => i === 0 || v !== all[i - 1]);
    assert.deepEqual(seen, [0, 2]);
    const phases = result.episodes.map((e) => (e.customStatus as JobCustomStatus | undefined)?.phase).filter((p, i, all) => i === 0 || p !== all[i - 1]);
    assert.deepEqual(phases, ['planning', 'running', 'aggregating', 'done']);
    assert.equal(result.generations.length, 1);
  });

  it('keeps its history the same size whatever the number of chunks and items', async () => {
    const lengths: number[] = [];
    for (const chunkCount of [3, 10_000]) {
      let polls = 0;
      const result = await runJob(initialState(run()), {
        [JOB_ACTIVITIES.plan]: planned(chunkCount),
        [JOB_ACTIVITIES.progress]: () => progress(chunkCount, polls++ < 3 ? 0 : chunkCount),
        [JOB_ACTIVITIES.aggregate]: aggregate,
      });
      assert.equal((result.output as JobSummary).status, 'completed');
      lengths.push(result.generations[0]?.historyLength ?? -1);
    }
    assert.equal(lengths[0], lengths[1]);
  });

  it('finishes when chunks failed instead of waiting for them', async () => {
    let polls = 0;
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.progress]: () => (polls++ === 0 ? progress(4, 1) : progress(4, 3, 1)),
      [JOB_ACTIVITIES.aggregate]: (input) => ({ ...(aggregate(input, undefined as never) as JobSummary), status: 'completed_with_errors' }),
    });
    assert.equal((result.output as JobSummary).status, 'completed_with_errors');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.aggregate).length, 1);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.redispatch).length, 0);
  });

  it('reports a plan that refused the input as a failed job with its code, without dispatching', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: () => ({ ok: false, error: { code: 'ITEMS_BLOB_NOT_FOUND', message: 'inputs/x.json does not exist.' } }) satisfies PlanOutcome,
    });
    const output = result.output as JobSummary;
    assert.equal(output.status, 'failed');
    assert.deepEqual(output.error, { code: 'ITEMS_BLOB_NOT_FOUND', message: 'inputs/x.json does not exist.' });
    assert.deepEqual(
      result.calls.map((c) => c.name),
      [JOB_ACTIVITIES.plan, JOB_ACTIVITIES.finish],
    );
  });

  it('ends at once with the recorded summary when its plan step stands down, recording and dispatching nothing', async () => {
    const recorded: JobSummary = {
      jobId: 'job1',
      workType: 'sum',
      status: 'completed',
      progress: { chunks: { total: 1, done: 1, failed: 0 }, items: { total: 3, done: 3, failed: 0 } },
      result: { count: 3, sum: 6, min: 1, max: 3 },
      epoch: 9,
      finishedAt: START.toISOString(),
    };
    const result = await runJob(initialState(run()), { [JOB_ACTIVITIES.plan]: () => ({ ok: false, standDown: recorded }) satisfies PlanOutcome });
    assert.deepEqual(result.output, recorded);
    assert.deepEqual(
      result.calls.map((c) => c.name),
      [JOB_ACTIVITIES.plan],
    );
  });

  it('answers the summary the finish step recorded, when an earlier run finished the job first', async () => {
    let polls = 0;
    const input: AggregateInput = { run: run(), chunkCount: 2, itemCount: 20, cancelled: false };
    const earlier: JobSummary = { ...(aggregate(input, undefined as never) as JobSummary), epoch: 5 };
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(2),
      [JOB_ACTIVITIES.progress]: () => progress(2, polls++ === 0 ? 0 : 2),
      [JOB_ACTIVITIES.aggregate]: aggregate,
      [JOB_ACTIVITIES.finish]: () => earlier,
    });
    assert.deepEqual(result.output, earlier);
    const finishCalls = callsOf(result.calls, JOB_ACTIVITIES.finish);
    assert.equal(finishCalls.length, 1);
    assert.equal((finishCalls[0]?.input as JobSummary).epoch, 7, 'it offered its own summary first');
  });

  it('fails the job visibly when an activity keeps throwing after its retries', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(2),
      [JOB_ACTIVITIES.progress]: () => {
        throw new Error('storage unreachable');
      },
    });
    const output = result.output as JobSummary;
    assert.equal(output.status, 'failed');
    assert.equal(output.error?.code, 'INTERNAL');
    assert.match(output.error?.message ?? '', /storage unreachable/);
    // A job's recorded error is public: no stack frame, no server path.
    assert.doesNotMatch(output.error?.message ?? '', /Stack|\bat\s|\.js\b|\/dist\//);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.progress).length, 4, 'tried as often as the retry policy allows');
  });

  it('never re-dispatches while its polls report no late chunk, however long the job runs past the deadline', async () => {
    // A backlog: chunks wait unclaimed in the queue for minutes; the deadline (5 s) does not apply to them.
    let polls = 0;
    const inputs: ProgressInput[] = [];
    const result = await runJob(initialState(run({ deadlineSeconds: 5, attempts: 1 })), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.progress]: (input, call) => {
        inputs.push(input as ProgressInput);
        assert.equal((input as ProgressInput).at, call.at.toISOString(), 'lateness is measured at the orchestration\'s time');
        return progress(4, ++polls >= 30 ? 4 : 1);
      },
      [JOB_ACTIVITIES.redispatch]: () => assert.fail('nothing was late'),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'completed');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.redispatch).length, 0);
    const span = (callsOf(result.calls, JOB_ACTIVITIES.progress).at(-1)?.at.getTime() ?? 0) - START.getTime();
    assert.ok(span > 60_000, `the job ran ${span} ms, far past its 5 s deadline`);
    assert.ok(inputs.every((i) => i.deadlineSeconds === 5));
    assert.equal(lastStatus(result).dispatch, 1);
  });

  it('re-dispatches when a poll reports late chunks, at the orchestration\'s time, and polls again soon', async () => {
    const redispatches: Array<{ input: RedispatchInput; at: Date }> = [];
    let polls = 0;
    const result = await runJob(initialState(run({ deadlineSeconds: 5, attempts: 2 })), {
      [JOB_ACTIVITIES.plan]: planned(4),
      // Polls 5 and 8 find claimed chunks silent past the deadline; the job ends at poll 11.
      [JOB_ACTIVITIES.progress]: () => {
        polls += 1;
        return polls >= 11 ? progress(4, 3, 1) : progress(4, 1, 0, false, polls === 5 ? 2 : polls === 8 ? 1 : 0);
      },
      [JOB_ACTIVITIES.redispatch]: (input, call) => {
        redispatches.push({ input: input as RedispatchInput, at: call.at });
        return (redispatches.length === 1 ? { redispatched: 2, expired: 0, highestDispatch: 2 } : { redispatched: 0, expired: 1, highestDispatch: 2 }) satisfies RedispatchOutcome;
      },
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'completed');
    assert.equal(redispatches.length, 2, 'once per poll that reported late chunks');
    for (const r of redispatches) {
      assert.equal(r.input.at, r.at.toISOString());
      assert.deepEqual([r.input.chunkCount, r.input.itemCount, r.input.run.jobId], [4, 40, 'job1']);
    }
    // Each re-dispatch directly follows the progress poll that saw the late chunks.
    const names = result.calls.map((c) => c.name);
    const progressIndexes = names.flatMap((n, i) => (n === JOB_ACTIVITIES.progress ? [i] : []));
    assert.deepEqual(
      names.flatMap((n, i) => (n === JOB_ACTIVITIES.redispatch ? [i - 1] : [])),
      [progressIndexes[4], progressIndexes[7]],
    );
    // After a re-dispatch the poll interval starts again from the initial one.
    const waits = result.timers.map((t) => t.fireAt.getTime() - t.createdAt.getTime());
    assert.equal(waits[4], POLL.initialMs);
    assert.ok((waits[3] ?? 0) > POLL.initialMs);
    assert.equal(lastStatus(result).dispatch, 2, 'the custom status carries the highest dispatch round');
  });

  it('ends as cancelled when the cancel event arrives while it waits', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.progress]: () => progress(4, 1),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    }, [{ at: new Date(START.getTime() + 1_200), name: CANCEL_EVENT, input: { reason: 'test' } }]);
    const output = result.output as JobSummary;
    assert.equal(output.status, 'cancelled');
    const agg = callsOf(result.calls, JOB_ACTIVITIES.aggregate);
    assert.equal((agg[0]?.input as AggregateInput).cancelled, true);
    assert.ok((agg[0]?.at.getTime() ?? 0) - START.getTime() < 2_500, 'cancel wakes the orchestration before its next poll');
  });

  it('ends as cancelled when a progress poll sees the cancel marker', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.progress]: (_input, call) => progress(4, 1, 0, call.at.getTime() > START.getTime()),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'cancelled');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.progress).length, 2);
  });

  it('continues as new every few polls, carrying its state, with the poll interval bounded', async () => {
    const completeAt = POLL.pollsPerGeneration * 2 + 5;
    let polls = 0;
    const result = await runJob(initialState(run({ deadlineSeconds: 86_400 })), {
      [JOB_ACTIVITIES.plan]: planned(8),
      [JOB_ACTIVITIES.progress]: (input) => {
        polls += 1;
        assert.equal((input as ProgressInput).chunkCount, 8);
        return progress(8, polls >= completeAt ? 8 : Math.min(7, Math.floor(polls / 10)));
      },
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'completed');
    assert.equal(result.generations.length, 3);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.plan).length, 1, 'planned once, not per generation');
    const second = result.generations[1]?.input as OrchestrationState;
    assert.equal(second.generation, 2);
    assert.deepEqual(second.plan, { chunkCount: 8, itemCount: 80 });
    assert.equal(second.dispatch, 1);
    assert.equal(second.run.epoch, 7);
        // Per poll: an activity (scheduled, completed), a timer (created, fired), two episodes (started, completed).
    for (const { historyLength: length } of result.generations) assert.ok(length <= POLL.pollsPerGeneration * 8 + 10, `history of ${length} events`);
    const waits = result.timers.map((t) => t.fireAt.getTime() - t.createdAt.getTime());
    assert.equal(Math.max(...waits), POLL.maxMs);
    assert.ok(waits.every((w) => w >= POLL.initialMs && w <= POLL.maxMs));
    assert.equal(lastStatus(result).generation, 3);
  });
});
