/**
 * Leader election on one blob lease (the Leader Election pattern's distributed mutex), in the shape
 * of client-go's leaderelection (acquire, renew, release, callbacks) and going past it with a fencing epoch.
 *
 * What it guarantees:
 * - At most one elector in the world believes it leads at any moment, provided every process's
 *   monotonic clock runs at roughly the same rate (it tolerates any offset between clocks, and a
 *   rate difference up to (L - D) / L). A leader stops believing (its `signal` aborts) once D has
 *   passed since its last successful renewal was *sent*, and the service cannot expire that lease
 *   before L has passed since then; D < L is checked at construction (leaderTiming.ts).
 * - Every acquisition writes a fencing epoch into the blob's metadata through the lease, read and
 *   bumped under the lease with an etag condition, so epochs strictly increase across leaders and
 *   each epoch belongs to exactly one term of one elector.
 * - A renewal answered "not your lease" (changed, broken, taken) steps down at once; a graceful
 *   `stop()` aborts leader work, waits for it (bounded), then releases, so followers take over
 *   within one campaign period; `resign()` lets whoever watches the work (the runtime) give up a term.
 *
 * What it does not guarantee:
 * - Nothing stops a process that is paused (GC, VM freeze, SIGSTOP) after checking its leadership
 *   from acting on a stale belief. Only fencing protects against that: side effects must carry the
 *   epoch and be idempotent by key, or go through `writeThroughLease`/`verify()`, which the
 *   service rejects once the lease is someone else's (or has expired).
 * - Liveness depends on the blob service: while it is unreachable nobody leads.
 * - It trusts no remote timestamp; `acquiredAt` is for people, not for decisions.
 * Route: docs/architecture.md, "The lease epoch from the elector to the fence", steps 1 to 3.
 */
import { randomUUID } from 'node:crypto';

import { createLogger, type Logger } from '../observability/log';
import { type Clock, settlesWithin, systemClock, withTimeout } from './Clock';
import type {
  CurrentLeader, ElectorCounters, ElectorRole, ElectorState, LeaderCallbacks, Leadership, LeaseElectorOptions, StepDownReason,
} from './electorTypes';
import { ElectorConfigError, LeaseLostError, NotLeaderError } from './errors';
import { checkLeaderTiming, type ElectorTiming } from './leaderTiming';
import { type LeaseContext, LeaseTerm } from './LeaseTerm';

export type * from './electorTypes';

interface Campaign {
  readonly name: 'campaigning';
  /** No attempt before this: a resigned leader lets a healthy instance win. */
  readonly sitOutUntil: number;
  /** The last term's work; never run two terms' work in one process. */
  previousWork: Promise<void> | undefined;
  /** The last attempt that found the lease held by someone else (for lastTakeoverWaitMs). */
  lastSeenHeldAt: number | undefined;
}

type State =
  | { readonly name: 'idle' | 'stopped' }
  | Campaign
  | { readonly name: 'leading'; readonly term: LeaseTerm }
  | { readonly name: 'stopping'; readonly term: LeaseTerm | undefined; readonly release: boolean; readonly done: Promise<void> };

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HOLDER = /^[A-Za-z0-9._:-]{1,128}$/;

function campaign(sitOutUntil = 0, previousWork?: Promise<void>): Campaign {
  return { name: 'campaigning', sitOutUntil, previousWork, lastSeenHeldAt: undefined };
}

export class LeaseElector {
  readonly holder: string;
  readonly timing: ElectorTiming;
  private readonly lease: LeaseContext;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly callbacks: LeaderCallbacks;
  private readonly stats: ElectorCounters = { acquired: 0, renewed: 0, renewFailures: 0, lost: 0, released: 0, stalls: 0 };
  private s: State = { name: 'idle' };
  private loop: Promise<void> = Promise.resolve();
  private wakeController = new AbortController();
  /** campaignNow() callers, resolved after the next attempt (or at once while leading or sitting out). */
  private attemptWaiters: Array<() => void> = [];
  private observed: { holder: string; epoch: number } | undefined;

