/**
 * The dispatcher's crash-safety between its steps, against Azurite: an episode whose state was
 * saved but whose work could not be sent (an injected send failure, as if the process died right
 * after the save) is completed once its consumed message comes back; and two hosts dispatching the
 * same task hub at once (conditional writes racing) produce correct outputs with no duplicated
 * completions in any history.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { DEFAULT_TUNING } from '../../../src/durable/DispatcherTuning';
import { DurableDispatcher } from '../../../src/durable/DurableDispatcher';
import { EventType, historyEvent } from '../../../src/durable/HistoryEvent';
import { InstanceStore, newInstanceState } from '../../../src/durable/InstanceStore';
import { taskHubNames } from '../../../src/durable/taskHubNames';
import { type ActivityWorkMessage, newMessageId, TaskHubQueues } from '../../../src/durable/TaskHubQueues';
import { memoryLogger } from '../../../src/log';
import { eventNames, loadReferenceApp, startDurableTestHost, storageFromEnv, uniqueTaskHub, waitForFinish } from '../../support/durableTestHost';

/** Real queues whose first `failures` activity sends throw (the injected failure). */
class FailingSendQueues extends TaskHubQueues {
  failures = 1;

  override async sendWork(message: ActivityWorkMessage): Promise<void> {
    if (this.failures > 0) {
      this.failures -= 1;
      throw new Error('injected: process died before sending its work');
    }
    return super.sendWork(message);
  }
}

test('work an episode saved but never sent is sent when its consumed message is redelivered', async () => {
  const app = await loadReferenceApp();
  const storage = storageFromEnv();
  const names = taskHubNames(uniqueTaskHub('Redeliver'));
  const logger = memoryLogger('redelivery');
  const store = new InstanceStore(storage, names);
  const queues = new FailingSendQueues(storage, names, logger);
  const dispatcher = new DurableDispatcher({ invoker: app, store, queues, logger, tuning: { ...DEFAULT_TUNING, controlVisibilitySeconds: 2, maxPollIntervalMs: 200 } });

  const instanceId = 'redelivered-1';
  const now = new Date();
  const executionId = newMessageId();
  await store.create(newInstanceState({ instanceId, name: 'HelloSequence', executionId, input: null, parent: null, now }));
  await queues.sendControl({ mid: newMessageId(), instanceId, executionId, events: [historyEvent.executionStarted(now, { name: 'HelloSequence', instanceId, executionId, input: null })] });

  dispatcher.start();
  try {
    const deadline = Date.now() + 30_000;
    let state = (await store.read(instanceId))?.state;
    while (state?.runtimeStatus !== 'Completed' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      state = (await store.read(instanceId))?.state;
    }
    assert.equal(state?.runtimeStatus, 'Completed');
    assert.equal(state?.output, '["Hello Tokyo!","Hello Seattle!","Hello London!"]');
    assert.equal(queues.failures, 0, 'the failure was injected');
    assert.ok(logger.lines.some((l) => l.event === 'durable.episode.failed'), 'the first attempt failed after its save');
    assert.ok(logger.lines.some((l) => l.event === 'durable.work.resent' && l.activities === 1), 'the redelivered message re-sent the pending activity');
    const history = state?.history ?? [];
    assert.deepEqual(history.filter((e) => e.EventType === EventType.TaskCompleted).map((e) => e.TaskScheduledId), [0, 1, 2]);
    assert.deepEqual(eventNames(history).filter((n) => n === 'ExecutionStarted'), ['ExecutionStarted']);
  } finally {
    await dispatcher.stop();
  }
});

