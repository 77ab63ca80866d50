/**
 * A deployment that lost its job activities (every function file but functions/jobActivities.js:
 * test/e2e/fixtures/lostActivitiesApp.ts), on both hosts in one run whatever E2E_HOST says. On its
 * own the real Durable extension would leave such a job's instance `Running` for ever (the
 * out-of-process shim drops a call of an activity that does not exist; durableDifferential.test.ts
 * holds that difference), while the development host fails it. The app decides instead
 * (shared/jobs/run/registeredActivities.ts): on both hosts the job fails at once with
 * `ACTIVITY_MISSING` naming the activity, and its Durable instance is `Failed`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import { type HostProcess } from 'devhost/testing';

import { BOTH_HOSTS, e2eHostName } from './support/appHost';
import { createRealAppRoot, Scenario } from './support/realApp';

for (const host of BOTH_HOSTS) {
  describe(`a job on a deployment without its activities, on the ${e2eHostName(host)}`, () => {
    let app: { dir: string; remove(): void } | undefined;
    let s: Scenario | undefined;
    let instance: HostProcess | undefined;

    before(
      async () => {
        app = createRealAppRoot({}, 'app/test/e2e/fixtures/lostActivitiesApp.js');
        s = new Scenario(app.dir, host);
        instance = await s.start(`lost-${host}`);
        await s.leading(instance);
      },
      { timeout: 180_000 },
    );
    after(async () => {
      await s?.stopAll();
      app?.remove();
    });

    it('fails with ACTIVITY_MISSING naming the activity, and its instance is Failed, instead of staying Running', async () => {
      assert.ok(s !== undefined && instance !== undefined);
      const jobId = `lost-${randomBytes(4).toString('hex')}`;
      await s.submitByHttp(instance, { jobId, workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } });
      const view = await s.finished(instance, jobId, 60_000);
      assert.equal(view.status, 'failed', JSON.stringify(view));
      assert.equal(view.error?.code, 'ACTIVITY_MISSING', JSON.stringify(view));
      assert.match(view.error?.message ?? '', /'jobPlan'/);
      assert.match(view.error?.message ?? '', /jobActivities/);
      // The run the job's start names (its own, or a shared one) failed: nothing is left waiting.
      const failed = await s.instance(instance, `job-${jobId}`);
      assert.equal(failed?.runtimeStatus, 'Failed', JSON.stringify(failed));
    });
  });
}
