/**
 * The timer trigger's listener lock across real host processes: two processes with one host id
 * (one scaled-out app) fire a schedule from one process only, while a process with another host id
 * fires it too; the lock is the host's blob `azure-webjobs-hosts/locks/{hostId}/Host.Functions.tick.Listener`
 * with the holder in its metadata, and a graceful stop releases it.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';

import { eventually, type HostProcess, startHostProcess } from '../../../src/testing/hostProcess';
import { type AppRoot, createAppRoot } from '../../support/appRoot';
import { azuriteConnectionString, uniqueName } from '../../support/env';

interface Firing {
  instance: string | null;
  isPastDue: boolean;
  schedule: { adjustForDST: boolean };
}

describe('timer trigger: one firing process per host id', () => {
  let app: AppRoot;
  const timerQueue = uniqueName('timer-firings');
  const sharedHostId = uniqueName('shared').slice(0, 32);
  const otherHostId = uniqueName('other').slice(0, 32);
  const hosts: HostProcess[] = [];

  before(async () => {
    app = createAppRoot({
      fixture: 'basicApp',
      hostJson: { version: '2.0' },
      values: {
        AzureWebJobsStorage: azuriteConnectionString(),
        FIXTURE_QUEUE: uniqueName('timer-in'),
        FIXTURE_OUT_QUEUE: uniqueName('timer-out'),
        FIXTURE_TIMER_QUEUE: timerQueue,
        FIXTURE_TIMER_SCHEDULE: '* * * * * *',
      },
    });
    // Started one after another so the lock race is between live processes, as on a scale-out.
    hosts.push(await startHostProcess({ appRoot: app.dir, hostId: sharedHostId, instanceId: 'shared-a' }));
    hosts.push(await startHostProcess({ appRoot: app.dir, hostId: sharedHostId, instanceId: 'shared-b' }));
    hosts.push(await startHostProcess({ appRoot: app.dir, hostId: otherHostId, instanceId: 'other-a' }));
  });

  after(async () => {
    await Promise.all(hosts.map((h) => h.stop()));
    app.remove();
  });

  it('fires from exactly one process of the shared host id, and from the other host id too', async () => {
    const queue = QueueServiceClient.fromConnectionString(azuriteConnectionString()).getQueueClient(timerQueue);
    const firings = await eventually(
      async () => {
        if (!(await queue.exists())) return undefined;
        const peeked = await queue.peekMessages({ numberOfMessages: 32 });
        const all = peeked.peekedMessageItems.map((m) => JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as Firing);
        const shared = all.filter((f) => f.instance === 'shared-a' || f.instance === 'shared-b');
        const other = all.filter((f) => f.instance === 'other-a');
        return shared.length >= 4 && other.length >= 2 ? all : undefined;
      },
      20_000,
      'firings from both host ids',
    );
    const sharedFirers = new Set(firings.filter((f) => f.instance !== 'other-a').map((f) => f.instance));
    assert.equal(sharedFirers.size, 1, `one process of ${sharedHostId} fires, got ${[...sharedFirers].join(', ')}`);
    for (const firing of firings) {
      assert.equal(firing.isPastDue, false);
      assert.deepEqual(firing.schedule, { adjustForDST: true });
    }
  });

  it('keeps the lock in the host blob with the holder recorded, and releases it on a graceful stop', async () => {
    const container = BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient('azure-webjobs-hosts');
    const lock = container.getBlobClient(`locks/${sharedHostId}/Host.Functions.tick.Listener`);
    const props = await lock.getProperties();
    assert.equal(props.leaseState, 'leased');
    const holder = props.metadata?.functioninstance ?? props.metadata?.FunctionInstance;
    assert.ok(holder === 'shared-a' || holder === 'shared-b', `holder recorded, got ${String(holder)}`);
    const holderProcess = hosts.find((h) => h.instanceId === holder);
    assert.ok(holderProcess !== undefined);
    assert.equal(await holderProcess.stop(), 0);
    const after = await lock.getProperties();
    assert.equal(after.leaseState, 'available');
  });
});
