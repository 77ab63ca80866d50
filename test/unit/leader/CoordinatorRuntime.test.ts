import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type CoordinationContext, type CoordinationPass, CoordinatorRuntime, type RuntimeObserver, type RuntimeState } from '../../../shared/leader/CoordinatorRuntime';
import { ElectorConfigError } from '../../../shared/leader/errors';
import { type Logger } from '../../../shared/observability/log';
import { debugMemoryLogger, STALL_TIMEOUT_MS, TIMING } from './contender';
import { ManualClock } from './ManualClock';
import { MemoryLeaseStore } from './MemoryLeaseStore';

/**
 * What a function hands over before it ticks or offers (the app's root keeps the latest Durable
 * client; shared/app): passes read the latest one, whichever invocation brought it.
 */
let handed = '';

function tickWith(rt: CoordinatorRuntime, name: string): Promise<RuntimeState> {
  handed = name;
  return rt.tick();
}

function offerWith(rt: CoordinatorRuntime, name: string): void {
  handed = name;
  rt.offer();
}

function runtime(
  clock: ManualClock,
  store: MemoryLeaseStore,
  pass: CoordinationPass,
  holder = 'r',
  overrides: { passIntervalMs?: number; idlePassIntervalMs?: number; stallTimeoutMs?: number; leaseId?: string; observer?: RuntimeObserver; logger?: Logger } = {},
): CoordinatorRuntime {
  const logger = overrides.logger ?? debugMemoryLogger(holder);
  const leaseId = overrides.leaseId;
  return new CoordinatorRuntime({
    elector: { ...TIMING, store, clock, holder, logger, random: () => 0, ...(leaseId === undefined ? {} : { leaseId }) },
    pass,
    passIntervalMs: overrides.passIntervalMs ?? 5_000,
    ...(overrides.idlePassIntervalMs === undefined ? {} : { idlePassIntervalMs: overrides.idlePassIntervalMs }),
    stallTimeoutMs: overrides.stallTimeoutMs ?? STALL_TIMEOUT_MS,
    ...(overrides.observer === undefined ? {} : { observer: overrides.observer }),
  });
}

