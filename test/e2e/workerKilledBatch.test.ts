/**
 * A worker SIGKILLed while it holds 64 chunks taken with a larger batch than shipped (host.json
 * queues.batchSize 32, shipped 16), on real host processes with the real app, against Azurite (the other cases: workerKilled.test.ts).
 * Recovery is per chunk, so a worker that took more messages at once and died before finishing any of
 * 64 chunks costs the same bound as one that held a few: every chunk is sent again and written by the
 * survivor, and the job completes exactly within L + 30 s of the kill.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { startStorageProxy } from '../support/storageProxy';
import { assertRedoneBySurvivor, type Killed, killWorkerAt, resultPut, survivorsJobId } from './support/killWorker';
import { proxiedScenarios } from './support/realApp';

describe('a worker killed holding 64 chunks taken with a larger batch than shipped (host.json queues.batchSize 32)', () => {
  const scenarios = proxiedScenarios({ batchSize: 32, newBatchThreshold: 16 });
  // With the shipped batchSize 16 and newBatchThreshold 8 an instance has at most 24 messages (96
  // chunks) at once; the larger batch lets the victim hold 64 result writes with room to spare.
  const HELD = 64;

  it(`after it received its batches, before finishing any of ${HELD} chunks: every one is sent again and the job completes within the bound`, async () => {
    const jobId = survivorsJobId('wk-batch32', 'wk-batch32-a', false);
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
      killed = await killWorkerAt(() => Promise.resolve(started), jobId, resultOf, {
        survivorConnection: survivorProxy.connectionString,
        runOwnedBy: 'survivor',
      });
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