  constructor(options: LeaseElectorOptions) {
    this.timing = checkLeaderTiming(options);
    if (typeof options.holder !== 'string' || !HOLDER.test(options.holder)) {
      const detail = "must be 1-128 letters, digits, '.', '_', ':' or '-' (it is written to blob metadata).";
      throw new ElectorConfigError('holder', `"${String(options.holder)}" ${detail}`);
    }
    const leaseId = options.leaseId ?? randomUUID();
    if (!GUID.test(leaseId)) throw new ElectorConfigError('leaseId', `must be a GUID (the blob service rejects other lease ids).`);
    if (typeof options.callbacks?.onStartedLeading !== 'function') {
      throw new ElectorConfigError('callbacks.onStartedLeading', 'is required: it is the work the leader does.');
    }
    this.holder = options.holder;
    this.clock = options.clock ?? systemClock;
    this.log = options.logger ?? createLogger('leader');
    this.random = options.random ?? Math.random;
    this.callbacks = options.callbacks;
    this.lease = { store: options.store, leaseId, clock: this.clock, timing: this.timing };
  }

  get state(): ElectorState {
    return this.s.name;
  }

  get role(): ElectorRole {
    if (this.term() !== undefined) return 'leader';
    return this.s.name === 'stopping' || this.s.name === 'stopped' ? 'stopped' : 'follower';
  }

  /** This instance's current epoch while it leads. */
  get epoch(): number | undefined {
    return this.term()?.epoch;
  }

  counters(): Readonly<ElectorCounters> {
    return { ...this.stats };
  }

  /** Starts campaigning (idempotent): acquire at the campaign period, then renew while leading. */
  start(): void {
    if (this.s.name !== 'idle') return;
    this.s = campaign();
    this.loop = this.run();
  }

  /** One campaign attempt now (a timer tick): resolves after it. Leaders keep renewing on their own schedule. */
  async campaignNow(): Promise<void> {
    if (this.s.name !== 'idle' && this.s.name !== 'campaigning') return;
    const attempted = new Promise<void>((resolve) => this.attemptWaiters.push(resolve));
    this.start();
    this.wake();
    await attempted;
  }

  /** Who leads according to the blob (anyone can read it; no lease needed). */
  async currentLeader(): Promise<CurrentLeader> {
    const { record, leaseState, leaseStatus } = await this.call('read', (signal) => this.lease.store.read(signal));
    return { holder: record?.holder, epoch: record?.epoch, acquiredAt: record?.acquiredAt, leaseState, leaseStatus };
  }

  /**
   * Stops for good (idempotent). Graceful by default: abort leader work, wait for it (at most drainTimeoutMs, renewing
   * meanwhile so the lease cannot lapse under work still winding down), then release. `release: false` is what a crash
   * does: the term ends now, renewals stop, and the lease is left to lapse after L.
   */
  stop(options: { readonly release?: boolean } = {}): Promise<void> {
    const release = options.release ?? true;
    const s = this.s;
    if (s.name === 'stopping') {
      if (!release && s.release) this.s = { ...s, release };
      if (!release && s.term !== undefined) this.endTerm(s.term, 'abandoned');
      return s.done;
    }
    if (s.name !== 'campaigning' && s.name !== 'leading') {
      this.s = { name: 'stopped' };
      return Promise.resolve();
    }
    const term = s.name === 'leading' ? s.term : undefined;
    let stopped = (): void => undefined;
    const done = new Promise<void>((resolve) => (stopped = resolve));
    this.s = { name: 'stopping', term, release, done };
    if (term !== undefined && !release) this.endTerm(term, 'abandoned');
    this.wake();
    this.finishStop(term)
      .catch((err: unknown) => this.log.error('leader.loop_error', { error: err }))
      .finally(stopped);
    return done;
  }

