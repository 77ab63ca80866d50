/**
 * devhost/testing runOrchestration: an orchestrator replayed by the durable-functions SDK's own
 * executor on the backend's own episode logic, in memory and on a virtual clock.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import * as df from 'durable-functions';
import { type OrchestrationContext, type OrchestrationHandler } from 'durable-functions';

import { completesAfter, historyNames, runOrchestration } from '../../../src/testing/runOrchestration';

const START = new Date('2026-03-01T00:00:00.000Z');

const sequence: OrchestrationHandler = function* (context: OrchestrationContext) {
  const greeting = (yield context.df.callActivity('Greet', context.df.getInput<string>())) as string;
  yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + 60_000));
  const approval: unknown = yield context.df.waitForExternalEvent('Approve');
  return { greeting, approval, at: context.df.currentUtcDateTime.toISOString() };
};

/** A long activity raced against an event: whichever lands first wins. */
const race: OrchestrationHandler = function* (context: OrchestrationContext) {
  const work = context.df.callActivity('Work', null);
  const stop = context.df.waitForExternalEvent('Stop');
  const winner: unknown = yield context.df.Task.any([work, stop]);
  return { winner: winner === stop ? 'stop' : 'work', at: context.df.currentUtcDateTime.toISOString() };
};

describe('runOrchestration', () => {
  it('lets an activity answer later with completesAfter, so it can lose a race to an event, or win it', async () => {
    const stopAt = new Date(START.getTime() + 1_000);
    const slow = await runOrchestration(race, { start: START, activities: { Work: () => completesAfter(5_000, 'done') }, events: [{ at: stopAt, name: 'Stop' }] });
    assert.deepEqual(slow.output, { winner: 'stop', at: stopAt.toISOString() });
    const quick = await runOrchestration(race, { start: START, activities: { Work: () => completesAfter(500, 'done') }, events: [{ at: stopAt, name: 'Stop' }] });
    assert.deepEqual(quick.output, { winner: 'work', at: new Date(START.getTime() + 500).toISOString() });
  });

  it('runs activities at once, then jumps the clock to the next timer or event, writing the extension\'s history', async () => {
    const result = await runOrchestration(sequence, {
      name: 'Sequence',
      input: 'Tokyo',
      start: START,
      activities: { Greet: (city) => `Hello ${String(city)}!` },
      events: [{ at: new Date(START.getTime() + 90_000), name: 'Approve', input: 'ok' }],
    });
    assert.equal(result.runtimeStatus, 'Completed');
    assert.deepEqual(result.output, { greeting: 'Hello Tokyo!', approval: 'ok', at: '2026-03-01T00:01:30.000Z' });
    assert.deepEqual(result.calls, [{ name: 'Greet', input: 'Tokyo', at: START, generation: 1 }]);
    assert.deepEqual(result.timers, [{ createdAt: START, fireAt: new Date(START.getTime() + 60_000), generation: 1 }]);
    assert.deepEqual(historyNames(result.history), [
      'OrchestratorStarted', 'ExecutionStarted', 'TaskScheduled', 'OrchestratorCompleted',
      'OrchestratorStarted', 'TaskCompleted', 'TimerCreated', 'OrchestratorCompleted',
      'OrchestratorStarted', 'TimerFired', 'OrchestratorCompleted',
      'OrchestratorStarted', 'EventRaised', 'ExecutionCompleted', 'OrchestratorCompleted',
    ]);
  });

  it('reports an uncaught activity failure as the extension words it', async () => {
    const result = await runOrchestration(sequence, {
      name: 'Sequence',
      activities: {
        Greet: () => {
          throw new Error('no greeting today');
        },
      },
    });
    assert.equal(result.runtimeStatus, 'Failed');
    assert.match(String(result.output), /^Orchestrator function 'Sequence' failed: Activity function 'Greet' failed: {2}no greeting today/);
  });

  it('restarts createdTime and replaces the input at each continue-as-new, and keeps the custom status rules', async () => {
    const counter: OrchestrationHandler = function* (context: OrchestrationContext) {
      const n = context.df.getInput<number>();
      if (n === 0) context.df.setCustomStatus('first generation');
      yield context.df.createTimer(new Date(context.df.currentUtcDateTime.getTime() + 10_000));
      if (n < 2) {
        context.df.continueAsNew(n + 1);
        return undefined;
      }
      return n;
    };
    const result = await runOrchestration(counter, { input: 0, start: START });
    assert.equal(result.output, 2);
    assert.deepEqual(result.generations.map((g) => g.input), [0, 1, 2]);
    assert.deepEqual(result.createdTime, new Date(START.getTime() + 20_000), 'the last execution started at the second continue-as-new');
    // Kept through the first continue-as-new episode, cleared once two generations in a row set none.
    assert.deepEqual(
      result.episodes.map((e) => e.customStatus),
      ['first generation', 'first generation', null, null],
    );
  });

  it('retries with DurableTask.Core\'s retry timers on the virtual clock', async () => {
    let attempts = 0;
    const retried: OrchestrationHandler = function* (context: OrchestrationContext) {
      return (yield context.df.callActivityWithRetry('Flaky', new df.RetryOptions(5_000, 3), null)) as string;
    };
    const result = await runOrchestration(retried, {
      start: START,
      activities: {
        Flaky: () => {
          attempts += 1;
          if (attempts < 3) throw new Error(`attempt ${attempts}`);
          return 'done';
        },
      },
    });
    assert.equal(result.output, 'done');
    assert.deepEqual(result.calls.map((c) => c.at.getTime() - START.getTime()), [0, 5_000, 10_000]);
  });
});
