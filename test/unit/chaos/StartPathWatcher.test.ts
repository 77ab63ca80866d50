/** Following a leader through the storage requests of one job start, and firing a fault at the asked step. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { partitionOf } from 'devhost/testing';

import { type ProcessRef, type StartStep } from '../../chaos/ChaosRecord';
import { type ServiceName, StartPathWatcher, stepNeedsBody } from '../../chaos/StartPathWatcher';
import { controlQueueIndex } from '../../e2e/support/durableRequests';
import { type ProxiedRequest } from '../../support/tcpProxy';

const names = { taskHub: 'ChaosHub', resultsContainer: 'job-results', jobsQueue: 'jobs' };
const leader: ProcessRef = { instance: 'instance-1', gen: 1, pid: 11, holder: 'instance-1.g1' };

/** The control queue the devhost's Durable backend puts job `id`'s messages on (4 partitions). */
function controlOf(id: string): string {
  return `chaoshub-control-${String(partitionOf(`job-${id}`, 4)).padStart(2, '0')}`;
}

/** The requests of one intake start of job `id`, as the devhost's Durable backend makes them (start message, then instance). */
function startRequests(id: string): ProxiedRequest[] {
  const at = Date.now();
  return [
    { method: 'GET', path: `/devstoreaccount1/chaoshub-instances/job-${id}`, headers: {}, at },
    { method: 'GET', path: `/devstoreaccount1/job-results/records/${id}.json`, headers: {}, at },
    { method: 'GET', path: `/devstoreaccount1/chaoshub-instances/job-${id}`, headers: {}, at },
    { method: 'POST', path: `/devstoreaccount1/${controlOf(id)}/messages?visibilitytimeout=0`, headers: {}, at },
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

  it("fires at its job's own start message while the same process starts other jobs and reads their status", () => {
    // Two jobs on different partitions, so a start message can be told apart by its queue.
    const ids = ['f5', 'j12', 'j13', 'j14', 'j15', 'j16'];
    const other = ids.find((id) => id !== 'f5' && controlOf(id) !== controlOf('f5'));
    assert.ok(other !== undefined);
    const f5 = startRequests('f5');
    const j = startRequests(other);
    // A status request for a third job reads its record, then its instance, like a start does.
    const status = startRequests('j99').slice(1, 3);
    for (const step of ['start-message', 'queue-delete'] as const) {
      const watcher = new StartPathWatcher(names);
      const fired: string[] = [];
      watcher.arm({ faultId: 'F5', jobId: 'f5', step, fire: () => (fired.push(step), 'drop') });
      // f5 reads, then the other job and the status request read, then the other job's message and
      // an unrelated one on the other job's partition go out before f5's own.
      const interleaved = [f5[0], f5[1], j[0], j[1], f5[2], j[2], ...status, j[3], j[3], f5[3], f5[4], j[4], j[5], f5[5]];
      const verdicts = interleaved.map((r) => watcher.onRequest(leader, r as ProxiedRequest));
      assert.deepEqual(fired, [step]);
      // The drop lands on f5's own start message, or on the first jobs-queue delete after its instance
      // write (a delete does not name its job: first come, first matched).
      const dropAt = verdicts.indexOf('drop');
      assert.equal(interleaved[dropAt], step === 'start-message' ? f5[3] : j[5], step);
    }
  });

  describe("on the extensions host (the Azure Storage provider's task hub)", () => {
    const extNames = { ...names, host: 'extensions' as const };
    const xml = (json: string): string => `<QueueMessage><MessageText>${json.replace(/"/g, '&quot;')}</MessageText></QueueMessage>`;
    const control = (id: string): string =>
      `/devstoreaccount1/chaoshub-control-${String(controlQueueIndex(`job-${id}`)).padStart(2, '0')}/messages`;
    const event = (type: string, id: string): string =>
      xml(
        `{"TaskMessage":{"Event":{"$type":"DurableTask.Core.History.${type}, DurableTask.Core"},` +
          `"OrchestrationInstance":{"InstanceId":"job-${id}","ExecutionId":"e1"}}}`,
      );
    type Sent = [ServiceName, ProxiedRequest];
    /** One start of job `id` as the provider makes it (as durableRequests.ts describes it), bodies as the proxy holds them. */
    function extStartRequests(id: string): Sent[] {
      const at = Date.now();
      const rowFilter = encodeURIComponent(`PartitionKey eq 'job-${id}' and RowKey eq ''`);
      const row = Buffer.from(JSON.stringify({ PartitionKey: `job-${id}`, RowKey: '', RuntimeStatus: 'Pending' }));
      const instances = '/devstoreaccount1/ChaosHubInstances';
      const started = Buffer.from(event('ExecutionStartedEvent', id));
      return [
        ['table', { method: 'GET', path: `${instances}()?$filter=${rowFilter}`, headers: {}, at }],
        ['blob', { method: 'GET', path: `/devstoreaccount1/job-results/records/${id}.json`, headers: {}, at }],
        ['table', { method: 'GET', path: `${instances}()?$filter=${rowFilter}&$select=PartitionKey,RuntimeStatus`, headers: {}, at }],
        ['queue', { method: 'POST', path: `${control(id)}?messagettl=-1`, headers: {}, body: started, at }],
        ['table', { method: 'POST', path: instances, headers: {}, body: row, at }],
        ['queue', { method: 'DELETE', path: '/devstoreaccount1/jobs/messages/abc?popreceipt=x', headers: {}, at }],
      ];
    }

    it('fires at each step of the start of its job, by the end-to-end tests\' predicates of that layout', () => {
      const steps: StartStep[] = ['status-read', 'record-read', 'start-read', 'start-message', 'instance-write', 'queue-delete'];
      steps.forEach((step, index) => {
        const watcher = new StartPathWatcher(extNames);
        const fired: number[] = [];
        watcher.arm({ faultId: 'F1', jobId: 'j1', step, fire: () => (fired.push(index), 'drop') });
        const other = extStartRequests('j2').map(([service, r]) => watcher.onRequest(leader, r, service));
        assert.ok(other.every((v) => v === 'forward'), 'another job never fires it');
        const verdicts = extStartRequests('j1').map(([service, r]) => watcher.onRequest(leader, r, service));
        assert.deepEqual(fired, [index], step);
        assert.equal(verdicts[index], 'drop', step);
      });
    });

    it("records the Instances row's insert as the create-once write, and takes no other message as the start's", () => {
      const watcher = new StartPathWatcher(extNames);
      const fired: string[] = [];
      watcher.arm({ faultId: 'F5', jobId: 'j1', step: 'start-message', fire: () => (fired.push('start-message'), 'drop') });
      const start = extStartRequests('j1');
      // Between its start read and its start message the same process sends another event of the
      // same instance's partition (an activity's result), and the development host's blob layout means nothing here.
      const result = Buffer.from(event('TaskCompletedEvent', 'j1'));
      const completed: Sent = ['queue', { method: 'POST', path: control('j1'), headers: {}, body: result, at: 0 }];
      const blobPath = '/devstoreaccount1/chaoshub-instances/job-j1';
      const devhostWrite: Sent = ['blob', { method: 'PUT', path: blobPath, headers: { 'if-none-match': '*' }, at: 0 }];
      const sequence = [...start.slice(0, 3), completed, devhostWrite, ...start.slice(3)];
      const verdicts = sequence.map(([service, r]) => watcher.onRequest(leader, r, service));
      assert.deepEqual(fired, ['start-message']);
      assert.equal(verdicts.indexOf('drop'), 5, 'the ExecutionStarted message, not the activity result');
      const insert = start[4]?.[1] as ProxiedRequest;
      watcher.onResponse({ request: insert, status: 204, at: 5 });
      assert.deepEqual(
        watcher.writes.map((w) => [w.kind, w.jobId, w.status]),
        [['instance-create', 'j1', 204]],
      );
    });

    it('asks the proxy for the bodies it reads: control-queue messages and Instances inserts, nothing on the development host', () => {
      const start = '/devstoreaccount1/chaoshub-control-03/messages?messagettl=-1';
      assert.equal(stepNeedsBody(extNames, 'queue', { method: 'POST', path: start }), true);
      assert.equal(stepNeedsBody(extNames, 'table', { method: 'POST', path: '/devstoreaccount1/ChaosHubInstances' }), true);
      assert.equal(stepNeedsBody(extNames, 'queue', { method: 'POST', path: '/devstoreaccount1/chaoshub-workitems/messages' }), false);
      assert.equal(stepNeedsBody(extNames, 'table', { method: 'POST', path: '/devstoreaccount1/$batch' }), false);
      assert.equal(stepNeedsBody(names, 'queue', { method: 'POST', path: '/devstoreaccount1/chaoshub-control-03/messages' }), false);
    });
  });
});
