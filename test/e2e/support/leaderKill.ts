/**
 * A leader killed (SIGKILL) at a step of starting a job (test/e2e/interruptedStart*.test.ts): the leader
 * reaches storage through a proxy that holds the request `holdAt` picks, and dies while it is held, so
 * storage never sees it; a follower reaching storage directly takes over.
 */
import assert from 'node:assert/strict';

import { type HostProcess } from 'devhost/testing';

import { type HeldRequest, type ProxiedRequest, type StorageProxy } from '../../support/storageProxy';
import { type Scenario } from './realApp';

/**
 * The leader (through a proxy) and a follower; `holdAt` picks the leader's request to die on.
 * Returns the scenario, the follower, and when the leader was killed.
 */
export async function killLeaderAt(
  scenarios: { start(): Promise<{ s: Scenario; proxy: StorageProxy }> },
  jobId: string,
  submit: (s: Scenario, follower: HostProcess) => Promise<void>,
  holdAt: (s: Scenario, request: ProxiedRequest) => boolean,
): Promise<{ s: Scenario; follower: HostProcess; held: HeldRequest; leaderEpoch: number; killedAt: number }> {
  const { s, proxy } = await scenarios.start();
  const leader = await s.start(`kill-a-${jobId.slice(-4)}`, proxy.connectionString);
  const led = await s.leading(leader);
  const follower = await s.start(`kill-b-${jobId.slice(-4)}`);
  const hold = proxy.hold((r) => holdAt(s, r));
  await submit(s, follower);
  const held = await hold.within(60_000, 'the leader never reached the step');
  const killedAt = Date.now();
  await leader.kill();
  assert.ok(held.clientGone || leader.child.signalCode === 'SIGKILL');
  return { s, follower, held, leaderEpoch: led.instance.epoch ?? 0, killedAt };
}

export async function assertRanOnce(s: Scenario, jobId: string): Promise<void> {
  // One run planned the job (a repeat would plan it again, under its own start id).
  const planned = s.events('job.planned', jobId);
  assert.equal(new Set(planned.map((e) => e.startId)).size, 1, JSON.stringify(planned));
  const final = await s.resultsBlob(`jobs/${jobId}/final.json`);
  assert.ok(final !== undefined, 'the job recorded its outcome');
}
