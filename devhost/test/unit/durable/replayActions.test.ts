/**
 * replayActions against hand-written histories: which actions become new history events, with which
 * sequence numbers (Azure/durabletask DurableTask.Core TaskOrchestrationContext.cs: one counter,
 * assigned as the history is played), retry timers per RetryInterceptor.cs, and the refusals
 * (non-determinism, unsupported actions, bad instance ids) as the extension words them.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { EventType, type HistoryEvent, historyEvent } from '../../../src/durable/HistoryEvent';
import { type EpisodeEnd, replayActions } from '../../../src/durable/replayActions';

const t0 = new Date('2026-01-01T00:00:00.000Z');
const at = (ms: number): Date => new Date(t0.getTime() + ms);
const decidedAt = at(99_999);

const started = (ms = 0): HistoryEvent[] => [
  historyEvent.orchestratorStarted(at(ms)),
  historyEvent.executionStarted(at(ms), { name: 'Orch', instanceId: 'i', executionId: 'e', input: null }),
];
const activity = (name: string, input?: unknown): Record<string, unknown> => ({ actionType: 0, functionName: name, input });
const withRetry = (name: string, retryOptions: Record<string, unknown>): Record<string, unknown> => ({ actionType: 1, functionName: name, retryOptions });
const timer = (fireAt: Date, isCanceled = false): Record<string, unknown> => ({ actionType: 5, fireAt: fireAt.toISOString(), isCanceled });
const waitFor = (name: string): Record<string, unknown> => ({ actionType: 6, externalEventName: name });
const whenAll = (...compoundActions: Array<Record<string, unknown>>): Record<string, unknown> => ({ actionType: 12, compoundActions });
const whenAny = (...compoundActions: Array<Record<string, unknown>>): Record<string, unknown> => ({ actionType: 11, compoundActions });

function replayWith(state: Record<string, unknown>, history: HistoryEvent[], ...actions: Array<Record<string, unknown>>): ReturnType<typeof replayActions> {
  return replayActions({ history, outcome: { state: { isDone: false, actions: [actions], schemaVersion: 2, ...state } }, name: 'Orch', instanceId: 'i', executionId: 'e', decidedAt });
}

function replay(history: HistoryEvent[], ...actions: Array<Record<string, unknown>>): ReturnType<typeof replayActions> {
  return replayWith({}, history, ...actions);
}

function failure(end: EpisodeEnd): string {
  assert.equal(end.kind, 'failed');
  return end.kind === 'failed' ? end.reason : '';
}

const summary = (events: HistoryEvent[]): Array<[number, number, string | undefined]> => events.map((e) => [e.EventType, e.EventId, e.Name ?? e.FireAt]);

describe('replayActions', () => {
  it('schedules a first activity as TaskScheduled 0 with the parameter array as input', () => {
    const result = replay(started(), activity('A', '"Tokyo"'));
    assert.deepEqual(summary(result.decisions), [[EventType.TaskScheduled, 0, 'A']]);
    assert.equal(result.decisions[0]?.Input, '["Tokyo"]');
    assert.deepEqual(result.activities, [{ id: 0, name: 'A', input: 'Tokyo' }]);
    assert.equal(result.nextEventId, 1);
  });

  it('replays scheduled work and only emits what is new', () => {
    const history = [...started(), historyEvent.taskScheduled(at(1), 0, 'A', null), historyEvent.orchestratorCompleted(at(1)), historyEvent.orchestratorStarted(at(5)), historyEvent.taskCompleted(at(4), 0, '1')];
    const result = replay(history, activity('A'), activity('B'));
    assert.deepEqual(summary(result.decisions), [[EventType.TaskScheduled, 1, 'B']]);
    assert.equal(result.nextEventId, 2);
  });

  it('reports an action that disagrees with its history event as non-determinism, in the extension\'s words', () => {
    const history = [...started(), historyEvent.taskScheduled(at(1), 0, 'A', null)];
    const result = replay(history, activity('B'));
    assert.equal(
      failure(result.end),
      "Non-Deterministic workflow detected: A previous execution of this orchestration scheduled an activity task with sequence number 0 named 'A', but the current orchestration replay instead scheduled an activity task named 'B' with this sequence number.  Was a change made to the orchestrator code after this instance had already started running?",
    );
    assert.deepEqual(result.decisions, [], 'a failed episode sends nothing');
  });

  it('refuses Durable HTTP and entity actions with a stable code', () => {
    for (const actionType of [7, 8, 9, 13]) {
      assert.match(failure(replay(started(), { actionType }).end), /^Orchestrator function 'Orch' failed: .*DURABLE_UNSUPPORTED_ACTION/);
    }
    assert.match(failure(replayWith({ schemaVersion: 0 }, started(), activity('A')).end), /DURABLE_UNSUPPORTED_SCHEMA/);
  });

  it('follows RetryInterceptor: backoff timers between attempts, an immediate timer after the last', () => {
    const options = { firstRetryIntervalInMilliseconds: 1000, maxNumberOfAttempts: 3, backoffCoefficient: 2 };
    const history: HistoryEvent[] = [...started(), historyEvent.taskScheduled(at(1), 0, 'A', null), historyEvent.orchestratorStarted(at(100)), historyEvent.taskFailed(at(90), 0, 'r', 'd')];
    let result = replay(history, withRetry('A', options));
    assert.deepEqual(summary(result.decisions), [[EventType.TimerCreated, 1, at(1100).toISOString()]]);

    history.push(...result.decisions, historyEvent.orchestratorStarted(at(1200)), historyEvent.timerFired(at(1100), 1, at(1100).toISOString()));
    result = replay(history, withRetry('A', options));
    assert.deepEqual(summary(result.decisions), [[EventType.TaskScheduled, 2, 'A']]);

    history.push(...result.decisions, historyEvent.orchestratorStarted(at(2000)), historyEvent.taskFailed(at(1900), 2, 'r', 'd'));
    result = replay(history, withRetry('A', options));
    assert.deepEqual(summary(result.decisions), [[EventType.TimerCreated, 3, at(4000).toISOString()]], 'second delay = 1000 x 2^1');

    history.push(...result.decisions, historyEvent.orchestratorStarted(at(4100)), historyEvent.timerFired(at(4000), 3, at(4000).toISOString()));
    history.push(...replay(history, withRetry('A', options)).decisions, historyEvent.orchestratorStarted(at(5000)), historyEvent.taskFailed(at(4900), 4, 'r', 'd'));
    result = replay(history, withRetry('A', options));
    assert.deepEqual(summary(result.decisions), [[EventType.TimerCreated, 5, at(5000).toISOString()]], 'back-compat timer at the current time');
    assert.equal(result.nextEventId, 6);
  });

  it('assigns retry timers of parallel retries in the order their failures are played', () => {
    const options = { firstRetryIntervalInMilliseconds: 500, maxNumberOfAttempts: 2 };
    const history = [
      ...started(),
      historyEvent.taskScheduled(at(1), 0, 'A', null),
      historyEvent.taskScheduled(at(1), 1, 'B', null),
      historyEvent.orchestratorStarted(at(50)),
      historyEvent.taskFailed(at(40), 1, 'r', 'd'),
      historyEvent.taskFailed(at(45), 0, 'r', 'd'),
    ];
    const result = replay(history, whenAll(withRetry('A', options), withRetry('B', options)));
    // B failed first in history, so B's retry timer takes sequence number 2.
    assert.deepEqual(summary(result.decisions), [
      [EventType.TimerCreated, 2, at(550).toISOString()],
      [EventType.TimerCreated, 3, at(550).toISOString()],
    ]);
  });

  it('waits for every task of a Task.all before the next action, even after one failed (the shim awaits Task.WhenAll)', () => {
    const history = [
      ...started(),
      historyEvent.taskScheduled(at(1), 0, 'A', null),
      historyEvent.taskScheduled(at(1), 1, 'B', null),
      historyEvent.orchestratorStarted(at(10)),
      historyEvent.taskFailed(at(9), 0, 'r', 'd'),
    ];
    // The SDK's Task.all fails fast, so the orchestrator already moved on to Compensate...
    assert.deepEqual(replay(history, whenAll(activity('A'), activity('B')), activity('Compensate')).decisions, []);
    // ...which the extension schedules only once B has completed too.
    history.push(historyEvent.orchestratorStarted(at(20)), historyEvent.taskCompleted(at(19), 1, '1'));
    assert.deepEqual(summary(replay(history, whenAll(activity('A'), activity('B')), activity('Compensate')).decisions), [[EventType.TaskScheduled, 2, 'Compensate']]);
  });

  it('writes a cancelled timer once and never waits for it', () => {
    const history = [...started(), historyEvent.taskScheduled(at(1), 0, 'A', null), historyEvent.timerCreated(at(1), 1, at(60_000)), historyEvent.orchestratorStarted(at(10)), historyEvent.taskCompleted(at(9), 0, '"x"')];
    const result = replay(history, whenAny(activity('A'), timer(at(60_000), true)), activity('Next'));
    assert.deepEqual(summary(result.decisions), [[EventType.TaskScheduled, 2, 'Next']]);
  });

  it('takes no sequence number for external events and resumes after a buffered one', () => {
    const history = [...started(), historyEvent.timerCreated(at(1), 0, at(60_000)), historyEvent.orchestratorStarted(at(10)), historyEvent.eventRaised(at(9), 'Approval', '1')];
    const result = replay(history, whenAny(waitFor('Approval'), timer(at(60_000))), activity('AfterApproval'));
    assert.deepEqual(summary(result.decisions), [[EventType.TaskScheduled, 1, 'AfterApproval']]);
  });

  it('gives a raised event to the newest wait for that name, matching names case-insensitively', () => {
    // Task.any([timer, event]) in a loop: the first poll's timer fired, so its wait is abandoned.
    const history = [
      ...started(),
      historyEvent.timerCreated(at(1), 0, at(100)),
      historyEvent.orchestratorStarted(at(100)),
      historyEvent.timerFired(at(100), 0, at(100).toISOString()),
      historyEvent.timerCreated(at(101), 1, at(200)),
      historyEvent.orchestratorStarted(at(150)),
      historyEvent.eventRaised(at(150), 'cancel', null),
    ];
    const result = replay(history, whenAny(timer(at(100)), waitFor('Cancel')), whenAny(timer(at(200)), waitFor('Cancel')), activity('AfterCancel'));
    assert.deepEqual(summary(result.decisions), [[EventType.TaskScheduled, 2, 'AfterCancel']]);
  });

  it('records continue-as-new with its input', () => {
    const history = [...started(), historyEvent.taskScheduled(at(1), 0, 'A', null), historyEvent.orchestratorStarted(at(10)), historyEvent.taskCompleted(at(9), 0, '1')];
    const result = replayWith({ isDone: true }, history, activity('A'), { actionType: 4, input: 5 });
    assert.deepEqual(result.end, { kind: 'continuedAsNew', input: '5', carryOver: [] });
    assert.deepEqual(result.decisions, []);
  });

  it('names a sub-orchestration without an id after the execution and sequence number', () => {
    const result = replay(started(), { actionType: 2, functionName: 'Child', input: { a: 1 } });
    assert.deepEqual(result.subOrchestrations, [{ id: 0, name: 'Child', instanceId: 'e:0', input: '{"a":1}' }]);
    assert.equal(result.decisions[0]?.EventType, EventType.SubOrchestrationInstanceCreated);
    assert.match(failure(replay(started(), { actionType: 2, functionName: 'Child', instanceId: 'a/b' }).end), /Sub-orchestration instance id "a\/b" is invalid/);
    assert.equal(
      failure(replay(started(), { actionType: 2, functionName: 'Child', instanceId: 'I' }).end),
      "Orchestrator function 'Orch' failed: The instance ID of a sub-orchestration must be different than the instance ID of a parent orchestration.",
    );
  });
});
