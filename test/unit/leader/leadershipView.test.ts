/**
 * Who the live page says leads, from the lease record and the heartbeats, at chosen instants: the
 * holder of the lease leads while it beats; a holder that misses its beats, says it stepped down, or
 * whose lease lapsed is a takeover with its latest time; a newer term announced by a fresh beat wins
 * over an older lease read.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type InstanceSeen } from '../../../shared/leader/InstanceHeartbeats';
import { LATE_GRACE_MS, leadershipView, leaseTimingView } from '../../../shared/leader/leadershipView';
import { type PublicLeaderView } from '../../../shared/leader/leaderStatus';

const T0 = Date.parse('2026-11-21T09:00:00.000Z');
const at = (ms: number): Date => new Date(T0 + ms);
const iso = (ms: number): string => at(ms).toISOString();
// The defaults: L 15 s, D 10 s, retry 2 s, renew every 5 s.
const timing = leaseTimingView({
  leaseSeconds: 15, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, requestTimeoutMs: 2_000, drainTimeoutMs: 10_000,
  renewIntervalMs: 5_000, campaignPeriodMs: 2_000, jitter: 0.5,
});

function lease(holder: string | null, epoch: number | null, leaseState = 'leased', acquiredMs = -60_000): PublicLeaderView {
  return { holder, epoch, acquiredAt: holder === null ? null : iso(acquiredMs), leaseState, leaseStatus: leaseState === 'leased' ? 'locked' : 'unlocked' };
}

function beat(id: string, role: InstanceSeen['role'], epoch: number | null, seenMs: number, intervalSeconds: number): InstanceSeen {
  return { id, role, epoch, passes: 0, startedAt: iso(-120_000), lastSeenAt: iso(seenMs), ageSeconds: 0, intervalSeconds, state: 'alive' };
}

describe('leadershipView: the leader is whoever holds the lease now', () => {
  it('reports the timings, with a takeover taking up to L plus a retry period', () => {
    assert.deepEqual(timing, { leaseSeconds: 15, renewIntervalSeconds: 5, renewDeadlineSeconds: 10, retryPeriodSeconds: 2, takeoverSeconds: 17 });
  });

  it('nobody has led yet', () => {
    const view = leadershipView(lease(null, null, 'available'), [], timing, at(0));
    assert.equal(view.state, 'none');
    assert.equal(view.holder, null);
    assert.match(view.message, /Nobody has led yet/);
  });

  it('the holder leads while it beats within its interval plus the grace, and is a silent holder one millisecond later', () => {
    const beats = [beat('a', 'leader', 7, 0, 5), beat('b', 'follower', null, -3_000, 15)];
    const edge = 5_000 + LATE_GRACE_MS;
    const leading = leadershipView(lease('a', 7), beats, timing, at(edge));
    assert.equal(leading.state, 'leading');
    assert.equal(leading.holder, 'a');
    assert.equal(leading.lastHeardAt, iso(0));
    const late = leadershipView(lease('a', 7), beats, timing, at(edge + 1));
    assert.equal(late.state, 'takeover');
    assert.equal(late.cause, 'holder-silent');
    assert.equal(late.holder, 'a', 'it still holds the lease');
    // Its last renewal came at most one beat (5 s) after it was heard; then L (15 s) and a retry period (2 s).
    assert.equal(late.takeoverBy, iso(5_000 + 15_000 + 2_000));
    assert.equal(late.overdue, false);
    assert.match(late.message, /a holds the lease \(epoch 7\) but has not been heard from for 8 s .*by 09:00:22 UTC at the latest.*17 s/);
    const overdue = leadershipView(lease('a', 7), beats, timing, at(22_001));
    assert.equal(overdue.overdue, true);
    assert.match(overdue.message, /nobody has taken over/);
  });

  it('a holder that says it no longer leads: the lease lapses within L of its last renewal, which came before that beat', () => {
    const view = leadershipView(lease('a', 7), [beat('a', 'follower', null, 1_000, 15)], timing, at(2_000));
    assert.equal(view.state, 'takeover');
    assert.equal(view.cause, 'holder-stepped-down');
    assert.equal(view.takeoverBy, iso(1_000 + 15_000 + 2_000));
  });

  it('a holder that just acquired leads before its first beat as leader lands', () => {
    const view = leadershipView(lease('b', 8, 'leased', -1_000), [beat('b', 'follower', null, -10_000, 15)], timing, at(0));
    assert.equal(view.state, 'leading');
    assert.equal(view.holder, 'b');
  });

  it('a lease that lapsed or was released: nobody leads, a follower takes it within a retry period', () => {
    for (const state of ['expired', 'available']) {
      const view = leadershipView(lease('a', 7, state), [beat('a', 'leader', 7, -20_000, 5)], timing, at(0));
      assert.equal(view.state, 'takeover');
      assert.equal(view.cause, 'lease-free');
      assert.equal(view.holder, null);
      assert.equal(view.epoch, 7);
      assert.equal(view.takeoverBy, iso(2_000));
      assert.match(view.message, new RegExp(`No leader: the lease of a \\(epoch 7\\) is ${state}`));
    }
  });

  it('a fresh beat of a newer term wins over an older lease read; a silent one does not', () => {
    const beats = [beat('a', 'leader', 7, -20_000, 5), beat('b', 'leader', 8, -1_000, 5)];
    const view = leadershipView(lease('a', 7), beats, timing, at(0));
    assert.equal(view.state, 'leading');
    assert.deepEqual([view.holder, view.epoch], ['b', 8]);
    // b's beat is 12 s old: more than two of its intervals (+1 s), so it proves nothing now.
    const stale = leadershipView(lease('a', 7, 'expired'), [beat('b', 'leader', 8, -12_000, 5)], timing, at(0));
    assert.deepEqual([stale.state, stale.holder, stale.cause], ['takeover', null, 'lease-free']);
  });
});
