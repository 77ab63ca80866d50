/**
 * Leader election on one blob lease (the Leader Election pattern's distributed mutex), modelled on
 * client-go's leaderelection and going past it with a fencing epoch.
 *
 * What it guarantees:
 * - At most one elector in the world believes it leads at any moment, provided every process's
 *   monotonic clock runs at roughly the same rate (it tolerates any offset between clocks, and a
 *   rate difference up to (L - D) / L). A leader stops believing (its `signal` aborts) once D has
 *   passed since its last successful renewal was *sent*, and the service cannot expire that lease
 *   before L has passed since then; D < L is checked at construction.
 * - Every acquisition writes a fencing epoch into the blob's metadata through the lease, read and
 *   bumped under the lease with an etag condition, so epochs strictly increase across leaders and
 *   each epoch belongs to exactly one term of one elector.
 * - A renewal answered "not your lease" (changed, broken, taken) steps down at once; a graceful
 *   `stop()` aborts leader work, waits for it (bounded), then releases, so followers take over
 *   within one campaign period; the watchdog steps down a leader whose work stopped calling
 *   `progress()`.
 *
 * What it does not guarantee:
 * - Nothing stops a process that is paused (GC, VM freeze, SIGSTOP) after checking its leadership
 *   from acting on a stale belief. Only fencing protects against that: side effects must carry the
 *   epoch and be idempotent by key, or go through `writeThroughLease`/`verify()`, which the
 *   service rejects once the lease is someone else's (or has expired).
 * - Liveness depends on the blob service: while it is unreachable nobody leads.
 * - It trusts no remote timestamp; `acquiredAt` is for people, not for decisions.
 */
import { randomUUID } from 'node:crypto';

import { createLogger, type Logger } from '../observability/log';
import { type Clock, systemClock } from './Clock';
import { type ElectorTiming, type ElectorTimingOptions, validateTiming } from './electorTiming';
import { ElectorConfigError, LeaseLostError, LeaseRequestTimeoutError, NotLeaderError } from './errors';
import { type LeaseRecord, type LeaseStore, recordMetadata } from './LeaseStore';

export type StepDownReason = 'lost' | 'deadline' | 'stalled' | 'released' | 'abandoned';

/** What leader work gets: its epoch, a signal aborted when leadership ends, and fenced helpers. */
export interface Leadership {
  readonly epoch: number;
  readonly holder: string;
  readonly acquiredAt: string;
  /** Aborted (with a NotLeaderError as reason) the moment this elector stops believing it leads. */
  readonly signal: AbortSignal;
  /** Leader work calls this whenever it makes progress; the watchdog steps down without it. */
  progress(): void;
  /** Confirms with the service that this term still holds the lease (a renewal); throws NotLeaderError if not. */
  verify(): Promise<void>;
  /** Writes extra metadata fields to the lease blob through the lease; only the current term can. */
  writeThroughLease(fields: Readonly<Record<string, string>>): Promise<void>;
}

export interface LeaderCallbacks {
  /** Called on every acquisition; the returned promise is the leader work graceful stop drains. */
  onStartedLeading(leadership: Leadership): void | Promise<void>;
  /** Called once for every term that started, however it ended. */
  onStoppedLeading?(info: { readonly epoch: number; readonly reason: StepDownReason }): void;
  /** Called when the observed leader (holder, epoch) changes, this instance included. */
  onNewLeader?(leader: { readonly holder: string; readonly epoch: number }): void;
}

export interface LeaseElectorOptions extends ElectorTimingOptions {
  readonly store: LeaseStore;
  /** This instance's name, written to the metadata as `holder`. */
  readonly holder: string;
  /** Proposed lease id; a fresh GUID per elector when absent. */
  readonly leaseId?: string;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Random source for jitter, [0, 1). */
  readonly random?: () => number;
  readonly callbacks: LeaderCallbacks;
}

export interface CurrentLeader {
  /** Holder of the latest epoch; the lease may have been released or expired since (see leaseState). */
  readonly holder: string | undefined;
  readonly epoch: number | undefined;
  readonly acquiredAt: string | undefined;
  readonly leaseState: string;
  readonly leaseStatus: string;
}

