/**
 * What an anonymous caller of GET /api/leader sees, and what it costs (issue: the route showed
 * counters and error text and read the blob once per request): the public view is the lease
 * record alone, and the reads behind it are shared for a short time, failures included.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CachedRead } from '../../../shared/leader/CachedRead';
import { CoordinatorRuntime } from '../../../shared/leader/CoordinatorRuntime';
import { cachedStatusSource, healthView, leaderView, publicLeaderView, StorageUnavailableError } from '../../../shared/leader/leaderStatus';
import { debugMemoryLogger, STALL_TIMEOUT_MS, TIMING } from './contender';
import { ManualClock } from './ManualClock';
import { MemoryLeaseStore } from './MemoryLeaseStore';

function setup(): { clock: ManualClock; store: MemoryLeaseStore; rt: CoordinatorRuntime } {
  const clock = new ManualClock();
  const store = new MemoryLeaseStore(clock);
  const rt = new CoordinatorRuntime({
    elector: { ...TIMING, store, clock, holder: 'me', logger: debugMemoryLogger('me'), random: () => 0 },
    pass: () => Promise.reject(new Error('secret detail: /srv/app/dist/x.js line 4')),
    passIntervalMs: 5_000,
    stallTimeoutMs: STALL_TIMEOUT_MS,
  });
  return { clock, store, rt };
}

describe('GET /api/leader for anonymous callers', () => {
  it('shows the lease record only: no counters, no instance, no pass errors', async () => {
    const { clock, rt } = setup();
    void rt.tick();
    await clock.advance(0);
    const full = await leaderView(rt);
    assert.ok(full.instance.lastPassError !== null, 'the keyed view does carry the pass error');
    const view = await publicLeaderView(rt);
    assert.deepEqual(view, { holder: 'me', epoch: 1, acquiredAt: '2026-01-01T00:00:00.000Z', leaseState: 'leased', leaseStatus: 'locked' });
    assert.doesNotMatch(JSON.stringify(view), /secret|counters|passes|lastPass/);
  });

  it('shares one lease read among concurrent and repeated callers for the ttl, then reads again', async () => {
    const { clock, store, rt } = setup();
    const storeReads = (): number => store.calls.filter((c) => c.op === 'read').length;
    const source = cachedStatusSource(rt, 2_000, clock);
    const views = await Promise.all(Array.from({ length: 100 }, () => publicLeaderView(source)));
    assert.equal(source.reads, 1, '100 concurrent requests, one read');
    assert.equal(storeReads(), 1, 'one read reached the store');
    assert.equal(new Set(views.map((v) => JSON.stringify(v))).size, 1);
    await healthView(source);
    await clock.advance(1_999);
    await publicLeaderView(source);
    assert.equal(source.reads, 1, 'health and later requests within the ttl share it too');
    await clock.advance(1);
    await Promise.all([publicLeaderView(source), publicLeaderView(source)]);
    assert.equal(source.reads, 2);
    assert.equal(storeReads(), 2);
  });

  it('keeps a failed read for the ttl too, and answers STORAGE_UNAVAILABLE without the cause', async () => {
    const { clock, store, rt } = setup();
    store.fault = (op) => (op === 'read' ? 'fail' : undefined);
    const source = cachedStatusSource(rt, 2_000, clock);
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, () => publicLeaderView(source)));
    assert.equal(source.reads, 1, 'an outage does not turn each request into a read');
    for (const o of outcomes) {
      assert.equal(o.status, 'rejected');
      const err = (o).reason as unknown;
      assert.ok(err instanceof StorageUnavailableError);
      assert.equal(err.code, 'STORAGE_UNAVAILABLE');
      assert.doesNotMatch(err.message, /injected|unreachable\)/);
    }
    store.fault = () => undefined;
    await clock.advance(2_000);
    assert.equal((await publicLeaderView(source)).leaseState, 'available');
    assert.equal(source.reads, 2);
  });

  it('CachedRead stamps an answer when it arrives, so a slow read is not stale on arrival', async () => {
    const clock = new ManualClock();
    let reads = 0;
    const cached = new CachedRead(async () => {
      reads += 1;
      await clock.sleep(5_000);
      return reads;
    }, 2_000, clock);
    const first = cached.get();
    await clock.advance(5_000);
    assert.equal(await first, 1);
    await clock.advance(1_000);
    assert.equal(await cached.get(), 1);
    assert.throws(() => new CachedRead(() => Promise.resolve(1), -1), RangeError);
  });
});