  private async finishStop(term: LeaseTerm | undefined): Promise<void> {
    if (term !== undefined && this.holds(term)) {
      const epoch = term.epoch;
      term.controller.abort(new NotLeaderError(`Leadership of epoch ${epoch} is ending: the instance is stopping.`));
      const drained = await settlesWithin(this.clock, term.work, this.timing.drainTimeoutMs);
      if (!drained) this.log.warn('leader.drain_timeout', { epoch, drainTimeoutMs: this.timing.drainTimeoutMs });
      await this.stepDown(term, 'released');
    }
    await this.loop;
    this.s = { name: 'stopped' };
  }

  /** The loop: acquire while campaigning, renew while a term is held (a graceful stop's included); ends when neither. */
  private async run(): Promise<void> {
    for (;;) {
      const s = this.s;
      const term = this.term();
      if (s.name !== 'campaigning' && term === undefined) break;
      try {
        if (s.name === 'campaigning') await this.acquire(s);
        else if (term !== undefined) await this.renew(term);
      } catch (err) {
        // Defensive: every expected failure is handled where it happens; keep going regardless.
        this.log.error('leader.loop_error', { error: err });
        await this.pause(this.timing.retryPeriodMs);
      }
    }
    this.resolveAttemptWaiters();
  }

  /** Campaigns at the jittered campaign period until this campaign ends: a term began, or stop() was called. */
  private async acquire(c: Campaign): Promise<void> {
    while (this.s === c) {
      const now = this.clock.now();
      if (now < c.sitOutUntil) {
        this.resolveAttemptWaiters();
        await this.pause(c.sitOutUntil - now);
        continue;
      }
      if (c.previousWork !== undefined) await settlesWithin(this.clock, c.previousWork, this.timing.drainTimeoutMs);
      c.previousWork = undefined;
      const waiters = this.attemptWaiters.splice(0);
      await this.tryAcquire(c).finally(() => waiters.forEach((resolve) => resolve()));
      // A tick that arrived during the attempt gets its own attempt now, not after a full period.
      const { campaignPeriodMs, jitter } = this.timing;
      if (this.s === c && this.attemptWaiters.length === 0) await this.pause(campaignPeriodMs * (1 - jitter * this.random()));
    }
  }

  /** One attempt: acquire the lease, bump the epoch through it, begin a term. */
  private async tryAcquire(c: Campaign): Promise<void> {
    const sentAt = this.clock.now();
    try {
      const { store, leaseId } = this.lease;
      if (!(await this.call('acquire', (signal) => store.acquire(leaseId, this.timing.leaseSeconds, signal)))) {
        c.lastSeenHeldAt = this.clock.now();
        return await this.observeLeader();
      }
    } catch (err) {
      this.log.warn('leader.campaign_failed', { holder: this.holder, error: err });
      return;
    }
    try {
      if (this.s !== c) return await this.releaseStray();
      const term = await LeaseTerm.claim(this.lease, this.holder, sentAt);
      if (this.s !== c) return await this.releaseStray();
      const elapsedMs = Math.round(this.clock.now() - sentAt);
      // Announcing took longer than the deadline allows: the lease may be close to lapsing. Still ours; the next attempt renews it.
      if (elapsedMs >= this.timing.renewDeadlineMs) return this.log.warn('leader.acquire_too_slow', { epoch: term.epoch, elapsedMs });
      this.beginTerm(c, term);
    } catch (err) {
      // A LeaseLostError here means another instance's announcement raced ours (etag changed): it leads.
      this.log.warn('leader.announce_failed', { holder: this.holder, error: err });
    }
  }

