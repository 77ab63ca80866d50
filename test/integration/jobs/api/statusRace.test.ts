/**
 * A job accepted with 202 is never "not found" (JobStatusReader.current reads in the lifecycle's order),
 * on the development host over Azurite: a status read of a just-accepted job is held in a storage
 * proxy at its read of the pending record while the leader's pass starts the job (start record,
 * Durable start); released, the read finds the pending record still there (it stays once the job
 * is started: the start record, read next, speaks for the job), and the status answers 200. When
 * the intake deleted the pending record at the start and the reads went Durable, start record,
 * pending record, the same hold answered 404 JOB_NOT_FOUND.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { appRoot } from '../../../../shared/app/appRoot';
import { type JobView } from '../../../../shared/jobs/api/jobViews';
import { jobCoordinationPass } from '../../../../shared/jobs/intake/jobCoordinationPass';
import { type StorageProxy } from '../../../support/storageProxy';
import { eventually, type JobsHost, startProxiedJobsHost } from '../support/jobsHost';

describe('an accepted job is never "not found" (status reads in the lifecycle\'s order; development host, Azurite)', () => {
  let h: JobsHost;
  let proxy: StorageProxy;
  let stop: () => Promise<void> = () => Promise.resolve();

  before(async () => {
    ({ h, proxy, stop } = await startProxiedJobsHost('statusrace'));
  });
  after(() => stop());

  it('answers 200 for a job whose start happens while its status is being read', async () => {
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'raced', workType: 'sum', items: [1, 2, 3, 4] }));
    assert.equal(posted.status, 202, posted.text);
    const pending = await h.request('GET', '/api/jobs/raced');
    assert.equal((pending.json as JobView).status, 'pending');

    // The next read of the pending record (the status read's) waits in the proxy.
    const isRecordRead = (r: { method: string; path: string }): boolean => r.method === 'GET' && r.path.endsWith('/records/raced.json');
    const hold = proxy.hold(isRecordRead);
    const reading = h.request('GET', '/api/jobs/raced');
    const held = await hold.within(15_000, 'the status read to read the pending record');

    // Meanwhile the leader starts the job: start record, Durable start.
    const controller = new AbortController();
    const pass = jobCoordinationPass(appRoot().jobs, () => h.client);
    const report = await pass({ epoch: 7, holder: 'race-leader', signal: controller.signal, progress: () => undefined });
    assert.equal(report?.started, 1, JSON.stringify(report));
    const created = (r: { method: string; path: string; status?: number }): boolean =>
      r.method === 'PUT' && r.path.endsWith('/jobs/raced/start.json') && r.status === 201;
    assert.ok(proxy.requests().some(created), 'the start record was created while the status read was held');

    assert.equal(await held.release(), 200, 'the held read found the pending record: it stays once the job is started');
    assert.ok(!proxy.requests().some((r) => r.method === 'DELETE' && r.path.endsWith('/records/raced.json')), 'nothing deleted the pending record');
    const answer = await reading;
    assert.equal(answer.status, 200, `an accepted job answered ${answer.status}: ${answer.text}`);
    assert.ok(['pending', 'running', 'completed'].includes((answer.json as JobView).status), answer.text);

    const done = await eventually(
      async () => {
        const view = (await h.request('GET', '/api/jobs/raced')).json as JobView;
        return view.status === 'completed' ? view : undefined;
      },
      60_000,
      'the job to complete',
    );
    assert.deepEqual(done.result, { count: 4, sum: 10, min: 1, max: 4 });
  });
});