describe('CoordinatorRuntime', () => {
  it('a tick campaigns and, once leading, runs a pass with the epoch and what the tick handed over', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const seen: Array<{ epoch: number; holder: string; services: string; at: number }> = [];
    const rt = runtime(clock, store, (ctx) => {
      seen.push({ epoch: ctx.epoch, holder: ctx.holder, services: handed, at: clock.now() });
      return Promise.resolve();
    });
    const ticked = tickWith(rt, 'first');
    await clock.advance(0);
    const state = await ticked;
    assert.equal(state.role, 'leader');
    assert.equal(state.epoch, 1);
    assert.deepEqual(seen, [{ epoch: 1, holder: 'r', services: 'first', at: 0 }], 'one pass for the acquiring tick');
    assert.equal(rt.state().passes, seen.length);
    assert.equal(rt.state().lastPass?.epoch, 1);
  });

  it('an offer starts campaigning without any tick, and the leader passes with them', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const names: string[] = [];
    const rt = runtime(clock, store, () => {
      names.push(handed);
      return Promise.resolve();
    });
    await clock.advance(10_000);
    assert.equal(rt.state().role, 'follower', 'nothing campaigns before a tick or an offer');
    offerWith(rt, 'from-a-worker');
    await clock.advance(0);
    assert.equal(rt.state().role, 'leader');
    assert.equal(rt.state().epoch, 1);
    await clock.advance(5_000);
    assert.deepEqual(names, ['from-a-worker', 'from-a-worker']);
    await rt.stop();
  });

  /** A leader (its first tick won the lease) and a follower that had an offer and lost, on one store. */
  async function leaderAndFollower(clock: ManualClock, store: MemoryLeaseStore): Promise<{ leader: CoordinatorRuntime; follower: CoordinatorRuntime }> {
    const leader = runtime(clock, store, () => Promise.resolve(), 'leader');
    const ticked = tickWith(leader, 'l');
    await clock.advance(0);
    await ticked;
    assert.equal(leader.state().role, 'leader');
    const follower = runtime(clock, store, () => Promise.resolve(), 'follower');
    offerWith(follower, 'f');
    await clock.advance(0);
    assert.equal(follower.state().role, 'follower');
    return { leader, follower };
  }

  it('a follower that had an offer takes over from a crashed leader without ticks', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const { leader, follower } = await leaderAndFollower(clock, store);
    // The crash: every request carrying the leader's lease id fails from now on (renewals stop, no release).
    const crashed = store.holderLeaseId;
    assert.ok(crashed !== undefined);
    store.fault = (_op, leaseId) => (leaseId === crashed ? 'fail' : undefined);
    await clock.advance(TIMING.leaseSeconds * 1000 + TIMING.retryPeriodMs * 2);
    assert.equal(follower.state().role, 'leader', 'the follower campaigned on its own and won once the lease expired');
    await follower.stop();
    await leader.stop();
  });

  it('an offer that says the lease is free makes a follower attempt at once, not at its next campaign period', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const plain = runtime(clock, store, () => Promise.resolve(), 'plain');
    const { leader, follower } = await leaderAndFollower(clock, store);
    offerWith(plain, 'p');
    await clock.advance(0);
    // Both followers now wait out their campaign period (random() = 0: the full retry period).
    await clock.advance(100);
    await leader.stop();
    assert.equal(store.leaseState, 'available');
    // The doorbell of the release reaches one of them: it campaigns now; the other is still pausing.
    follower.offer({ attemptNow: true });
    await clock.advance(0);
    assert.equal(follower.state().role, 'leader', 'the follower the doorbell reached took the lease without waiting for its period');
    assert.equal(plain.state().role, 'follower');
    // An attempt asked of a leader changes nothing.
    follower.offer({ attemptNow: true });
    await clock.advance(0);
    assert.equal(follower.state().role, 'leader');
    await follower.stop();
    await plain.stop();
  });

  it('runs passes on its own interval while leading, with what was handed over last, without ticks', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const times: number[] = [];
    const names: string[] = [];
    const rt = runtime(clock, store, () => {
      times.push(clock.now());
      names.push(handed);
      return Promise.resolve();
    });
    const ticked = tickWith(rt, 'a');
    await clock.advance(0);
    await ticked;
    const t2 = tickWith(rt, 'b');
    await clock.advance(0);
    await t2;
    await clock.advance(20_000);
    const own = times.filter((t) => t > 0);
    assert.deepEqual(own, [5_000, 10_000, 15_000, 20_000]);
    assert.equal(names.at(-1), 'b');
  });

  it('runs a pass at once when nudged while it sleeps, and once more after a pass the nudge found running; a follower ignores it', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const times: number[] = [];
    let release: (() => void) | undefined;
    const rt = runtime(clock, store, () => {
      times.push(clock.now());
      // The third pass hangs until released: a nudge during it must bring one more pass after it.
      if (times.length === 3) return new Promise<void>((resolve) => (release = resolve));
      return Promise.resolve();
    });
    const ticked = tickWith(rt, 'a');
    await clock.advance(0);
    await ticked;
    assert.deepEqual(times, [0]);
    await clock.advance(1_000);
    rt.nudge();
    await clock.advance(0);
    assert.deepEqual(times, [0, 1_000], 'the nudge woke the sleeping leader 4 s early');
    await clock.advance(5_000);
    assert.deepEqual(times, [0, 1_000, 6_000], 'then its interval runs from the nudged pass');
    rt.nudge();
    release?.();
    await clock.advance(0);
    assert.deepEqual(times, [0, 1_000, 6_000, 6_000], 'one more pass right after the one the nudge found running');

    const follower = runtime(clock, store, () => Promise.reject(new Error('a follower never passes')), 'f');
    follower.nudge();
    await clock.advance(0);
    assert.equal(follower.state().role === 'leader', false);
    await rt.stop();
  });

  it('runs the next pass at once when a pass asks for it (again()), and waits the interval otherwise', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const times: number[] = [];
    const rt = runtime(clock, store, (ctx) => {
      times.push(clock.now());
      // The second and third passes stop at their budget with work waiting.
      if (times.length === 2 || times.length === 3) ctx.again?.();
      return Promise.resolve();
    });
    const ticked = tickWith(rt, 'a');
    await clock.advance(0);
    await ticked;
    await clock.advance(5_000);
    await clock.advance(0);
    assert.deepEqual(times, [0, 5_000, 5_000, 5_000], 'two passes asked for another: both came without the interval');
    await clock.advance(4_999);
    assert.equal(times.length, 4, 'the fourth pass did not ask: the interval again');
    await clock.advance(1);
    assert.deepEqual(times, [0, 5_000, 5_000, 5_000, 10_000]);
    await rt.stop();
  });

  it('backs off while passes find no work (2, 4, 8, then 10 s), and starts over from 1 s after a busy pass or a nudge; ticks add no pass while its own are on time; idle once at the ceiling', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const times: number[] = [];
    const busyAt = 64_000;
    const rt = runtime(
      clock,
      store,
      (ctx) => {
        times.push(clock.now());
        if (clock.now() === busyAt) ctx.busy?.();
        return Promise.resolve();
      },
      'r',
      { passIntervalMs: 1_000, idlePassIntervalMs: 10_000 },
    );
    assert.equal(rt.state().idle, false, 'not leading: not idle');
    const ticked = tickWith(rt, 'a');
    await clock.advance(0);
    await ticked;
    assert.equal(rt.state().idle, false, 'backing off, not yet at the ceiling');
    for (let i = 0; i < 40; i++) await clock.advance(1_000);
    assert.deepEqual(times, [0, 2_000, 6_000, 14_000, 24_000, 34_000], 'idle: the interval doubles up to the idle ceiling');
    assert.equal(rt.state().passIntervalMs, 10_000);
    assert.equal(rt.state().idle, true, 'at the ceiling after passes that found no work');
    // Ticks every 5 s while the own passes are on time: no extra pass.
    for (let i = 0; i < 3; i++) {
      const t = tickWith(rt, 'tick');
      await clock.advance(0);
      await t;
      await clock.advance(5_000);
    }
    assert.deepEqual(times.slice(6), [44_000, 54_000], 'only the own passes, 10 s apart');
    // A pass that finds work (at 64 s): the next one after 1 s, then the back-off starts over.
    await clock.advance(9_000);
    await clock.advance(1_000);
    await clock.advance(2_000);
    assert.deepEqual(times.slice(-3), [64_000, 65_000, 67_000], 'busy: 1 s, then 2 s');
    assert.equal(rt.state().idle, false, 'a busy pass ends the idle');
    // A nudge (a submission by HTTP on this instance): a pass at once, and the back-off from the start.
    await clock.advance(1_500);
    rt.nudge();
    assert.equal(rt.state().idle, false);
    await clock.advance(0);
    assert.equal(times.at(-1), 68_500);
    await clock.advance(2_000);
    assert.equal(times.at(-1), 70_500, 'the pass after the nudged (idle) one comes after 2 s, not the 8 s it had reached');
    await rt.stop();
  });

  it('refuses an idle pass interval below the pass interval or at the stall timeout', () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    for (const idlePassIntervalMs of [500, STALL_TIMEOUT_MS]) {
      assert.throws(
        () => runtime(clock, store, () => Promise.resolve(), 'r', { passIntervalMs: 1_000, idlePassIntervalMs }),
        (err: unknown) => err instanceof ElectorConfigError && err.option === 'idlePassIntervalMs',
      );
    }
  });

  it('never runs two passes at once, however ticks and the interval coincide', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    let running = 0;
    let maxRunning = 0;
    let count = 0;
    const rt = runtime(
      clock,
      store,
      async (ctx) => {
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        count += 1;
        await clock.sleep(7_000, ctx.signal); // slower than the pass interval and the ticks
        ctx.progress();
        running -= 1;
      },
      'r',
      { passIntervalMs: 1_000 },
    );
    const ticks: Array<Promise<unknown>> = [];
    for (let i = 0; i < 10; i++) {
      ticks.push(tickWith(rt, `t${i}`));
      await clock.advance(1_000);
    }
    await clock.advance(10_000);
    await Promise.all(ticks);
    assert.equal(maxRunning, 1);
    assert.ok(count >= 2);
  });

  it('aborts a running pass when leadership is lost, and records no error for it', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const signals: AbortSignal[] = [];
    const rt = runtime(clock, store, (ctx: CoordinationContext) => {
      signals.push(ctx.signal);
      return new Promise<void>((_resolve, reject) => ctx.signal.addEventListener('abort', () => reject(new Error('pass aborted')), { once: true }));
    });
    void tickWith(rt, 'x');
    await clock.advance(1_000);
    assert.equal(signals.length, 1);
    assert.equal(signals[0]?.aborted, false);
    store.breakLease();
    await clock.advance(3_999);
    assert.equal(signals[0]?.aborted, false);
    await clock.advance(1);
    assert.equal(signals[0]?.aborted, true);
    assert.equal(rt.counters().lost, 1);
    assert.equal(rt.state().lastPassError, undefined);
  });

  it('records a failed pass with a code and keeps leading', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const rt = runtime(clock, store, () => Promise.reject(new Error('boom')));
    void tickWith(rt, 'x');
    await clock.advance(0);
    const state = rt.state();
    assert.equal(state.role, 'leader');
    assert.equal(state.lastPassError?.code, 'PASS_FAILED');
    assert.equal(state.lastPassError?.message, 'boom');
    assert.equal(state.passes, 0);
  });

  it('steps down through the watchdog when a pass hangs without progress', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const rt = runtime(clock, store, () => new Promise<void>(() => undefined), 'r', { stallTimeoutMs: 20_000 });
    void tickWith(rt, 'x');
    await clock.advance(19_999);
    assert.equal(rt.state().role, 'leader');
    await clock.advance(1);
    assert.equal(rt.state().role, 'follower');
    assert.equal(rt.counters().stalls, 1);
  });

  it('steps a stalled leader down (release, then sit out one lease period) so a healthy one takes over', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const leaseId = '00000000-0000-4000-8000-00000000a11e';
    const ended: string[] = [];
    const observer: RuntimeObserver = { termEnded: (t) => ended.push(`${t.epoch} ${t.reason}`) };
    const a = runtime(clock, store, () => new Promise<void>(() => undefined), 'a', { stallTimeoutMs: 20_000, leaseId, observer });
    const b = runtime(clock, store, () => Promise.resolve(), 'b');
    void tickWith(a, 'a');
    await clock.advance(0);
    offerWith(b, 'b');
    await clock.advance(19_999);
    assert.equal(a.state().role, 'leader', 'renewals alone do not keep a stalled leader');
    await clock.advance(1);
    assert.equal(a.elector.state, 'campaigning');
    assert.deepEqual(ended, ['1 stalled']);
    assert.deepEqual(
      store.calls.filter((c) => c.op === 'release' && c.leaseId === leaseId).map((c) => c.at),
      [20_000],
    );
    assert.equal(a.counters().stalls, 1);
    await clock.advance(TIMING.retryPeriodMs);
    assert.equal(b.state().role, 'leader');
    await clock.advance(20_000);
    const aAcquires = store.calls.filter((c) => c.op === 'acquire' && c.leaseId === leaseId && c.at > 20_000).map((c) => c.at);
    assert.ok(aAcquires.length > 0 && aAcquires.every((t) => t >= 35_000), `a campaigned at ${aAcquires.join(', ')}`);
  });

  it('logs the stall with how long the term was held and how long its work was silent', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    const logger = debugMemoryLogger('r');
    const rt = runtime(clock, store, async (ctx) => {
      // Reports progress for 12 s, then hangs without a word.
      for (let i = 0; i < 4; i++) {
        await clock.sleep(3_000);
        ctx.progress();
      }
      await new Promise<void>(() => undefined);
    }, 'r', { stallTimeoutMs: 20_000, logger });
    void tickWith(rt, 'x');
    await clock.advance(31_999);
    assert.equal(rt.state().role, 'leader', 'progress at 12 s moved the watchdog to 32 s');
    await clock.advance(1);
    assert.equal(rt.state().role, 'follower');
    const stalled = logger.lines.find((l) => l.event === 'leader.stalled');
    assert.deepEqual(
      stalled === undefined ? undefined : { epoch: stalled.epoch, heldMs: stalled.heldMs, sinceProgressMs: stalled.sinceProgressMs },
      { epoch: 1, heldMs: 32_000, sinceProgressMs: 20_000 },
    );
  });

  it('keeps a leader whose long pass reports progress, however long the pass runs', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    let finished = 0;
    const rt = runtime(clock, store, async (ctx) => {
      for (let i = 0; i < 12; i++) {
        await clock.sleep(5_000, ctx.signal);
        ctx.progress();
      }
      finished += 1;
    }, 'r', { stallTimeoutMs: 20_000 });
    void tickWith(rt, 'x');
    await clock.advance(60_000);
    assert.equal(rt.state().role, 'leader');
    assert.equal(finished, 1, 'a 60 s pass with progress every 5 s ran to its end');
    assert.equal(rt.counters().stalls, 0);
  });

  it('stop() aborts the pass, waits for it, then releases the lease', async () => {
    const clock = new ManualClock();
    const store = new MemoryLeaseStore(clock);
    let finishedAt: number | undefined;
    const rt = runtime(clock, store, async (ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve(), { once: true }));
      await clock.sleep(500);
      finishedAt = clock.now();
    });
    void tickWith(rt, 'x');
    await clock.advance(1_000);
    const stopped = rt.stop();
    await clock.advance(499);
    assert.equal(store.leaseState, 'leased');
    await clock.advance(1);
    await stopped;
    assert.equal(finishedAt, 1_500);
    assert.equal(store.leaseState, 'available');
    assert.equal(rt.state().role, 'stopped');
    const after = await tickWith(rt, 'late');
    assert.equal(after.role, 'stopped');
  });

  it('rejects a pass interval the watchdog would mistake for a stall', () => {
    const clock = new ManualClock();
    assert.throws(
      () => runtime(clock, new MemoryLeaseStore(clock), () => Promise.resolve(), 'r', { passIntervalMs: 60_000, stallTimeoutMs: 60_000 }),
      (err: unknown) => err instanceof ElectorConfigError && err.option === 'passIntervalMs',
    );
    assert.throws(
      () => runtime(clock, new MemoryLeaseStore(clock), () => Promise.resolve(), 'r', { passIntervalMs: 0 }),
      (err: unknown) => err instanceof ElectorConfigError && err.option === 'passIntervalMs',
    );
    assert.throws(
      () => runtime(clock, new MemoryLeaseStore(clock), () => Promise.resolve(), 'r', { stallTimeoutMs: 0 }),
      (err: unknown) => err instanceof ElectorConfigError && err.option === 'stallTimeoutMs' && /greater than 0/.test(err.message),
    );
  });
});
