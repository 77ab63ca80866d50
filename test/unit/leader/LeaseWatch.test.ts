/**
 * The lease watch of an instance that does not campaign (shared/leader/LeaseWatch.ts): it reads the
 * lease only while idle, rings the doorbell when nobody holds it (at most every ringEveryMs), never
 * while the lease is held, and a failed read or ring is only logged.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { LeaseWatch } from '../../../shared/leader/LeaseWatch';
import { memoryLogger } from '../../../shared/observability/log';

function watch(state: { lease: string; idle: boolean; now: number; failRead?: boolean; failRing?: boolean }): { w: LeaseWatch; reads: () => number; rings: () => number; logger: ReturnType<typeof memoryLogger> } {
  let reads = 0;
  let rings = 0;
  const logger = memoryLogger('watch', 'debug');
  const w = new LeaseWatch({
    leaseState: () => {
      reads += 1;
      return state.failRead === true ? Promise.reject(new Error('storage down')) : Promise.resolve(state.lease);
    },
    ring: () => {
      if (state.failRing === true) return Promise.reject(new Error('queue down'));
      rings += 1;
      return Promise.resolve();
    },
    idle: () => state.idle,
    logger,
    ringEveryMs: 10_000,
    now: () => state.now,
  });
  return { w, reads: () => reads, rings: () => rings, logger };
}

describe('lease watch', () => {
  it('rings when nobody holds the lease, at most every ringEveryMs, never while it is held', async () => {
    const state = { lease: 'leased', idle: true, now: 0 };
    const { w, reads, rings } = watch(state);
    await w.look();
    assert.deepEqual([reads(), rings()], [1, 0], 'a held lease: read, no ring');
    state.lease = 'expired';
    await w.look();
    assert.equal(rings(), 1, 'a lapsed lease: the doorbell');
    state.now = 5_000;
    await w.look();
    assert.equal(rings(), 1, 'not again within ringEveryMs');
    state.now = 10_000;
    state.lease = 'available';
    await w.look();
    assert.equal(rings(), 2, 'again once ringEveryMs has passed and the lease is still free');
    assert.equal(w.rings, 2);
  });

  it('reads nothing while the instance campaigns or leads', async () => {
    const state = { lease: 'expired', idle: false, now: 0 };
    const { w, reads, rings } = watch(state);
    await w.look();
    assert.deepEqual([reads(), rings()], [0, 0]);
  });

  it('logs a failed read or ring and goes on', async () => {
    const state = { lease: 'expired', idle: true, now: 0, failRead: true, failRing: false };
    const { w, rings, logger } = watch(state);
    await w.look();
    assert.equal(rings(), 0);
    state.failRead = false;
    state.failRing = true;
    await w.look();
    assert.equal(rings(), 0);
    assert.deepEqual(logger.lines.filter((l) => l.event === 'leader.watch_failed').length, 2);
  });

  it('keeps no process alive: its timer is unref\'d, and stop ends it', () => {
    const { w } = watch({ lease: 'leased', idle: true, now: 0 });
    w.start();
    w.stop();
    w.start();
    assert.equal(w.rings, 0);
  });
});