export interface ElectorCounters {
  acquired: number;
  renewed: number;
  renewFailures: number;
  /** Terms that ended without a release of our own: lease lost, or renew deadline passed. */
  lost: number;
  released: number;
  stalls: number;
  lastRenewLatencyMs: number | undefined;
  /**
   * Failover as this instance saw it when it took over: time from its last attempt that found the
   * lease held by someone else to its acquisition. It bounds how long the lease sat free first.
   */
  lastTakeoverWaitMs: number | undefined;
}

export type ElectorRole = 'leader' | 'follower' | 'stopped';

interface Term {
  readonly record: LeaseRecord;
  readonly controller: AbortController;
  readonly startedAt: number;
  /** Monotonic time the last successful acquire/renew request was sent. */
  lastSentAt: number;
  /** When the next renewal is due after a failed one; undefined after a success. */
  retryAt: number | undefined;
  etag: string;
  lastProgressAt: number;
  work: Promise<void>;
  ended: boolean;
  /** Serializes this term's storage calls so a renewal never races our own metadata write. */
  queue: Promise<unknown>;
}

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const HOLDER = /^[A-Za-z0-9._:-]{1,128}$/;

export class LeaseElector {
  readonly holder: string;
  readonly timing: ElectorTiming;
  private readonly leaseId: string;
  private readonly store: LeaseStore;
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly callbacks: LeaderCallbacks;
  private readonly stats: ElectorCounters = {
    acquired: 0,
    renewed: 0,
    renewFailures: 0,
    lost: 0,
    released: 0,
    stalls: 0,
    lastRenewLatencyMs: undefined,
    lastTakeoverWaitMs: undefined,
  };

  private term: Term | undefined;
  private loop: Promise<void> | undefined;
  private halted = false;
  private stopRequested = false;
  private abandoned = false;
  private stopping: Promise<void> | undefined;
  private wakeController = new AbortController();
  private attemptWaiters: Array<() => void> = [];
  private sitOutUntil = 0;
  private previousWork: Promise<void> | undefined;
  private lastSeenHeldAt: number | undefined;
  private observed: { holder: string; epoch: number } | undefined;

  constructor(options: LeaseElectorOptions) {
    this.timing = validateTiming(options);
    if (typeof options.holder !== 'string' || !HOLDER.test(options.holder)) {
      throw new ElectorConfigError('holder', `"${String(options.holder)}" must be 1-128 letters, digits, '.', '_', ':' or '-' (it is written to blob metadata).`);
    }
    const leaseId = options.leaseId ?? randomUUID();
    if (!GUID.test(leaseId)) throw new ElectorConfigError('leaseId', `must be a GUID (the blob service rejects other lease ids).`);
    if (typeof options.callbacks?.onStartedLeading !== 'function') {
      throw new ElectorConfigError('callbacks.onStartedLeading', 'is required: it is the work the leader does.');
    }
    this.holder = options.holder;
    this.leaseId = leaseId;
    this.store = options.store;
    this.clock = options.clock ?? systemClock;
    this.log = options.logger ?? createLogger('leader');
    this.random = options.random ?? Math.random;
    this.callbacks = options.callbacks;
  }

  /** Starts campaigning (idempotent): acquire-or-renew at the campaign period, with jitter. */
  start(): void {
    if (this.loop !== undefined || this.halted) return;
    this.loop = this.run();
  }

  /** One campaign attempt now (a timer tick): resolves after it. Leaders keep renewing on their own schedule. */
  async campaignNow(): Promise<void> {
    if (this.halted || this.stopRequested || this.term !== undefined) return;
    const done = new Promise<void>((resolve) => this.attemptWaiters.push(resolve));
    this.start();
    this.wake();
    await done;
  }

  get role(): ElectorRole {
    if (this.halted) return 'stopped';
    return this.term === undefined ? 'follower' : 'leader';
  }

