/**
 * Shared runs end to end (run/batchOrchestration.ts, intake/StartBatches.ts) on the development host
 * against Azurite: small jobs the leader's intake starts together share one Durable instance, each
 * with its own start; each completes exactly and answers its status and its submission; a job its
 * plan does not finish goes on alone as its own run; a job purged takes its shared run's history
 * with it once the last of its jobs goes, the other jobs showing from it until then.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { appRoot } from '../../../../shared/app/appRoot';
import { type JobView } from '../../../../shared/jobs/api/jobViews';
import { INTAKE } from '../../../../shared/jobs/intake/intakeTerms';
import { instanceIdFor, isBatchInstanceId } from '../../../../shared/jobs/jobIds';
import { encodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { eventually, type JobsHost, startJobsHost } from '../support/jobsHost';
import { expectedSum, jobsScenario, registerHeldWorkType } from '../support/jobsScenario';

describe('shared runs: small jobs started together share one Durable instance (development host, Azurite)', () => {
  let h: JobsHost;
  const { passUntilQueueEmpty, finished } = jobsScenario(() => h);

  before(async () => {
    // A window of 2 chunks: the held job's 6 chunks cannot all go out with its plan.
    h = await startJobsHost('shared', undefined, { JOB_DISPATCH_WINDOW: '2' });
    await h.jobsQueue.createIfNotExists();
  });
  after(async () => {
    await h.stop();
  });

  it('a burst of small jobs runs in shared runs, each exact; one its plan does not finish goes on alone; a purge leaves the others readable', async () => {
    const release = registerHeldWorkType('shared-held');
    const small = Array.from({ length: 12 }, (_, i) => ({ jobId: `s-${i}`, workType: 'sum', items: [i, i + 1, i + 2] }));
    const held = { jobId: 'held-1', workType: 'shared-held', items: [1, 2, 3, 4, 5, 6], options: { chunkSize: 1 } };
    await Promise.all([...small, held].map((m) => h.jobsQueue.sendMessage(encodeQueueMessage(m))));
    await passUntilQueueEmpty();

    const store = appRoot().jobs.store;
    const instances = await Promise.all([...small, held].map(async (j) => (await store.readStart(j.jobId))?.value.instance));
    assert.ok(instances.every((i) => i !== undefined && isBatchInstanceId(i)), `every start names a shared run: ${instances.join(', ')}`);
    const sizes = new Map<string, number>();
    for (const i of instances) if (i !== undefined) sizes.set(i, (sizes.get(i) ?? 0) + 1);
    assert.ok(Math.max(...sizes.values()) >= 2, 'a shared run holds several jobs');
    assert.ok(Math.max(...sizes.values()) <= INTAKE.jobsPerSharedRun, 'and no more than jobsPerSharedRun');

    for (const job of small) {
      const view = await finished(job.jobId);
      assert.equal(view.status, 'completed', job.jobId);
      assert.deepEqual(view.result, expectedSum(job.items), job.jobId);
    }

    // The held job's plan answered with its chunks still out: its own run goes on from that ledger.
    const alone = await eventually(
      async () => {
        const status = await h.client.getStatus(instanceIdFor('held-1')).catch(() => undefined);
        return (status?.customStatus as { phase?: string } | null | undefined)?.phase === 'running' ? status : undefined;
      },
      30_000,
      'the held job to go on alone',
    );
    assert.equal(alone.runtimeStatus, 'Running');
    const running = (await h.request('GET', '/api/jobs/held-1')).json as JobView;
    assert.equal(running.status, 'running');
    // Its status is its own run's (the shared run's custom status has no progress, and its last update stays put).
    assert.equal(running.phase, 'running');
    assert.equal(running.progress?.chunks.total, 6, JSON.stringify(running));
    assert.ok((running.updatedAt ?? '') >= alone.lastUpdatedTime.toISOString(), `${String(running.updatedAt)} is its own run's last update or later`);
    release();
    const done = await finished('held-1');
    assert.equal(done.status, 'completed');
    assert.deepEqual(done.result, { n: 21 });

    // A job of a shared run answers the submission it ran (from its start record: it has no run of its own).
    const submission = await h.request('GET', '/api/jobs/s-0/submission');
    assert.equal(submission.status, 200, submission.text);
    assert.deepEqual((submission.json as { items: number[] }).items, [0, 1, 2]);

    // A purge takes the job; its shared run stays for its other jobs (what shows them), and goes with the last of them.
    const shared = instances[0] ?? '';
    const members = small.filter((_job, i) => instances[i] === shared);
    assert.ok(members.length >= 2, 's-0 shares its run with another job');
    const purge = (jobId: string): Promise<unknown> =>
      eventually(
        async () => {
          const res = await h.request('DELETE', `/api/jobs/${jobId}?purge=true`);
          return res.status === 200 ? res : undefined;
        },
        60_000,
        `${jobId} to be purged`,
      );
    await purge('s-0');
    assert.equal((await h.request('GET', '/api/jobs/s-0')).status, 404);
    const sibling = members[1];
    assert.ok(sibling !== undefined);
    assert.equal((await h.client.getStatus(shared)).runtimeStatus, 'Completed', 'the shared run stays while other jobs of it do');
    const kept = await finished(sibling.jobId);
    assert.equal(kept.status, 'completed');
    assert.deepEqual(kept.result, expectedSum(sibling.items));
    for (const member of members.slice(1)) await purge(member.jobId);
    assert.equal((await h.client.getStatus(shared).catch(() => undefined))?.runtimeStatus, undefined, 'gone with the last of its jobs');
  });
});
