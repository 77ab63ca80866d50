/**
 * Who leads now, and while nobody visibly does, what is happening and by when it should be over:
 * what the live page's Leader card says (GET /api/cluster `leadership`). The leader is whoever
 * holds the lease: the lease record, or a newer term that an instance's fresh heartbeat announces
 * (the lease read may be a couple of seconds old). Whether the holder is still there is judged by
 * its heartbeat, which a leader writes every renew interval while its passes find work (every 15 s,
 * as followers do, once they back off finding none); each beat says its interval.
 *
 * Guarantees: `leading` only while the lease is held and its holder beat within its interval plus
 * LATE_GRACE_MS; `takeoverBy` is the latest time a running follower takes over if the holder died
 * right after it was last heard (its last renewal came at most one beat later, the lease lapses L
 * after that, followers campaign every retry period).
 * Not guaranteed: that a holder shown `leading` is alive this second: a process killed a moment ago
 * looks like a healthy one until it misses a beat (up to its interval plus LATE_GRACE_MS).
 */
import { type InstanceSeen, isSilent } from './InstanceHeartbeats';
import { type PublicLeaderView } from './leaderStatus';
import { type ElectorTiming } from './leaderTiming';

/** A beat this much later than its interval is missed: Last-Modified has whole seconds, and a write may be slow. */
export const LATE_GRACE_MS = 3_000;

/** The lease timings as the API shows them, in seconds. */
export interface LeaseTimingView {
  readonly leaseSeconds: number;
  readonly renewIntervalSeconds: number;
  readonly renewDeadlineSeconds: number;
  readonly retryPeriodSeconds: number;
  /** L + retry period: how long a takeover may take after the holder's last renewal. */
  readonly takeoverSeconds: number;
}

export type LeadershipState = 'none' | 'leading' | 'takeover';
/** holder-silent: the holder missed its beats; holder-stepped-down: it says it no longer leads; lease-free: nobody holds the lease. */
export type TakeoverCause = 'holder-silent' | 'holder-stepped-down' | 'lease-free';

export interface LeadershipView {
  readonly state: LeadershipState;
  /** Who holds the lease now (null when nobody does). */
  readonly holder: string | null;
  readonly epoch: number | null;
  /** When the holder was last heard from (its heartbeat, the service's clock). */
  readonly lastHeardAt: string | null;
  readonly cause: TakeoverCause | null;
  /** During a takeover: the latest time a running follower should have taken over. */
  readonly takeoverBy: string | null;
  /** During a takeover: `takeoverBy` has passed and still nobody took over. */
  readonly overdue: boolean;
  readonly message: string;
}

export function leaseTimingView(timing: ElectorTiming): LeaseTimingView {
  return {
    leaseSeconds: timing.leaseSeconds,
    renewIntervalSeconds: timing.renewIntervalMs / 1000,
    renewDeadlineSeconds: timing.renewDeadlineMs / 1000,
    retryPeriodSeconds: timing.retryPeriodMs / 1000,
    takeoverSeconds: timing.leaseSeconds + timing.retryPeriodMs / 1000,
  };
}

const utc = (ms: number): string => `${new Date(ms).toISOString().slice(11, 19)} UTC`;
const secs = (ms: number): string => `${Math.round(ms / 1000)} s`;

