/**
 * A start message whose send fails (the storage proxy refuses every send of it, whichever layer
 * retries), with no process killed: both Durable backends send the start message before they write
 * the Pending instance, so the failed start leaves no instance, and the same leader's next pass
 * starts the job again as a new start under the next instance id (never under an id another start
 * used: that one may still land). The job finishes exactly once with the exact result.
 * Every send is refused, not the first few: the development host's storage SDK gives up after 4
 * attempts, but on the extensions host the provider's .NET queue client sent it a fifth time 12.5 s
 * later (accepted, the start then landed under its own id and nothing was repaired).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { type ProxiedRequest, putMessageText } from '../support/storageProxy';
import { proxiedScenarios, type Scenario, sumOf } from './support/realApp';

describe('a start message that storage refuses', () => {
  const scenarios = proxiedScenarios();

  function isStartMessage(s: Scenario, r: ProxiedRequest, jobId: string): boolean {
    const text = putMessageText(r.body) ?? '';
    // camelCase from the development host's backend, PascalCase ("InstanceId") from the Azure Storage provider.
    return r.method === 'POST' && s.controlQueuePath().test(r.path) && text.toLowerCase().includes(`"instanceid":"job-${jobId}"`);
  }

  it('is started again by the same leader when sending its start message failed', async (t) => {
    const jobId = 'start-message-lost';
    const items = Array.from({ length: 25 }, (_, i) => 3 * i + 1);
    const { s, proxy } = await scenarios.start();
    const leader = await s.start('lost-a', proxy.connectionString);
    await s.leading(leader);
    // Every send of this instance's start message fails: the backend gives up before writing the
    // instance, and the leader's start call fails (or times out while a retry layer keeps trying).
    let refused = 0;
    const refusal = proxy.refuse((r) => isStartMessage(s, r, jobId) && ++refused > 0);
    await s.submitByQueue({ jobId, workType: 'sum', items, options: { chunkSize: 5 } });
    const done = await s.finished(leader, jobId, 150_000);
    refusal.remove();
    assert.ok(refused >= 1, 'the start message was refused');
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    const planned = s.events('job.planned', jobId);
    assert.equal(new Set(planned.map((e) => e.startId)).size, 1, JSON.stringify(planned));
    assert.ok((await s.resultsBlob(`jobs/${jobId}/final.json`)) !== undefined, 'the job recorded its outcome');
    // The job shows its recorded outcome as soon as it is written; its run finishes a Durable hop later.
    const started = s.events('intake.start_repaired', jobId).map((e) => e.instanceId);
    assert.ok(started.length >= 1, 'the start was repaired');
    const working = String(started.at(-1));
    assert.match(working, new RegExp(`^job-${jobId}\\.\\d+$`), 'repaired under a later instance id');
    await eventually(async () => ((await s.instance(leader, working))?.runtimeStatus === 'Completed' ? true : undefined), 10_000, 'the run to complete');
    const firstRefusal = proxy.requests().find((r) => isStartMessage(s, r, jobId));
    t.diagnostic(`completed ${Date.now() - (firstRefusal?.at ?? NaN)} ms after its first start message was refused`);
  });
});
