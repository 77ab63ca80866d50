/**
 * What the backend hands to the app's functions, recorded on the way through the real invoker: the
 * orchestration trigger payload the extension builds for out-of-process SDKs
 * (OrchestrationTriggerAttributeBindingProvider.OrchestrationContextToString: history, input,
 * instanceId, isReplaying, parentInstanceId, upperSchemaVersion V2 + upperSchemaVersionNew V3,
 * the Azure Storage provider's timer durations) and an activity's input.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { type InvocationRequest } from '../../../src/contracts';
import { type HistoryEvent } from '../../../src/durable/HistoryEvent';
import { eventNames, startDurableTestHost, waitForFinish } from '../../support/durableTestHost';

interface OrchestrationTrigger {
  readonly history: HistoryEvent[];
  readonly [field: string]: unknown;
}

test('orchestrators receive the extension trigger payload; activities their input', async () => {
  const calls: Array<{ name: string; request: InvocationRequest }> = [];
  const host = await startDurableTestHost({
    wrapInvoker: (app) => ({
      list: () => app.list(),
      invoke: (name, request) => {
        calls.push({ name, request });
        return app.invoke(name, request);
      },
    }),
  });
  try {
    const id = await host.client.startNew('HelloSequence', { input: { who: 'payload' } });
    await waitForFinish(host.client, id);
    const episodes = calls.filter((c) => c.name === 'HelloSequence').map((c) => c.request.trigger as OrchestrationTrigger);
    assert.equal(episodes.length, 4, 'one invocation per episode');
    const [first, second, , last] = episodes;
    assert.ok(first !== undefined && second !== undefined && last !== undefined);

    const { history: firstHistory, ...fields } = first;
    assert.deepEqual(fields, {
      input: { who: 'payload' },
      instanceId: id,
      isReplaying: false,
      parentInstanceId: null,
      upperSchemaVersion: 1,
      upperSchemaVersionNew: 2,
      maximumShortTimerDuration: '6.00:00:00',
      longRunningTimerIntervalDuration: '3.00:00:00',
      defaultHttpAsyncRequestSleepTimeMillseconds: 30000,
    });
    assert.deepEqual(eventNames(firstHistory), ['OrchestratorStarted', 'ExecutionStarted']);
    assert.deepEqual(firstHistory.map((e) => [e.EventId, e.IsPlayed]), [[-1, false], [-1, false]]);
    assert.deepEqual(firstHistory[1]?.OrchestrationInstance?.InstanceId, id);
    assert.equal(firstHistory[1]?.Input, '{"who":"payload"}');

    assert.equal(second.isReplaying, true);
    assert.deepEqual(eventNames(second.history), ['OrchestratorStarted', 'ExecutionStarted', 'TaskScheduled', 'OrchestratorCompleted', 'OrchestratorStarted', 'TaskCompleted']);
    assert.deepEqual(second.history.map((e) => e.IsPlayed), [true, true, true, true, false, false], 'past episodes played, the new one not');
    assert.equal(last.history.length, 14);

    const activityInputs = calls.filter((c) => c.name === 'SayHello').map((c) => c.request.trigger);
    assert.deepEqual(activityInputs, ['Tokyo', 'Seattle', 'London']);
  } finally {
    await host.stop();
  }
});
