import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CoordinatorRuntime } from '../../../shared/leader/CoordinatorRuntime';
import { healthView, leaderView, StorageUnavailableError } from '../../../shared/leader/leaderStatus';
import { debugMemoryLogger, STALL_TIMEOUT_MS, TIMING } from './contender';
import { ManualClock } from './ManualClock';
import { MemoryLeaseStore } from './MemoryLeaseStore';

function setup(): { clock: ManualClock; store: MemoryLeaseStore; rt: CoordinatorRuntime } {
  const clock = new ManualClock();
  const store = new MemoryLeaseStore(clock);
  const rt = new CoordinatorRuntime({
    elector: { ...TIMING, store, clock, holder: 'me', logger: debugMemoryLogger('me'), random: () => 0 },
    pass: () => Promise.resolve(),
    passIntervalMs: 5_000,
    stallTimeoutMs: STALL_TIMEOUT_MS,
  });
  return { clock, store, rt };
}

describe('leader status views', () => {
  it('GET /api/leader view: the blob record, this instance, counters; no lease id', async () => {
    const { clock, rt } = setup();
    void rt.tick();
    await clock.advance(0);
    const view = await leaderView(rt);
    assert.equal(view.holder, 'me');
    assert.equal(view.epoch, 1);
    assert.equal(view.acquiredAt, '2026-01-01T00:00:00.000Z');
    assert.equal(view.leaseState, 'leased');
    assert.equal(view.instance.id, 'me');
    assert.equal(view.instance.role, 'leader');
    assert.equal(view.instance.epoch, 1);
    assert.equal(view.instance.passes, 1);
    assert.equal(view.counters.acquired, 1);
    assert.doesNotMatch(JSON.stringify(view), /00000000-|leaseId/);
  });

  it('a follower that has not campaigned reports no holder yet', async () => {
    const { rt } = setup();
    const view = await leaderView(rt);
    assert.equal(view.holder, null);
    assert.equal(view.instance.role, 'follower');
    assert.equal(view.leaseState, 'available');
  });

  it('storage failures become STORAGE_UNAVAILABLE for the leader view and "degraded" health', async () => {
    const { store, rt } = setup();
    store.fault = (op) => (op === 'read' ? 'fail' : undefined);
    await assert.rejects(leaderView(rt), (err: unknown) => err instanceof StorageUnavailableError && err.code === 'STORAGE_UNAVAILABLE' && !err.message.includes('injected'));
    assert.deepEqual(await healthView(rt), { status: 'degraded', instance: 'me', role: 'follower', storage: { reachable: false } });
    store.fault = () => undefined;
    assert.equal((await healthView(rt)).status, 'ok');
  });
});
