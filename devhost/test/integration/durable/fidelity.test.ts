/**
 * Durable fidelity: behaviors of the Durable extension and its Azure Storage provider, including
 * what they refuse, checked through the durable-functions SDK's own client (over HTTP) and its own
 * executor (the fixture app's orchestrators), with state in Azurite. Each test names the public
 * source it was read from (repository, then file):
 * - extension: Azure/azure-functions-durable-extension, src/WebJobs.Extensions.DurableTask/
 * - core: Azure/durabletask, src/DurableTask.Core/
 * - storage: Azure/durabletask, src/DurableTask.AzureStorage/
 * - webjobs: Azure/azure-webjobs-sdk, src/Microsoft.Azure.WebJobs.Host/
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import * as df from 'durable-functions';

import { type FunctionInvoker, type HostedFunction, type InvocationRequest, type InvocationResult } from '../../../src/contracts';
import { EventType, type HistoryEvent,historyEvent } from '../../../src/durable/HistoryEvent';
import { newMessageId } from '../../../src/durable/TaskHubQueues';
import { TimeoutInvoker } from '../../../src/functionTimeout';
import { memoryLogger } from '../../../src/log';
import { type DurableTestHost, eventNames, loadReferenceApp, referenceAppExports, startDurableTestHost, waitForFinish, waitUntil } from '../../support/durableTestHost';

const OS = 'OrchestratorStarted';
const OC = 'OrchestratorCompleted';
const CHANGED = 'Was a change made to the orchestrator code after this instance had already started running?';

const ofType = (history: readonly HistoryEvent[], type: number): HistoryEvent[] => history.filter((e) => e.EventType === type);
const statusOf = (host: DurableTestHost, id: string): Promise<df.DurableOrchestrationStatus> => host.client.getStatus(id, { showInput: true });

describe('Durable fidelity: continue-as-new and custom status', { concurrency: true }, () => {
  let host: DurableTestHost;
  before(async () => {
    host = await startDurableTestHost();
  });
  after(async () => {
    await host?.stop();
  });

  it('restarts createdTime and replaces the input at each continue-as-new; custom status is carried through that episode only, then cleared by one that sets none (storage AzureTableTrackingStore.UpdateStateAsync; core TaskOrchestrationDispatcher carryOverStatus)', async () => {
    const id = await host.client.startNew('Generations', { input: { generation: 0, last: 2 } });
    await waitUntil(async () => (await statusOf(host, id)).runtimeStatus === df.OrchestrationRuntimeStatus.Running, 20_000, 'generation 0 running');
    const first = await statusOf(host, id);
    assert.deepEqual(first.customStatus, { generation: 0 });
    // createdTime has whole seconds: the next generation must start in a later second.
    await new Promise((resolve) => setTimeout(resolve, 1_100));

    await host.client.raiseEvent(id, 'Next', 1);
    await waitUntil(async () => ((await statusOf(host, id)).input as { generation?: number }).generation === 1, 20_000, 'generation 1');
    const second = await statusOf(host, id);
    assert.equal(second.runtimeStatus, df.OrchestrationRuntimeStatus.Running);
    assert.deepEqual(second.input, { generation: 1, last: 2 });
    assert.ok(new Date(second.createdTime).getTime() > new Date(first.createdTime).getTime(), `createdTime restarted: ${String(first.createdTime)} -> ${String(second.createdTime)}`);
    assert.deepEqual(second.customStatus, { generation: 0 }, 'generation 1 set none in the continue-as-new episode: the previous generation\'s is kept');

    await host.client.raiseEvent(id, 'Next', 2);
    await waitUntil(async () => ((await statusOf(host, id)).input as { generation?: number }).generation === 2, 20_000, 'generation 2');
    assert.equal((await statusOf(host, id)).customStatus, null, 'two generations in a row set none: cleared');

    await host.client.raiseEvent(id, 'Next', 3);
    const done = await waitForFinish(host.client, id);
    assert.deepEqual(done.output, { generation: 2, next: 3 });
    assert.ok(new Date(done.createdTime).getTime() >= new Date(second.createdTime).getTime());
  });

  it('clears the custom status in an episode whose orchestrator set none (extension OutOfProcOrchestrationShim sets it only when given; core TaskOrchestrationDispatcher stores each episode\'s)', async () => {
    const id = await host.client.startNew('StatusWhileNotReplaying');
    await waitUntil(async () => (await statusOf(host, id)).runtimeStatus === df.OrchestrationRuntimeStatus.Running);
    await host.client.raiseEvent(id, 'Continue', null);
    await waitUntil(async () => (await statusOf(host, id)).customStatus === 'set while not replaying', 20_000, 'the custom status');
    await host.client.raiseEvent(id, 'Again', null);
    await waitUntil(async () => ofType(await host.rawHistory(id), EventType.EventRaised).length === 2, 20_000, 'the Again episode');
    assert.equal((await statusOf(host, id)).customStatus, null, 'the replaying episode set none');
    await host.client.raiseEvent(id, 'Finish', null);
    assert.equal((await waitForFinish(host.client, id)).output, 'done');
  });

  it('accepts a custom status of 16 KB in UTF-16 and fails the orchestration over it, with the extension\'s reason (extension MessagePayloadDataConverter.Serialize, DurableOrchestrationContext.SetCustomStatus)', async () => {
    // JSON of n characters is n + 2 UTF-16 units of 2 bytes; the extension truncates the KB count.
    const fits = await host.client.startNew('BigStatus', { input: 8_701 });
    const tooBig = await host.client.startNew('BigStatus', { input: 8_702 });
    const ok = await waitForFinish(host.client, fits);
    assert.equal(ok.runtimeStatus, 'Completed');
    assert.equal((ok.customStatus as string).length, 8_701);
    const failed = await waitForFinish(host.client, tooBig);
    assert.equal(failed.runtimeStatus, 'Failed');
    assert.equal(failed.output, "Orchestrator function 'BigStatus' failed: The UTF-16 size of the JSON-serialized payload must not exceed 16 KB. The current payload size is 17 KB.");
    assert.equal(failed.customStatus, null, 'the refused status is not stored');
    assert.deepEqual(eventNames(await host.rawHistory(tooBig)), [OS, 'ExecutionStarted', 'ExecutionCompleted', OC], 'nothing was scheduled');
  });
});

describe('Durable fidelity: events around starts and continue-as-new', () => {
  it('carries raised events after the continue-as-new point over to the next generation, and drops unconsumed ones before it (core TaskOrchestrationContext.HandleEventRaisedEvent; storage EventBehaviourForContinueAsNew = Carryover)', async () => {
    const host = await startDurableTestHost({ start: false });
    try {
      // Dispatcher stopped: each instance's start and both events reach it in one batch, in order.
      const carried = await host.client.startNew('CarryOver');
      await host.client.raiseEvent(carried, 'First', 1);
      await host.client.raiseEvent(carried, 'Second', 2);
      const dropped = await host.client.startNew('CarryOver');
      await host.client.raiseEvent(dropped, 'Second', 2);
      await host.client.raiseEvent(dropped, 'First', 1);
      await host.backend.start();

      const done = await waitForFinish(host.client, carried);
      assert.deepEqual(done.output, { second: 2 });
      assert.deepEqual(eventNames(await host.rawHistory(carried)).slice(0, 4), [OS, 'ExecutionStarted', 'EventRaised', OC], 'the carried event opens the new generation');

      await waitUntil(async () => ((await statusOf(host, dropped)).input as number | null) === 1, 20_000, 'the second instance to continue as new');
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      assert.equal((await statusOf(host, dropped)).runtimeStatus, df.OrchestrationRuntimeStatus.Running, 'Second arrived before the continue-as-new point: it is gone');
      assert.equal(ofType(await host.rawHistory(dropped), EventType.EventRaised).length, 0);
    } finally {
      await host.stop();
    }
  });

  it('discards an event dequeued before its instance\'s ExecutionStarted (storage AzureStorageOrchestrationService.IsExecutableInstanceAsync: "No such instance")', async () => {
    const host = await startDurableTestHost({ start: false });
    try {
      const id = await host.client.startNew('ApprovalWithTimeout', { input: 60_000 });
      // Hold the start message back for a few seconds, as a partition move or a slow client can.
      const partition = host.queues.partitionFor(id);
      const held = await host.queues.receiveControl(partition, 32, 4);
      assert.equal(held.length, 1);
      await host.client.raiseEvent(id, 'Approval', { by: 'too early' });
      await host.backend.start();

      await waitUntil(async () => (await statusOf(host, id)).runtimeStatus === df.OrchestrationRuntimeStatus.Running, 20_000, 'the delayed start');
      assert.ok(host.logger.lines.some((l) => l.event === 'durable.message.discarded' && l.reason === 'No such instance' && l.instanceId === id), 'the early event was discarded, loudly');
      assert.equal(ofType(await host.rawHistory(id), EventType.EventRaised).length, 0);
      await host.client.raiseEvent(id, 'Approval', { by: 'ops' });
      assert.equal((await waitForFinish(host.client, id)).output, 'approved: {"by":"ops"}');
    } finally {
      await host.stop();
    }
  });

  it('refuses to start an id whose instance is Pending and re-sends nothing (extension DurableClient.StartNewAsync + OverridableStates.ToDedupeStatuses; storage CreateTaskOrchestrationAsync)', async () => {
    const host = await startDurableTestHost({ start: false });
    try {
      const id = 'pending-twice';
      await host.client.startNew('HelloSequence', { instanceId: id });
      assert.equal((await statusOf(host, id)).runtimeStatus, df.OrchestrationRuntimeStatus.Pending);
      await assert.rejects(host.client.startNew('HelloSequence', { instanceId: id }), /status code: 500.*An Orchestration instance with the status Pending already exists/);
      const queue = host.queues.controlQueueFor(id);
      assert.equal((await queue.peekMessages({ numberOfMessages: 32 })).peekedMessageItems.length, 1, 'one start message, none re-sent');
      await host.backend.start();
      const done = await waitForFinish(host.client, id);
      assert.deepEqual(done.output, ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']);
      assert.equal(ofType(await host.rawHistory(id), EventType.ExecutionStarted).length, 1);
      // A finished id may be started again: a new execution replaces it.
      await host.client.startNew('HelloSequence', { instanceId: id, input: 'again' });
      assert.equal((await waitForFinish(host.client, id)).input, 'again');
    } finally {
      await host.stop();
    }
  });

  it('leaves no instance when a start stops between its message and its record; the orphan message is deferred, then discarded, and the id starts once (storage OrchestrationSessionManager.DedupeExecutionStartedMessagesAsync)', async () => {
    const host = await startDurableTestHost({ tuning: { startMessageMaxDequeues: 2 } });
    try {
      const id = 'interrupted-start';
      const executionId = newMessageId();
      const orphan = historyEvent.executionStarted(new Date(), { name: 'HelloSequence', instanceId: id, executionId, input: '"orphan"' });
      await host.queues.sendControl({ mid: newMessageId(), instanceId: id, executionId, events: [orphan] });
      await assert.rejects(host.client.getStatus(id), /404/, 'no record: the instance does not exist');
      await waitUntil(() => Promise.resolve(host.logger.lines.some((l) => l.event === 'durable.message.duplicate_start' && l.instanceId === id)), 20_000, 'the orphan start to be discarded');
      await assert.rejects(host.client.getStatus(id), /404/);

      await host.client.startNew('HelloSequence', { instanceId: id, input: 'real' });
      const done = await waitForFinish(host.client, id);
      assert.equal(done.input, 'real');
      assert.equal(ofType(await host.rawHistory(id), EventType.ExecutionStarted).length, 1);
    } finally {
      await host.stop();
    }
  });
});

describe('Durable fidelity: non-determinism (core TaskOrchestrationContext.HandleTaskScheduledEvent / HandleTimerCreatedEvent; extension OutOfProcOrchestrationShim)', { concurrency: true }, () => {
  let host: DurableTestHost;
  before(async () => {
    host = await startDurableTestHost();
  });
  after(async () => {
    await host?.stop();
  });

  /** Runs `Evolving` to its wait with the original code, changes the code, and lets it replay. */
  async function changeUnderRunningInstance(variant: string): Promise<df.DurableOrchestrationStatus> {
    const id = await host.client.startNew('Evolving');
    await waitUntil(async () => ofType(await host.rawHistory(id), EventType.TaskCompleted).length === 2, 20_000, 'the original code to reach its wait');
    (await referenceAppExports()).codeVariants.set(id, variant);
    await host.client.raiseEvent(id, 'Go', variant);
    return waitForFinish(host.client, id);
  }

  const failedWith = (status: df.DurableOrchestrationStatus, details: string): void => {
    assert.equal(status.runtimeStatus, 'Failed', JSON.stringify(status.output));
    assert.equal(status.output, `Non-Deterministic workflow detected: ${details}`);
  };

  it('fails a replay that no longer schedules a task its history holds', async () => {
    failedWith(
      await changeUnderRunningInstance('removedLast'),
      `A previous execution of this orchestration scheduled an activity task with sequence ID 1 and name 'Double' (version ''), but the current replay execution hasn't (yet?) scheduled this task. ${CHANGED}`,
    );
  });

  it('fails a replay whose first call was removed (the next call takes its sequence number)', async () => {
    failedWith(
      await changeUnderRunningInstance('removedFirst'),
      `A previous execution of this orchestration scheduled an activity task with sequence number 0 named 'SayHello', but the current orchestration replay instead scheduled an activity task named 'Double' with this sequence number.  ${CHANGED}`,
    );
  });

  it('fails a replay with a call added before the recorded ones', async () => {
    failedWith(
      await changeUnderRunningInstance('addedFirst'),
      `A previous execution of this orchestration scheduled an activity task with sequence number 0 named 'SayHello', but the current orchestration replay instead scheduled an activity task named 'Double' with this sequence number.  ${CHANGED}`,
    );
  });

  it('fails a replay whose calls were reordered', async () => {
    failedWith(
      await changeUnderRunningInstance('reordered'),
      `A previous execution of this orchestration scheduled an activity task with sequence number 0 named 'SayHello', but the current orchestration replay instead scheduled an activity task named 'Double' with this sequence number.  ${CHANGED}`,
    );
  });

  it('fails a replay that creates a timer where history has an activity', async () => {
    failedWith(
      await changeUnderRunningInstance('timerInstead'),
      `A previous execution of this orchestration scheduled an activity task with sequence number 0 named 'SayHello', but the current orchestration replay instead produced a CreateTimerOrchestratorAction action with this sequence number. ${CHANGED}`,
    );
  });

  it('accepts names that changed only in case, and a call added after the recorded ones', async () => {
    const renamed = await changeUnderRunningInstance('renamedCase');
    assert.equal(renamed.runtimeStatus, 'Completed', JSON.stringify(renamed.output));
    assert.deepEqual(renamed.output, { variant: 'renamedCase', go: 'renamedCase' });
    const added = await changeUnderRunningInstance('addedLast');
    assert.equal(added.runtimeStatus, 'Completed', JSON.stringify(added.output));
    assert.deepEqual(added.output, { variant: 'addedLast', go: 'addedLast' });
  });
});

