/**
 * The wiring of the elector to the leader's work: every timer firing calls `tick`, which campaigns
 * and, while this instance leads, runs a coordination pass; other invocations that should make this
 * instance campaign (they brought what the pass needs: shared/app) call `offer`, which starts
 * campaigning without a tick; while leading the
 * runtime also runs passes on its own (on Azure the host's timer lock may sit on another instance,
 * so this instance's timer may never fire while it leads): every `passIntervalMs` while passes find
 * work (`ctx.busy()`), and while they find none the interval doubles up to `idlePassIntervalMs`, so
 * an idle leader costs a few storage transactions a minute instead of a few a second. A `nudge()`
 * (a submission just arrived on this instance) runs a pass at once and starts over from
 * `passIntervalMs`. A tick while leading runs a pass only when the runtime's own pass is overdue.
 *
 * Guarantees: passes never overlap within a process; a pass runs only while the elector believes
 * it leads and gets that term's epoch and an AbortSignal that fires on step-down; graceful shutdown
 * (SIGTERM/SIGINT, the host's app-terminate hook, or `stop()`) aborts the pass, waits for it
 * (bounded by the drain timeout) and releases the lease. The watchdog lives here, beside the work it
 * watches: a leader whose passes reported no progress for `stallTimeoutMs` resigns its term (the
 * lease is released) and sits out one lease period, so a healthy instance takes over.
 * Not guaranteed: that a pass finishes (it is aborted on step-down), or that a pass never runs
 * twice for one epoch (passes must be idempotent; the epoch is their fencing token).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 2; "The lease epoch from the elector to the fence", step 4.
 */
import { setMaxListeners } from 'node:events';

import { type Settings } from '../config/settings';
import { toCoordinatorError } from '../errors';
import { createLogger, type Logger } from '../observability/log';
import { BlobLeaseStore } from './BlobLeaseStore';
import { type Clock, systemClock } from './Clock';
import { ClusterRecords } from './ClusterRecords';
import { checkLeaderTiming } from './leaderTiming';
import {
  type CurrentLeader,
  type ElectorCounters,
  type ElectorRole,
  type Leadership,
  LeaseElector,
  type LeaseElectorOptions,
  type StepDownReason,
} from './LeaseElector';

export interface CoordinationContext {
  readonly epoch: number;
  readonly holder: string;
  readonly signal: AbortSignal;
  /** Report progress; a pass silent for longer than the stall timeout makes the leader step down. */
  progress(): void;
  /**
   * Ask for the next pass right after this one instead of after the interval (the pass stopped at
   * its time budget with work waiting). Passes still never overlap.
   */
  again?(): void;
  /**
   * This pass found work waiting or in progress: the next pass comes after `passIntervalMs`. A pass
   * that does not say so was idle, and the interval grows (up to `idlePassIntervalMs`).
   */
  busy?(): void;
}

export type CoordinationPass = (ctx: CoordinationContext) => Promise<void>;

/**
 * The 'abort' listeners a term's signal may hold at once before Node warns of a possible leak. The
 * signal is every pass's `ctx.signal`, and the job pipeline hands it to each storage request of the
 * pass and of the work the pass leaves running (the intake's 48 lanes, its receives, the first-window
 * sends of up to 192 starts under way, the stall check and the upkeep): the storage SDK adds one
 * listener per request in flight and removes it when the request and its body end
 * (@typespec/ts-http-runtime NodeHttpClient.sendRequest), TableWrites one per write waiting for its
 * partition. A 60-job burst held 88 at once, and none was left once its work had ended
 * (test/integration/jobs/run/termSignalListeners.test.ts). Node 20 and earlier Node 22 releases warn
 * at the 11th listener, once per signal (12 MaxListenersExceededWarnings in a chaos run, issue 48);
 * later ones (nodejs/node#55816; 22.23 has it) set no limit on AbortSignals. This one is above the
 * most the passes can hold (about 3,300 if every start under way sent a 16-message window at once)
 * and below what a leak of one listener per request would reach in a busy term (about four requests
 * a job), so a real leak still warns.
 */
