/**
 * A leader killed (SIGKILL) at a step of starting a job, on real host processes (the extensions host,
 * or the development host with E2E_HOST=devhost) with the real app, Durable backend and Azurite: the leader reaches storage through a proxy that
 * holds its request at that step, and the process dies while the request is held, so storage never
 * sees it. The other instance takes over, and the job finishes exactly once with the exact result:
 * - before the Durable instance is written (the start record exists, the start message was sent, no
 *   instance; the backend discards such a message): the next leader starts it itself, before the
 *   submission's message becomes visible again;
 * - before its start message is sent (the backend sends it before it writes the Pending instance,
 *   as the Azure Storage provider does, so nothing of the start exists): the next leader starts it;
 * The leader killed before the submission's queue message is deleted is in interruptedStartDelete.test.ts.
 * A start message whose send fails without a kill is in startSendFailed.test.ts (one file per
 * minute or two of processes, so each stays well inside the runner's per-file time limit).
 * The tests print how long the repairs took (diagnostics), for the figures in docs/figures.md ("Measurements
 * behind docs/jobs.md", which keeps those docs/jobs.md carried).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually } from 'devhost/testing';

import { durableRequests } from './support/durableRequests';
import { assertRanOnce, killLeaderAt } from './support/leaderKill';
import { proxiedScenarios, sumOf } from './support/realApp';

describe('a leader killed while it starts a job', () => {
  const scenarios = proxiedScenarios();

  it('is started by the next leader when the leader died before writing the Durable instance', async (t) => {
    const jobId = 'killed-before-instance';
    const items = Array.from({ length: 40 }, (_, i) => i * 3 - 17);
    const { s, follower, leaderEpoch, killedAt } = await killLeaderAt(
      scenarios,
      jobId,
      (sc) => sc.submitByQueue({ jobId, workType: 'sum', items, options: { chunkSize: 10 } }),
      (sc, r) => durableRequests(sc).instanceWrite(r, `job-${jobId}`),
    );
    const done = await s.finished(follower, jobId, 120_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    assert.ok((done.epoch ?? 0) > leaderEpoch, 'started by the next leader');
    // The next leader did not wait for the submission to come back: it is still on the queue, invisible.
    const queue = s.jobsQueue();
    assert.equal((await queue.getProperties()).approximateMessagesCount, 1, 'the submission is still held by the dead leader\'s receive');
    assert.equal((await queue.peekMessages()).peekedMessageItems.length, 0);
    await assertRanOnce(s, jobId);
    const repaired = s.events('intake.start_repaired', jobId)[0];
    const ms = Date.parse(String(repaired?.ts)) - killedAt;
    t.diagnostic(`interrupted start completed ${ms} ms after the leader was killed (${String(repaired?.reason)})`);
  });

  // The development host's Durable backend starts an orchestration as the Azure Storage provider
  // does: the start message first, then the Pending instance (a start message that finds no
  // instance is discarded). So a leader that dies at its start message has written nothing of it.
  it('is started by the next leader when the leader died before sending its start message', async (t) => {
    const jobId = 'killed-before-start-message';
    const items = Array.from({ length: 55 }, (_, i) => (i % 2 === 0 ? i : -2 * i));
    const { s, follower, leaderEpoch, killedAt } = await killLeaderAt(
      scenarios,
      jobId,
      (sc) => sc.submitByQueue({ jobId, workType: 'sum', items, options: { chunkSize: 10 } }),
      (sc, r) => durableRequests(sc).startMessage(r, `job-${jobId}`),
    );
    const done = await s.finished(follower, jobId, 150_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    assert.ok((done.epoch ?? 0) > leaderEpoch, 'started by the next leader');
    await assertRanOnce(s, jobId);
    // Nothing of the dead leader's start existed; the next leader's start is a new start under the
    // next instance id (the dead one's, had it been in flight, could only have made its own).
    // The job shows its recorded outcome as soon as it is written; its run finishes a Durable hop later.
    await eventually(async () => ((await s.instance(follower, `job-${jobId}.2`))?.runtimeStatus === 'Completed' ? true : undefined), 10_000, 'the run to complete');
    assert.equal(await s.instance(follower, `job-${jobId}`), undefined);
    const listed = (await s.call(follower, 'GET', '/api/jobs')).json as { jobs: Array<{ jobId: string; status: string }> };
    assert.deepEqual(listed.jobs.filter((j) => j.jobId === jobId).map((j) => j.status), ['completed']);
    const repaired = s.events('intake.start_repaired', jobId)[0];
    assert.equal(repaired?.reason, 'no instance');
    const ms = Date.parse(String(repaired?.ts)) - killedAt;
    t.diagnostic(`start repaired ${ms} ms after the leader was killed, by the next leader (${String(repaired?.reason)})`);
  });
});
