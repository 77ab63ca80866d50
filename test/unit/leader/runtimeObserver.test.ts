/**
 * The runtime tells its observer (the records kept for operators) about terms and passes, on a
 * manual clock: a term's start with its epoch, every pass with its outcome, the term's end with
 * its reason, and `stopped` once the lease is released; an observer that throws changes nothing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CoordinatorRuntime, type RuntimeObserver } from '../../../shared/leader/CoordinatorRuntime';
import { PassSummary } from '../../../shared/observability/PassSummary';
import { debugMemoryLogger, STALL_TIMEOUT_MS, TIMING } from './contender';
import { ManualClock } from './ManualClock';
import { MemoryLeaseStore } from './MemoryLeaseStore';

describe('runtime observer', () => {
  it('hears term start, passes, term end and stop, in that order', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const heard: string[] = [];
    const observer: RuntimeObserver = {
      termStarted: (t) => heard.push(`start ${t.epoch} ${t.holder} ${t.acquiredAt}`),
      passFinished: (p) => heard.push(`pass ${p.epoch} ${p.failed ? 'failed' : 'ok'}`),
      termEnded: (t) => heard.push(`end ${t.epoch} ${t.holder} ${t.reason}`),
      stopped: () => {
        heard.push('stopped');
        return Promise.resolve();
      },
    };
    let passes = 0;
    const rt = new CoordinatorRuntime({
      elector: { ...TIMING, store, clock, holder: 'me', logger: debugMemoryLogger('me'), random: () => 0 },
      pass: () => (++passes === 2 ? Promise.reject(new Error('second pass fails')) : Promise.resolve()),
      passIntervalMs: 5_000,
      stallTimeoutMs: STALL_TIMEOUT_MS,
      observer,
    });
    void rt.tick();
    await clock.advance(0);
    await clock.advance(5_000);
    const stopping = rt.stop();
    await clock.advance(0);
    await stopping;
    assert.deepEqual(heard, ['start 1 me 2026-01-01T00:00:00.000Z', 'pass 1 ok', 'pass 1 failed', 'end 1 me released', 'stopped']);
  });

  it('an observer that throws does not stop leadership or passes', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const logger = debugMemoryLogger('me');
    const rt = new CoordinatorRuntime({
      elector: { ...TIMING, store, clock, holder: 'me', logger, random: () => 0 },
      pass: () => Promise.resolve(),
      passIntervalMs: 5_000,
      stallTimeoutMs: STALL_TIMEOUT_MS,
      observer: {
        termStarted: () => {
          throw new Error('observer broke');
        },
        passFinished: () => {
          throw new Error('observer broke');
        },
      },
    });
    void rt.tick();
    await clock.advance(0);
    await clock.advance(5_000);
    assert.equal(rt.state().role, 'leader');
    assert.equal(rt.state().passes, 2);
    assert.ok(logger.lines.some((l) => l.event === 'leader.observer_failed'));
    const stopping = rt.stop();
    await clock.advance(0);
    await stopping;
  });

  it('PassSummary logs one line per window with counts and durations, none for an empty window', () => {
    const logger = debugMemoryLogger('passes');
    let now = 0;
    const summary = new PassSummary(logger, 60_000, () => now);
    summary.flush();
    assert.equal(logger.lines.length, 0);
    summary.add({ epoch: 3, durationMs: 10, failed: false });
    summary.add({ epoch: 3, durationMs: 30, failed: true });
    now = 60_000;
    summary.flush();
    assert.deepEqual(
      logger.lines.map(({ event, epoch, passes, failed, meanMs, maxMs, windowSeconds }) => ({ event, epoch, passes, failed, meanMs, maxMs, windowSeconds })),
      [{ event: 'leader.passes', epoch: 3, passes: 2, failed: 1, meanMs: 20, maxMs: 30, windowSeconds: 60 }],
    );
  });
});
