/**
 * QuietReads: the leader's side reads (start marks, index refresh, deliveries due) keep their own
 * schedules while jobs come and go, and once nothing has shown activity for `afterMs` each runs at
 * most every `readEveryMs`; activity or a new term ends the quiet at once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { QUIET, QuietReads } from '../../../../shared/jobs/intake/QuietReads';

/** Every 15 s (the idle pass interval) from `from` to `to`: the passes at which `read` was allowed. */
function passes(quiet: QuietReads, clock: { now: number }, from: number, to: number, read: string): number[] {
  const allowed: number[] = [];
  for (clock.now = from; clock.now <= to; clock.now += 15_000) if (quiet.allow(read)) allowed.push(clock.now);
  return allowed;
}

describe('QuietReads (the leader\'s side reads while nothing happens)', () => {
  it('allows every read until nothing has shown activity for afterMs, then one per readEveryMs each', () => {
    const clock = { now: 0 };
    const quiet = new QuietReads(() => clock.now);
    quiet.term(1);
    assert.equal(quiet.quiet, false, 'a new term is activity');
    const marks = passes(quiet, clock, 0, 600_000, 'start marks');
    // Every pass up to afterMs (the last at 45 s), then quiet: the next read readEveryMs after the last one.
    assert.deepEqual(marks, [0, 15_000, 30_000, 45_000, 345_000], 'every pass for the first minute, then at 45 s + 5 min');
    assert.equal(quiet.quiet, true);
    assert.deepEqual(QUIET, { afterMs: 60_000, readEveryMs: 300_000 });
  });

  it('keeps each read\'s own time: one read allowed does not use up another\'s', () => {
    const clock = { now: 0 };
    const quiet = new QuietReads(() => clock.now, { afterMs: 10, readEveryMs: 100 });
    clock.now = 50;
    assert.equal(quiet.allow('index refresh'), true, 'the first of each read is always allowed');
    assert.equal(quiet.allow('deliveries due'), true);
    clock.now = 120;
    assert.equal(quiet.allow('index refresh'), false);
    assert.equal(quiet.allow('deliveries due'), false);
    clock.now = 150;
    assert.equal(quiet.allow('index refresh'), true);
    assert.equal(quiet.allow('index refresh'), false, 'and counts as done now');
    assert.equal(quiet.allow('deliveries due'), true);
  });

  it('ends the quiet at once on activity, and on a new term only', () => {
    const clock = { now: 0 };
    const quiet = new QuietReads(() => clock.now, { afterMs: 1_000, readEveryMs: 10_000 });
    quiet.term(4);
    clock.now = 1_000;
    assert.equal(quiet.quiet, true);
    assert.equal(quiet.allow('start marks'), true);
    clock.now = 2_000;
    assert.equal(quiet.allow('start marks'), false);
    quiet.active();
    assert.equal(quiet.quiet, false);
    assert.equal(quiet.allow('start marks'), true, 'activity: every pass reads again');
    clock.now = 3_500;
    assert.equal(quiet.quiet, true);
    quiet.term(4);
    assert.equal(quiet.quiet, true, 'the same term again is no activity');
    quiet.term(5);
    assert.equal(quiet.quiet, false, 'a new term takes over its predecessors\' marks: the reads follow it');
  });
});
