/**
 * The leader stopped gracefully (SIGTERM, what the platform sends when it scales an instance in or
 * restarts it) while a job runs, on real host processes (the extensions host unless
 * E2E_HOST=devhost), two instances of the app each campaigning on its own timer: the leader drains
 * its pass and releases the lease, its process exits 0 within the Functions host's grace for a worker
 * (5 s), the other instance leads within 3 s of the signal (docs/leader-election.md's goal for a
 * graceful stop), and the job completes exactly once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { type HostProcess } from 'devhost/testing';

import { e2eHostName } from './support/appHost';
import { createRealAppRoot, type LeaderView, Scenario, sumOf } from './support/realApp';

/** The Functions host gives a Node.js worker this long to end after it asks it to (WorkerTerminate). */
const WORKER_GRACE_MS = 5_000;
const HANDOVER_BOUND_MS = 3_000;

describe(`a graceful stop of the leader mid-job, on the ${e2eHostName()}`, () => {
  let app: { dir: string; remove(): void } | undefined;
  let s: Scenario | undefined;
  let first: HostProcess | undefined;
  let second: HostProcess | undefined;

  before(
    async () => {
      app = createRealAppRoot({ batchSize: 1 });
      s = new Scenario(app.dir);
      first = await s.start('grace-a');
      await s.leading(first);
      second = await s.start('grace-b');
      // The follower campaigns (its own timer handed it a client) before the leader goes.
      await s.leader(second);
    },
    { timeout: 240_000 },
  );
  after(async () => {
    await s?.stopAll();
    app?.remove();
  });

  it('hands the lease over within 3 s, exits within the worker grace, and the job completes exactly', async (t) => {
    assert.ok(s !== undefined && first !== undefined && second !== undefined);
    const old = await s.leading(first);
    const items = Array.from({ length: 2_000 }, (_, i) => i - 700);
    await s.submitByHttp(first, { jobId: 'grace-job', workType: 'sum', items, options: { chunkSize: 20 } });
    // Mid-job: the leader started it and some chunks are done.
    await s.finishedChunks(first, 'grace-job', 5, 60_000);

    const signalledAt = Date.now();
    first.child.kill('SIGTERM');
    const exited = new Promise<number | null>((resolve) => first?.child.once('exit', (code) => resolve(code)));
    let takenAt: number | undefined;
    let view: LeaderView | undefined;
    while (Date.now() - signalledAt < 20_000) {
      const answer = await s.call(second, 'GET', '/api/cluster');
      view = answer.json as LeaderView;
      if (answer.status === 200 && view.instance.role === 'leader' && (view.instance.epoch ?? 0) > (old.epoch ?? 0)) {
        takenAt = Date.now();
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    const code = await exited;
    const exitMs = Date.now() - signalledAt;
    assert.ok(takenAt !== undefined, `the other instance did not lead within 20 s: ${JSON.stringify(view)}`);
    const handoverMs = takenAt - signalledAt;
    t.diagnostic(`handover ${handoverMs} ms after SIGTERM; the stopped process exited ${exitMs} ms after it`);
    assert.equal(code, 0, `the stopped instance exited with ${String(code)}`);
    assert.ok(s.events('leader.released').some((e) => e.epoch === old.epoch), 'the stopped leader released its lease');
    assert.ok(handoverMs <= HANDOVER_BOUND_MS, `handover took ${handoverMs} ms (bound ${HANDOVER_BOUND_MS})`);
    assert.ok(exitMs <= WORKER_GRACE_MS, `the stopped instance took ${exitMs} ms to exit (the worker grace is ${WORKER_GRACE_MS} ms)`);

    const done = await s.finished(second, 'grace-job', 120_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
  });
});
