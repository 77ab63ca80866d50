/**
 * A leader killed (SIGKILL) while it finishes taking an HTTP submission, on real host processes (the
 * extensions host, or the development host with E2E_HOST=devhost) with the real app and Azurite: it
 * dies while the proxy holds its delete of the submission's queue message. The job runs, exactly once,
 * and its status answers from its start (the submission's pending record stays, as for every HTTP job). (Split from interruptedStart.test.ts:
 * its three cases took 168 s of the runner's 180 s per file on the extensions host under load.)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { assertRanOnce, killLeaderAt } from './support/leaderKill';
import { proxiedScenarios, sumOf } from './support/realApp';

describe('a leader killed while it deletes a submission it started', () => {
  const scenarios = proxiedScenarios();

  it('finishes an HTTP submission whose leader died before deleting its queue message', async () => {
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
    // The pending record stays (deleting it would cost a blob delete per job); the start record speaks for the job.
    const record = await s.resultsBlob(`records/${jobId}.json`);
    assert.equal((JSON.parse(record?.text ?? '{}') as { status?: string }).status, 'pending', record?.text);
  });
});