  /** This instance's current epoch while it leads. */
  get epoch(): number | undefined {
    return this.term?.record.epoch;
  }

  get acquiredAt(): string | undefined {
    return this.term?.record.acquiredAt;
  }

  counters(): Readonly<ElectorCounters> {
    return { ...this.stats };
  }

  /** Who leads according to the blob (anyone can read it; no lease needed). */
  async currentLeader(): Promise<CurrentLeader> {
    const snap = await this.call('read', (signal) => this.store.read(signal));
    return {
      holder: snap.record?.holder,
      epoch: snap.record?.epoch,
      acquiredAt: snap.record?.acquiredAt,
      leaseState: snap.leaseState,
      leaseStatus: snap.leaseStatus,
    };
  }

  /**
   * Graceful stop: abort leader work, wait for it to finish (at most drainTimeoutMs, renewing
   * meanwhile so the lease cannot lapse under work that is still winding down), then release.
   */
  stop(): Promise<void> {
    this.stopping ??= this.stopGracefully();
    return this.stopping;
  }

  /**
   * Stops without releasing, as a crashed process would: no more renewals, the lease lapses after
   * L. Its leader work is aborted so this process's belief ends now. For tests and benchmarks.
   */
  abandon(): void {
    this.abandoned = true;
    this.halted = true;
    this.stopRequested = true;
    this.wake();
    const term = this.term;
    if (term !== undefined) this.endTerm(term, 'abandoned');
  }

  private async stopGracefully(): Promise<void> {
    this.stopRequested = true;
    const term = this.term;
    if (term !== undefined) {
      term.controller.abort(new NotLeaderError(`Leadership of epoch ${term.record.epoch} is ending: the instance is stopping.`));
      const drained = await this.settleWithin(term.work, this.timing.drainTimeoutMs);
      if (!drained) this.log.warn('leader.drain_timeout', { epoch: term.record.epoch, drainTimeoutMs: this.timing.drainTimeoutMs });
    }
    this.halted = true;
    this.wake();
    await this.loop;
    if (term !== undefined && !term.ended) {
      this.endTerm(term, 'released');
      await this.release(term);
    }
  }

  private async run(): Promise<void> {
    while (!this.halted) {
      try {
        const term = this.term;
        if (term !== undefined) await this.leadStep(term);
        else if (this.stopRequested) await this.pause(this.timing.campaignPeriodMs);
        else await this.followStep();
      } catch (err) {
        // Defensive: every expected failure is handled where it happens; keep campaigning regardless.
        this.log.error('leader.loop_error', { error: err });
        await this.pause(this.timing.retryPeriodMs);
      }
    }
    this.resolveAttemptWaiters();
  }

  private async followStep(): Promise<void> {
    const now = this.clock.now();
    if (now < this.sitOutUntil) {
      this.resolveAttemptWaiters();
      await this.pause(this.sitOutUntil - now);
      return;
    }
    if (this.previousWork !== undefined) {
      // Never run two terms' work in one process: wait (bounded) for the last term's work to end.
      await this.settleWithin(this.previousWork, this.timing.drainTimeoutMs);
      this.previousWork = undefined;
    }
    const waiters = this.takeAttemptWaiters();
    try {
      await this.attempt();
    } finally {
      for (const resolve of waiters) resolve();
    }
    // A tick that arrived during the attempt gets its own attempt now, not after a full period.
    if (this.term === undefined && !this.halted && this.attemptWaiters.length === 0) await this.pause(this.jitteredCampaignPeriod());
  }

