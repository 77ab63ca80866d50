/**
 * A leader paused (SIGSTOP) between its last check and its act (test/e2e/staleLeader*.test.ts), on real
 * host processes (the extensions host, or the development host with E2E_HOST=devhost) with the real
 * app and Azurite. The leader reaches storage through a proxy that holds the request its start makes
 * after every check has passed; the test pauses the leader there, lets the other instance take the
 * lease with a newer epoch, resumes the old leader and only then lets the held request through, so the
 * act lands after the newer epoch exists.
 *
 * How late a landed stale start may run (`staleStartWindowMs`): on the development host every process
 * polls every control queue, so within seconds. On the real extension the resumed leader's own receive
 * loop may take the start message first: it still listens on the control queue whose partition lease
 * expired while it was paused (its partition manager drops the queue only at its next read of the
 * partition table, which it makes in the same instant), and a receive cancelled by that drop leaves the
 * message received in storage and handled by nobody, hidden for the control-queue visibility timeout
 * (Azure/durabletask at 5217032, src/DurableTask.AzureStorage: Messaging/ControlQueue.cs lines 81-84
 * and 169-171: the receive is cancelled by the queue's release, and its `catch` ignores that, so nothing
 * abandons the messages storage handed out;
 * AzureStorageOrchestrationService.cs line 575, DropLostControlQueue; Partitioning/TablePartitionManager.cs
 * line 365). Seen on 3.19.0: the resumed leader received control-01 just after the message was stored,
 * dropped the queue 55 ms later, and the partition's owner, polling every 250 ms, never saw the message.
 * It comes back then and runs as any start does.
 */
import assert from 'node:assert/strict';
import { after } from 'node:test';

import { type HostProcess } from 'devhost/testing';

import { type HeldRequest, type StorageProxy } from '../../support/storageProxy';
import { durableRequests } from './durableRequests';
import { pauseInstance } from './pauseProcess';
import { type Scenario, shippedControlQueueVisibilityMs } from './realApp';

/**
 * How long a stale start, once stored, may take to run and end, on either host: the control-queue
 * visibility timeout (above), and 30 s for the partition's owner to receive it (a lease changing
 * hands meanwhile drains for up to about 10 s) and for its run to stand down.
 */
export function staleStartWindowMs(): number {
  return shippedControlQueueVisibilityMs() + 30_000;
}

export interface PausedStart {
  readonly s: Scenario;
  readonly proxy: StorageProxy;
  readonly old: HostProcess;
  readonly next: HostProcess;
  readonly held: HeldRequest;
  readonly oldEpoch: number;
  readonly newEpoch: number;
  resume(): void;
}

/**
 * For a describe block: the old leader paused in its start of a job and the newer leader leading, and
 * every paused process continued after the block (a test that fails while its old leader is paused must
 * not leave a stopped process behind: the scenario's stop continues the host it started, not the
 * extensions host's worker).
 */
export function pausedLeaders(scenarios: { start(): Promise<{ s: Scenario; proxy: StorageProxy }> }): {
  pausedInItsStart(jobId: string, items: number[]): Promise<PausedStart>;
  resume(p: PausedStart): Promise<void>;
} {
  const paused: Array<{ resume(): void }> = [];
  after(() => {
    for (const p of paused) p.resume();
  });
  return {
    async pausedInItsStart(jobId, items) {
      const { s, proxy } = await scenarios.start();
      const old = await s.start(`stale-a-${jobId.slice(-3)}`, proxy.connectionString);
      const oldTerm = await s.leading(old);
      const next = await s.start(`stale-b-${jobId.slice(-3)}`);
      // The development host: the start's own read of the instance blob, after the intake's status check
      // of the same blob. The real extension's provider reads the instance's row as often as its client
      // is asked (status checks and the start's own dedupe read look alike), so there the hold is the
      // start's first write, its start message: sent only after the provider's own check found no instance.
      const durable = durableRequests(s);
      let reads = 0;
      const hold = proxy.hold((r) =>
        durable.host === 'devhost' ? durable.instanceRead(r, `job-${jobId}`) && ++reads === 2 : durable.startMessage(r, `job-${jobId}`),
      );
      await s.submitByQueue({ jobId, workType: 'sum', items, options: { chunkSize: 10 } });
      const held = await hold.held;
      const stopped = pauseInstance(old);
      paused.push(stopped);
      const oldEpoch = oldTerm.instance.epoch ?? 0;
      const newTerm = await s.leading(next, oldEpoch, 90_000);
      return { s, proxy, old, next, held, oldEpoch, newEpoch: newTerm.instance.epoch ?? 0, resume: () => stopped.resume() };
    },
    /** Resumes the old leader, then lets its held request through; resolves once storage answered it. */
    async resume(p) {
      p.resume();
      const status = await p.held.release();
      assert.ok(status !== undefined, 'the held request reached storage: the stale start went on');
    },
  };
}
