/** Following a leader through the storage requests of one job start, and firing a fault at the asked step. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ProcessRef, type StartStep } from '../../chaos/ChaosRecord';
import { StartPathWatcher } from '../../chaos/StartPathWatcher';
import { type ProxiedRequest } from '../../support/tcpProxy';

const names = { taskHub: 'ChaosHub', resultsContainer: 'job-results', jobsQueue: 'jobs' };
const leader: ProcessRef = { instance: 'instance-1', gen: 1, pid: 11, holder: 'instance-1.g1' };

/** The requests of one intake start of job `id`, as the devhost's Durable backend makes them (start message, then instance). */
function startRequests(id: string): ProxiedRequest[] {
  const at = Date.now();
  return [
    { method: 'GET', path: `/devstoreaccount1/chaoshub-instances/job-${id}`, headers: {}, at },
    { method: 'GET', path: `/devstoreaccount1/job-results/records/${id}.json`, headers: {}, at },
    { method: 'GET', path: `/devstoreaccount1/chaoshub-instances/job-${id}`, headers: {}, at },
    { method: 'POST', path: '/devstoreaccount1/chaoshub-control-00/messages?visibilitytimeout=0', headers: {}, at },
    { method: 'PUT', path: `/devstoreaccount1/chaoshub-instances/job-${id}`, headers: { 'if-none-match': '*' }, at },
    { method: 'DELETE', path: '/devstoreaccount1/jobs/messages/abc?popreceipt=x', headers: {}, at },
  ];
}

describe('start path watcher', () => {
  it('fires at each step of the start of its job, and only of its job', () => {
    const steps: StartStep[] = ['status-read', 'record-read', 'start-read', 'start-message', 'instance-write', 'queue-delete'];
    steps.forEach((step, index) => {
      const watcher = new StartPathWatcher(names);
      const fired: number[] = [];
      watcher.arm({ faultId: 'F1', jobId: 'j1', step, fire: () => (fired.push(index), 'drop') });
      const other = startRequests('j2').map((r) => watcher.onRequest(leader, r));
      assert.ok(other.every((v) => v === 'forward'), 'another job never fires it');
      const verdicts = startRequests('j1').map((r) => watcher.onRequest(leader, r));
      assert.deepEqual(fired, [index], step);
      assert.equal(verdicts[index], 'drop', step);
      assert.equal(watcher.armed('j1'), false);
    });
  });

  it('records create-once writes with the status that answered them', () => {
    const watcher = new StartPathWatcher(names);
    const requests = startRequests('j1');
    for (const r of requests) watcher.onRequest(leader, r);
    watcher.onResponse({ request: requests[4] as ProxiedRequest, status: 201, at: 5 });
    assert.deepEqual(
      watcher.writes.map((w) => [w.kind, w.jobId, w.holder, w.status]),
      [['instance-create', 'j1', 'instance-1.g1', 201]],
    );
  });
});
