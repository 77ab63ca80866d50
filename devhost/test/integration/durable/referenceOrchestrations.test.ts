/**
 * Durable fidelity: the reference orchestrations of the fixture app, started and observed through
 * the durable-functions SDK's own client over real HTTP against the backend, replayed by the SDK's
 * own executor, state in Azurite. Each test checks the output AND the history the real extension
 * writes for that orchestration.
 *
 * Where the expected histories come from:
 * - Episode shape (OrchestratorStarted, the new events, the decisions, ExecutionCompleted when done,
 *   OrchestratorCompleted): DurableTask.Core TaskOrchestrationDispatcher.OnProcessWorkItemAsync,
 *   and the history table of the Durable Functions docs ("Orchestrator functions", "Reliability",
 *   E1_HelloSequence): OrchestratorStarted, ExecutionStarted, TaskScheduled, OrchestratorCompleted,
 *   OrchestratorStarted, TaskCompleted, TaskScheduled, OrchestratorCompleted, ..., OrchestratorStarted,
 *   TaskCompleted, ExecutionCompleted, OrchestratorCompleted.
 * - Sequence numbers (EventId of TaskScheduled/TimerCreated, TaskScheduledId/TimerId of their
 *   completions, ExecutionCompleted taking the next number): DurableTask.Core TaskOrchestrationContext
 *   (one counter, `idCounter++` per scheduled task, timer, sub-orchestration and completion).
 * - Retries: DurableTask.Core RetryInterceptor: after each failed attempt a timer (FirstRetryInterval x
 *   BackoffCoefficient^attempt) then a new TaskScheduled; after the last failed attempt an immediate
 *   "back-compat" timer, then the failure.
 * - Continue-as-new: the dispatcher's continue-as-new branch starts the next generation as
 *   OrchestratorStarted, ExecutionStarted, OrchestratorCompleted and runs it in the same work item.
 * - Activity failure text: the extension's TaskActivityShim ("Activity function 'X' failed: " + the
 *   worker exception's friendly message, which keeps the space after "Exception:"), surfaced by the
 *   SDK as `${Reason} \n ${Details}`.
 * - historyEvents of the status API: the docs' HTTP API example for E1_HelloSequence and
 *   DurableClient.GetDurableOrchestrationStatusAsync.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import * as df from 'durable-functions';

import { EventType, type HistoryEvent } from '../../../src/durable/HistoryEvent';
import { type DurableTestHost, eventNames, startDurableTestHost, waitForFinish } from '../../support/durableTestHost';

const OS = 'OrchestratorStarted';
const OC = 'OrchestratorCompleted';

function ofType(history: readonly HistoryEvent[], type: number): HistoryEvent[] {
  return history.filter((e) => e.EventType === type);
}

describe('Durable reference orchestrations on the development host', { concurrency: true }, () => {
  let host: DurableTestHost;

  before(async () => {
    host = await startDurableTestHost();
  });

  after(async () => {
    await host?.stop();
  });

  it('function chaining: outputs in order and the docs history table, episode by episode', async () => {
    const id = await host.client.startNew('HelloSequence');
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    assert.deepEqual(status.output, ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']);

    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [
      OS, 'ExecutionStarted', 'TaskScheduled', OC,
      OS, 'TaskCompleted', 'TaskScheduled', OC,
      OS, 'TaskCompleted', 'TaskScheduled', OC,
      OS, 'TaskCompleted', 'ExecutionCompleted', OC,
    ]); // prettier-ignore
    assert.deepEqual(ofType(history, EventType.TaskScheduled).map((e) => [e.EventId, e.Name, e.Input]), [
      [0, 'SayHello', '["Tokyo"]'],
      [1, 'SayHello', '["Seattle"]'],
      [2, 'SayHello', '["London"]'],
    ]);
    assert.deepEqual(ofType(history, EventType.TaskCompleted).map((e) => [e.EventId, e.TaskScheduledId, e.Result]), [
      [-1, 0, '"Hello Tokyo!"'],
      [-1, 1, '"Hello Seattle!"'],
      [-1, 2, '"Hello London!"'],
    ]);
    const completed = ofType(history, EventType.ExecutionCompleted)[0];
    assert.equal(completed?.EventId, 3);
    assert.equal(completed?.OrchestrationStatus, 1);
    assert.equal(completed?.Result, '["Hello Tokyo!","Hello Seattle!","Hello London!"]');
    assert.equal(ofType(history, EventType.ExecutionStarted)[0]?.Name, 'HelloSequence');
  });

  it('function chaining: showHistory gives the extension historyEvents summary', async () => {
    const id = await host.client.startNew('HelloSequence');
    await waitForFinish(host.client, id);
    const url = `${host.baseUrl}/runtime/webhooks/durabletask/instances/${id}?showHistory=true&showHistoryOutput=true`;
    const response = await fetch(url);
    assert.equal(response.status, 200);
    const body = (await response.json()) as { historyEvents: Array<Record<string, unknown>> };
    // The docs example's keys; Generation is DurableTask.Core's newer ExecutionStarted field, Input
    // shows because the SDK client posts "" when started without input (axios JSON-encodes it).
    const shape = body.historyEvents.map((e) => Object.keys(e).sort().join(','));
    assert.deepEqual(shape, [
      'EventType,FunctionName,Generation,Input,Timestamp',
      'EventType,FunctionName,Input,Result,ScheduledTime,Timestamp',
      'EventType,FunctionName,Input,Result,ScheduledTime,Timestamp',
      'EventType,FunctionName,Input,Result,ScheduledTime,Timestamp',
      'EventType,OrchestrationStatus,Result,Timestamp',
    ]);
    assert.equal(body.historyEvents[0]?.Input, '""');
    assert.equal(body.historyEvents[1]?.Input, '["Tokyo"]');
    assert.deepEqual(
      body.historyEvents.map((e) => [e.EventType, e.FunctionName ?? e.OrchestrationStatus, e.Result ?? null]),
      [
        ['ExecutionStarted', 'HelloSequence', null],
        ['TaskCompleted', 'SayHello', 'Hello Tokyo!'],
        ['TaskCompleted', 'SayHello', 'Hello Seattle!'],
        ['TaskCompleted', 'SayHello', 'Hello London!'],
        ['ExecutionCompleted', 'Completed', ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']],
      ],
    );
    const withoutOutput = (await (await fetch(url.replace('&showHistoryOutput=true', ''))).json()) as { historyEvents: Array<Record<string, unknown>> };
    assert.ok(withoutOutput.historyEvents.every((e) => !('Result' in e)), 'results only with showHistoryOutput=true');
  });

  it('fan-out/fan-in: every result aggregated; all activities scheduled in the first episode', async () => {
    const id = await host.client.startNew('FanOutFanIn', { input: 5 });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    assert.equal(status.output, 2 + 4 + 6 + 8 + 10);

    const names = eventNames(await host.rawHistory(id));
    // Completions may arrive in one episode or several; the extension's shape either way:
    assert.match(names.join(' '), /^OrchestratorStarted ExecutionStarted (TaskScheduled ){5}OrchestratorCompleted (OrchestratorStarted (TaskCompleted )+OrchestratorCompleted )*OrchestratorStarted (TaskCompleted )+ExecutionCompleted OrchestratorCompleted$/);
    const history = await host.rawHistory(id);
    assert.deepEqual(ofType(history, EventType.TaskScheduled).map((e) => e.EventId), [0, 1, 2, 3, 4]);
    assert.deepEqual(ofType(history, EventType.TaskCompleted).map((e) => e.TaskScheduledId).sort(), [0, 1, 2, 3, 4]);
    assert.equal(ofType(history, EventType.ExecutionCompleted)[0]?.EventId, 5);
  });

  it('timer racing an activity: the activity wins, the timer is created but never awaited', async () => {
    const id = await host.client.startNew('TimerRace', { input: { activityDelayMs: 50, timeoutMs: 60_000 } });
    const status = await waitForFinish(host.client, id);
    assert.deepEqual(status.output, { winner: 'activity', result: 'activity result' });
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [OS, 'ExecutionStarted', 'TaskScheduled', 'TimerCreated', OC, OS, 'TaskCompleted', 'ExecutionCompleted', OC]);
    assert.deepEqual(
      history.filter((e) => e.EventId >= 0).map((e) => e.EventId),
      [0, 1, 2],
    );
  });

  it('timer racing an activity: the timer wins, and the instance completes once the still-open activity has completed', async () => {
    // TaskOrchestrationExecutor.ExecuteCore (Azure/durabletask): a finished orchestrator completes only
    // when no task is open; an activity cannot be cancelled, so its late result closes the instance.
    const id = await host.client.startNew('TimerRace', { input: { activityDelayMs: 4000, timeoutMs: 1000 } });
    const status = await waitForFinish(host.client, id);
    assert.deepEqual(status.output, { winner: 'timer' });
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [OS, 'ExecutionStarted', 'TaskScheduled', 'TimerCreated', OC, OS, 'TimerFired', OC, OS, 'TaskCompleted', 'ExecutionCompleted', OC]);
    const created = ofType(history, EventType.TimerCreated)[0];
    const fired = ofType(history, EventType.TimerFired)[0];
    assert.equal(fired?.TimerId, created?.EventId);
    assert.equal(fired?.FireAt, created?.FireAt);
    const startedAt = Date.parse(history[0]?.Timestamp ?? '');
    assert.equal(Date.parse(created?.FireAt ?? ''), startedAt + 1000, 'fireAt = currentUtcDateTime + timeout');
    assert.ok(Date.parse(history[5]?.Timestamp ?? '') >= Date.parse(created?.FireAt ?? ''), 'the timer did not fire early');
  });

  it('external event with a timeout: the event arrives first', async () => {
    const id = await host.client.startNew('ApprovalWithTimeout', { input: 60_000 });
    await waitUntil(async () => (await host.client.getStatus(id)).runtimeStatus === df.OrchestrationRuntimeStatus.Running);
    await host.client.raiseEvent(id, 'Approval', { by: 'ops' });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.output, 'approved: {"by":"ops"}');
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [OS, 'ExecutionStarted', 'TimerCreated', OC, OS, 'EventRaised', 'ExecutionCompleted', OC]);
    const raised = ofType(history, EventType.EventRaised)[0];
    assert.deepEqual([raised?.Name, raised?.Input, raised?.EventId], ['Approval', '{"by":"ops"}', -1]);
    assert.equal(ofType(history, EventType.ExecutionCompleted)[0]?.EventId, 1, 'waitForExternalEvent takes no sequence number');
  });

  it('external event with a timeout: nobody answers and the timer decides', async () => {
    const id = await host.client.startNew('ApprovalWithTimeout', { input: 1000 });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.output, 'timed out');
    assert.deepEqual(eventNames(await host.rawHistory(id)), [OS, 'ExecutionStarted', 'TimerCreated', OC, OS, 'TimerFired', 'ExecutionCompleted', OC]);
  });

  it('one external event raced against a new timer on every poll: the newest wait receives it', async () => {
    const id = await host.client.startNew('PollUntilCancelled');
    await waitUntil(async () => (await host.rawHistory(id)).filter((e) => e.EventType === EventType.TimerFired).length >= 2);
    await host.client.raiseEvent(id, 'Cancel', null);
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    const history = await host.rawHistory(id);
    const raised = history.findIndex((e) => e.EventType === EventType.EventRaised);
    const polls = history.slice(0, raised).filter((e) => e.EventType === EventType.TimerFired).length;
    assert.equal(status.output, `Hello cancelled after ${polls} polls!`);
    // The extension keeps waiters of one event name on a stack (DurableOrchestrationContext.WaitForExternalEvent),
    // so the event completes the wait of the current poll, not a stale one.
    const names = eventNames(history);
    const raisedAt = names.indexOf('EventRaised');
    assert.ok(raisedAt > 0);
    assert.equal(names[names.indexOf(OC, raisedAt) - 1], 'TaskScheduled', 'the episode that received the event scheduled the activity after the loop');
    assert.deepEqual(names.slice(-3), ['TaskCompleted', 'ExecutionCompleted', OC]);
  });

  it('activity retry: failed attempts are followed by a retry timer and a new TaskScheduled', async () => {
    const id = await host.client.startNew('RetryFlaky', { input: { key: `retry-${Date.now()}`, failures: 2 } });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    assert.equal(status.output, 'ok after 3 attempts');
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [
      OS, 'ExecutionStarted', 'TaskScheduled', OC,
      OS, 'TaskFailed', 'TimerCreated', OC,
      OS, 'TimerFired', 'TaskScheduled', OC,
      OS, 'TaskFailed', 'TimerCreated', OC,
      OS, 'TimerFired', 'TaskScheduled', OC,
      OS, 'TaskCompleted', 'ExecutionCompleted', OC,
    ]); // prettier-ignore
    assert.deepEqual(
      history.filter((e) => e.EventId >= 0).map((e) => [eventNames([e])[0], e.EventId]),
      [['TaskScheduled', 0], ['TimerCreated', 1], ['TaskScheduled', 2], ['TimerCreated', 3], ['TaskScheduled', 4], ['ExecutionCompleted', 5]],
    );
    // RetryOptions(200 ms, 3): each retry timer fires FirstRetryInterval after the episode that saw the failure.
    for (const timer of ofType(history, EventType.TimerCreated)) {
      const episodeStart = [...history.slice(0, history.indexOf(timer))].reverse().find((e) => e.EventType === EventType.OrchestratorStarted);
      assert.equal(Date.parse(timer.FireAt ?? ''), Date.parse(episodeStart?.Timestamp ?? '') + 200);
    }
    assert.match(ofType(history, EventType.TaskFailed)[0]?.Reason ?? '', /^Activity function 'Flaky' failed: {2}attempt 1 failed$/);
  });

  it('activity retry exhausted: a back-compat timer after the last attempt, then the error reaches the orchestrator', async () => {
    const id = await host.client.startNew('RetryExhausted', { input: { key: `exhaust-${Date.now()}`, failures: 10 } });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    const caught = (status.output as { caught: string }).caught;
    assert.ok(caught.startsWith("Activity function 'Flaky' failed:  attempt 2 failed \n "), caught);
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [
      OS, 'ExecutionStarted', 'TaskScheduled', OC,
      OS, 'TaskFailed', 'TimerCreated', OC,
      OS, 'TimerFired', 'TaskScheduled', OC,
      OS, 'TaskFailed', 'TimerCreated', OC,
      OS, 'TimerFired', 'ExecutionCompleted', OC,
    ]); // prettier-ignore
    const lastTimer = ofType(history, EventType.TimerCreated)[1];
    const lastEpisodeStart = history[12];
    assert.equal(lastTimer?.FireAt, lastEpisodeStart?.Timestamp, 'the back-compat timer fires at once');
  });

  it('parallel retries: the SDK and the backend agree on every retry timer and reschedule', async () => {
    const id = await host.client.startNew('RetryFanOut', { input: `fan-${Date.now()}` });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    assert.deepEqual(status.output, ['ok after 2 attempts', 'ok after 2 attempts']);
    const history = await host.rawHistory(id);
    // Whatever the batching of completions, the decisions take sequence numbers in this order.
    assert.deepEqual(
      history.filter((e) => e.EventId >= 0).map((e) => [eventNames([e])[0], e.EventId]),
      [['TaskScheduled', 0], ['TaskScheduled', 1], ['TimerCreated', 2], ['TimerCreated', 3], ['TaskScheduled', 4], ['TaskScheduled', 5], ['ExecutionCompleted', 6]],
    );
  });

  it('continue-as-new counter: one generation per count, only the last generation kept', async () => {
    const id = await host.client.startNew('Counter', { input: 0 });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    assert.equal(status.output, 3);
    assert.equal(status.input, 3, 'the last generation’s input');
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [OS, 'ExecutionStarted', OC, 'ExecutionCompleted', OC]);
    assert.equal(ofType(history, EventType.ExecutionStarted)[0]?.Input, '3');
    assert.equal(ofType(history, EventType.ExecutionStarted)[0]?.Generation, 3);
    assert.equal(ofType(history, EventType.ExecutionCompleted)[0]?.EventId, 0);
  });

  it('custom status: visible while running (202) and after completion', async () => {
    const id = await host.client.startNew('CustomStatus');
    await waitUntil(async () => ((await host.client.getStatus(id)).customStatus as { stage?: string } | null)?.stage === 'waiting');
    const running = await fetch(`${host.baseUrl}/runtime/webhooks/durabletask/instances/${id}`);
    assert.equal(running.status, 202);
    assert.ok(running.headers.get('location')?.includes(`/instances/${id}`));
    const body = (await running.json()) as { runtimeStatus: string; customStatus: unknown };
    assert.equal(body.runtimeStatus, 'Running');
    assert.deepEqual(body.customStatus, { stage: 'waiting', greeting: 'Hello status!' });

    await host.client.raiseEvent(id, 'Continue', { go: true });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.output, 'finished');
    assert.deepEqual(status.customStatus, { stage: 'done', signal: { go: true } });
    assert.deepEqual(eventNames(await host.rawHistory(id)), [OS, 'ExecutionStarted', 'TaskScheduled', OC, OS, 'TaskCompleted', OC, OS, 'EventRaised', 'ExecutionCompleted', OC]);
  });

  it('an exception from an activity is caught by the orchestrator', async () => {
    const id = await host.client.startNew('CatchActivityError');
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Completed');
    const caught = (status.output as { caught: string }).caught;
    assert.ok(caught.startsWith("Activity function 'Fail' failed:  boom \n {"), caught);
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [OS, 'ExecutionStarted', 'TaskScheduled', OC, OS, 'TaskFailed', 'ExecutionCompleted', OC]);
    const failed = ofType(history, EventType.TaskFailed)[0];
    assert.equal(failed?.TaskScheduledId, 0);
    assert.equal(failed?.Reason, "Activity function 'Fail' failed:  boom");
    assert.ok((JSON.parse(failed?.Details ?? '{}') as { Message?: string }).Message === ' boom');
  });

  it('an orchestrator that throws fails the instance with the extension’s reason', async () => {
    const id = await host.client.startNew('Throws');
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Failed');
    assert.equal(status.output, "Orchestrator function 'Throws' failed: kaboom");
    const history = await host.rawHistory(id);
    assert.deepEqual(eventNames(history), [OS, 'ExecutionStarted', 'TaskScheduled', OC, OS, 'TaskCompleted', 'ExecutionCompleted', OC]);
    assert.equal(ofType(history, EventType.ExecutionCompleted)[0]?.OrchestrationStatus, 3);
  });

  it('calling an activity that is not registered fails the orchestration like the extension', async () => {
    const id = await host.client.startNew('CallsMissingActivity');
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Failed');
    assert.match(
      String(status.output),
      /^Orchestrator function 'CallsMissingActivity' failed: The function 'NoSuchActivity' doesn't exist, is disabled, or is not an activity function\. Additional info: The following are the known activity functions: '.*SayHello.*'\.$/,
    );
    assert.deepEqual(eventNames(await host.rawHistory(id)), [OS, 'ExecutionStarted', 'ExecutionCompleted', OC]);
  });

  it('sub-orchestration: the child runs as its own instance and its output returns to the parent', async () => {
    const id = await host.client.startNew('SubOrchestrationParent');
    const status = await waitForFinish(host.client, id);
    assert.deepEqual(status.output, { childOutput: ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!'] });
    assert.deepEqual(eventNames(await host.rawHistory(id)), [OS, 'ExecutionStarted', 'SubOrchestrationInstanceCreated', OC, OS, 'SubOrchestrationInstanceCompleted', 'ExecutionCompleted', OC]);
    const child = await host.client.getStatus(`${id}-child`);
    assert.equal(child.runtimeStatus, 'Completed');
  });

  it('sub-orchestration: an id owned by a running instance fails the call and leaves that instance alone', async () => {
    const id = `parent-${Date.now()}`;
    await host.client.startNew('CustomStatus', { instanceId: `${id}-child` });
    await waitUntil(async () => (await host.client.getStatus(`${id}-child`)).runtimeStatus === df.OrchestrationRuntimeStatus.Running);
    await host.client.startNew('SubOrchestrationParent', { instanceId: id });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.runtimeStatus, 'Failed');
    assert.match(String(status.output), /^Orchestrator function 'SubOrchestrationParent' failed: An Orchestration instance with the status Running already exists\./);
    const other = await host.client.getStatus(`${id}-child`);
    assert.equal(other.name, 'CustomStatus');
    assert.equal(other.runtimeStatus, 'Running');
    await host.client.terminate(`${id}-child`, 'cleanup');
  });
});

async function waitUntil(check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
