/**
 * A worker SIGKILLed while it holds chunks, on real development host processes with the real app and
 * the project's own host.json (batchSize 8, the host's 10-minute receive visibility), against Azurite.
 * The victim reaches storage through a proxy that holds its request at the chosen step, and dies
 * while it is held:
 * - after claiming, before writing a result: its claims go silent and the chunks are sent again (the
 *   victim's result write is held until it has claimed the chunk: a worker claims after 2 s on it);
 * - after receiving a batch, before claiming any of it: nobody claimed those chunks, later sends
 *   were claimed or finished by the other instance, and they are sent again in the same round.
 * - the same with the leader as the victim. When the leader dies during the job's plan (it waits a few
 *   seconds for the first results), the plan's activity comes back 20 s later on the survivor, now
 *   under a newer lease epoch: the start already staged its input, so the plan goes on rather than
 *   standing the run down for a restart (which used to cost a whole new plan: 52 s in a loaded run).
 * Either way the job completes exactly (every item counted once) within L + 30 s of the kill
 * (L = 15 s, the lease), where before it waited for the queue's 10 minutes or the 300 s deadline.
 * Whatever the batch size: recovery is per chunk, so a worker that took more messages at once than
 * the shipped batch allows (host.json batchSize 32) and died before finishing any of 64 chunks costs
 * the same bound.
 * The tests print the time from the kill to completion (diagnostics, for the figures in docs/).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ProxiedRequest, startStorageProxy } from '../support/storageProxy';
import { assertRedoneBySurvivor, type Killed, killWorkerAt } from './support/killWorker';
import { proxiedScenarios, type Scenario } from './support/realApp';

const resultPut = (jobId: string) => (s: Scenario, r: ProxiedRequest): boolean =>
  r.method === 'PUT' && r.path.includes(`/${s.names.results}/jobs/${jobId}/results/`);

describe('a worker killed while it holds chunks (shipped host.json)', () => {
  const scenarios = proxiedScenarios();

  it('after it claimed chunks: their heartbeats stop and they are sent again in about 20 s', async () => {
    await killWorkerAt(() => scenarios.start(), 'wk-claimed', resultPut('wk-claimed'), { claimed: true });
  });

  it('after it received a batch, before claiming: the chunks nobody claimed are sent again in the same round', async () => {
    await killWorkerAt(() => scenarios.start(), 'wk-unclaimed', resultPut('wk-unclaimed'));
  });

  it('the leader, killed while it holds claimed chunks: the other instance leads and the job completes', async () => {
    await killWorkerAt(() => scenarios.start(), 'wk-leader', resultPut('wk-leader'), { victimLeads: true, claimed: true });
  });
});

describe('a worker killed holding more chunks than the shipped batch allows (host.json queues.batchSize 32)', () => {
  const scenarios = proxiedScenarios({ batchSize: 32, newBatchThreshold: 16 });
  // With the shipped batchSize 8 and newBatchThreshold 4 an instance has at most 12 messages (48
  // chunks) at once: holding 64 result writes is only reachable with the larger batch.
  const HELD = 64;

  it(`after it received its batches, before finishing any of ${HELD} chunks: every one is sent again and the job completes within the bound`, async () => {
    const jobId = 'wk-batch32';
    const resultOf = resultPut(jobId);
    const started = await scenarios.start();
    // The victim starts second; on a loaded machine the other instance (batch 32 too: 192 chunks at
    // once) drained all 400 chunks before the victim had received 64. So the survivor's receives on the
    // work-item queue are refused (it logs and polls again) until the victim holds 63 result writes.
    const survivorProxy = await startStorageProxy(started.s.conn);
    const workItems = `/${started.s.names.workItems}/messages`;
    const offWork = survivorProxy.refuse((r) => r.service === 'queue' && r.method === 'GET' && r.path.endsWith(workItems));
    // The victim's first HELD - 1 result writes are held too (killWorkerAt holds the next one).
    const holds = Array.from({ length: HELD - 1 }, () => started.proxy.hold((r) => resultOf(started.s, r)));
    void Promise.all(holds.map((h) => h.held)).finally(() => offWork.remove());
    let killed: Killed;
    try {
      killed = await killWorkerAt(() => Promise.resolve(started), jobId, resultOf, { survivorConnection: survivorProxy.connectionString });
    } finally {
      offWork.remove();
      for (const h of holds) h.cancel();
      await survivorProxy.close();
    }
    // Every held write was a different chunk, and each of them was written again by the survivor.
    const heldChunks = await Promise.all(holds.map(async (h) => /\/results\/(\d{5})/.exec((await h.held).request.path)?.[1] ?? '(no chunk number)'));
    assert.equal(new Set(heldChunks).size, HELD - 1);
    for (const chunk of heldChunks) await assertRedoneBySurvivor(killed, jobId, chunk);
  });
});