export const TERM_SIGNAL_MAX_LISTENERS = 10_000;

/**
 * What operators' records hear from the runtime (term history, heartbeats, pass summaries:
 * ClusterRecords). Calls are synchronous and must neither throw nor block leadership; `stopped`
 * is awaited once by `stop()`, after the lease is released.
 */
export interface RuntimeObserver {
  termStarted?(term: { readonly epoch: number; readonly holder: string; readonly acquiredAt: string }): void;
  termEnded?(term: { readonly epoch: number; readonly holder: string; readonly reason: StepDownReason }): void;
  passFinished?(pass: { readonly epoch: number; readonly durationMs: number; readonly failed: boolean }): void;
  stopped?(): Promise<void>;
}

export interface CoordinatorRuntimeOptions {
  readonly elector: Omit<LeaseElectorOptions, 'callbacks'>;
  readonly pass: CoordinationPass;
  /** While leading, run a pass this often even without ticks, while passes find work. < stallTimeoutMs. */
  readonly passIntervalMs: number;
  /**
   * The longest interval between passes while they find no work (the interval doubles from
   * passIntervalMs up to this). Default passIntervalMs (no back-off). >= passIntervalMs, < stallTimeoutMs.
   */
  readonly idlePassIntervalMs?: number;
  /** The watchdog: step down when the leader's work reported no progress for this long. */
  readonly stallTimeoutMs: number;
  readonly clock?: Clock;
  readonly logger?: Logger;
  readonly observer?: RuntimeObserver;
  /**
   * Runs once a graceful stop (stop(), SIGTERM/SIGINT) released this instance's lease, beside the
   * observer's flush: the app rings the doorbell that tells the other instances the lease is free.
   * Must not throw.
   */
  readonly released?: () => Promise<void>;
}

/** The last pass that finished, and the last that failed (cleared by the next success). */
export interface LastPass {
  readonly epoch: number;
  readonly at: string;
  readonly durationMs: number;
}

export interface LastPassError {
  readonly code: string;
  readonly message: string;
  readonly at: string;
}

export interface RuntimeState {
  readonly role: ElectorRole;
  /**
   * Whether this instance contends for the lease: false until a function hands it a Durable client
   * (`offer`, a tick) and again once it stopped; a follower that is not campaigning cannot take over.
   */
  readonly campaigning: boolean;
  /** This instance's holder id (what the lease metadata shows when it leads). */
  readonly holder: string;
  /** This instance's epoch while it leads. */
  readonly epoch: number | undefined;
  readonly passes: number;
  /** While leading: the wait before the next pass of the runtime's own (grows while passes are idle). */
  readonly passIntervalMs: number;
  /**
   * While leading: the last pass found no work and the passes have backed off to `idlePassIntervalMs`
   * (no nudge since). The heartbeats follow it (an idle leader beats at the followers' interval).
   */
  readonly idle: boolean;
  readonly lastPass: LastPass | undefined;
  readonly lastPassError: LastPassError | undefined;
  /** The leader this instance last observed (itself included). */
  readonly observedLeader: { readonly holder: string; readonly epoch: number } | undefined;
}

/** The term this instance leads, and when its work last reported progress (what the watchdog reads). */
interface LeaderTerm {
  readonly leadership: Leadership;
  readonly startedAt: number;
  lastProgressAt: number;
}

export class CoordinatorRuntime {
  readonly elector: LeaseElector;
  private readonly pass: CoordinationPass;
  private readonly passIntervalMs: number;
  private readonly idlePassIntervalMs: number;
  /** The wait before the next own pass: passIntervalMs after a busy pass or a nudge, growing while passes are idle. */
  private currentIntervalMs: number;
  private lastPassStartedAt = -Infinity;
  /** Whether the last pass said it was busy (or a nudge came since): until then the leader is not idle. */
  private lastPassBusy = true;
  private readonly stallTimeoutMs: number;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly observer: RuntimeObserver;
  private readonly released: (() => Promise<void>) | undefined;
  /** Set by the first tick or offer: nothing campaigns or passes before one (see offer). */
  private offered = false;
  private term: LeaderTerm | undefined;
  private passInFlight: Promise<void> | undefined;
  private passes = 0;
  private lastPass: RuntimeState['lastPass'];
  private lastPassError: RuntimeState['lastPassError'];
  private observedLeader: RuntimeState['observedLeader'];
  private stopping: Promise<void> | undefined;
  private signalHandlers: Array<[NodeJS.Signals, () => void]> = [];

