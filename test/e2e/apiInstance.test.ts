/**
 * The jobs API on an instance that serves HTTP only (test/e2e/fixtures/apiOnlyApp.ts: the jobs
 * routes, health, leader and cluster; no timer, no worker, no Durable function), beside a full
 * instance of the same app that leads, on real host processes (the extensions host unless
 * E2E_HOST=devhost). What it holds, as docs/guarantees.md lists:
 * - campaign only on change: reading routes never make the API instance contend for the lease; the
 *   first submission it takes does (it hands over its Durable client), and it stays a follower;
 * - a status read costs at most two storage requests for a pending or running job, one for a
 *   finished one (counted at the proxy: the requests that name the job);
 * - an accepted job is never "not found": the API instance reaches storage through a proxy, and
 *   for each request of a status read in turn (the n-th request that names the job), the read is
 *   held there while the leader starts the job, then released: every answer is 200, whichever step
 *   the start fell between;
 * - the API with its storage unreachable: a third API instance whose CoordinatorStorage refuses
 *   connections answers every jobs route 503 SERVICE_UNAVAILABLE naming the setting within seconds,
 *   without the connection's secrets.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import { AZURITE_ACCOUNT, AZURITE_KEY, eventually, freePort, type HostProcess } from 'devhost/testing';

import { type ProxiedRequest, startStorageProxy, type StorageProxy } from '../support/storageProxy';
import { e2eHostName } from './support/appHost';
import { pauseInstance } from './support/pauseProcess';
import { createRealAppRoot, type JobView, type LeaderView, Scenario } from './support/realApp';

const API_ONLY_MAIN = 'app/test/e2e/fixtures/apiOnlyApp.js';

/** A request of a status read of `jobId`: a read (GET or HEAD) whose path or query names the job. */
function readsOf(jobId: string): (r: ProxiedRequest) => boolean {
  return (r) => (r.method === 'GET' || r.method === 'HEAD') && (r.path.includes(jobId) || decodeURIComponent(r.query.toString()).includes(jobId));
}

describe(`the jobs API on an instance that only serves HTTP, on the ${e2eHostName()}`, () => {
  let full: { dir: string; remove(): void } | undefined;
  let apiOnly: { dir: string; remove(): void } | undefined;
  let s: Scenario | undefined;
  let proxy: StorageProxy | undefined;
  let leader: HostProcess | undefined;
  let api: HostProcess | undefined;

  before(
    async () => {
      full = createRealAppRoot();
      apiOnly = createRealAppRoot({}, API_ONLY_MAIN);
      s = new Scenario(full.dir);
      proxy = await startStorageProxy(s.conn);
      leader = await s.start('api-leader');
      await s.leading(leader);
      api = await s.start('api-only', proxy.connectionString, apiOnly.dir);
    },
    { timeout: 240_000 },
  );
  after(async () => {
    await s?.stopAll();
    await proxy?.close();
    full?.remove();
    apiOnly?.remove();
  });

  const apiInstance = async (): Promise<LeaderView['instance'] & { campaigning: boolean }> => {
    assert.ok(s !== undefined && api !== undefined);
    const answer = await s.call(api, 'GET', '/api/cluster');
    assert.equal(answer.status, 200, JSON.stringify(answer.json));
    return (answer.json as { instance: LeaderView['instance'] & { campaigning: boolean } }).instance;
  };

  it('campaigns only once a route that changes something hands it a Durable client', async () => {
    assert.ok(s !== undefined && api !== undefined && leader !== undefined);
    assert.equal((await apiInstance()).campaigning, false, 'an instance nothing was asked of does not contend');
    for (const path of ['/api/jobs', '/api/jobs?status=pending', '/api/jobs/not-there', '/api/jobs/not-there/submission', '/api/health', '/api/leader']) {
      const res = await s.call(api, 'GET', path);
      assert.ok(res.status === 200 || res.status === 404, `${path}: ${res.status} ${JSON.stringify(res.json)}`);
    }
    // A campaign starts within the request that offers; the pause would let a late one show too.
    await new Promise((r) => setTimeout(r, 1_000));
    const idle = await apiInstance();
    assert.equal(idle.campaigning, false, 'no read made it campaign');
    assert.equal(idle.role, 'follower');

    const jobId = `camp-${randomBytes(4).toString('hex')}`;
    await s.submitByHttp(api, { jobId, workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } });
    const after = await apiInstance();
    assert.equal(after.campaigning, true, 'the submission handed its client over and the elector started');
    assert.equal(after.role, 'follower', 'the leader still leads');
    const done = await s.finished(leader, jobId, 60_000);
    assert.equal(done.status, 'completed', JSON.stringify(done));
  });

  it('never answers JOB_NOT_FOUND for an accepted job, whichever request of its status read the start falls after', async (t) => {
    assert.ok(s !== undefined && api !== undefined && leader !== undefined && proxy !== undefined);
    const held: string[] = [];
    for (let n = 1; ; n++) {
      assert.ok(n <= 8, `a status read makes at most a few requests: ${held.join('; ')}`);
      const jobId = `race${n}-${randomBytes(3).toString('hex')}`;
      // The leader cannot start the job before the n-th request of the read is held.
      const paused = pauseInstance(leader);
      let reading: Promise<{ status: number; json: unknown }> | undefined;
      let hold: ReturnType<StorageProxy['hold']> | undefined;
      try {
        await s.submitByHttp(api, { jobId, workType: 'sum', items: [n, n + 1] });
        let seen = 0;
        const reads = readsOf(jobId);
        hold = proxy.hold((r) => reads(r) && ++seen === n);
        reading = s.call(api, 'GET', `/api/jobs/${jobId}`);
        const first = await Promise.race([hold.held.then((h) => ({ h })), reading.then((answer) => ({ answer }))]);
        if ('answer' in first) {
          // The read ended in fewer than n requests: every step has been held once.
          hold.cancel();
          assert.equal(first.answer.status, 200, JSON.stringify(first.answer.json));
          assert.ok(n > 1, 'a status read made no request that names the job');
          assert.ok(n - 1 <= 2, `a status read of a pending job makes at most two storage requests: ${held.join('; ')}`);
          t.diagnostic(`a status read of a pending job made ${n - 1} requests naming it; held in turn: ${held.join('; ')}`);
          break;
        }
        held.push(`${first.h.request.method} ${first.h.request.path}`);
        paused.resume();
        // The leader starts the job (start record, Durable instance) while the read waits.
        await eventually(
          async () => {
            const view = (await s?.job(leader as HostProcess, jobId));
            return view !== undefined && view.status !== 'pending' ? view : undefined;
          },
          60_000,
          `the leader to start ${jobId}`,
        );
        await first.h.release();
        const answer: { status: number; json: unknown } = await reading;
        assert.equal(answer.status, 200, `request ${n} of the read (${held.at(-1) ?? ''}) held across the start: ${JSON.stringify(answer.json)}`);
        assert.ok(['pending', 'running', 'completed'].includes((answer.json as JobView).status), JSON.stringify(answer.json));
      } finally {
        paused.resume();
        hold?.cancel();
        await reading?.catch(() => undefined);
      }
    }
  });
  it('reads a running job in at most two storage requests and a finished one in one', async () => {
    assert.ok(s !== undefined && api !== undefined && leader !== undefined && proxy !== undefined);
    const jobId = `reads-${randomBytes(3).toString('hex')}`;
    // Long enough to be read while it runs: 2,000 chunks (under the 48 KiB a request may carry).
    const items = Array.from({ length: 8_000 }, (_, i) => i);
    await s.submitByHttp(api, { jobId, workType: 'sum', items, options: { chunkSize: 4 } });
    const reads = readsOf(jobId);
    const count = async (): Promise<{ requests: string[]; view: JobView }> => {
      const before = proxy?.requests().length ?? 0;
      const answer = await s?.call(api as HostProcess, 'GET', `/api/jobs/${jobId}`);
      assert.equal(answer?.status, 200, JSON.stringify(answer?.json));
      const requests = (proxy?.requests() ?? []).slice(before).filter(reads).map((r) => `${r.method} ${r.path}`);
      return { requests, view: answer?.json as JobView };
    };
    const seen: string[] = [];
    const running = await eventually(async () => {
      const read = await count();
      seen.push(`${read.view.status}/${read.view.progress?.chunks.done ?? '-'}`);
      return read.view.status === 'running' ? read : undefined;
    }, 60_000, `${jobId} to show running`).catch((err: unknown) => {
      throw new Error(`${String(err)}; seen ${[...new Set(seen)].join(', ')}`);
    });
    assert.ok(running.requests.length <= 2, `a running job read in ${running.requests.length} requests: ${running.requests.join('; ')}`);
    await s.finished(leader, jobId, 120_000);
    const finished = await eventually(async () => {
      const read = await count();
      return read.view.status === 'completed' ? read : undefined;
    }, 30_000, `${jobId} to show completed on the API instance`);
    assert.deepEqual(finished.requests.length, 1, `a finished job read in ${finished.requests.length} requests: ${finished.requests.join('; ')}`);
  });
});

