/**
 * The job orchestration replayed by the durable-functions SDK's own executor on the development
 * host's own Durable episode logic (devhost/testing runOrchestration: the extension's histories,
 * custom status and continue-as-new rules, in memory, on a virtual clock); activity results are
 * scripted per scenario.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ActivityCall, type ActivityScript, completesAfter, type OrchestrationRun, type RaisedEvent, runOrchestration } from 'devhost/testing';

import { type StepInput, type StepOutcome } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { type DispatchLedger } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { type JobCustomStatus, type JobSummary } from '../../../../shared/jobs/JobSummary';
import { type AggregateInput } from '../../../../shared/jobs/run/aggregation';
import { type PlanInput, type PlanOutcome } from '../../../../shared/jobs/run/JobActivities';
import {
  CANCEL_EVENT,
  initialState,
  JOB_ACTIVITIES,
  JOB_ORCHESTRATOR,
  jobOrchestration,
  type OrchestrationState,
  RESUME_EVENT,
  type ResumeRequest,
  STEPS_PER_GENERATION,
} from '../../../../shared/jobs/run/jobOrchestration';

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
    startId: 'start-1',
  };
}

/** A ledger with `done` chunks finished (10 items each) and the rest of the first `inFlight` in flight. */
function ledger(chunkCount: number, done: number, failed = 0, highestDispatch = 1): DispatchLedger {
  const next = Math.min(chunkCount, done + failed + 4);
  return {
    next,
    inFlight: Array.from({ length: next - done - failed }, (_, i) => ({ chunk: done + failed + i, dispatch: 1, sentAt: START.getTime(), resends: 0 })),
    progress: { chunks: { total: chunkCount, done, failed }, items: { total: chunkCount * 10, done: done * 10, failed: failed * 10 } },
    highestDispatch,
  };
}