describe('Durable fidelity: limits', () => {
  it('fails an activity that outlives functionTimeout with the host\'s FunctionTimeoutException, and says the worker restart is not reproduced (webjobs Executors/FunctionExecutor.cs; extension Listener/TaskActivityShim.cs)', async () => {
    const logger = memoryLogger('timeouts');
    const host = await startDurableTestHost({ wrapInvoker: (app) => new TimeoutInvoker(app, 1_000, logger) });
    try {
      const id = await host.client.startNew('CatchActivityTimeout', { input: { delayMs: 3_000, value: 'late' } });
      const done = await waitForFinish(host.client, id);
      const caught = (done.output as { caught: string }).caught;
      assert.ok(caught.startsWith("Activity function 'SlowEcho' failed: Timeout value of 00:00:01 was exceeded by function: Functions.SlowEcho"), caught);
      const failed = ofType(await host.rawHistory(id), EventType.TaskFailed)[0];
      assert.equal(failed?.Reason, "Activity function 'SlowEcho' failed: Timeout value of 00:00:01 was exceeded by function: Functions.SlowEcho");
      assert.ok(logger.lines.some((l) => l.event === 'host.function_timeout' && l.level === 'error' && l.function === 'SlowEcho'));
    } finally {
      await host.stop();
    }
  });

  it('caps the actions of one execution at maxOrchestrationActions, failing only once its open tasks are done (extension DurableOrchestrationContext.IncrementActionsOrThrowException; core TaskOrchestrationExecutor)', async () => {
    const host = await startDurableTestHost({ durableTask: { maxOrchestrationActions: 4 } });
    try {
      const atCap = await host.client.startNew('FanOutFanIn', { input: 4 });
      const overCap = await host.client.startNew('FanOutFanIn', { input: 5 });
      assert.equal((await waitForFinish(host.client, atCap)).output, 20);
      const failed = await waitForFinish(host.client, overCap);
      assert.equal(failed.runtimeStatus, 'Failed');
      assert.equal(failed.output, "Orchestrator function 'FanOutFanIn' failed: Maximum amount of orchestration actions (4) has been reached. This value can be configured in host.json file as MaxOrchestrationActions.");
      const history = await host.rawHistory(overCap);
      assert.equal(ofType(history, EventType.TaskScheduled).length, 4, 'the calls before the cap were scheduled');
      assert.equal(ofType(history, EventType.TaskCompleted).length, 4, 'and completed before the failure');
    } finally {
      await host.stop();
    }
  });

  it('runs at most maxConcurrentActivityFunctions activities and maxConcurrentOrchestratorFunctions episodes at once per process (extension AzureStorageDurabilityProviderFactory: MaxConcurrentTaskActivityWorkItems / MaxConcurrentTaskOrchestrationWorkItems)', async () => {
    const app = await loadReferenceApp();
    const peak = { activities: 0, orchestrators: 0 };
    const running = { activities: 0, orchestrators: 0 };
    const counting: FunctionInvoker = {
      list: (): readonly HostedFunction[] => app.list(),
      async invoke(name: string, request: InvocationRequest): Promise<InvocationResult> {
        const kind = app.list().find((f) => f.name === name)?.triggerType === 'activityTrigger' ? 'activities' : 'orchestrators';
        running[kind] += 1;
        peak[kind] = Math.max(peak[kind], running[kind]);
        try {
          // Orchestrator invocations are quick; a pause makes overlapping ones visible.
          if (kind === 'orchestrators') await new Promise((resolve) => setTimeout(resolve, 50));
          return await app.invoke(name, request);
        } finally {
          running[kind] -= 1;
        }
      },
    };
    const host = await startDurableTestHost({ wrapInvoker: () => counting, durableTask: { maxConcurrentActivityFunctions: 2, maxConcurrentOrchestratorFunctions: 1 } });
    try {
      const ids = await Promise.all([1, 2, 3].map(() => host.client.startNew('SlowFanOut', { input: { count: 4, delayMs: 300 } })));
      for (const id of ids) assert.equal((await waitForFinish(host.client, id)).runtimeStatus, 'Completed');
      assert.equal(peak.activities, 2, 'activities ran two at a time, never more');
      assert.equal(peak.orchestrators, 1, 'episodes ran one at a time');
    } finally {
      await host.stop();
    }
  });
});

describe('Durable fidelity: polling back-off (storage TaskHubQueue.AddMessageAsync, BackoffPollingHelper)', () => {
  let host: DurableTestHost;
  const ceilingMs = 15_000;
  before(async () => {
    host = await startDurableTestHost({ tuning: { maxPollIntervalMs: ceilingMs } });
  });
  after(async () => {
    await host?.stop();
  });

  it('a message this process adds wakes its own poller of that queue: a start and each activity after an idle spell run at once, not at the next poll', async () => {
    // Idle until every poller waits the full ceiling between polls (50 ms doubling reaches 15 s after ~26 s).
    await new Promise((resolve) => setTimeout(resolve, 2 * ceilingMs + 5_000));
    const started = Date.now();
    const id = await host.client.startNew('HelloSequence');
    const status = await waitForFinish(host.client, id, 60_000);
    const tookMs = Date.now() - started;
    assert.equal(status.runtimeStatus, 'Completed');
    // Unwoken, the start's control message and the first activity's message would each wait for a
    // poll up to 15 s apart (about 15 s together on average); woken, the whole run takes a moment.
    assert.ok(tookMs < 5_000, `HelloSequence took ${tookMs} ms after idle with a ${ceilingMs} ms polling ceiling`);
  });
});
