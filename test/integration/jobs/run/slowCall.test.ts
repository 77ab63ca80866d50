/**
 * A slow live call is never called again (CallClaims, StalledJobs), on the development host's real
 * Durable backend over Azurite: a job's plan is held (the download of its items blob waits in a
 * storage proxy) for longer than its 15 s call lease, while the leader's stall check runs on a clock
 * held minutes ahead, so the run looks stalled at every check. The plan holds the job's call lease,
 * renewed past its 15 s; no check asks the run to resume; resumes raised by hand (as a stall check
 * of a leader that could not read the lease would) call the plan again, and those repeats wait for
 * the live call instead of running beside it. Released, the job completes exactly with one plan
 * having read the input.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { appRoot } from '../../../../shared/app/appRoot';
import { type JobView } from '../../../../shared/jobs/api/jobViews';
import { instanceIdFor } from '../../../../shared/jobs/jobIds';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { initialState } from '../../../../shared/jobs/run/jobOrchestration';
import { durableOrchestrationClient } from '../../../../shared/jobs/run/OrchestrationClient';
import { STALL_CHECK, StalledJobs } from '../../../../shared/jobs/run/StalledJobs';
import { memoryLogger } from '../../../../shared/observability/log';
import { azuriteConnectionString, uniqueName } from '../../../support/env';
import { type StorageProxy } from '../../../support/storageProxy';
import { eventually, type JobsHost, startProxiedJobsHost } from '../support/jobsHost';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('a slow live call is not called again (call lease, stall check; development host, Azurite)', () => {
  let h: JobsHost;
  let proxy: StorageProxy;
  let stop: () => Promise<void> = () => Promise.resolve();

  before(async () => {
    ({ h, proxy, stop } = await startProxiedJobsHost('slowcall'));
  });
  after(() => stop());

  it('holds the call lease through a plan that outlasts several stall periods; no resume, repeats wait, one plan reads the input', async () => {
    const inputs = BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient(uniqueName('e2e-inputs'));
    await inputs.createIfNotExists();
    const items = Array.from({ length: 40 }, (_, i) => i + 1);
    const text = JSON.stringify(items);
    await inputs.getBlockBlobClient('slow.json').upload(text, text.length);
    const isInputRead = (r: { method: string; path: string; query: URLSearchParams }): boolean =>
      r.method === 'GET' && r.path.endsWith(`/${inputs.containerName}/slow.json`) && !r.query.has('comp');
    const hold = proxy.hold(isInputRead);

    const run: JobRun = {
      jobId: 'slow-plan',
      workType: 'sum',
      fingerprint: 's'.repeat(64),
      options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300 },
      source: { kind: 'blob', container: inputs.containerName, blob: 'slow.json' },
      epoch: 41,
      holder: 'e2e',
      submittedAt: new Date().toISOString(),
      via: 'queue',
      startId: 'slow-plan-start',
    };
    const instanceId = instanceIdFor(run.jobId);
    await h.client.startNew('jobOrchestrator', { instanceId, input: initialState(run) });
    const held = await hold.within(30_000, 'the plan to read its items blob');
    const calls = appRoot().jobs.calls;
    await eventually(async () => ((await calls.held(run.jobId)) ? true : undefined), 15_000, 'the plan to take the call lease');

    // The leader's stall check on a clock held ahead: the run is minutes silent at every check.
    const clock = { now: Date.now() };
    const logger = memoryLogger('stall-check', 'debug');
    const stalls = new StalledJobs({ logger, now: () => clock.now, callHeld: (jobId) => calls.held(jobId) });
    const orchestrations = durableOrchestrationClient(h.client);
    const leaseHeldFrom = Date.now();
    for (let check = 1; check <= 4; check++) {
      clock.now = Date.now() + check * 4 * STALL_CHECK.stalledAfterMs;
      const raised = (await stalls.check(orchestrations, 41)).filter((r) => r.jobId === run.jobId);
      assert.deepEqual(raised, [], `check ${check}: the run's call is alive (it holds the lease)`);
      // Real time passes too: the lease (15 s) must be renewed to last through the checks.
      await sleep(5_500);
    }
    assert.ok(Date.now() - leaseHeldFrom > 20_000, 'the hold outlasted the 15 s lease');
    // Each check examined the run and found its call alive (not merely left it out).
    const alive = logger.lines.filter((l) => l.event === 'job.call_alive' && l.jobId === run.jobId).length;
    assert.equal(alive, 4, `${alive} of 4 checks found the call alive`);
    assert.equal(await calls.held(run.jobId), true, 'still held: renewed while the plan runs');
    const silent = await h.client.getStatus(instanceId);
    assert.equal((silent.customStatus as { phase?: string } | null)?.phase, 'planning');

    // Resumes regardless (a stall check that could not read the lease): the plan is called again, twice.
    await orchestrations.raiseResume(instanceId, { generation: 1, wait: 1 });
    await eventually(async () => (((await h.client.getStatus(instanceId)).customStatus as { wait?: number } | null)?.wait === 2 ? true : undefined), 15_000, 'the run to call its plan again');
    await orchestrations.raiseResume(instanceId, { generation: 1, wait: 2 });
    const repeated = await eventually(async () => {
      const custom = (await h.client.getStatus(instanceId)).customStatus as { wait?: number; repeat?: number } | null;
      return custom?.wait === 3 ? custom : undefined;
    }, 15_000, 'the run to call its plan a third time');
    assert.equal(repeated.repeat, 2, 'the run says its current call is the second repeat');
    // The repeats are running, waiting for the lease: none of them reads the input beside the held plan.
    await sleep(3_000);
    assert.equal(proxy.requests().filter(isInputRead).length, 1, 'one read of the input while the first plan lives');

    await held.release();
    const view = await eventually(
      async () => {
        const res = await h.request('GET', `/api/jobs/${run.jobId}`);
        const v = res.json as JobView;
        return res.status === 200 && !['pending', 'running'].includes(v.status) ? v : undefined;
      },
      60_000,
      'the job to finish',
    );
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, { count: 40, sum: 820, min: 1, max: 40 });
    // The repeats found the input staged by the first plan: the input was read once in all.
    assert.equal(proxy.requests().filter(isInputRead).length, 1, 'the input was read once');
    // Given back when the call that recorded the outcome ends (the status shows the outcome as soon
    // as it is written, a moment before): within 5 s, well inside the lease's own 15 s.
    await eventually(async () => ((await calls.held(run.jobId)) ? undefined : true), 5_000, 'the lease to be given back');
  });
});
