import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { loadSettings } from '../../../shared/config/settings';
import { ElectorConfigError, NotLeaderError } from '../../../shared/leader/errors';
import { LeaseElector, type LeaseElectorOptions } from '../../../shared/leader/LeaseElector';
import { contender, TIMING } from './contender';
import { ManualClock } from './ManualClock';
import { MemoryLeaseStore } from './MemoryLeaseStore';

function setup(): { clock: ManualClock; store: MemoryLeaseStore } {
  const clock = new ManualClock();
  return { clock, store: new MemoryLeaseStore(clock) };
}

/** Contender a leads (started first), b campaigns from a moment later; the clock then runs `ms`. */
async function leaderAndFollower(ms: number) {
  const { clock, store } = setup();
  const a = contender(store, clock, 'a');
  const b = contender(store, clock, 'b');
  a.elector.start();
  await clock.advance(0);
  b.elector.start();
  await clock.advance(ms);
  return { clock, store, a, b };
}

function callTimes(store: MemoryLeaseStore, op: string, leaseId?: string): number[] {
  return store.calls.filter((c) => c.op === op && (leaseId === undefined || c.leaseId === leaseId)).map((c) => c.at);
}

describe('LeaseElector', () => {
  it('acquires a free lease and writes epoch 1, holder and acquiredAt through it', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(0);
    assert.equal(a.elector.role, 'leader');
    assert.equal(a.elector.epoch, 1);
    assert.equal(store.holderLeaseId, a.leaseId);
    const leader = await a.elector.currentLeader();
    assert.deepEqual(leader, { holder: 'a', epoch: 1, acquiredAt: '2026-01-01T00:00:00.000Z', leaseState: 'leased', leaseStatus: 'locked' });
    assert.equal(a.elector.counters().acquired, 1);
    assert.ok(a.logs.some((l) => l.event === 'leader.acquired' && l.epoch === 1));
  });

  it('keeps a second contender a follower that can report the leader', async () => {
    const { a, b } = await leaderAndFollower(30_000);
    assert.equal(a.elector.role, 'leader');
    assert.equal(b.elector.role, 'follower');
    assert.equal(b.terms.length, 0);
    assert.equal((await b.elector.currentLeader()).holder, 'a');
    assert.ok(b.logs.some((l) => l.event === 'leader.observed' && l.leader === 'a'));
  });

  it('renews every L/3, counted from when the last renewal was sent', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(20_000);
    assert.deepEqual(callTimes(store, 'renew'), [5_000, 10_000, 15_000, 20_000]);
    assert.equal(a.elector.counters().renewed, 4);
    assert.equal(a.elector.role, 'leader');
  });

  it('retries a failed renewal after the retry period and stays leader when it succeeds', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    let failNext = true;
    store.fault = (op) => {
      if (op === 'renew' && failNext) {
        failNext = false;
        return 'fail';
      }
      return undefined;
    };
    a.elector.start();
    await clock.advance(11_999);
    assert.deepEqual(callTimes(store, 'renew'), [5_000, 7_000]);
    assert.equal(a.elector.role, 'leader');
    assert.equal(a.elector.counters().renewFailures, 1);
    assert.equal(a.elector.counters().renewed, 1);
    // The next regular renewal counts from the successful one at 7 s.
    await clock.advance(1);
    assert.deepEqual(callTimes(store, 'renew'), [5_000, 7_000, 12_000]);
  });

  it('cuts off a hung request at requestTimeoutMs', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    store.fault = (op) => (op === 'acquire' ? 'hang' : undefined);
    a.elector.start();
    await clock.advance(5_000);
    assert.deepEqual(
      store.aborts.map((x) => x.at),
      [2_000],
    );
    assert.deepEqual(callTimes(store, 'acquire'), [0, 4_000]);
    assert.equal(a.elector.role, 'follower');
    assert.ok(a.logs.some((l) => l.event === 'leader.campaign_failed'));
  });

  it('steps down when no renewal succeeded for the renew deadline, before the lease can expire', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(5_000); // renewal sent at 5 s succeeds: deadline 15 s, lease expiry no earlier than 20 s
    store.fault = (op) => (op === 'renew' ? 'hang' : undefined);
    await clock.advance(9_999);
    assert.equal(a.elector.role, 'leader', 'still leading just before the deadline');
    await clock.advance(1);
    const term = a.terms[0];
    assert.ok(term !== undefined);
    assert.equal(term.reason, 'deadline');
    assert.equal(term.endedAt, 15_000);
    assert.ok(term.leadership.signal.aborted);
    assert.ok(term.leadership.signal.reason instanceof NotLeaderError);
    // Each hung try was cut off: at its timeout, and the last one at the deadline itself.
    assert.deepEqual(callTimes(store, 'renew'), [5_000, 10_000, 14_000]);
    assert.deepEqual(
      store.aborts.filter((x) => x.op === 'renew').map((x) => x.at),
      [12_000, 15_000],
    );
    assert.equal(a.elector.counters().lost, 1);
    assert.equal(a.elector.counters().renewFailures, 2);
    assert.ok(a.logs.some((l) => l.event === 'leader.lost' && l.reason === 'deadline'));
  });

  it('steps down at once when a renewal is answered "lease lost"', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(1_000);
    store.fault = (op) => (op === 'renew' ? 'lost' : op === 'acquire' ? 'fail' : undefined);
    await clock.advance(4_000);
    assert.equal(a.terms[0]?.reason, 'lost');
    assert.equal(a.terms[0]?.endedAt, 5_000);
    assert.equal(a.elector.role, 'follower');
    assert.equal(a.elector.counters().lost, 1);
  });

  it('loses leadership at the next renewal when someone else breaks or changes the lease', async () => {
    for (const tamper of ['break', 'change'] as const) {
      const { clock, store } = setup();
      const a = contender(store, clock, 'a');
      a.elector.start();
      await clock.advance(6_000);
      if (tamper === 'break') store.breakLease();
      else store.changeLease('11111111-2222-4333-8444-555555555555');
      await clock.advance(3_999);
      assert.equal(a.elector.role, 'leader', `${tamper}: not noticed before the next renewal`);
      await clock.advance(1);
      assert.equal(a.terms[0]?.reason, 'lost', tamper);
      assert.equal(a.terms[0]?.endedAt, 10_000, tamper);
    }
  });

  it('campaigns again after losing, without a restart, with a higher epoch', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(1_000);
    store.breakLease();
    await clock.advance(4_000); // lost at 5 s; a broken lease can be acquired again
    await clock.advance(4_000);
    assert.deepEqual(
      a.terms.map((t) => t.epoch),
      [1, 2],
    );
    assert.equal(a.elector.role, 'leader');
    assert.equal((await a.elector.currentLeader()).epoch, 2);
  });

  it('keeps epochs strictly increasing across leaders', async () => {
    const { clock, store } = setup();
    const seen: number[] = [];
    for (const name of ['a', 'b', 'c', 'a2']) {
      const x = contender(store, clock, name);
      x.elector.start();
      await clock.advance(2_000);
      assert.equal(x.elector.role, 'leader', name);
      seen.push(x.elector.epoch ?? -1);
      const stopped = x.elector.stop();
      await clock.advance(0);
      await stopped;
    }
    assert.deepEqual(seen, [1, 2, 3, 4]);
  });

  it('graceful stop aborts leader work, waits for it to drain, then releases; a follower leads within one campaign period', async () => {
    const { clock, store } = setup();
    let drainedAt: number | undefined;
    const a = contender(store, clock, 'a', {}, async (l) => {
      await new Promise<void>((resolve) => l.signal.addEventListener('abort', () => resolve(), { once: true }));
      await clock.sleep(1_500); // winding down takes 1.5 s
      drainedAt = clock.now();
    });
    const b = contender(store, clock, 'b');
    a.elector.start();
    await clock.advance(0);
    b.elector.start();
    await clock.advance(1_000);
    let stopped = false;
    void a.elector.stop().then(() => {
      stopped = true;
    });
    await clock.advance(1_499);
    assert.ok(a.terms[0]?.leadership.signal.aborted, 'work is told to stop at once');
    assert.equal(store.holderLeaseId, a.leaseId, 'lease still held while work drains');
    assert.equal(stopped, false);
    await clock.advance(1);
    assert.equal(drainedAt, 2_500);
    assert.equal(store.leaseState, 'available');
    assert.equal(stopped, true);
    assert.equal(a.elector.role, 'stopped');
    assert.equal(a.terms[0]?.reason, 'released');
    assert.equal(a.elector.counters().released, 1);
    const t = await clock.advanceUntil(() => b.elector.role === 'leader', 10_000);
    assert.ok(t - 2_500 <= TIMING.retryPeriodMs, `follower took ${t - 2_500} ms`);
  });

  it('bounds the drain by drainTimeoutMs when leader work ignores the signal', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a', {}, () => new Promise<void>(() => undefined));
    a.elector.start();
    await clock.advance(1_000);
    void a.elector.stop();
    await clock.advance(2_999);
    assert.equal(store.holderLeaseId, a.leaseId);
    await clock.advance(1);
    assert.equal(store.leaseState, 'available');
    assert.deepEqual(callTimes(store, 'release'), [4_000]);
    assert.ok(a.logs.some((l) => l.event === 'leader.drain_timeout'));
  });

  it('a paused leader learns at once that it passed its deadline and cannot write through the lease', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(1_000);
    const leadership = a.terms[0]?.leadership;
    assert.ok(leadership !== undefined);
    await leadership.writeThroughLease({ checkpoint: '1' });
    assert.equal((await store.read(new AbortController().signal)).extra.checkpoint, '1');
    clock.jump(16_000); // the process was frozen: no timer has run
    const writesBefore = callTimes(store, 'write').length;
    await assert.rejects(leadership.writeThroughLease({ checkpoint: '2' }), NotLeaderError);
    assert.equal(callTimes(store, 'write').length, writesBefore, 'no write was even sent');
    assert.ok(leadership.signal.aborted);
    assert.equal(a.terms[0]?.reason, 'deadline');
    await assert.rejects(leadership.verify(), NotLeaderError);
  });

  it('a leader whose lease was taken cannot write through it and learns it lost', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(1_000);
    const leadership = a.terms[0]?.leadership;
    assert.ok(leadership !== undefined);
    store.changeLease('11111111-2222-4333-8444-555555555555');
    await assert.rejects(leadership.writeThroughLease({ checkpoint: 'stale' }), NotLeaderError);
    assert.equal((await store.read(new AbortController().signal)).extra.checkpoint, undefined);
    assert.ok(leadership.signal.aborted);
    assert.equal(a.terms[0]?.reason, 'lost');
    assert.equal(a.elector.role, 'follower');
  });

  it('verify() renews: it confirms a live lease and exposes a lost one', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(1_000);
    const leadership = a.terms[0]?.leadership;
    assert.ok(leadership !== undefined);
    await leadership.verify();
    assert.equal(a.elector.counters().renewed, 1);
    store.breakLease();
    await assert.rejects(leadership.verify(), NotLeaderError);
    assert.equal(a.terms[0]?.reason, 'lost');
  });

  it('campaigns at a jittered period no longer than the campaign period', async () => {
    for (const r of [0, 0.5, 0.999]) {
      const { clock, store } = setup();
      const a = contender(store, clock, 'a');
      a.elector.start();
      await clock.advance(0);
      const b = contender(store, clock, 'b', { random: () => r });
      b.elector.start();
      await clock.advance(10_000);
      const times = callTimes(store, 'acquire', b.leaseId);
      const gaps = times.slice(1).map((t, i) => t - (times[i] ?? 0));
      assert.ok(gaps.length >= 4);
      for (const gap of gaps) assert.ok(gap >= 1_000 && gap <= 2_000, `gap ${gap} with random ${r}`);
      assert.ok(Math.abs((gaps[0] ?? 0) - 2_000 * (1 - 0.5 * r)) < 1);
    }
  });

  it('campaignNow() attempts at once and resolves after the attempt', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(0);
    const b = contender(store, clock, 'b');
    b.elector.start();
    await clock.advance(500);
    await b.elector.campaignNow();
    assert.deepEqual(callTimes(store, 'acquire', b.leaseId), [0, 500]);
  });

  it('a crash (stop without release) leaves the lease to lapse; a follower takes over only after it expires', async () => {
    const { clock, store, a, b } = await leaderAndFollower(6_000); // last renewal sent at 5 s
    void a.elector.stop({ release: false });
    const t = await clock.advanceUntil(() => b.elector.role === 'leader', 30_000);
    assert.ok(t >= 20_000, `took over at ${t}, before the lease expired at 20000`);
    assert.ok(t <= 20_000 + TIMING.retryPeriodMs, `took over at ${t}`);
    assert.equal(callTimes(store, 'release', a.leaseId).length, 0);
  });
});