  constructor(options: CoordinatorRuntimeOptions) {
    const idle = options.idlePassIntervalMs ?? options.passIntervalMs;
    const { passIntervalMs, stallTimeoutMs } = options;
    checkLeaderTiming({ ...options.elector, passIntervalMs, idlePassIntervalMs: idle, stallTimeoutMs });
    this.pass = options.pass;
    this.passIntervalMs = options.passIntervalMs;
    this.idlePassIntervalMs = idle;
    this.currentIntervalMs = options.passIntervalMs;
    this.stallTimeoutMs = options.stallTimeoutMs;
    this.clock = options.clock ?? options.elector.clock ?? systemClock;
    this.log = options.logger ?? options.elector.logger ?? createLogger('leader');
    this.observer = options.observer ?? {};
    this.released = options.released;
    this.elector = new LeaseElector({
      ...options.elector,
      callbacks: {
        onStartedLeading: (leadership) => {
          this.notify((o) => o.termStarted?.({ epoch: leadership.epoch, holder: leadership.holder, acquiredAt: leadership.acquiredAt }));
          return this.lead(leadership);
        },
        onStoppedLeading: ({ epoch, reason }) => this.notify((o) => o.termEnded?.({ epoch, holder: this.elector.holder, reason })),
        onNewLeader: (leader) => {
          this.observedLeader = leader;
        },
      },
    });
  }

  /** A timer firing: campaign (acquire-or-renew) and, while leading, run one pass. */
  async tick(): Promise<RuntimeState> {
    this.offered = true;
    if (this.stopping !== undefined) return this.state();
    const before = this.term;
    await this.elector.campaignNow();
    const term = this.term;
    if (term !== undefined && !term.leadership.signal.aborted) {
      // A term that began in this very campaign already ran its first pass; wait for it, don't repeat it.
      // A leader runs its own passes; a tick adds one only when the runtime's own is overdue.
      if (term !== before) await this.passInFlight;
      else if (this.clock.now() - this.lastPassStartedAt >= this.currentIntervalMs) await this.runPass(term);
    }
    return this.state();
  }

  /**
   * An invocation that brought what passes need (the app's root keeps it: a Durable client from the
   * work-items worker or a mutating jobs route) calls this. From then on this instance campaigns
   * between ticks too, so it can take over without its own timer firing: on Azure one app's timer
   * fires on one instance at a time (the host's listener lock), and waiting for that lock to move
   * would make failover as slow as the host's lock period. `attemptNow` (the lease was just freed:
   * the doorbell of a leader's graceful release) makes one campaign attempt now instead of at the
   * next campaign period; a leader's renewals go on unchanged.
   */
  offer(options: { readonly attemptNow?: boolean } = {}): void {
    this.offered = true;
    if (this.stopping !== undefined) return;
    if (options.attemptNow !== true) return this.elector.start();
    if (this.elector.role === 'follower') this.log.info('leader.campaign_now', { holder: this.elector.holder, reason: 'lease-free' });
    void this.elector.campaignNow();
  }

  state(): RuntimeState {
    const electorState = this.elector.state;
    return {
      role: this.elector.role,
      campaigning: electorState !== 'idle' && electorState !== 'stopping' && electorState !== 'stopped',
      holder: this.elector.holder,
      epoch: this.elector.epoch,
      passes: this.passes,
      passIntervalMs: this.currentIntervalMs,
      idle: this.term !== undefined && !this.lastPassBusy && this.currentIntervalMs >= this.idlePassIntervalMs,
      lastPass: this.lastPass,
      lastPassError: this.lastPassError,
      observedLeader: this.observedLeader,
    };
  }

