/**
 * A leader killed (SIGKILL) at each step of starting a job, on real development host processes
 * with the real app, Durable backend and Azurite: the leader reaches storage through a proxy that
 * holds its request at that step, and the process dies while the request is held, so storage never
 * sees it. The other instance takes over, and the job finishes exactly once with the exact result:
 * - before the Durable instance is written (the start record exists, the start message was sent, no
 *   instance; the backend discards such a message): the next leader starts it itself, before the
 *   submission's message becomes visible again;
 * - before its start message is sent (the backend sends it before it writes the Pending instance,
 *   as the Azure Storage provider does, so nothing of the start exists): the next leader starts it;
 * - before the submission's queue message is deleted (HTTP submission): the job runs, and the
 *   submission's pending record does not outlive the start.
 * A start message whose send fails without a kill is in startSendFailed.test.ts (one file per
 * minute or two of processes, so each stays well inside the runner's per-file time limit).
 * The tests print how long the repairs took (diagnostics), for the figures in docs/jobs.md ("How it holds up").
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually, type HostProcess } from 'devhost/testing';

import { type HeldRequest, type ProxiedRequest } from '../support/storageProxy';
import { durableRequests } from './support/durableRequests';
import { proxiedScenarios, type Scenario, sumOf } from './support/realApp';

describe('a leader killed while it starts a job', () => {
  const scenarios = proxiedScenarios();

  /**
   * The leader (through a proxy) and a follower; `holdAt` picks the leader's request to die on.
   * Returns the scenario, the follower, and when the leader was killed.
   */
  async function killLeaderAt(
    jobId: string,
    submit: (s: Scenario, follower: HostProcess) => Promise<void>,
    holdAt: (s: Scenario, request: ProxiedRequest) => boolean,
  ): Promise<{ s: Scenario; follower: HostProcess; held: HeldRequest; leaderEpoch: number; killedAt: number }> {
    const { s, proxy } = await scenarios.start();
    const leader = await s.start(`kill-a-${jobId.slice(-4)}`, proxy.connectionString);
    const led = await s.leading(leader);
    const follower = await s.start(`kill-b-${jobId.slice(-4)}`);
    const hold = proxy.hold((r) => holdAt(s, r));
    await submit(s, follower);
    const held = await hold.within(60_000, 'the leader never reached the step');
    const killedAt = Date.now();
    await leader.kill();
    assert.ok(held.clientGone || leader.child.signalCode === 'SIGKILL');
    return { s, follower, held, leaderEpoch: led.instance.epoch ?? 0, killedAt };
  }

  async function assertRanOnce(s: Scenario, jobId: string): Promise<void> {
    // One run planned the job (a repeat would plan it again, under its own start id).
    const planned = s.events('job.planned', jobId);
    assert.equal(new Set(planned.map((e) => e.startId)).size, 1, JSON.stringify(planned));
    const final = await s.resultsBlob(`jobs/${jobId}/result.json`);
    assert.ok(final !== undefined, 'the job stored its result');
  }

  it('is started by the next leader when the leader died before writing the Durable instance', async (t) => {
    const jobId = 'killed-before-instance';
    const items = Array.from({ length: 40 }, (_, i) => i * 3 - 17);
    const { s, follower, leaderEpoch, killedAt } = await killLeaderAt(
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

  it('finishes an HTTP submission whose leader died before deleting its queue message, and leaves no pending record', async () => {
    const jobId = 'killed-before-delete';
    const items = Array.from({ length: 30 }, (_, i) => 1_000 - i * i);
    const { s, follower } = await killLeaderAt(
      jobId,
      (sc, f) => sc.submitByHttp(f, { jobId, workType: 'sum', items, options: { chunkSize: 7 } }),
      (sc, r) => r.method === 'DELETE' && r.path.startsWith(`/devstoreaccount1/${sc.names.jobsQueue}/messages/`),
    );
    const done = await s.finished(follower, jobId, 120_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    await assertRanOnce(s, jobId);
    // The record that showed the submission as pending goes once the start is confirmed, without waiting for the message to come back.
    const deadline = Date.now() + 40_000;
    while ((await s.resultsBlob(`records/${jobId}.json`)) !== undefined && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 500));
    }
    assert.equal(await s.resultsBlob(`records/${jobId}.json`), undefined, 'the pending record of a started job is left behind');
  });
});
