/**
 * CallClaims (one running call per job) on the in-memory lease, whose expiry runs on a clock the
 * test holds: which calls take the lease and when, that a repeat waits for a live call and never
 * runs beside it, and that a dead call's lease lapses so a repeat can go on. The lease on Azurite
 * (BlobCallClaimStore) and a plan held past several stall periods on the real Durable backend are in
 * test/integration/jobs/run/slowCall.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CALL_CLAIM, CallClaims, MemoryCallClaimStore } from '../../../../shared/jobs/run/CallClaims';
import { memoryLogger } from '../../../../shared/observability/log';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');

function gate(): { opened: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { opened, open };
}

const tick = (ms = 5): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function setup(claimAfterMs = 20): { clock: { now: number }; store: MemoryCallClaimStore; calls: CallClaims; logger: ReturnType<typeof memoryLogger> } {
  const clock = { now: T0 };
  const store = new MemoryCallClaimStore(() => clock.now);
  const logger = memoryLogger();
  // Waits for the lease pass in a few real milliseconds; the lease's own time is the held clock.
  return { clock, store, logger, calls: new CallClaims({ store, logger, claimAfterMs, sleep: () => tick(2) }) };
}

describe('CallClaims (one running call per job)', () => {
  it('takes no lease for a first call that ends within claimAfterMs', async () => {
    const { store, calls } = setup(1_000);
    assert.equal(await calls.run({ jobId: 'j', call: 'step', claimFirst: false }, () => Promise.resolve('answer')), 'answer');
    assert.equal(store.acquired, 0);
    assert.equal(await calls.held('j'), false);
  });

  it('has a first call that runs on take the lease after claimAfterMs, hold it while it runs and give it back when it ends', async () => {
    const { store, calls } = setup(20);
    const hold = gate();
    const running = calls.run({ jobId: 'j', call: 'plan', claimFirst: false }, async () => {
      await hold.opened;
      return 7;
    });
    assert.equal(await calls.held('j'), false, 'not before claimAfterMs');
    await tick(60);
    assert.equal(await calls.held('j'), true, 'a live slow call holds the lease');
    hold.open();
    assert.equal(await running, 7);
    assert.equal(await calls.held('j'), false, 'given back at the end');
    assert.equal(store.acquired, 1);
  });

  it('runs a repeat only once the live call ends, however many repeats come: never two at once', async () => {
    const { calls } = setup(10);
    let running = 0;
    let most = 0;
    const order: string[] = [];
    const work = (name: string, hold?: Promise<void>) => async (): Promise<string> => {
      running += 1;
      most = Math.max(most, running);
      order.push(`${name} start`);
      if (hold !== undefined) await hold;
      await tick(5);
      order.push(`${name} end`);
      running -= 1;
      return name;
    };
    const first = gate();
    const a = calls.run({ jobId: 'j', call: 'plan', claimFirst: false }, work('a', first.opened));
    await tick(40);
    const repeats = ['b', 'c', 'd'].map((name) => calls.run({ jobId: 'j', call: 'plan', claimFirst: true }, work(name)));
    await tick(100);
    assert.deepEqual(order, ['a start'], 'the repeats wait while the first call lives');
    first.open();
    assert.deepEqual(await Promise.all([a, ...repeats]), ['a', 'b', 'c', 'd']);
    assert.equal(most, 1, 'at most one call of the job ran at a time');
    assert.equal(order.length, 8);
    // Another job's calls are not held up by this one's.
    assert.equal(await calls.run({ jobId: 'other', call: 'plan', claimFirst: true }, () => Promise.resolve('free')), 'free');
  });

  it('lets a repeat go on once a dead call\'s lease runs out, not before', async () => {
    const { clock, store, calls } = setup();
    // A call of an instance that died holding the lease: it never renews again.
    assert.equal(await store.acquire('j', 'dead-call', CALL_CLAIM.leaseSeconds), true);
    let ran = false;
    const repeat = calls.run({ jobId: 'j', call: 'step', claimFirst: true }, () => {
      ran = true;
      return Promise.resolve('redone');
    });
    clock.now += CALL_CLAIM.leaseSeconds * 1000 - 1;
    await tick(30);
    assert.equal(ran, false, 'the lease still runs');
    assert.equal(await calls.held('j'), true);
    clock.now += 1;
    assert.equal(await repeat, 'redone');
    assert.equal(ran, true);
  });

  it('answers the work\'s error and gives the lease back', async () => {
    const { calls } = setup();
    await assert.rejects(
      calls.run({ jobId: 'j', call: 'aggregate', claimFirst: true }, () => Promise.reject(new Error('storage down'))),
      /storage down/,
    );
    assert.equal(await calls.held('j'), false);
  });
});
