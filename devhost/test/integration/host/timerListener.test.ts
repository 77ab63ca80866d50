/**
 * The timer listener against Azurite: `runOnStartup`, `isPastDue` from the schedule status blob the
 * host keeps (`azure-webjobs-hosts/timers/{hostId}/Host.Functions.{name}/status`), and a follower
 * taking over the listener lock once the holder stops.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { type FunctionInvoker, type HostedFunction, type InvocationRequest, type InvocationResult } from '../../../src/contracts';
import { memoryLogger } from '../../../src/log';
import { parseTimerSchedule } from '../../../src/schedule/TimerSchedule';
import { eventually } from '../../../src/testing/hostProcess';
import { TimerListener } from '../../../src/triggers/TimerListener';
import { azuriteConnectionString, uniqueName } from '../../support/env';

interface TimerTrigger {
  Schedule: { AdjustForDST: boolean };
  ScheduleStatus: { Last: string; Next: string; LastUpdated: string } | null;
  IsPastDue: boolean;
}

class RecordingInvoker implements FunctionInvoker {
  readonly calls: TimerTrigger[] = [];
  list(): readonly HostedFunction[] {
    return [];
  }
  invoke(_name: string, request: InvocationRequest): Promise<InvocationResult> {
    this.calls.push(request.trigger as TimerTrigger);
    return Promise.resolve({ returnValue: undefined, outputs: {} });
  }
}

const fn: HostedFunction = {
  name: 'tick',
  triggerType: 'timerTrigger',
  triggerName: 'timer',
  bindings: { timer: { type: 'timerTrigger', direction: 'in' } },
};

function listener(hostId: string, instanceId: string, schedule: string, invoker: FunctionInvoker, runOnStartup = false): TimerListener {
  return new TimerListener({
    fn,
    schedule: parseTimerSchedule(schedule),
    runOnStartup,
    useMonitor: true,
    invoker,
    blobService: BlobServiceClient.fromConnectionString(azuriteConnectionString()),
    hostId,
    instanceId,
    listenerLockPeriodMs: 15_000,
    recoveryPollingIntervalMs: 300,
    logger: memoryLogger('timer'),
  });
}

describe('TimerListener', () => {
  it('runs once on startup when runOnStartup is set, with the schedule status of a monitored schedule', async () => {
    const invoker = new RecordingInvoker();
    const timer = listener(uniqueName('ros').slice(0, 32), 'a', '0 0 0 1 1 *', invoker, true);
    await timer.start();
    try {
      const call = await eventually(() => Promise.resolve(invoker.calls[0]), 5_000, 'the startup run');
      assert.equal(call.IsPastDue, false);
      assert.deepEqual(call.Schedule, { AdjustForDST: true });
      assert.match(call.ScheduleStatus?.Next ?? '', /-01-01T00:00:00\.000\+00:00$/);
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(invoker.calls.length, 1);
    } finally {
      await timer.stop();
    }
  });

  it('fires at once with isPastDue when the recorded next occurrence has passed, then records the new status', async () => {
    const hostId = uniqueName('pastdue').slice(0, 32);
    const container = BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient('azure-webjobs-hosts');
    await container.createIfNotExists();
    const status = { Last: '2020-01-01T00:00:00.000+00:00', Next: '2020-01-01T01:00:00.000+00:00', LastUpdated: '2020-01-01T00:00:00.000+00:00' };
    const statusBlob = container.getBlockBlobClient(`timers/${hostId}/Host.Functions.tick/status`);
    await statusBlob.upload(JSON.stringify(status), JSON.stringify(status).length);

    const invoker = new RecordingInvoker();
    const timer = listener(hostId, 'a', '0 0 * * * *', invoker);
    await timer.start();
    try {
      const call = await eventually(() => Promise.resolve(invoker.calls[0]), 5_000, 'the past-due run');
      assert.equal(call.IsPastDue, true);
      assert.deepEqual(call.ScheduleStatus, status);
      const written = await eventually(
        async () => {
          const now = JSON.parse((await statusBlob.downloadToBuffer()).toString('utf8')) as typeof status;
          return now.Last !== status.Last ? now : undefined;
        },
        5_000,
        'the updated status',
      );
      assert.ok(new Date(written.Next).getTime() > Date.now());
      assert.equal(new Date(written.Next).getUTCMinutes(), 0);
    } finally {
      await timer.stop();
    }
  });

  it('lets a waiting process take the listener over after the holder stops', async () => {
    const hostId = uniqueName('takeover').slice(0, 32);
    const first = new RecordingInvoker();
    const second = new RecordingInvoker();
    const holder = listener(hostId, 'holder', '0 0 0 1 1 *', first, true);
    const follower = listener(hostId, 'follower', '0 0 0 1 1 *', second, true);
    await holder.start();
    await follower.start();
    try {
      assert.equal(holder.listening, true);
      assert.equal(follower.listening, false);
      await eventually(() => Promise.resolve(first.calls[0]), 5_000, 'the holder’s startup run');
      await new Promise((r) => setTimeout(r, 700));
      assert.equal(second.calls.length, 0, 'the follower does not run while the holder listens');
      await holder.stop();
      await eventually(() => Promise.resolve(second.calls[0]), 5_000, 'the follower’s run after takeover');
      assert.equal(follower.listening, true);
    } finally {
      await holder.stop();
      await follower.stop();
    }
  });
});