  /** tryAcquire: acquire the lease, then bump the epoch through it. */
  private async attempt(): Promise<void> {
    const sentAt = this.clock.now();
    let acquired: boolean;
    try {
      acquired = await this.call('acquire', (signal) => this.store.acquire(this.leaseId, this.timing.leaseSeconds, signal));
    } catch (err) {
      this.log.warn('leader.campaign_failed', { holder: this.holder, error: err });
      return;
    }
    if (this.stopRequested) {
      if (acquired) await this.releaseUntracked();
      return;
    }
    if (!acquired) {
      this.lastSeenHeldAt = this.clock.now();
      await this.observeLeader();
      return;
    }
    try {
      const snap = await this.call('read', (signal) => this.store.read(signal));
      const record: LeaseRecord = { epoch: (snap.record?.epoch ?? 0) + 1, holder: this.holder, acquiredAt: this.clock.wallNow().toISOString() };
      const { etag } = await this.call('write', (signal) => this.store.write(this.leaseId, recordMetadata(record), snap.etag, signal));
      if (this.stopRequested) {
        await this.releaseUntracked();
        return;
      }
      if (this.clock.now() - sentAt >= this.timing.renewDeadlineMs) {
        // Announcing took longer than the deadline allows: the lease may be close to lapsing. Still ours; the next attempt renews it.
        this.log.warn('leader.acquire_too_slow', { epoch: record.epoch, elapsedMs: Math.round(this.clock.now() - sentAt) });
        return;
      }
      this.beginTerm(record, sentAt, etag, snap.record);
    } catch (err) {
      // A LeaseLostError here means another instance's announcement raced ours (etag changed): it leads.
      this.log.warn('leader.announce_failed', { holder: this.holder, error: err });
    }
  }

  private beginTerm(record: LeaseRecord, sentAt: number, etag: string, previous: LeaseRecord | undefined): void {
    const now = this.clock.now();
    const term: Term = {
      record,
      controller: new AbortController(),
      startedAt: now,
      lastSentAt: sentAt,
      retryAt: undefined,
      etag,
      lastProgressAt: now,
      work: Promise.resolve(),
      ended: false,
      queue: Promise.resolve(),
    };
    this.term = term;
    this.stats.acquired += 1;
    const takeoverWaitMs = this.lastSeenHeldAt === undefined ? undefined : Math.round(now - this.lastSeenHeldAt);
    this.stats.lastTakeoverWaitMs = takeoverWaitMs;
    this.lastSeenHeldAt = undefined;
    this.log.info('leader.acquired', {
      holder: this.holder,
      epoch: record.epoch,
      lease: this.leaseId.slice(0, 8),
      blob: this.store.description,
      leaseSeconds: this.timing.leaseSeconds,
      ...(takeoverWaitMs === undefined ? {} : { takeoverWaitMs }),
      // Who led before: a different holder means a failover or handover (the README's Kusto queries).
      ...(previous === undefined ? {} : { previousHolder: previous.holder, previousEpoch: previous.epoch }),
    });
    this.noteLeader(record.holder, record.epoch);
    const leadership: Leadership = {
      epoch: record.epoch,
      holder: record.holder,
      acquiredAt: record.acquiredAt,
      signal: term.controller.signal,
      progress: () => {
        term.lastProgressAt = this.clock.now();
      },
      verify: () => this.verify(term),
      writeThroughLease: (fields) => this.writeThroughLease(term, fields),
    };
    term.work = (async () => {
      await this.callbacks.onStartedLeading(leadership);
    })().catch((err: unknown) => {
      this.log.error('leader.work_failed', { epoch: record.epoch, error: err });
    });
  }

  private async leadStep(term: Term): Promise<void> {
    // A tick that asked for an attempt while we lead has its answer.
    this.resolveAttemptWaiters();
    const now = this.clock.now();
    const deadline = term.lastSentAt + this.timing.renewDeadlineMs;
    if (now >= deadline) {
      await this.stepDown(term, 'deadline');
      return;
    }
    const stallAt = term.lastProgressAt + this.timing.stallTimeoutMs;
    if (now >= stallAt && !this.stopRequested) {
      await this.stepDown(term, 'stalled');
      return;
    }
    const dueAt = term.retryAt ?? term.lastSentAt + this.timing.renewIntervalMs;
    if (now < dueAt) {
      await this.pause(Math.min(dueAt, deadline, stallAt) - now);
      return;
    }
    try {
      await this.renew(term);
    } catch (err) {
      if (term.ended) return;
      this.stats.renewFailures += 1;
      term.retryAt = this.clock.now() + this.timing.retryPeriodMs;
      this.log.warn('leader.renew_failed', {
        epoch: term.record.epoch,
        error: err,
        msUntilDeadline: Math.round(term.lastSentAt + this.timing.renewDeadlineMs - this.clock.now()),
      });
    }
  }