describe('LeaseElector states', () => {
  it('moves idle -> campaigning -> leading -> campaigning (lease lost) -> leading -> stopping -> stopped', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    const seen = (): string => `${a.elector.state}/${a.elector.role}/${String(a.elector.epoch)}`;
    assert.equal(seen(), 'idle/follower/undefined');
    a.elector.start();
    assert.equal(seen(), 'campaigning/follower/undefined', 'campaigning as soon as it starts');
    await clock.advance(0);
    assert.equal(seen(), 'leading/leader/1');
    store.fault = (op) => (op === 'renew' ? 'lost' : op === 'acquire' ? 'fail' : undefined);
    await clock.advance(5_000);
    assert.equal(seen(), 'campaigning/follower/undefined', 'the renewal at 5 s was answered "lost"');
    store.fault = () => undefined;
    await clock.advance(TIMING.retryPeriodMs);
    assert.equal(seen(), 'leading/leader/2');
    const stopped = a.elector.stop();
    assert.equal(seen(), 'stopping/leader/2', 'still holds the lease while its work drains');
    await clock.advance(0);
    await stopped;
    assert.equal(seen(), 'stopped/stopped/undefined');
    assert.equal(store.leaseState, 'available');
    a.elector.start();
    await a.elector.campaignNow();
    await clock.advance(10_000);
    assert.equal(seen(), 'stopped/stopped/undefined', 'a stopped elector never campaigns again');
    assert.deepEqual(
      a.terms.map((t) => [t.epoch, t.reason]),
      [
        [1, 'lost'],
        [2, 'released'],
      ],
    );
  });

  it('a follower asked to stop goes stopping -> stopped without touching the lease', async () => {
    const { clock, store, a, b } = await leaderAndFollower(1_000);
    assert.equal(b.elector.state, 'campaigning');
    const stopped = b.elector.stop();
    assert.equal(b.elector.state, 'stopping');
    assert.equal(b.elector.role, 'stopped');
    await clock.advance(0);
    await stopped;
    assert.equal(b.elector.state, 'stopped');
    assert.deepEqual(callTimes(store, 'release', b.leaseId), []);
    assert.equal(store.holderLeaseId, a.leaseId);
    assert.equal(new LeaseElector({ ...TIMING, store, clock, holder: 'never', callbacks: { onStartedLeading: () => undefined } }).state, 'idle');
  });

  it('stop({ release: false }) ends the term at once, renews no more and leaves the lease to expire L after its last renewal', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(6_000); // last renewal sent at 5 s: the lease runs until 20 s
    const stopped = a.elector.stop({ release: false });
    assert.equal(a.terms[0]?.leadership.signal.aborted, true, 'its belief ends now');
    assert.equal(a.terms[0]?.reason, 'abandoned');
    assert.equal(a.elector.state, 'stopping');
    await clock.advance(0);
    await stopped;
    assert.equal(a.elector.state, 'stopped');
    await clock.advance(13_999);
    assert.equal(store.leaseState, 'leased', 'nobody released it');
    await clock.advance(1);
    assert.equal(store.leaseState, 'expired');
    assert.deepEqual(callTimes(store, 'renew'), [5_000]);
    assert.deepEqual(callTimes(store, 'release'), []);
    assert.equal(a.elector.counters().released, 0);
  });

  it('stop({ release: false }) during a graceful drain keeps the lease unreleased', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a', {}, () => new Promise<void>(() => undefined));
    a.elector.start();
    await clock.advance(1_000);
    const graceful = a.elector.stop();
    await clock.advance(1_000);
    const crash = a.elector.stop({ release: false });
    assert.equal(a.terms[0]?.reason, 'abandoned');
    assert.equal(a.elector.role, 'stopped');
    await clock.advance(TIMING.drainTimeoutMs);
    await Promise.all([graceful, crash]);
    assert.equal(a.elector.state, 'stopped');
    assert.deepEqual(callTimes(store, 'release'), []);
  });

  it('resign() ends the term, releases, and campaigns again only after the sit-out', async () => {
    const { clock, store } = setup();
    const a = contender(store, clock, 'a');
    a.elector.start();
    await clock.advance(1_000);
    const leadership = a.terms[0]?.leadership;
    assert.ok(leadership !== undefined);
    await leadership.resign('stalled', 15_000);
    assert.equal(a.elector.state, 'campaigning');
    assert.equal(a.terms[0]?.reason, 'stalled');
    assert.deepEqual(callTimes(store, 'release', a.leaseId), [1_000]);
    assert.equal(store.leaseState, 'available');
    assert.equal(a.elector.counters().stalls, 1);
    await a.elector.campaignNow();
    assert.deepEqual(callTimes(store, 'acquire', a.leaseId), [0], 'a tick during the sit-out does not campaign');
    await clock.advance(14_999);
    assert.equal(a.elector.state, 'campaigning');
    await clock.advance(1);
    assert.equal(a.elector.state, 'leading');
    assert.deepEqual(callTimes(store, 'acquire', a.leaseId), [0, 16_000]);
    await assert.rejects(leadership.verify(), NotLeaderError, 'the resigned term stays over');
  });
});

