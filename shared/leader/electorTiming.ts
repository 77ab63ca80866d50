/**
 * The elector's timing, checked once at construction (as client-go does) so that a configuration
 * that could let two leaders overlap fails at start with a message naming the option, not at 3 a.m.
 *
 * The safety argument: a leader steps down at `sent + D`, where `sent` is when its last successful
 * acquire/renew request left this process; the service cannot have granted that lease before the
 * request was sent, so it cannot expire before `sent + L`. With D < L the leader always stops
 * believing before anyone else can acquire, with L - D of margin for clock-rate differences.
 */
import { ElectorConfigError } from './errors';

export interface ElectorTimingOptions {
  /** L: lease duration in whole seconds, 15..60 (the service's range for a finite lease). */
  readonly leaseSeconds: number;
  /** D: step down when no renewal succeeded for this long (from when it was sent). D < L. */
  readonly renewDeadlineMs: number;
  /** How soon a failed renewal is retried, and the follower campaign period. < D. */
  readonly retryPeriodMs: number;
  /** Hard limit on one storage request. < D. */
  readonly requestTimeoutMs: number;
  /** Watchdog: step down when leader work reports no progress for this long. */
  readonly stallTimeoutMs: number;
  /** Graceful stop waits at most this long for leader work to finish before releasing. */
  readonly drainTimeoutMs: number;
  /** Renew this often while leading; default min(L/3, D - retry period). < D. */
  readonly renewIntervalMs?: number;
  /** Followers campaign this often; default the retry period. Only failover speed depends on it. */
  readonly campaignPeriodMs?: number;
  /** Followers wait a uniform random time in [period x (1 - jitter), period]; 0..0.9, default 0.5. */
  readonly jitter?: number;
}

export type ElectorTiming = Required<ElectorTimingOptions>;

export const DEFAULT_JITTER = 0.5;

export function validateTiming(options: ElectorTimingOptions): ElectorTiming {
  const L = options.leaseSeconds;
  finite('leaseSeconds', L);
  if (!Number.isInteger(L) || L < 15 || L > 60) {
    throw new ElectorConfigError('leaseSeconds', `${L} must be a whole number of seconds from 15 to 60 (the range Azure accepts for a finite blob lease).`);
  }
  const leaseMs = L * 1000;
  const D = positive('renewDeadlineMs', options.renewDeadlineMs);
  if (D >= leaseMs) {
    throw new ElectorConfigError('renewDeadlineMs', `${D} ms must be shorter than leaseSeconds (${leaseMs} ms), so a leader steps down before its lease can expire elsewhere.`);
  }
  const retry = positive('retryPeriodMs', options.retryPeriodMs);
  if (retry >= D) {
    throw new ElectorConfigError('retryPeriodMs', `${retry} ms must be shorter than renewDeadlineMs (${D} ms), so a failed renewal is retried before the deadline.`);
  }
  const requestTimeout = positive('requestTimeoutMs', options.requestTimeoutMs);
  if (requestTimeout >= D) {
    throw new ElectorConfigError('requestTimeoutMs', `${requestTimeout} ms must be shorter than renewDeadlineMs (${D} ms), so one hung request cannot outlast the deadline.`);
  }
  const stall = positive('stallTimeoutMs', options.stallTimeoutMs);
  const drain = options.drainTimeoutMs;
  finite('drainTimeoutMs', drain);
  if (drain < 0) throw new ElectorConfigError('drainTimeoutMs', `${drain} ms must be 0 or more.`);
  const renewInterval = options.renewIntervalMs === undefined ? Math.min(leaseMs / 3, D - retry) : positive('renewIntervalMs', options.renewIntervalMs);
  if (renewInterval >= D) {
    throw new ElectorConfigError('renewIntervalMs', `${renewInterval} ms must be shorter than renewDeadlineMs (${D} ms), or the leader steps down before it ever renews.`);
  }
  const campaign = options.campaignPeriodMs === undefined ? retry : positive('campaignPeriodMs', options.campaignPeriodMs);
  const jitter = options.jitter ?? DEFAULT_JITTER;
  finite('jitter', jitter);
  if (jitter < 0 || jitter > 0.9) throw new ElectorConfigError('jitter', `${jitter} must be from 0 to 0.9.`);
  return {
    leaseSeconds: L,
    renewDeadlineMs: D,
    retryPeriodMs: retry,
    requestTimeoutMs: requestTimeout,
    stallTimeoutMs: stall,
    drainTimeoutMs: drain,
    renewIntervalMs: renewInterval,
    campaignPeriodMs: campaign,
    jitter,
  };
}

function finite(option: string, value: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value)) throw new ElectorConfigError(option, `${String(value)} is not a finite number.`);
}

function positive(option: string, value: number): number {
  finite(option, value);
  if (value <= 0) throw new ElectorConfigError(option, `${value} must be greater than 0.`);
  return value;
}
