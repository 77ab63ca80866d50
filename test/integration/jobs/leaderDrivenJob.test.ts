/**
 * The whole app on the development host, nothing called by hand: the leader timer wins the lease
 * and runs the coordination pass (shared/jobs/intake/jobCoordinationPass.ts), which starts the orchestrations;
 * the queue trigger works the chunks. A sum over 10,000 integers submitted by HTTP and one
 * submitted as a plain queue message both complete with the exact result.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { type JobView } from '../../../shared/jobs/api/jobViews';
import { encodeQueueMessage } from '../../../shared/jobs/messageCodec';
import { eventually, type JobsHost, startJobsHost } from './support/jobsHost';

describe('jobs run by the elected leader (whole app, development host, Azurite)', () => {
  let h: JobsHost;

  before(async () => {
    h = await startJobsHost('lead', ['*'], { LEADER_TIMER_SCHEDULE: '*/1 * * * * *', LEADER_PASS_INTERVAL_SECONDS: '1' });
  });
  after(async () => {
    await h.stop();
  });

  it('registers the leader timer with the configured schedule and a Durable client for the pass', () => {
    const timer = h.host.app.list().find((f) => f.name === 'leaderTimer');
    assert.equal(timer?.triggerType, 'timerTrigger');
    assert.equal(timer?.bindings[timer.triggerName]?.schedule, '*/1 * * * * *');
    assert.ok(Object.values(timer?.bindings ?? {}).some((b) => b.type === 'durableClient'));
  });

  it('completes a sum over 10,000 integers submitted by HTTP and one submitted by queue message, exactly', async () => {
    // Both lists fit a queue message inline (48 KiB of JSON).
    const items = Array.from({ length: 10_000 }, (_, i) => (i % 97) - 48 + (i === 7_777 ? 90_000 : 0));
    const expected = { count: 10_000, sum: items.reduce((a, b) => a + b, 0), min: Math.min(...items), max: Math.max(...items) };
    const httpItems = Array.from({ length: 10_000 }, (_, i) => (i * 13) % 100);
    const posted = await h.request('POST', '/api/jobs', JSON.stringify({ workType: 'sum', items: httpItems, options: { chunkSize: 250 } }));
    assert.equal(posted.status, 202, posted.text);
    const httpJob = (posted.json as { jobId: string }).jobId;
    await h.jobsQueue.createIfNotExists();
    await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'by-queue', workType: 'sum', items, options: { chunkSize: 1_000 } }));

    const done = async (jobId: string) =>
      eventually(
        async () => {
          const res = await h.request('GET', `/api/jobs/${jobId}`);
          const view = res.json as JobView;
          return res.status === 200 && !['pending', 'running'].includes(view.status) ? view : undefined;
        },
        120_000,
        `job ${jobId}`,
      );
    const [viaHttp, viaQueue] = await Promise.all([done(httpJob), done('by-queue')]);
    assert.equal(viaQueue.status, 'completed', JSON.stringify(viaQueue));
    assert.deepEqual(viaQueue.result, expected);
    assert.equal(viaHttp.status, 'completed', JSON.stringify(viaHttp));
    assert.deepEqual(viaHttp.result, {
      count: 10_000,
      sum: httpItems.reduce((a, b) => a + b, 0),
      min: Math.min(...httpItems),
      max: Math.max(...httpItems),
    });
    // Started by the elected leader: the epoch in the job is the lease's.
    const leader = await h.request('GET', '/api/leader');
    assert.equal(leader.status, 200, leader.text);
    const epoch = (leader.json as { epoch: number | null }).epoch;
    assert.ok(typeof epoch === 'number' && epoch >= 1, leader.text);
    assert.equal(viaQueue.epoch, epoch);
    assert.equal(viaHttp.epoch, epoch);
  });
});
