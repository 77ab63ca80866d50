/**
 * Shared runs on a real host process (the extensions host unless E2E_HOST=devhost) with the real app
 * and Azurite (shared/jobs/run/batchOrchestration.ts, intake/StartBatches.ts): a burst of small inline
 * jobs put on the jobs queue at once is started together, several jobs to one Durable instance
 * (`batch-<uuid>`, each job's start record naming it, at most 10 a run); every job completes exactly
 * through the status API and answers its submission; a purge of one job leaves its shared run for
 * the others (they still read completed), and the purge of the last of them takes the run with it.
 * (A job its plan does not finish going on alone needs a held work type in the app's process:
 * test/integration/jobs/run/sharedRuns.test.ts, on the development host in-process.)
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { eventually, type HostProcess } from 'devhost/testing';

import { e2eHostName } from './support/appHost';
import { createRealAppRoot, Scenario, sumOf } from './support/realApp';

/** At most this many jobs share one run (shared/jobs/intake/intakeTerms.ts INTAKE.jobsPerSharedRun). */
const JOBS_PER_SHARED_RUN = 10;

describe(`shared runs of small jobs, on the ${e2eHostName()}`, () => {
  let app: { dir: string; remove(): void } | undefined;
  let s: Scenario | undefined;
  let host: HostProcess | undefined;

  before(
    async () => {
      app = createRealAppRoot();
      s = new Scenario(app.dir);
      host = await s.start('shared-1');
      await s.leading(host);
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await s?.stopAll();
    app?.remove();
  });

  it('starts a queued burst together in shared runs, each job exact; a purge keeps the run for the others until the last goes', async () => {
    assert.ok(s !== undefined && host !== undefined);
    const jobs = Array.from({ length: 16 }, (_, i) => ({ jobId: `sh-${i}`, workType: 'sum', items: [i, i + 1, i + 2] }));
    const scenario = s;
    await scenario.jobsQueue().createIfNotExists();
    await Promise.all(jobs.map((job) => scenario.submitByQueue(job)));

    for (const job of jobs) {
      const view = await s.finished(host, job.jobId, 90_000);
      assert.equal(view.status, 'completed', JSON.stringify(view));
      assert.deepEqual(view.result, sumOf(job.items), job.jobId);
    }

    const instances = await Promise.all(
      jobs.map(async (job) => (JSON.parse((await s?.resultsBlob(`jobs/${job.jobId}/start.json`))?.text ?? '{}') as { instance?: string }).instance),
    );
    const sizes = new Map<string, number>();
    for (const instance of instances) if (instance !== undefined) sizes.set(instance, (sizes.get(instance) ?? 0) + 1);
    const largest = Math.max(0, ...sizes.values());
    assert.ok(largest >= 2, `a shared run holds several jobs: ${instances.join(', ')}`);
    assert.ok(largest <= JOBS_PER_SHARED_RUN, `and no more than ${JOBS_PER_SHARED_RUN}: ${instances.join(', ')}`);
    assert.ok([...sizes.keys()].every((i) => /^batch-[0-9a-f-]+$/.test(i)), `shared instances are batch-<uuid>: ${[...sizes.keys()].join(', ')}`);

    const [shared] = [...sizes.entries()].sort((a, b) => b[1] - a[1])[0] ?? [];
    assert.ok(shared !== undefined);
    const members = jobs.filter((_job, i) => instances[i] === shared);
    const first = members[0];
    assert.ok(first !== undefined);
    // A job of a shared run answers the submission it ran (it has no run of its own).
    const submission = await s.call(host, 'GET', `/api/jobs/${first.jobId}/submission`);
    assert.equal(submission.status, 200, JSON.stringify(submission.json));
    assert.deepEqual((submission.json as { items: number[] }).items, first.items);

    const purge = (jobId: string): Promise<unknown> =>
      eventually(
        async () => {
          const res = await s?.call(host as HostProcess, 'DELETE', `/api/jobs/${jobId}?purge=true`);
          return res?.status === 200 ? res : undefined;
        },
        60_000,
        `${jobId} to be purged`,
      );
    await purge(first.jobId);
    assert.equal((await s.call(host, 'GET', `/api/jobs/${first.jobId}`)).status, 404, 'a purged job is gone');
    assert.equal((await s.instance(host, shared))?.runtimeStatus, 'Completed', 'the shared run stays while other jobs of it do');
    for (const member of members.slice(1)) {
      const kept = await s.finished(host, member.jobId, 10_000);
      assert.deepEqual(kept.result, sumOf(member.items), member.jobId);
    }
    for (const member of members.slice(1)) await purge(member.jobId);
    assert.equal(await s.instance(host, shared), undefined, 'the shared run went with the last of its jobs');
  });
});
