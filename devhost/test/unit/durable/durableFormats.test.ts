/**
 * The Durable backend's wire formats: the `durableClient` binding payload, the status API's
 * historyEvents summary, the activity failure wording, and the name rules for task hubs and
 * instance ids (all as the extension has them).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { activityFailure } from '../../../src/durable/ActivityDispatcher';
import { clientBindingPayload, managementUrls } from '../../../src/durable/DurableHttpApi';
import { historyEvent } from '../../../src/durable/HistoryEvent';
import { instanceBlobName, instanceIdFromBlobName, taskHubNames, validateInstanceId } from '../../../src/durable/taskHubNames';
import { summarizeHistory } from '../../../src/durable/toStatusPayload';
import { DevHostError } from '../../../src/errors';

describe('Durable wire formats', () => {
  it('gives durableClient bindings the extension payload: webhook links, and the local RPC base the client calls', () => {
    // BindingHelper.DurableOrchestrationClientToString and HttpApiHandler.GetClientResponseLinks /
    // GetInstanceCreationLinks (azure-functions-durable-extension); rpcBaseUrl is LocalHttpListener's /durabletask/.
    const payload = clientBindingPayload('http://127.0.0.1:7071/', 'MyHub');
    assert.deepEqual(Object.keys(payload).sort(), ['baseUrl', 'creationUrls', 'managementUrls', 'requiredQueryStringParameters', 'rpcBaseUrl', 'taskHubName']);
    assert.equal(payload.rpcBaseUrl, 'http://127.0.0.1:7071/durabletask/');
    assert.equal(payload.baseUrl, 'http://127.0.0.1:7071/runtime/webhooks/durabletask');
    assert.equal(payload.requiredQueryStringParameters, '');
    const management = payload.managementUrls as Record<string, string>;
    assert.equal(management.id, 'INSTANCEID');
    assert.equal(management.statusQueryGetUri, 'http://127.0.0.1:7071/runtime/webhooks/durabletask/instances/INSTANCEID?taskHub=MyHub&connection=Storage');
    assert.equal(management.terminatePostUri, 'http://127.0.0.1:7071/runtime/webhooks/durabletask/instances/INSTANCEID/terminate?reason={text}&taskHub=MyHub&connection=Storage');
    assert.equal((payload.creationUrls as Record<string, string>).createNewInstancePostUri, 'http://127.0.0.1:7071/runtime/webhooks/durabletask/orchestrators/{functionName}[/{instanceId}]?');
    assert.equal(managementUrls('http://h', 'Hub', 'a b').statusQueryGetUri, 'http://h/runtime/webhooks/durabletask/instances/a%20b?taskHub=Hub&connection=Storage');
  });

  it('puts the system key into every webhook link when keys are on, as the host\'s notification URL carries it', () => {
    const payload = clientBindingPayload('http://127.0.0.1:7071', 'MyHub', 's/k');
    assert.equal(payload.requiredQueryStringParameters, 'code=s%2Fk');
    assert.equal((payload.managementUrls as Record<string, string>).statusQueryGetUri, 'http://127.0.0.1:7071/runtime/webhooks/durabletask/instances/INSTANCEID?taskHub=MyHub&connection=Storage&code=s%2Fk');
    assert.equal((payload.creationUrls as Record<string, string>).createNewInstancePostUri, 'http://127.0.0.1:7071/runtime/webhooks/durabletask/orchestrators/{functionName}[/{instanceId}]?code=s%2Fk');
    assert.equal(payload.rpcBaseUrl, 'http://127.0.0.1:7071/durabletask/', 'the local RPC endpoint takes no key');
  });

  it('summarizes history like the status API: scheduled folded into completions, no episode markers', () => {
    const t = new Date('2026-01-01T00:00:00.000Z');
    const history = [
      historyEvent.orchestratorStarted(t),
      historyEvent.executionStarted(t, { name: 'Orch', instanceId: 'i', executionId: 'e', input: '"in"' }),
      historyEvent.taskScheduled(t, 0, 'A', 'x'),
      historyEvent.timerCreated(t, 1, t),
      historyEvent.orchestratorCompleted(t),
      historyEvent.orchestratorStarted(t),
      historyEvent.taskFailed(t, 0, 'reason', 'details'),
      historyEvent.timerFired(t, 1, t.toISOString()),
      historyEvent.executionCompleted(t, 2, 'Completed', '{"ok":true}'),
      historyEvent.orchestratorCompleted(t),
    ];
    const ts = t.toISOString();
    assert.deepEqual(summarizeHistory(history, true, true), [
      { EventType: 'ExecutionStarted', Timestamp: ts, Input: '"in"', Generation: 0, FunctionName: 'Orch' },
      { EventType: 'TimerCreated', Timestamp: ts, FireAt: ts },
      { EventType: 'TaskFailed', Timestamp: ts, Reason: 'reason', Details: 'details', ScheduledTime: ts, FunctionName: 'A', Input: '["x"]' },
      { EventType: 'TimerFired', Timestamp: ts, FireAt: ts },
      { EventType: 'ExecutionCompleted', Timestamp: ts, OrchestrationStatus: 'Completed', Result: { ok: true } },
    ]);
    const hidden = summarizeHistory(history, false, false);
    assert.ok(hidden.every((e) => !('Result' in e) && !('Input' in e)));
  });

  it('words activity failures as the extension does', () => {
    const { reason, details } = activityFailure('Charge', new Error('card declined'));
    assert.equal(reason, "Activity function 'Charge' failed:  card declined");
    const parsed = JSON.parse(details) as { Message: string; InnerException: { RemoteMessage: string } };
    assert.equal(parsed.Message, ' card declined');
    assert.equal(parsed.InnerException.RemoteMessage, 'card declined');
  });

  it('validates task hub names and builds storage names under them', () => {
    const names = taskHubNames('CoordinatorHub', 2);
    assert.deepEqual(names.controlQueues, ['coordinatorhub-control-00', 'coordinatorhub-control-01']);
    assert.equal(names.workItemQueue, 'coordinatorhub-workitems');
    assert.equal(names.instancesContainer, 'coordinatorhub-instances');
    for (const bad of ['ab', '1hub', 'my-hub', 'x'.repeat(46)]) {
      assert.throws(
        () => taskHubNames(bad),
        (err: unknown) => err instanceof DevHostError && err.code === 'DURABLE_BAD_TASK_HUB',
      );
    }
  });

  it('validates instance ids like the extension and maps them to blob names reversibly', () => {
    assert.equal(validateInstanceId('job-42:chunk/1'), 'Orchestration instance ids must not contain /, \\, #, ?, or control characters.');
    assert.match(validateInstanceId('@x') ?? '', /must not start with @/);
    assert.match(validateInstanceId('a\u0001b') ?? '', /control characters/);
    assert.match(validateInstanceId('x'.repeat(257)) ?? '', /256/);
    assert.equal(validateInstanceId('job-42:chunk 1 ü'), undefined);
    const id = 'job-42:chunk 1 ü%';
    assert.equal(instanceIdFromBlobName(instanceBlobName(id)), id);
    assert.ok(instanceBlobName(`${id}tail`).startsWith(instanceBlobName(id)), 'prefix-preserving');
  });
});