  private beginTerm(c: Campaign, term: LeaseTerm): void {
    const { record, previous } = term;
    this.s = { name: 'leading', term };
    this.stats.acquired += 1;
    const takeoverWaitMs = c.lastSeenHeldAt === undefined ? undefined : Math.round(term.startedAt - c.lastSeenHeldAt);
    this.stats.lastTakeoverWaitMs = takeoverWaitMs;
    this.log.info('leader.acquired', {
      holder: this.holder,
      epoch: record.epoch,
      lease: this.lease.leaseId.slice(0, 8),
      blob: this.lease.store.description,
      leaseSeconds: this.timing.leaseSeconds,
      ...(takeoverWaitMs === undefined ? {} : { takeoverWaitMs }),
      // Who led before: a different holder means a failover or handover (the Kusto queries in docs/operations.md).
      ...(previous === undefined ? {} : { previousHolder: previous.holder, previousEpoch: previous.epoch }),
    });
    this.noteLeader(record.holder, record.epoch);
    const leadership: Leadership = {
      epoch: record.epoch,
      holder: record.holder,
      acquiredAt: record.acquiredAt,
      signal: term.controller.signal,
      verify: async () => {
        await this.checkStillLeading(term);
        await this.tryRenew(term);
      },
      writeThroughLease: async (fields) => {
        await this.checkStillLeading(term);
        await this.fenced(term, 'no longer holds the lease; the write was refused', () => term.write(fields));
      },
      resign: (reason, sitOutMs) => this.stepDown(term, reason, undefined, sitOutMs),
    };
    term.work = (async () => this.callbacks.onStartedLeading(leadership))().catch((err: unknown) => {
      this.log.error('leader.work_failed', { epoch: record.epoch, error: err });
    });
  }

  /** Keeps the lease while the term lasts: renews every renewIntervalMs, retries a failure, steps down at the deadline. */
  private async renew(term: LeaseTerm): Promise<void> {
    while (this.holds(term)) {
      this.resolveAttemptWaiters(); // a tick that asked for an attempt while we lead has its answer
      const now = this.clock.now();
      const deadline = term.deadline;
      if (now >= deadline) return this.stepDown(term, 'deadline');
      const dueAt = term.retryAt ?? term.lastSentAt + this.timing.renewIntervalMs;
      if (now < dueAt) {
        await this.pause(Math.min(dueAt, deadline) - now);
        continue;
      }
      await this.tryRenew(term).catch((err: unknown) => {
        if (!this.holds(term)) return;
        this.stats.renewFailures += 1;
        term.retryAt = this.clock.now() + this.timing.retryPeriodMs;
        const msUntilDeadline = Math.round(deadline - this.clock.now());
        this.log.warn('leader.renew_failed', { epoch: term.epoch, error: err, msUntilDeadline });
      });
    }
  }

  /** One renewal, bounded by the deadline; "not your lease" (or a blob changed behind our back) ends the term at once. */
  private async tryRenew(term: LeaseTerm): Promise<void> {
    const latencyMs = Math.round(await this.fenced(term, 'was lost', () => term.renew()));
    if (!this.holds(term)) return;
    this.stats.renewed += 1;
    this.stats.lastRenewLatencyMs = latencyMs;
    this.log.debug('leader.renewed', { epoch: term.epoch, latencyMs });
  }