  counters(): Readonly<ElectorCounters> {
    return this.elector.counters();
  }

  currentLeader(): Promise<CurrentLeader> {
    return this.elector.currentLeader();
  }

  /** Graceful: abort the pass, wait for it (bounded), release the lease. Idempotent. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      const releasedBefore = this.elector.counters().released;
      await this.elector.stop();
      // What tells the others the lease is free goes beside the observer's flush, not after it.
      const released = this.elector.counters().released > releasedBefore ? this.released?.() : undefined;
      const flushed = this.observer.stopped?.().catch((err: unknown) => this.log.warn('leader.observer_failed', { error: err }));
      await Promise.all([released, flushed]);
    })();
    return this.stopping;
  }

  /** Stop gracefully on SIGTERM/SIGINT, then let the signal do what it would have done without us. */
  installSignalHandlers(): void {
    if (this.signalHandlers.length > 0) return;
    for (const signal of ['SIGTERM', 'SIGINT'] as const) {
      const handler = (): void => {
        this.removeSignalHandlers();
        this.log.info('leader.shutdown', { signal });
        void this.stop().finally(() => {
          // Our listener suppressed the default exit; restore it unless someone else handles the signal.
          if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
        });
      };
      process.once(signal, handler);
      this.signalHandlers.push([signal, handler]);
    }
  }

  removeSignalHandlers(): void {
    for (const [signal, handler] of this.signalHandlers) process.removeListener(signal, handler);
    this.signalHandlers = [];
  }

  /**
   * Asks for a pass now instead of at the end of the interval (a submission just arrived): wakes a
   * sleeping leader at once, or runs one more pass right after the one in flight (which may have
   * read the queue before the submission landed). A no-op while this instance does not lead.
   */
  nudge(): void {
    if (this.term === undefined) return;
    this.nudged = true;
    this.lastPassBusy = true;
    this.currentIntervalMs = this.passIntervalMs;
    this.wake?.abort();
  }

  private nudged = false;
  private wake: AbortController | undefined;

  private async lead(leadership: Leadership): Promise<void> {
    setMaxListeners(TERM_SIGNAL_MAX_LISTENERS, leadership.signal);
    const term = { leadership, startedAt: this.clock.now(), lastProgressAt: this.clock.now() };
    this.term = term;
    this.currentIntervalMs = this.passIntervalMs;
    this.lastPassBusy = true;
    const watching = this.watchdog(term);
    try {
      while (!leadership.signal.aborted) {
        // Idle leadership is healthy; only a pass that hangs starves the watchdog.
        term.lastProgressAt = this.clock.now();
        this.nudged = false;
        if (this.offered) await this.runPass(term);
        if (this.nudged || leadership.signal.aborted) continue;
        const wake = new AbortController();
        this.wake = wake;
        await this.clock.sleep(this.currentIntervalMs, AbortSignal.any([leadership.signal, wake.signal]));
        this.wake = undefined;
      }
    } finally {
      if (this.term === term) this.term = undefined;
    }
    await Promise.all([this.passInFlight, watching]);
  }

  /**
   * Renewals prove only that this process is alive, not that its work moves: when no progress was
   * reported for stallTimeoutMs, resign the term and sit out one lease period so another instance leads.
   */
  private async watchdog(term: LeaderTerm): Promise<void> {
    const { leadership } = term;
    while (!leadership.signal.aborted) {
      const now = this.clock.now();
      const stallAt = term.lastProgressAt + this.stallTimeoutMs;
      if (now < stallAt) {
        await this.clock.sleep(stallAt - now, leadership.signal);
        continue;
      }
      const heldMs = Math.round(now - term.startedAt);
      const sinceProgressMs = Math.round(now - term.lastProgressAt);
      this.log.warn('leader.stalled', { holder: leadership.holder, epoch: leadership.epoch, heldMs, sinceProgressMs });
      await leadership.resign('stalled', this.elector.timing.leaseSeconds * 1000);
      return;
    }
  }