function stepped(chunkCount: number, done: number, options: { failed?: number; cancelled?: boolean; changed?: boolean; highestDispatch?: number } = {}): StepOutcome {
  return {
    ledger: ledger(chunkCount, done, options.failed ?? 0, options.highestDispatch ?? 1),
    cancelled: options.cancelled ?? false,
    sent: 0,
    resent: 0,
    expired: 0,
    finished: options.changed === false ? 0 : 1,
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

const planned = (chunkCount: number): ActivityScript => () =>
  ({ ok: true, cancelled: false, chunkCount, itemCount: chunkCount * 10, ledger: ledger(chunkCount, 0) }) satisfies PlanOutcome;

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
  it('plans (sending the first window), runs steps back to back without durable timers, and aggregates once every chunk has a result', async () => {
    let steps = 0;
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => stepped(4, [0, 2, 4][steps++] ?? 4, { changed: steps !== 1 }),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    const output = result.output as JobSummary;
    assert.equal(output.status, 'completed');
    assert.deepEqual(output.result, { count: 40 });
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.plan).length, 1);
    assert.equal((callsOf(result.calls, JOB_ACTIVITIES.plan)[0]?.input as PlanInput).at, START.toISOString());
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step).length, 3);
    const agg = callsOf(result.calls, JOB_ACTIVITIES.aggregate);
    assert.equal(agg.length, 1);
    assert.deepEqual({ ...(agg[0]?.input as AggregateInput), run: undefined }, { run: undefined, chunkCount: 4, itemCount: 40, cancelled: false });
    // A step long-polls inside its activity: a timer message would be held by whichever instance received it.
    assert.equal(result.timers.length, 0);
    assert.equal(lastStatus(result).phase, 'done');
    assert.equal(lastStatus(result).epoch, 7);
    const running = result.episodes.map((e) => e.customStatus as JobCustomStatus | undefined).filter((s) => s?.phase === 'running');
    const seen = running.map((s) => s?.progress.chunks.done).filter((v, i, all) => i === 0 || v !== all[i - 1]);
    assert.deepEqual(seen, [0, 2]);
    const phases = result.episodes.map((e) => (e.customStatus as JobCustomStatus | undefined)?.phase).filter((p, i, all) => i === 0 || p !== all[i - 1]);
    assert.deepEqual(phases, ['planning', 'running', 'aggregating', 'done']);
    assert.equal(result.generations.length, 1);
  });

  it('hands each step the ledger the previous one answered, the job without its items, and the orchestration\'s time', async () => {
    const inputs: StepInput[] = [];
    let steps = 0;
    const inline = { ...run(), source: { kind: 'inline' as const, items: Array.from({ length: 100 }, (_, i) => i) } };
    await runJob(initialState(inline), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: (input, call) => {
        inputs.push(input as StepInput);
        assert.equal((input as StepInput).at, call.at.toISOString());
        return stepped(4, ++steps >= 3 ? 4 : steps);
      },
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.deepEqual(inputs.map((i) => i.ledger.progress.chunks.done), [0, 1, 2]);
    for (const i of inputs) {
      assert.deepEqual(i.job, {
        jobId: 'job1',
        workType: 'sum',
        epoch: 7,
        options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300 },
        submittedAt: START.toISOString(),
      });
      assert.equal(JSON.stringify(i).includes('"source"'), false, 'no items ride in a step\'s input');
    }
  });

  it('ends with the summary a step recorded when it saw the last result, without an aggregate activity', async () => {
    const input: AggregateInput = { run: run(), chunkCount: 4, itemCount: 40, cancelled: false };
    const summary = aggregate(input, undefined as never) as JobSummary;
    const viaStep = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => ({ ...stepped(4, 4), summary }),
    });
    assert.deepEqual(viaStep.output, summary);
    assert.deepEqual(viaStep.calls.map((c) => c.name), [JOB_ACTIVITIES.plan, JOB_ACTIVITIES.step]);
    assert.equal(lastStatus(viaStep).phase, 'done');
    assert.deepEqual(lastStatus(viaStep).progress, summary.progress);
    // A small job finishes while the plan waits for its first results: the plan answers the summary.
    const viaPlan = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: () => ({ ok: true, cancelled: false, chunkCount: 4, itemCount: 40, ledger: ledger(4, 4), summary }) satisfies PlanOutcome,
    });
    assert.deepEqual(viaPlan.output, summary);
    assert.deepEqual(viaPlan.calls.map((c) => c.name), [JOB_ACTIVITIES.plan]);
  });

  it('keeps its history the same size whatever the number of chunks and items', async () => {
    const lengths: number[] = [];
    for (const chunkCount of [3, 10_000]) {
      let steps = 0;
      const result = await runJob(initialState(run()), {
        [JOB_ACTIVITIES.plan]: planned(chunkCount),
        [JOB_ACTIVITIES.step]: () => stepped(chunkCount, steps++ < 3 ? 0 : chunkCount),
        [JOB_ACTIVITIES.aggregate]: aggregate,
      });
      assert.equal((result.output as JobSummary).status, 'completed');
      lengths.push(result.generations[0]?.historyLength ?? -1);
    }
    assert.equal(lengths[0], lengths[1]);
  });

  it('finishes when chunks failed instead of waiting for them', async () => {
    let steps = 0;
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => (steps++ === 0 ? stepped(4, 1) : stepped(4, 3, { failed: 1 })),
      [JOB_ACTIVITIES.aggregate]: (input) => ({ ...(aggregate(input, undefined as never) as JobSummary), status: 'completed_with_errors' }),
    });
    assert.equal((result.output as JobSummary).status, 'completed_with_errors');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.aggregate).length, 1);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step).length, 2);
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
    assert.equal(lastStatus(result).superseded, undefined, 'answering the recorded outcome is not standing down superseded');
  });

  it('says in its status that it stood down superseded, so the intake starts the job again without waiting for Durable', async () => {
    const marker: JobSummary = {
      jobId: 'job1',
      workType: 'sum',
      status: 'failed',
      progress: { chunks: { total: 0, done: 0, failed: 0 }, items: { total: 0, done: 0, failed: 0 } },
      error: { code: 'SUPERSEDED', message: 'stood down' },
      epoch: 9,
      finishedAt: START.toISOString(),
      superseded: { reason: 'leader epoch 10 is newer than the run\'s 9' },
    };
    const result = await runJob(initialState(run()), { [JOB_ACTIVITIES.plan]: () => ({ ok: false, standDown: marker }) satisfies PlanOutcome });
    assert.deepEqual(result.output, marker);
    assert.deepEqual([lastStatus(result).phase, lastStatus(result).superseded], ['done', true]);
  });

  it('answers the summary aggregation recorded (an earlier run\'s, when it finished the job first), without a separate finish', async () => {
    let steps = 0;
    const input: AggregateInput = { run: run(), chunkCount: 2, itemCount: 20, cancelled: false };
    const earlier: JobSummary = { ...(aggregate(input, undefined as never) as JobSummary), epoch: 5 };
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(2),
      [JOB_ACTIVITIES.step]: () => stepped(2, steps++ === 0 ? 0 : 2),
      [JOB_ACTIVITIES.aggregate]: () => earlier,
    });
    assert.deepEqual(result.output, earlier);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.finish).length, 0);
    assert.equal(lastStatus(result).phase, 'done');
  });

  it('fails the job visibly when an activity keeps throwing after its retries', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(2),
      [JOB_ACTIVITIES.step]: () => {
        throw new Error('storage unreachable');
      },
    });
    const output = result.output as JobSummary;
    assert.equal(output.status, 'failed');
    assert.equal(output.error?.code, 'INTERNAL');
    assert.match(output.error?.message ?? '', /storage unreachable/);
    // A job's recorded error is public: no stack frame, no server path.
    assert.doesNotMatch(output.error?.message ?? '', /Stack|\bat\s|\.js\b|\/dist\//);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step).length, 4, 'tried as often as the retry policy allows');
  });

  it('publishes the highest dispatch round a step reached', async () => {
    let steps = 0;
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => (++steps < 3 ? stepped(4, 1, { highestDispatch: 2 }) : stepped(4, 4, { highestDispatch: 2 })),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal(lastStatus(result).dispatch, 2);
  });

  it('ends as cancelled when the cancel event arrives during a step, without waiting for the step', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => completesAfter(5_000, stepped(4, 1, { changed: false })),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    }, [{ at: new Date(START.getTime() + 1_200), name: CANCEL_EVENT, input: { reason: 'test' } }]);
    const output = result.output as JobSummary;
    assert.equal(output.status, 'cancelled');
    const agg = callsOf(result.calls, JOB_ACTIVITIES.aggregate);
    assert.equal((agg[0]?.input as AggregateInput).cancelled, true);
    assert.equal(agg[0]?.at.getTime(), START.getTime() + 1_200, 'cancel wakes the orchestration at once');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step).length, 1, 'no step after the cancel');
  });

  it('ends as cancelled when a step sees the cancel marker', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: (() => {
        let steps = 0;
        return () => stepped(4, 1, { cancelled: ++steps === 2 });
      })(),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'cancelled');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step).length, 2);
  });

  it('ends as cancelled, sending nothing, when the plan step finds the job already cancelled', async () => {
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: () => ({ ok: true, cancelled: true, chunkCount: 0, itemCount: 0, ledger: ledger(0, 0) }) satisfies PlanOutcome,
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'cancelled');
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step).length, 0);
  });

  it('calls its current activity again when a resume names it (its answer held by a dead instance), and ignores that answer when it lands', async () => {
    let steps = 0;
    const at = (ms: number): Date => new Date(START.getTime() + ms);
    const resume = (request: ResumeRequest, ms: number): RaisedEvent => ({ at: at(ms), name: RESUME_EVENT, input: request });
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => {
        steps += 1;
        // The first answer is "held" for two minutes; it says 3 chunks done, which no later step says.
        if (steps === 1) return completesAfter(120_000, stepped(4, 3));
        if (steps === 2) return stepped(4, 1);
        return completesAfter(200_000, stepped(4, 4));
      },
      [JOB_ACTIVITIES.aggregate]: aggregate,
    }, [resume({ generation: 1, wait: 2 }, 20_000)]);
    assert.equal((result.output as JobSummary).status, 'completed');
    const calls = callsOf(result.calls, JOB_ACTIVITIES.step);
    assert.equal(calls.length, 3, 'the resumed call, once more, and the next step: the late answer started nothing');
    assert.equal(calls[1]?.at.getTime(), at(20_000).getTime(), 'called again when the resume arrived');
    assert.deepEqual(calls[1]?.input, { ...(calls[0]?.input as object), repeat: 1 }, 'with the same input (the same ledger), marked as the first repeat');
    const statuses = result.episodes.map((e) => e.customStatus as JobCustomStatus | undefined);
    assert.equal(statuses.find((s) => s?.phase === 'running')?.wait, 2, 'the plan was call 1, the first step call 2');
    assert.ok(statuses.some((s) => s?.phase === 'running' && s.wait === 3 && s.repeat === 1), 'the status says the call is a repeat');
    assert.equal(statuses.find((s) => s?.phase === 'running' && s.wait === 4)?.repeat, undefined, 'the next step is a first call again');
    assert.equal(statuses.some((s) => s?.progress.chunks.done === 3), false, 'the held answer, landing at 120 s, was not used');
    assert.ok(result.episodes.some((e) => e.at.getTime() === at(120_000).getTime()), 'it did land, during the third step');
  });

  it('calls its current activity again for any resume, even one raised for an earlier call, and goes on from the new call\'s answer', async () => {
    let steps = 0;
    const at = (ms: number): Date => new Date(START.getTime() + ms);
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: planned(4),
      [JOB_ACTIVITIES.step]: () => (++steps === 1 ? completesAfter(10_000, stepped(4, 2)) : completesAfter(30_000, stepped(4, 4))),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    }, [{ at: at(2_000), name: RESUME_EVENT, input: { generation: 1, wait: 1 } }]);
    assert.equal((result.output as JobSummary).status, 'completed');
    // The stale resume at 2 s costs one spare step, whose answer (at 32 s) is the one used.
    assert.deepEqual(callsOf(result.calls, JOB_ACTIVITIES.step).map((c) => c.at.getTime() - START.getTime()), [0, 2_000]);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.plan).length, 1);
    const statuses = result.episodes.map((e) => e.customStatus as JobCustomStatus | undefined);
    assert.deepEqual([...new Set(statuses.filter((s) => s?.phase === 'running').map((s) => s?.wait))], [2, 3]);
    assert.equal(statuses.some((s) => s?.progress.chunks.done === 2), false, 'the first call\'s answer (10 s) was ignored');
    assert.equal(result.episodes.at(-1)?.at.getTime(), START.getTime() + 32_000);
  });

  it('calls the plan again when a resume names it', async () => {
    let plans = 0;
    const result = await runJob(initialState(run()), {
      [JOB_ACTIVITIES.plan]: (input, call) => (++plans === 1 ? completesAfter(90_000, planned(4)(input, call)) : planned(4)(input, call)),
      [JOB_ACTIVITIES.step]: () => stepped(4, 4),
      [JOB_ACTIVITIES.aggregate]: aggregate,
    }, [{ at: new Date(START.getTime() + 16_000), name: RESUME_EVENT, input: { generation: 1, wait: 1 } }]);
    assert.equal((result.output as JobSummary).status, 'completed');
    const calls = callsOf(result.calls, JOB_ACTIVITIES.plan);
    assert.equal(calls.length, 2);
    assert.deepEqual(calls[1]?.input, { ...(calls[0]?.input as object), repeat: 1 });
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.step)[0]?.at.getTime(), START.getTime() + 16_000, 'the job went on from the second answer');
  });

  it('continues as new every few steps, carrying its ledger', async () => {
    const completeAt = STEPS_PER_GENERATION * 2 + 5;
    let steps = 0;
    const result = await runJob(initialState(run({ deadlineSeconds: 86_400 })), {
      [JOB_ACTIVITIES.plan]: planned(8),
      [JOB_ACTIVITIES.step]: (input) => {
        steps += 1;
        assert.equal((input as StepInput).chunkCount, 8);
        const done = steps >= completeAt ? 8 : Math.min(7, Math.floor(steps / 10));
        return stepped(8, done, { changed: steps % 10 === 0 });
      },
      [JOB_ACTIVITIES.aggregate]: aggregate,
    });
    assert.equal((result.output as JobSummary).status, 'completed');
    assert.equal(result.generations.length, 3);
    assert.equal(callsOf(result.calls, JOB_ACTIVITIES.plan).length, 1, 'planned once, not per generation');
    const second = result.generations[1]?.input as OrchestrationState;
    assert.equal(second.generation, 2);
    assert.deepEqual(second.plan, { chunkCount: 8, itemCount: 80 });
    assert.equal(second.ledger?.progress.chunks.done, Math.floor(STEPS_PER_GENERATION / 10), 'the ledger the last step of generation 1 answered');
    assert.equal(second.run.epoch, 7);
    // Per step: an activity (scheduled, completed) and its episode (started, completed).
    for (const { historyLength: length } of result.generations) assert.ok(length <= STEPS_PER_GENERATION * 4 + 12, `history of ${length} events`);
    assert.equal(lastStatus(result).generation, 3);
  });
});