  /** A term's storage call; a LeaseLostError from it ends the term and becomes a NotLeaderError. */
  private async fenced<T>(term: LeaseTerm, what: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err;
      await this.stepDown(term, 'lost', err);
      throw new NotLeaderError(`Epoch ${term.epoch} ${what} (${err.serviceCode}).`, { cause: err });
    }
  }

  private async checkStillLeading(term: LeaseTerm): Promise<void> {
    if (!this.holds(term)) throw new NotLeaderError(`Epoch ${term.epoch} is no longer the leader.`);
    if (this.clock.now() >= term.deadline) {
      // Paused past the deadline (or storage unreachable): stop believing before acting.
      await this.stepDown(term, 'deadline');
      throw new NotLeaderError(`Epoch ${term.epoch} passed its renew deadline; it stepped down.`);
    }
  }

  /** Ends a term; releases the lease unless it was lost or abandoned (after a deadline, best effort: storage may answer again). */
  private async stepDown(term: LeaseTerm, reason: StepDownReason, cause?: unknown, sitOutMs = 0): Promise<void> {
    if (!this.holds(term)) return;
    this.endTerm(term, reason, cause, sitOutMs);
    if (reason !== 'lost' && reason !== 'abandoned') await this.release(term, reason === 'deadline' ? 'debug' : 'warn');
  }

  /** The one place a term ends: leave the state that held it, abort its work, count it, tell the callbacks. */
  private endTerm(term: LeaseTerm, reason: StepDownReason, cause?: unknown, sitOutMs = 0): void {
    const s = this.s;
    if (s.name === 'leading') this.s = campaign(this.clock.now() + sitOutMs, term.work);
    else if (s.name === 'stopping') this.s = { ...s, term: undefined };
    this.wake();
    const epoch = term.epoch;
    term.controller.abort(new NotLeaderError(`Leadership of epoch ${epoch} ended (${reason}).`, { cause }));
    if (reason === 'stalled') this.stats.stalls += 1;
    if (reason === 'lost' || reason === 'deadline') {
      this.stats.lost += 1;
      const heldMs = Math.round(this.clock.now() - term.startedAt);
      this.log.warn('leader.lost', { holder: this.holder, epoch, reason, heldMs, ...(cause === undefined ? {} : { error: cause }) });
    }
    try {
      this.callbacks.onStoppedLeading?.({ epoch, reason });
    } catch (err) {
      this.log.error('leader.callback_failed', { callback: 'onStoppedLeading', error: err });
    }
  }

  /** Gives the lease back once the term's calls in flight are done; not fatal when it fails (the lease lapses after L). */
  private async release(term: LeaseTerm, failureLevel: 'warn' | 'debug'): Promise<void> {
    const epoch = term.epoch;
    try {
      await term.release();
      this.stats.released += 1;
      this.log.info('leader.released', { holder: this.holder, epoch });
    } catch (err) {
      // A LeaseLostError here means the lease had already lapsed or been taken.
      this.log.log(failureLevel, 'leader.release_failed', { holder: this.holder, epoch, error: err });
    }
  }

  /** Gives back a lease acquired while stopping, before any term began (a crash, `release: false`, keeps it). */
  private async releaseStray(): Promise<void> {
    if (this.s.name === 'stopping' && !this.s.release) return;
    await this.call('release', (signal) => this.lease.store.release(this.lease.leaseId, signal)).catch((err: unknown) => {
      this.log.debug('leader.release_failed', { holder: this.holder, error: err });
    });
  }

  private async observeLeader(): Promise<void> {
    try {
      const { record } = await this.call('read', (signal) => this.lease.store.read(signal));
      if (record !== undefined) this.noteLeader(record.holder, record.epoch);
    } catch (err) {
      this.log.debug('leader.observe_failed', { error: err });
    }
  }

  private noteLeader(holder: string, epoch: number): void {
    if (this.observed?.holder === holder && this.observed.epoch === epoch) return;
    this.observed = { holder, epoch };
    if (holder !== this.holder) this.log.info('leader.observed', { holder: this.holder, leader: holder, epoch });
    try {
      this.callbacks.onNewLeader?.({ holder, epoch });
    } catch (err) {
      this.log.error('leader.callback_failed', { callback: 'onNewLeader', error: err });
    }
  }

  /** One storage call with a hard timeout on our own clock, whatever the SDK does with the signal. */
  private call<T>(operation: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    return withTimeout(this.clock, operation, this.timing.requestTimeoutMs, fn);
  }

  private term(): LeaseTerm | undefined {
    return this.s.name === 'leading' || this.s.name === 'stopping' ? this.s.term : undefined;
  }

  private holds(term: LeaseTerm): boolean {
    return this.term() === term;
  }

  private pause(ms: number): Promise<void> {
    return this.clock.sleep(ms, this.wakeController.signal);
  }

  private wake(): void {
    this.wakeController.abort();
    this.wakeController = new AbortController();
  }

  private resolveAttemptWaiters(): void {
    for (const resolve of this.attemptWaiters.splice(0)) resolve();
  }
}
