/**
 * A worker SIGKILLed while it holds chunks, on real host processes (the extensions host unless E2E_HOST=devhost) with the real app and
 * the project's own host.json (batchSize 16, the host's 10-minute receive visibility), against Azurite.
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
 * Whatever the batch size (workerKilledBatch.test.ts, a file of its own: the four cases took 157-180 s
 * of the runner's 180 s per file on the extensions host).
 * The tests print the time from the kill to completion (diagnostics, for the figures in docs/).
 */
import { describe, it } from 'node:test';

import { killWorkerAt, resultPut, survivorsJobId } from './support/killWorker';
import { proxiedScenarios } from './support/realApp';

describe('a worker killed while it holds chunks (shipped host.json)', () => {
  const scenarios = proxiedScenarios();

  it('after it claimed chunks: their heartbeats stop and they are sent again in about 20 s', async () => {
    const jobId = survivorsJobId('wk-claimed', 'wk-claimed-a', false);
    await killWorkerAt(() => scenarios.start(), jobId, resultPut(jobId), { claimed: true, runOwnedBy: 'survivor' });
  });

  it('after it received a batch, before claiming: the chunks nobody claimed are sent again in the same round', async () => {
    const jobId = survivorsJobId('wk-unclaimed', 'wk-unclaimed-a', false);
    await killWorkerAt(() => scenarios.start(), jobId, resultPut(jobId), { runOwnedBy: 'survivor' });
  });

  it('the leader, killed while it holds claimed chunks: the other instance leads and the job completes', async () => {
    const jobId = survivorsJobId('wk-leader', 'wk-leader', true);
    await killWorkerAt(() => scenarios.start(), jobId, resultPut(jobId), { victimLeads: true, claimed: true, runOwnedBy: 'survivor' });
  });
});