  /** Runs a pass unless one is already running (then waits for that one): passes never overlap. */
  private runPass(term: LeaderTerm): Promise<void> {
    if (this.passInFlight !== undefined) return this.passInFlight;
    const { leadership } = term;
    if (!this.offered || leadership.signal.aborted) return Promise.resolve();
    const progress = (): void => {
      term.lastProgressAt = this.clock.now();
    };
    const run = async (): Promise<void> => {
      const startedAt = this.clock.now();
      this.lastPassStartedAt = startedAt;
      progress();
      let busy = false;
      try {
        const again = (): void => {
          this.nudged = true;
        };
        const markBusy = (): void => {
          busy = true;
        };
        await this.pass({ epoch: leadership.epoch, holder: leadership.holder, signal: leadership.signal, progress, again, busy: markBusy });
        progress();
        this.currentIntervalMs = busy ? this.passIntervalMs : Math.min(this.idlePassIntervalMs, this.currentIntervalMs * 2);
        this.lastPassBusy = busy;
        this.passes += 1;
        const durationMs = Math.round(this.clock.now() - startedAt);
        this.lastPass = { epoch: leadership.epoch, at: this.clock.wallNow().toISOString(), durationMs };
        this.lastPassError = undefined;
        this.notify((o) => o.passFinished?.({ epoch: leadership.epoch, durationMs: this.clock.now() - startedAt, failed: false }));
      } catch (err) {
        if (leadership.signal.aborted) {
          this.log.info('leader.pass_aborted', { epoch: leadership.epoch });
          return;
        }
        const error = toCoordinatorError(err, 'PASS_FAILED');
        this.lastPassError = { code: error.code, message: error.message, at: this.clock.wallNow().toISOString() };
        this.log.error('leader.pass_failed', { epoch: leadership.epoch, code: error.code, error: err });
        this.notify((o) => o.passFinished?.({ epoch: leadership.epoch, durationMs: this.clock.now() - startedAt, failed: true }));
      }
    };
    const inFlight = run().finally(() => {
      this.passInFlight = undefined;
    });
    this.passInFlight = inFlight;
    return inFlight;
  }

  private notify(call: (observer: RuntimeObserver) => void): void {
    try {
      call(this.observer);
    } catch (err) {
      this.log.warn('leader.observer_failed', { error: err });
    }
  }
}

/**
 * The runtime the app runs, from its settings: the lease blob, the timings, the operators' records
 * (term history and heartbeats start beating here). The app's root (shared/app) builds it once.
 */
export function createCoordinatorRuntime(
  settings: Settings,
  pass: CoordinationPass,
  records: ClusterRecords = ClusterRecords.fromSettings(settings),
  released?: () => Promise<void>,
): CoordinatorRuntime {
  const leader = settings.leader;
  // The recorder reads the runtime's state for its heartbeats; it starts beating only below, once the runtime exists.
  const recorder = records.recorder(settings.instanceId, () => {
    const state = created.state();
    return { role: state.role, epoch: state.epoch, passes: state.passes, idle: state.idle };
  });
  const created: CoordinatorRuntime = new CoordinatorRuntime({
    elector: {
      store: BlobLeaseStore.fromConnection(settings.storage, leader.container, leader.blob, leader.requestTimeoutMs),
      holder: settings.instanceId,
      leaseSeconds: leader.leaseSeconds,
      renewDeadlineMs: leader.renewDeadlineMs,
      retryPeriodMs: leader.retryPeriodMs,
      requestTimeoutMs: leader.requestTimeoutMs,
      drainTimeoutMs: leader.drainTimeoutMs,
    },
    pass,
    passIntervalMs: leader.passIntervalMs,
    idlePassIntervalMs: leader.idlePassIntervalMs,
    stallTimeoutMs: leader.stallTimeoutMs,
    observer: recorder,
    ...(released === undefined ? {} : { released }),
  });
  recorder.start();
  return created;
}