export function leadershipView(
  lease: PublicLeaderView,
  instances: readonly InstanceSeen[],
  timing: LeaseTimingView,
  now: Date,
): LeadershipView {
  const nowMs = now.getTime();
  const leaseMs = timing.leaseSeconds * 1000;
  const retryMs = timing.retryPeriodSeconds * 1000;
  const beatOf = (id: string): InstanceSeen | undefined => instances.find((i) => i.id === id);
  const ageMs = (beat: InstanceSeen): number => nowMs - Date.parse(beat.lastSeenAt);

  // A fresh beat of a newer term than the lease read shows: that instance acquired the lease since.
  const newer = instances
    .filter((i) => i.role === 'leader' && (i.epoch ?? 0) > (lease.epoch ?? 0) && !isSilent(ageMs(i), i.intervalSeconds * 1000))
    .sort((a, b) => (b.epoch ?? 0) - (a.epoch ?? 0))[0];
  const holder = newer?.id ?? (lease.leaseState === 'leased' ? lease.holder : null);
  const epoch = newer?.epoch ?? lease.epoch;

  const takeover = (cause: TakeoverCause, byMs: number, lastHeardAt: string | null, what: string): LeadershipView => {
    const overdue = nowMs > byMs;
    const tail = overdue
      ? ` That time has passed and nobody has taken over: check that other instances run and reach storage.`
      : ` A takeover takes up to L + retry period = ${secs(leaseMs + retryMs)} after the holder's last renewal.`;
    const takeoverBy = new Date(byMs).toISOString();
    return { state: 'takeover', holder, epoch, lastHeardAt, cause, takeoverBy, overdue, message: what + tail };
  };

  if (holder === null) {
    if (lease.holder === null) {
      return {
        state: 'none', holder: null, epoch: null, lastHeardAt: null, cause: null, takeoverBy: null, overdue: false,
        message: `Nobody has led yet; instances campaign for the lease every ${secs(retryMs)}.`,
      };
    }
    const last = beatOf(lease.holder);
    return takeover(
      'lease-free',
      nowMs + retryMs,
      last?.lastSeenAt ?? null,
      `No leader: the lease of ${lease.holder} (epoch ${String(lease.epoch)}) is ${lease.leaseState}; ` +
        `a running follower takes it within ${secs(retryMs)} (by ${utc(nowMs + retryMs)}).`,
    );
  }

  const beat = beatOf(holder);
  const acquiredMs = newer === undefined ? Date.parse(lease.acquiredAt ?? '') : NaN;
  const ofThisTerm = beat !== undefined && beat.role === 'leader' && beat.epoch === epoch;
  const intervalMs = (beat?.intervalSeconds ?? timing.renewIntervalSeconds) * 1000;
  // Just acquired: its first beat as leader is on its way.
  const firstBeatDueMs = timing.renewIntervalSeconds * 1000 + LATE_GRACE_MS;
  const justAcquired = !ofThisTerm && Number.isFinite(acquiredMs) && nowMs - acquiredMs <= firstBeatDueMs;
  const leading = (): LeadershipView => ({
    state: 'leading', holder, epoch, lastHeardAt: beat?.lastSeenAt ?? null, cause: null, takeoverBy: null, overdue: false,
    message: `${holder} leads (epoch ${String(epoch)})${beat === undefined ? '' : `, heard from ${secs(ageMs(beat))} ago`}.`,
  });
  if (justAcquired) return leading();

  if (beat !== undefined && !ofThisTerm && beat.role !== 'leader') {
    // It stepped down (its beat after the term started says so): its last renewal came before this beat.
    const byMs = Date.parse(beat.lastSeenAt) + leaseMs + retryMs;
    return takeover(
      'holder-stepped-down',
      byMs,
      beat.lastSeenAt,
      `${holder} holds the lease (epoch ${String(epoch)}) but says it no longer leads (${beat.role}); its lease lapses within ` +
        `${secs(leaseMs)} of its last renewal and a running follower takes over by ${utc(byMs)} at the latest.`,
    );
  }

  const heardMs = beat === undefined ? acquiredMs : Date.parse(beat.lastSeenAt);
  if (Number.isFinite(heardMs) && nowMs - heardMs <= intervalMs + LATE_GRACE_MS) return leading();
  const lastHeardAt = Number.isFinite(heardMs) ? new Date(heardMs).toISOString() : null;
  // Its last renewal came at most one beat after it was last heard; the lease lapses L after it.
  const byMs = (Number.isFinite(heardMs) ? heardMs : nowMs) + intervalMs + leaseMs + retryMs;
  const quiet = Number.isFinite(heardMs) ? `has not been heard from for ${secs(nowMs - heardMs)}` : 'has never been heard from';
  return takeover(
    'holder-silent',
    byMs,
    lastHeardAt,
    `${holder} holds the lease (epoch ${String(epoch)}) but ${quiet} (it beats every ${secs(intervalMs)} while it leads): ` +
      `it may have died. If so, its lease lapses and a running follower takes over by ${utc(byMs)} at the latest.`,
  );
}
