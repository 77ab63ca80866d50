/**
 * GET /api/leader and /api/cluster on the running app (development host, keys on, Azurite): an
 * anonymous caller sees the lease record and nothing else, a caller with a key sees everything,
 * and a burst of anonymous requests costs one blob read per 2 s, counted on the app's own source.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { appRoot } from '../../../shared/app/appRoot';
import { eventually, type JobsHost, startJobsHost } from '../jobs/support/jobsHost';

describe('who leads, for anonymous callers and for callers with a key', () => {
  let h: JobsHost;

  before(async () => {
    h = await startJobsHost('lroutes', ['leaderTimer', 'leaderApi', 'health'], { LEADER_TIMER_SCHEDULE: '*/1 * * * * *' });
  });
  after(async () => {
    await h?.stop();
  });

  it('anonymous: the lease record only, cacheable; with a key: counters, passes, terms and instances', async () => {
    const instance = h.env.COORDINATOR_INSTANCE_ID;
    const anonymous = await eventually(async () => {
      const res = await h.request('GET', '/api/leader', undefined, null);
      return res.status === 200 && (res.json as { holder: string | null }).holder === instance ? res : undefined;
    }, 30_000, 'a leader');
    assert.deepEqual(Object.keys(anonymous.json as object).sort(), ['acquiredAt', 'epoch', 'holder', 'leaseState', 'leaseStatus']);
    assert.equal(anonymous.headers.get('cache-control'), 'public, max-age=2');
    assert.equal((await h.request('GET', '/api/cluster', undefined, null)).status, 401, 'the detail needs a key');
    const keyed = await h.request('GET', '/api/cluster');
    assert.equal(keyed.status, 200);
    const detail = keyed.json as Record<string, unknown>;
    for (const field of ['instance', 'counters', 'terms', 'instances', 'holder', 'epoch']) assert.ok(field in detail, field);
    assert.equal(keyed.headers.get('cache-control'), 'no-store');
  });

  it('a burst of anonymous requests (leader and health) costs one lease read per 2 s', async () => {
    // The same root the host's functions use: its cached source counts the reads that reach storage.
    const { status } = appRoot().leader();
    await new Promise((r) => setTimeout(r, 2_100));
    const before = status.reads;
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => h.request('GET', i % 3 === 0 ? '/api/health' : '/api/leader', undefined, null)),
    );
    const elapsedMs = Date.now() - started;
    assert.ok(answers.every((a) => a.status === 200));
    const reads = status.reads - before;
    assert.ok(reads >= 1 && reads <= 1 + Math.floor(elapsedMs / 2_000), `${reads} lease reads for 60 requests in ${elapsedMs} ms`);
  });
});
