/**
 * A leader killed (SIGKILL) while it finishes taking an HTTP submission, on real host processes (the
 * development host, or the extensions host with E2E_HOST=extensions) with the real app and Azurite: it
 * dies while the proxy holds its delete of the submission's queue message. The job runs, exactly once,
 * and the submission's pending record does not outlive the start. (Split from interruptedStart.test.ts:
 * its three cases took 168 s of the runner's 180 s per file on the extensions host under load.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { assertRanOnce, killLeaderAt } from './support/leaderKill';
import { proxiedScenarios, sumOf } from './support/realApp';

describe('a leader killed while it deletes a submission it started', () => {
  const scenarios = proxiedScenarios();

  it('finishes an HTTP submission whose leader died before deleting its queue message, and leaves no pending record', async () => {
    const jobId = 'killed-before-delete';
    const items = Array.from({ length: 30 }, (_, i) => 1_000 - i * i);
    const { s, follower } = await killLeaderAt(
      scenarios,
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