  /** One renewal; a "not your lease" answer (or a blob changed behind our back) ends the term at once. */
  private async renew(term: Term): Promise<void> {
    await this.serialized(term, async () => {
      const sentAt = this.clock.now();
      const timeout = Math.min(this.timing.requestTimeoutMs, term.lastSentAt + this.timing.renewDeadlineMs - sentAt);
      try {
        const { etag } = await this.call('renew', (signal) => this.store.renew(this.leaseId, signal), timeout);
        // Lease operations leave the etag alone, and only the holder can write, so the etag should be
        // the one our last write returned. If not, the blob changed in a way this term cannot account
        // for (another holder in between, or a write of ours that timed out yet landed): step down
        // rather than guess; the next campaign starts a clean term.
        if (etag !== '' && etag !== term.etag) throw new LeaseLostError('BlobChangedByAnotherHolder');
        if (term.ended) return;
        term.lastSentAt = sentAt;
        term.retryAt = undefined;
        const latency = this.clock.now() - sentAt;
        this.stats.renewed += 1;
        this.stats.lastRenewLatencyMs = Math.round(latency);
        this.log.debug('leader.renewed', { epoch: term.record.epoch, latencyMs: Math.round(latency) });
      } catch (err) {
        if (err instanceof LeaseLostError) {
          await this.stepDown(term, 'lost', err);
          throw new NotLeaderError(`Leadership of epoch ${term.record.epoch} was lost: ${err.message}`, { cause: err });
        }
        throw err;
      }
    });
  }

  private async verify(term: Term): Promise<void> {
    await this.checkStillLeading(term);
    await this.renew(term);
  }

  private async writeThroughLease(term: Term, fields: Readonly<Record<string, string>>): Promise<void> {
    await this.checkStillLeading(term);
    await this.serialized(term, async () => {
      const now = this.clock.now();
      const timeout = Math.min(this.timing.requestTimeoutMs, term.lastSentAt + this.timing.renewDeadlineMs - now);
      try {
        const { etag } = await this.call('write', (signal) => this.store.write(this.leaseId, recordMetadata(term.record, fields), term.etag, signal), timeout);
        term.etag = etag;
      } catch (err) {
        if (err instanceof LeaseLostError) {
          await this.stepDown(term, 'lost', err);
          throw new NotLeaderError(`Write refused: epoch ${term.record.epoch} no longer holds the lease (${err.serviceCode}).`, { cause: err });
        }
        throw err;
      }
    });
  }

  private async checkStillLeading(term: Term): Promise<void> {
    if (term.ended) throw new NotLeaderError(`Epoch ${term.record.epoch} is no longer the leader.`);
    if (this.clock.now() - term.lastSentAt >= this.timing.renewDeadlineMs) {
      // Paused past the deadline (or storage unreachable): stop believing before acting.
      await this.stepDown(term, 'deadline');
      throw new NotLeaderError(`Epoch ${term.record.epoch} passed its renew deadline; it stepped down.`);
    }
  }

  /** Ends a term, releasing the lease when this instance gives it up on its own account. */
  private async stepDown(term: Term, reason: StepDownReason, cause?: unknown): Promise<void> {
    if (term.ended) return;
    this.endTerm(term, reason, cause);
    if (reason === 'stalled') {
      await this.release(term);
      // Sit out one lease period, so a healthy instance gets the lease instead of this one again.
      this.sitOutUntil = this.clock.now() + this.timing.leaseSeconds * 1000;
    } else if (reason === 'deadline') {
      // Best effort: if storage answers again, followers need not wait for the lease to lapse.
      await this.release(term, 'debug');
    }
  }

