/**
 * The leader's timing rules, all of them, in one function: `checkLeaderTiming` runs when the app
 * loads its settings (messages name the app settings, in seconds) and when an elector or runtime is
 * built (messages name the options, in milliseconds), so a configuration that could let two leaders
 * overlap fails at start with a message a person can act on, not at 3 a.m. (client-go's rule).
 *
 * The safety argument: a leader steps down at `sent + D`, where `sent` is when its last successful
 * acquire/renew request left this process; the service cannot have granted that lease before the
 * request was sent, so it cannot expire before `sent + L`. With D < L the leader always stops
 * believing before anyone else can acquire, with L - D of margin for clock-rate differences.
 * Not checked here: anything about storage latency; a store slower than D simply never leads.
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

/** The runtime's timings (CoordinatorRuntime), checked with the elector's when given. */
export interface RuntimeTimingOptions {
  /** Watchdog: step down when leader work reports no progress for this long. */
  readonly stallTimeoutMs: number;
  /** A leader runs a pass this often; < stallTimeoutMs, or the watchdog fires between passes. */
  readonly passIntervalMs: number;
  /** While passes find no work the interval grows up to this; >= passIntervalMs and < stallTimeoutMs. */
  readonly idlePassIntervalMs?: number;
}

export type TimingKey = keyof ElectorTimingOptions | keyof RuntimeTimingOptions;

/** How messages name and show each value, and which error they raise (an option's or a setting's). */
export interface TimingNames {
  name(key: TimingKey): string;
  show(key: TimingKey, value: number): string;
  error(name: string, detail: string): Error;
}

/** The elector's and runtime's own option names; durations in milliseconds. */
export const OPTION_NAMES: TimingNames = {
  name: (key) => key,
  show: (key, value) => (key === 'jitter' ? String(value) : key === 'leaseSeconds' ? `${value} s` : `${value} ms`),
  error: (name, detail) => new ElectorConfigError(name, detail),
};

export const DEFAULT_JITTER = 0.5;

/** Checks every timing rule, naming the values with `names`; returns the elector's timing with its defaults filled in. */
export function checkLeaderTiming(
  options: ElectorTimingOptions & Partial<RuntimeTimingOptions>,
  names: TimingNames = OPTION_NAMES,
): ElectorTiming {
  const fail = (key: TimingKey, value: number, rule: string): never => {
    throw names.error(names.name(key), `${names.show(key, value)} ${rule}`);
  };
  const than = (key: TimingKey, value: number): string => `${names.name(key)} (${names.show(key, value)})`;
  const finite = (key: TimingKey, value: number): number => {
    if (typeof value === 'number' && Number.isFinite(value)) return value;
    throw names.error(names.name(key), `${String(value)} is not a finite number.`);
  };
  const positive = (key: TimingKey, value: number): number =>
    finite(key, value) > 0 ? value : fail(key, value, 'must be greater than 0.');

  const L = finite('leaseSeconds', options.leaseSeconds);
  if (!Number.isInteger(L) || L < 15 || L > 60) {
    fail('leaseSeconds', L, 'must be a whole number of seconds from 15 to 60 (the range Azure accepts for a finite blob lease).');
  }
  const leaseMs = L * 1000;
  const D = positive('renewDeadlineMs', options.renewDeadlineMs);
  if (D >= leaseMs) {
    const why = 'so a leader steps down before its lease can expire elsewhere';
    fail('renewDeadlineMs', D, `must be less than ${than('leaseSeconds', L)}, ${why}.`);
  }
  const underDeadline = (key: TimingKey, value: number, why: string): number =>
    positive(key, value) < D ? value : fail(key, value, `must be less than ${than('renewDeadlineMs', D)}, ${why}.`);
  const retry = underDeadline('retryPeriodMs', options.retryPeriodMs, 'so a failed renewal is retried before the deadline');
  const requestTimeout = underDeadline('requestTimeoutMs', options.requestTimeoutMs, 'so one hung request cannot outlast the deadline');
  const drain = finite('drainTimeoutMs', options.drainTimeoutMs);
  if (drain < 0) fail('drainTimeoutMs', drain, 'must be 0 or more.');
  const renewInterval = options.renewIntervalMs ?? Math.min(leaseMs / 3, D - retry);
  underDeadline('renewIntervalMs', renewInterval, 'or the leader steps down before it ever renews');
  const campaign = options.campaignPeriodMs === undefined ? retry : positive('campaignPeriodMs', options.campaignPeriodMs);
  const jitter = finite('jitter', options.jitter ?? DEFAULT_JITTER);
  if (jitter < 0 || jitter > 0.9) fail('jitter', jitter, 'must be from 0 to 0.9.');
  const stall = options.stallTimeoutMs === undefined ? undefined : positive('stallTimeoutMs', options.stallTimeoutMs);
  const pass = options.passIntervalMs === undefined ? undefined : positive('passIntervalMs', options.passIntervalMs);
  if (stall !== undefined && pass !== undefined && pass >= stall) {
    const why = 'or the watchdog steps a healthy leader down between passes';
    fail('passIntervalMs', pass, `must be less than ${than('stallTimeoutMs', stall)}, ${why}.`);
  }
  if (options.idlePassIntervalMs !== undefined) {
    const idle = positive('idlePassIntervalMs', options.idlePassIntervalMs);
    if (pass !== undefined && idle < pass) fail('idlePassIntervalMs', idle, `must be at least ${than('passIntervalMs', pass)}.`);
    if (stall !== undefined && idle >= stall) {
      const why = 'or the watchdog takes an idle leader for a stalled one';
      fail('idlePassIntervalMs', idle, `must be less than ${than('stallTimeoutMs', stall)}, ${why}.`);
    }
  }
  return {
    leaseSeconds: L,
    renewDeadlineMs: D,
    retryPeriodMs: retry,
    requestTimeoutMs: requestTimeout,
    drainTimeoutMs: drain,
    renewIntervalMs: renewInterval,
    campaignPeriodMs: campaign,
    jitter,
  };
}