describe('LeaseElector configuration', () => {
  const base = (): LeaseElectorOptions => {
    const clock = new ManualClock();
    return { ...TIMING, store: new MemoryLeaseStore(clock), clock, holder: 'x', callbacks: { onStartedLeading: () => undefined } };
  };
  const cases: Array<[string, Partial<LeaseElectorOptions>, string, RegExp]> = [
    ['a lease under 15 s', { leaseSeconds: 14 }, 'leaseSeconds', /15 to 60/],
    ['a lease over 60 s', { leaseSeconds: 61 }, 'leaseSeconds', /15 to 60/],
    ['a fractional lease', { leaseSeconds: 15.5 }, 'leaseSeconds', /whole number/],
    ['a lease that is not a number', { leaseSeconds: NaN }, 'leaseSeconds', /not a finite number/],
    ['a renew deadline as long as the lease', { renewDeadlineMs: 15_000 }, 'renewDeadlineMs', /15000 ms must be less than leaseSeconds \(15 s\)/],
    ['a zero renew deadline', { renewDeadlineMs: 0 }, 'renewDeadlineMs', /greater than 0/],
    ['a retry period as long as the deadline', { retryPeriodMs: 10_000 }, 'retryPeriodMs', /10000 ms must be less than renewDeadlineMs \(10000 ms\)/],
    ['a negative retry period', { retryPeriodMs: -1 }, 'retryPeriodMs', /greater than 0/],
    ['a request timeout as long as the deadline', { requestTimeoutMs: 10_000 }, 'requestTimeoutMs', /must be less than renewDeadlineMs/],
    ['a negative drain timeout', { drainTimeoutMs: -1 }, 'drainTimeoutMs', /0 or more/],
    ['a renew interval as long as the deadline', { renewIntervalMs: 10_000 }, 'renewIntervalMs', /must be less than renewDeadlineMs/],
    ['a zero campaign period', { campaignPeriodMs: 0 }, 'campaignPeriodMs', /greater than 0/],
    ['jitter of 1', { jitter: 1 }, 'jitter', /0 to 0.9/],
    ['a holder with spaces', { holder: 'my host' }, 'holder', /letters, digits/],
    ['an empty holder', { holder: '' }, 'holder', /letters, digits/],
    ['a lease id that is not a GUID', { leaseId: 'leader-1' }, 'leaseId', /GUID/],
    ['no leader work', { callbacks: {} as LeaseElectorOptions['callbacks'] }, 'callbacks.onStartedLeading', /required/],
  ];
  for (const [what, override, option, message] of cases) {
    it(`rejects ${what}, naming ${option}`, () => {
      assert.throws(
        () => new LeaseElector({ ...base(), ...override }),
        (err: unknown) => err instanceof ElectorConfigError && err.option === option && err.code === 'LEADER_CONFIG_INVALID' && err.message.includes(option) && message.test(err.message),
      );
    });
  }

  it('accepts what the settings accept, with renewals every L/3 by default', () => {
    for (const env of [{}, { LEADER_LEASE_SECONDS: '60' }, { LEADER_RENEW_DEADLINE_SECONDS: '1', LEADER_RETRY_PERIOD_SECONDS: '0.5' }, { LEADER_LEASE_SECONDS: '20', LEADER_RENEW_DEADLINE_SECONDS: '19' }]) {
      const leader = loadSettings({ AzureWebJobsStorage: 'UseDevelopmentStorage=true', ...env }).leader;
      const elector = new LeaseElector({ ...base(), ...leader });
      assert.ok(elector.timing.renewIntervalMs < elector.timing.renewDeadlineMs, JSON.stringify(env));
    }
    assert.equal(new LeaseElector(base()).timing.renewIntervalMs, 5_000);
  });
});