  private endTerm(term: Term, reason: StepDownReason, cause?: unknown): void {
    if (term.ended) return;
    term.ended = true;
    if (this.term === term) this.term = undefined;
    const epoch = term.record.epoch;
    term.controller.abort(new NotLeaderError(`Leadership of epoch ${epoch} ended (${reason}).`, { cause }));
    this.previousWork = term.work;
    const heldMs = Math.round(this.clock.now() - term.startedAt);
    if (reason === 'lost' || reason === 'deadline') {
      this.stats.lost += 1;
      this.log.warn('leader.lost', { holder: this.holder, epoch, reason, heldMs, ...(cause === undefined ? {} : { error: cause }) });
    } else if (reason === 'stalled') {
      this.stats.stalls += 1;
      this.log.warn('leader.stalled', { holder: this.holder, epoch, heldMs, sinceProgressMs: Math.round(this.clock.now() - term.lastProgressAt) });
    }
    try {
      this.callbacks.onStoppedLeading?.({ epoch, reason });
    } catch (err) {
      this.log.error('leader.callback_failed', { callback: 'onStoppedLeading', error: err });
    }
  }

  private async release(term: Term, failureLevel: 'warn' | 'debug' = 'warn'): Promise<void> {
    try {
      await this.call('release', (signal) => this.store.release(this.leaseId, signal));
      this.stats.released += 1;
      this.log.info('leader.released', { holder: this.holder, epoch: term.record.epoch });
    } catch (err) {
      // Not fatal: an unreleased lease lapses after L; a LeaseLostError means it already had.
      this.log.log(failureLevel, 'leader.release_failed', { holder: this.holder, epoch: term.record.epoch, error: err });
    }
  }

  /** Gives back a lease acquired while stopping, before any term began (a crash simulation keeps it). */
  private async releaseUntracked(): Promise<void> {
    if (this.abandoned) return;
    await this.call('release', (signal) => this.store.release(this.leaseId, signal)).catch((err: unknown) => {
      this.log.debug('leader.release_failed', { holder: this.holder, error: err });
    });
  }

  private async observeLeader(): Promise<void> {
    try {
      const snap = await this.call('read', (signal) => this.store.read(signal));
      if (snap.record !== undefined) this.noteLeader(snap.record.holder, snap.record.epoch);
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
  private async call<T>(operation: string, fn: (signal: AbortSignal) => Promise<T>, timeoutMs = this.timing.requestTimeoutMs): Promise<T> {
    const request = new AbortController();
    const timer = new AbortController();
    const timedOut = this.clock.sleep(Math.max(0, timeoutMs), timer.signal).then(() => {
      if (timer.signal.aborted) return undefined as never;
      const error = new LeaseRequestTimeoutError(operation, timeoutMs);
      request.abort(error);
      throw error;
    });
    try {
      return await Promise.race([fn(request.signal), timedOut]);
    } finally {
      timer.abort();
    }
  }

  private serialized<T>(term: Term, fn: () => Promise<T>): Promise<T> {
    const next = term.queue.then(fn, fn);
    term.queue = next.catch(() => undefined);
    return next;
  }

  private async settleWithin(work: Promise<void>, ms: number): Promise<boolean> {
    const timer = new AbortController();
    const finished = await Promise.race([work.then(() => true), this.clock.sleep(ms, timer.signal).then(() => false)]);
    timer.abort();
    return finished;
  }

  private jitteredCampaignPeriod(): number {
    const { campaignPeriodMs, jitter } = this.timing;
    return campaignPeriodMs * (1 - jitter * this.random());
  }

  private pause(ms: number): Promise<void> {
    return this.clock.sleep(ms, this.wakeController.signal);
  }

  private wake(): void {
    this.wakeController.abort();
    this.wakeController = new AbortController();
  }

  private takeAttemptWaiters(): Array<() => void> {
    const waiters = this.attemptWaiters;
    this.attemptWaiters = [];
    return waiters;
  }

  private resolveAttemptWaiters(): void {
    for (const resolve of this.takeAttemptWaiters()) resolve();
  }
}