describe(`the jobs API with its storage unreachable, on the ${e2eHostName()}`, () => {
  let apiOnly: { dir: string; remove(): void } | undefined;
  let s: Scenario | undefined;
  let api: HostProcess | undefined;

  before(
    async () => {
      apiOnly = createRealAppRoot({}, API_ONLY_MAIN);
      s = new Scenario(apiOnly.dir);
      // A port nobody listens on: connections are refused at once. The host's own storage stays up.
      const port = await freePort();
      const unreachable =
        `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};` +
        `BlobEndpoint=http://127.0.0.1:${port}/${AZURITE_ACCOUNT};QueueEndpoint=http://127.0.0.1:${port}/${AZURITE_ACCOUNT};TableEndpoint=http://127.0.0.1:${port}/${AZURITE_ACCOUNT};`;
      api = await s.start('api-unreach', s.conn, apiOnly.dir, { CoordinatorStorage: unreachable });
    },
    { timeout: 180_000 },
  );
  after(async () => {
    await s?.stopAll();
    apiOnly?.remove();
  });

  for (const [method, path, body] of [
    ['POST', '/api/jobs', JSON.stringify({ workType: 'sum', items: [1, 2] })],
    ['GET', '/api/jobs/some-job', undefined],
    ['GET', '/api/jobs/some-job/result', undefined],
    ['DELETE', '/api/jobs/some-job', undefined],
  ] as const) {
    it(`${method} ${path} answers 503 SERVICE_UNAVAILABLE naming the setting, within seconds`, async () => {
      assert.ok(s !== undefined && api !== undefined);
      const started = Date.now();
      const res = await s.call(api, method, path, body);
      const elapsed = Date.now() - started;
      const text = JSON.stringify(res.json);
      assert.equal(res.status, 503, text);
      assert.equal((res.json as { code: string }).code, 'SERVICE_UNAVAILABLE');
      assert.match((res.json as { message: string }).message, /CoordinatorStorage/);
      assert.doesNotMatch(text, /AccountKey|127\.0\.0\.1/);
      // The SDK's default retries took about 16 s; three quick tries about 2. Loose for a loaded machine.
      assert.ok(elapsed < 10_000, `answered after ${elapsed} ms`);
    });
  }
});
