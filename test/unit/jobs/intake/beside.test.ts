/**
 * Beside: a pass waits for its stall check or index upkeep at most so long, and does not start it
 * again while the one before still runs.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { Beside, waitAtMost } from '../../../../shared/jobs/intake/beside';

function held(): { promise: Promise<void>; release: () => void } {
  let release = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    release = resolve;
  });
  return { promise, release };
}

describe('Beside (work a leader pass waits for only so long)', () => {
  it('answers ended when the work ends within the wait', async () => {
    const beside = new Beside(5_000);
    let calls = 0;
    const outcome = await beside.run(async () => {
      calls += 1;
      await new Promise((resolve) => setImmediate(resolve));
    });
    assert.equal(outcome, 'ended');
    assert.equal(calls, 1);
    assert.equal(beside.running, false);
  });

  it('leaves slow work running after the wait, starts no second copy meanwhile, and the next start once it ended', async () => {
    const beside = new Beside(20);
    const first = held();
    let calls = 0;
    const work = async (): Promise<void> => {
      calls += 1;
      if (calls === 1) await first.promise;
    };
    assert.equal(await beside.run(work), 'still_running');
    assert.equal(beside.running, true);
    // The next passes wait for the same work again; none starts another.
    assert.equal(await beside.run(work), 'still_running');
    assert.equal(await beside.run(work), 'still_running');
    assert.equal(calls, 1);
    first.release();
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(beside.running, false);
    assert.equal(await beside.run(work), 'ended');
    assert.equal(calls, 2);
  });

  it('waits until the work ends when told to wait without bound', async () => {
    const beside = new Beside(Number.POSITIVE_INFINITY);
    const gate = held();
    let ended = false;
    const running = beside.run(async () => {
      await gate.promise;
      ended = true;
    });
    setTimeout(() => gate.release(), 30);
    assert.equal(await running, 'ended');
    assert.equal(ended, true);
  });
});

describe('waitAtMost (the pass\'s one bounded wait)', () => {
  it('answers whether the work ended within the wait, waits without bound for Infinity, and not at all for a wait already over', async () => {
    const slow = held();
    const began = performance.now();
    assert.equal(await waitAtMost(slow.promise, 50), false);
    assert.ok(performance.now() - began >= 45, 'it waited its time');
    assert.equal(await waitAtMost(Promise.resolve(), 50), true);
    assert.equal(await waitAtMost(slow.promise, -10), false, 'a deadline already past');
    const unbounded = waitAtMost(slow.promise, Number.POSITIVE_INFINITY);
    setTimeout(slow.release, 20);
    assert.equal(await unbounded, true);
  });
});