test('two hosts dispatching one task hub complete every orchestration exactly as one would', async () => {
  const taskHub = uniqueTaskHub('Shared');
  const hostA = await startDurableTestHost({ taskHub });
  const hostB = await startDurableTestHost({ taskHub });
  try {
    const ids: string[] = [];
    for (let i = 0; i < 6; i += 1) ids.push(await (i % 2 === 0 ? hostA : hostB).client.startNew('HelloSequence'));
    const fanOut = await hostB.client.startNew('FanOutFanIn', { input: 40 });
    for (const id of ids) {
      const status = await waitForFinish(hostA.client, id);
      assert.deepEqual(status.output, ['Hello Tokyo!', 'Hello Seattle!', 'Hello London!']);
      assert.equal(eventNames(await hostA.rawHistory(id)).length, 16, `${id}: the sequence's 16 history events, nothing duplicated`);
    }
    const fan = await waitForFinish(hostB.client, fanOut);
    assert.equal(fan.output, (40 * 41) / 2 * 2);
    const completions = (await hostB.rawHistory(fanOut)).filter((e) => e.EventType === EventType.TaskCompleted).map((e) => e.TaskScheduledId ?? -1);
    assert.deepEqual(completions.sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i));
  } finally {
    await Promise.all([hostA.stop(), hostB.stop()]);
  }
});

test('duplicate deliveries are applied once: a repeated message id, a repeated task completion', async () => {
  const host = await startDurableTestHost();
  try {
    const id = await host.client.startNew('CustomStatus');
    const deadline = Date.now() + 20_000;
    while (((await host.client.getStatus(id)).customStatus as { stage?: string } | null)?.stage !== 'waiting') {
      if (Date.now() > deadline) throw new Error('CustomStatus never reached its waiting stage');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const queues = new TaskHubQueues(storageFromEnv(), taskHubNames(host.taskHub), host.logger);
    const raised = { mid: newMessageId(), instanceId: id, events: [historyEvent.eventRaised(new Date(), 'Other', '1')] };
    await queues.sendControl(raised);
    const applied = Date.now() + 10_000;
    while ((await host.rawHistory(id)).filter((e) => e.EventType === EventType.EventRaised).length === 0) {
      if (Date.now() > applied) throw new Error('the first delivery was never applied');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    // Now the same message again (as after a crash before its delete), and a second completion of task 0.
    await queues.sendControl(raised);
    await queues.sendControl({ mid: newMessageId(), instanceId: id, events: [historyEvent.taskCompleted(new Date(), 0, '"Hello again!"')] });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    await host.client.raiseEvent(id, 'Continue', true);
    const status = await waitForFinish(host.client, id);
    assert.equal(status.output, 'finished');
    const history = await host.rawHistory(id);
    assert.equal(history.filter((e) => e.EventType === EventType.TaskCompleted).length, 1, 'the second completion of task 0 was dropped');
    assert.deepEqual(
      history.filter((e) => e.EventType === EventType.EventRaised).map((e) => e.Name),
      ['Other', 'Continue'],
      'the redelivered message was applied once',
    );
  } finally {
    await host.stop();
  }
});

test('a timer longer than a queue message may wait is re-chained and fires on time, not early', async () => {
  // Messages may wait at most 1 s here (6 days in production): a 4 s timer needs several hops.
  const host = await startDurableTestHost({ maxTimerMessageDelaySeconds: 1, tuning: { controlVisibilitySeconds: 2 } });
  try {
    const id = await host.client.startNew('ApprovalWithTimeout', { input: 4000 });
    const status = await waitForFinish(host.client, id);
    assert.equal(status.output, 'timed out');
    const history = await host.rawHistory(id);
    const fireAt = Date.parse(history.find((e) => e.EventType === EventType.TimerCreated)?.FireAt ?? '');
    const firedEpisode = history[history.findIndex((e) => e.EventType === EventType.TimerFired) - 1];
    assert.equal(firedEpisode?.EventType, EventType.OrchestratorStarted);
    assert.ok(Date.parse(firedEpisode.Timestamp) >= fireAt, 'not early');
    assert.ok(Date.parse(firedEpisode.Timestamp) < fireAt + 1500, 'not much late');
  } finally {
    await host.stop();
  }
});
