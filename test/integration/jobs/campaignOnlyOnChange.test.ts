/**
 * Which jobs routes make an instance campaign for the lease (functions/jobsApi.ts, AppRoot.offer): the
 * routes that change something hand their Durable client over and start the elector; reading routes
 * never do, so polling a job's status cannot turn an instance into a contender. The host loads the
 * jobs API and the health route (which builds the runtime) and no timer, so nothing else campaigns.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { appRoot } from '../../../shared/app/appRoot';
import { eventually, type JobsHost, startJobsHost } from './support/jobsHost';

describe('only the jobs routes that change something make the instance campaign (development host, Azurite)', () => {
  let h: JobsHost;

  before(async () => {
    h = await startJobsHost('campaign', ['jobsApi', 'health']);
  });
  after(async () => {
    // No timer function here registers the app-terminate hook that stops the runtime: stop it first.
    await appRoot().stop();
    await h.stop();
  });

  it('GETs leave the elector idle; a POST starts it, and the instance then leads', async () => {
    const { runtime } = appRoot().leader();
    assert.equal(runtime.elector.state, 'idle');
    for (const path of ['/api/jobs', '/api/jobs?status=pending', '/api/jobs/not-there', '/api/jobs/not-there/submission', '/api/health']) {
      const res = await h.request('GET', path);
      assert.ok(res.status === 200 || res.status === 404, `${path}: ${res.status} ${res.text}`);
    }
    // An offer starts the elector synchronously, within the request; a pause only makes a late start visible too.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(runtime.elector.state, 'idle', 'no GET started a campaign');
    assert.equal(runtime.counters().acquired, 0);

    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ workType: 'noop', items: [1] }));
    assert.equal(posted.status, 202, posted.text);
    assert.notEqual(runtime.elector.state, 'idle', 'the submission handed its client over and the elector started');
    await eventually(() => Promise.resolve(runtime.state().role === 'leader' ? true : undefined), 30_000, 'this instance to lead');
  });
});
