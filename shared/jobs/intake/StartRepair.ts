/**
 * The leader's check of the starts still in progress: every pass lists the start marks (one per
 * start: rows of the job index's table, or blobs without one: StartMarks.ts) and takes each marked
 * job's current start (the one its start record names) one step on (`nextStartStep`): confirmed
 * (its marks go), waiting (its own mark stays, any other goes), or started again under a new start
 * id, the pass's epoch and the next instance generation (`takeOver`: the new start is marked before
 * the earlier marks go). A mark's age is this process's own reckoning (`#seen`), never the storage
 * service's clock. A newer leader takes over its predecessors' marked starts at its
 * first pass. The start record changes only with If-Match, and only by a leader whose epoch is at
 * least the record's. The checks follow the start -> plan lag the marks show and back off per start
 * (INTAKE), and the listing also tells the intake how many starts are on their way to their plans
 * (its admission bound) and which are still marked (`startUnconfirmed`, for the stall check).
 *
 * Guaranteed: every recorded start is checked by the leader's runs of checks (one at a time: each
 * pass begins one on the newest listing when none is running), whoever leads, until its orchestration
 * is past planning, so an interrupted start is completed (a start this process is still making, from
 * its mark until its start call settles, is not: it is not interrupted, only slow); a repair by a leader that lost its lease,
 * landing late, is refused by Durable (Pending or Running instance) or does nothing.
 * Not guaranteed: that a run past its plan step stops when a newer epoch appears (its steps are
 * idempotent).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3; "The lease epoch from the elector to the fence", step 5.
 */
import { randomUUID } from 'node:crypto';

import { type Logger } from '../../observability/log';
import { mapWhile } from '../pool';
import { jobViewOf, type OrchestrationClient } from '../run/OrchestrationClient';
import { type JobStore, type StartRecord, type Versioned } from '../store/JobStore';
import { type StartMark } from '../store/StartMarks';
import { type Now } from '../wallClock';
import { INTAKE, type IntakeContext, isAbort } from './intakeTerms';
import { nextStartStep, startInstanceId, startRecorded } from './startSteps';

const MAX_PREVIOUS_STARTS = 5;

export interface StartRepairDeps {
  readonly store: JobStore;
  readonly logger: Logger;
  readonly now: Now;
}

/**
 * The marks of one listing, one entry a job: the starts of it that are marked (the current one, and
 * any an earlier start or delivery left) and when the newest was first seen here, on this process's
 * clock: when its intake marked it, else the first listing that showed it (a mark a term's first
 * listing finds counts as seen `INTAKE.checkAfterMs` before it: see `#seen`).
 */
export type Marks = ReadonlyArray<{ readonly jobId: string; readonly startIds: readonly string[]; readonly markedAt: number }>;

/** Confirmations of this process's plans remembered for a listing under way: at most this many, this long. */
const CONFIRMED_KEPT = 1_000;
const CONFIRMED_KEPT_MS = 10_000;

export class StartRepair {
  /** When the marked starts were last listed (`INTAKE.checkEveryMs`). */
  #checkedAt = Number.NEGATIVE_INFINITY;
  /**
   * The fresh marks of the last listing (job id -> marked at: first listed within `freshMarkMs`) and
   * when it was, and the lags of the marks gone since (`startLagWindowMs`).
   */
  #marksSeen = new Map<string, number>();
  #marksSeenAt = 0;
  /** When each mark listed (`<jobId>.<startId>`) was first seen here, and the term of the last listing. */
  #firstSeen = new Map<string, number>();
  #listedTerm: number | undefined;
  /**
   * Starts on their way to their plans (`maxStartsUnderWay`): the fresh marks of the last listing,
   * and the starts made since; each goes from here when a plan of this process says it got past its
   * fence (`confirmedHere`), or at the next listing that no longer shows its mark.
   */
  #underWayListed = new Set<string>();
  /** Starts made here since the last listing began (job id -> when: one made while a listing ran may be missing from it). */
  readonly #startedSince = new Map<string, number>();
  /** Starts a plan of this process confirmed (job id -> when): left out of a listing that began before the confirmation. */
  readonly #confirmedHere = new Map<string, number>();
  /** The job ids the last listing showed marked, and the starts this intake marked since (`startUnconfirmed`). */
  #marksListed: ReadonlySet<string> = new Set();
  readonly #markedHere = new Map<string, number>();
  /** Starts this process is making now (from their mark until their start call settles), and repairs under way. */
  readonly #inFlight = new Set<string>();
  /**
   * Starts a check is judging now (its own set: a check must not end the intake's claim on a job id
   * the intake marked while the check ran, nor clear the mark the intake just wrote).
   */
  readonly #checking = new Set<string>();
  readonly #lags: Array<{ readonly at: number; readonly ms: number }> = [];
  /** The start -> plan lag at the last check (`startLag`). */
  #lag = 0;

  /** When each marked start that was waiting is due for its next check (`INTAKE.maxCheckBackoffMs`). */
  readonly #checkBackoff = new Map<string, { nextAt: number; waitMs: number }>();

  private readonly now: Now;

  constructor(private readonly deps: StartRepairDeps) {
    this.now = deps.now;
  }

  /** Whether the job's start was marked unconfirmed at the last listing of the marks (at most a few seconds old while busy). */
  startUnconfirmed(jobId: string): boolean {
    return this.#marksListed.has(jobId) || this.#markedHere.has(jobId);
  }

  /**
   * The start -> plan lag the marks showed at the last check (largest of the last
   * `INTAKE.startLagWindowMs`): how far behind Durable's queues run under a burst, 0 when quiet.
   * `withinMs`: only the samples of that last stretch (0 once none is that recent), for a reader
   * that must not go on waiting for a burst that is over.
   */
  lagMs(withinMs?: number): number {
    if (withinMs === undefined) return this.#lag;
    const now = this.now().getTime();
    const recent = this.#lags.filter((l) => now - l.at <= withinMs);
    return Math.min(INTAKE.maxStartLagMs, recent.reduce((most, l) => Math.max(most, l.ms), 0));
  }

  /** Starts on their way to their plans: the fresh marks of the last listing and the starts made since (`maxStartsUnderWay`). */
  underWay(): number {
    let n = this.#underWayListed.size;
    for (const jobId of this.#startedSince.keys()) if (!this.#underWayListed.has(jobId)) n += 1;
    return n;
  }

  /** A start this intake is making now (counted toward `underWay` until its plan confirms it, or the next listing). */
  started(jobId: string): void {
    this.#startedSince.set(jobId, this.now().getTime());
  }

  /**
   * A plan of this process got the job's start past its fence and removed its mark (JobActivities):
   * the start is no longer under way. True when it was counted (room opened). Without this a start
   * counted until the next listing of the marks (2 s), so the bound held back more submissions than
   * the starts on their way called for. A plan run by another instance is seen at the listing.
   */
  confirmedHere(jobId: string): boolean {
    const at = this.now().getTime();
    this.#confirmedHere.set(jobId, at);
    // Needed only by a listing under way (seconds); a process that does not lead lists nothing, so
    // the oldest go here too (insertion order is time order).
    if (this.#confirmedHere.size > CONFIRMED_KEPT) {
      for (const [id, confirmedAt] of this.#confirmedHere) {
        if (at - confirmedAt <= CONFIRMED_KEPT_MS && this.#confirmedHere.size <= CONFIRMED_KEPT) break;
        this.#confirmedHere.delete(id);
      }
    }
    const listed = this.#underWayListed.delete(jobId);
    return this.#startedSince.delete(jobId) || listed;
  }

  /** Whether this process holds the job's start now (making it, or repairing it): its claim is not another's to end. */
  holds(jobId: string): boolean {
    return this.#inFlight.has(jobId);
  }

  /**
   * A start this intake is marking now (`startUnconfirmed` says so until a listing shows it). Until
   * `settled`, its start is this process's own work in progress: a check would find no instance yet
   * (under a burst the start call takes seconds) and start the job again under a new start.
   */
  marking(jobId: string): void {
    this.#markedHere.set(jobId, this.now().getTime());
    this.#inFlight.add(jobId);
  }

  /** The start call of a start marked here has answered or failed: the checks may judge it again. */
  settled(jobId: string): void {
    this.#inFlight.delete(jobId);
  }

  /**
   * The marked starts, listed at most every `INTAKE.checkEveryMs` (a listing is a query of every mark:
   * not on every one of a burst's back-to-back passes); undefined when not due.
   * Before any submission is taken: the admission bound counts them.
   */
  async listMarks(ctx: IntakeContext): Promise<Marks | undefined> {
    const at = this.now().getTime();
    if (at - this.#checkedAt < INTAKE.checkEveryMs) return undefined;
    this.#checkedAt = at;
    const marked = this.#seen(await this.deps.store.listUnconfirmed(ctx.signal), at, ctx.epoch);
    ctx.progress();
    const fresh = marked.filter((m) => this.now().getTime() - m.markedAt < INTAKE.underWayFreshMs && !this.#confirmedHere.has(m.jobId));
    this.#underWayListed = new Set(fresh.map((m) => m.jobId));
    // Confirmed before this listing began: its mark was gone by then.
    for (const [jobId, confirmedAt] of this.#confirmedHere) if (confirmedAt < at) this.#confirmedHere.delete(jobId);
    this.#marksListed = new Set(marked.map((m) => m.jobId));
    // Marks made before this listing began are in it (or already gone: their plans began); later ones are kept.
    for (const [jobId, markedAt] of this.#markedHere) if (markedAt < at) this.#markedHere.delete(jobId);
    // Starts made before this listing began have their marks in it (or gone: their plans began); later ones are kept.
    for (const [jobId, startedAt] of this.#startedSince) if (startedAt < at) this.#startedSince.delete(jobId);
    return marked;
  }

  /**
   * The listing's marks, a job each, timed on this process's clock (a mark carries no time: the
   * storage service's clock is not this one): when this intake marked the job, else when a listing
   * first showed the mark. A mark a term's first listing finds is what the leader before left (it
   * may have stopped between its start's record and its Durable start): it counts as seen
   * `checkAfterMs` ago, so it is checked at once, before a start the old leader may still land
   * (a paused one) runs under its older epoch.
   */
  #seen(listed: readonly StartMark[], at: number, epoch: number): Marks {
    const newTerm = this.#listedTerm !== epoch;
    this.#listedTerm = epoch;
    const firstSeen = new Map<string, number>();
    const byJob = new Map<string, { startIds: string[]; markedAt: number }>();
    for (const { jobId, startId } of listed) {
      const key = `${jobId}.${startId}`;
      const seenAt = this.#firstSeen.get(key) ?? this.#markedHere.get(jobId) ?? (newTerm ? at - INTAKE.checkAfterMs : at);
      firstSeen.set(key, seenAt);
      const job = byJob.get(jobId);
      if (job === undefined) byJob.set(jobId, { startIds: [startId], markedAt: seenAt });
      else {
        job.startIds.push(startId);
        job.markedAt = Math.max(job.markedAt, seenAt);
      }
    }
    this.#firstSeen = firstSeen;
    return [...byJob].map(([jobId, job]) => ({ jobId, ...job }));
  }

  /** One pass over the marked starts: confirm, wait, or start again (see the module comment). */
  async checkStarts(
    marked: Marks | undefined,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    counts: { checked: number; confirmed: number; restarted: number },
  ): Promise<void> {
    if (marked === undefined) return;
    const now = this.now().getTime();
    const present = new Set(marked.map((m) => m.jobId));
    const lag = this.startLag(now, present, marked);
    this.#lag = lag;
    for (const jobId of this.#checkBackoff.keys()) if (!present.has(jobId)) this.#checkBackoff.delete(jobId);
    const due = marked
      .filter((m) => now - m.markedAt >= Math.max(INTAKE.checkAfterMs, lag) && (this.#checkBackoff.get(m.jobId)?.nextAt ?? 0) <= now)
      .filter((m) => !this.#inFlight.has(m.jobId) && !this.#checking.has(m.jobId))
      .slice(0, INTAKE.maxChecksPerPass);
    const checking = performance.now();
    // Past the budget the rest stay due (their back-off untouched): the next pass checks them.
    const withinBudget = (): boolean => !ctx.signal.aborted && performance.now() - checking < INTAKE.checkBudgetMs;
    await mapWhile(due, INTAKE.checkConcurrency, withinBudget, async ({ jobId, startIds }) => {
      // A check still running from an earlier pass (a slow start call) is not checked twice at once.
      if (this.#inFlight.has(jobId) || this.#checking.has(jobId)) return;
      this.#checking.add(jobId);
      counts.checked += 1;
      try {
        const stuckAfterMs = Math.max(INTAKE.stuckPendingSeconds * 1000, 2 * lag);
        const { step, stuckAt } = await this.advance(jobId, startIds, ctx, orchestrations, stuckAfterMs);
        if (step === 'confirmed') counts.confirmed += 1;
        else if (step === 'restarted') counts.restarted += 1;
        if (step === 'waiting' || step === 'not_ours') {
          const waitMs = Math.min(2 * (this.#checkBackoff.get(jobId)?.waitMs ?? INTAKE.checkAfterMs / 2), INTAKE.maxCheckBackoffMs);
          const checkedAt = this.now().getTime();
          // Never past the moment a Pending instance counts as stuck: its repair is what recovers a
          // start message taken by an instance that died (a back-off past it would delay that by up to 15 s).
          const nextAt = stuckAt !== undefined && stuckAt > checkedAt ? Math.min(checkedAt + waitMs, stuckAt) : checkedAt + waitMs;
          this.#checkBackoff.set(jobId, { nextAt, waitMs });
        } else {
          this.#checkBackoff.delete(jobId);
        }
      } catch (err) {
        if (isAbort(err)) throw err;
        // One start's trouble (Durable refused, storage hiccup) must not hold up the others: next pass.
        this.deps.logger.warn('intake.start_check_failed', { jobId, error: err, epoch: ctx.epoch });
      } finally {
        this.#checking.delete(jobId);
      }
      ctx.progress();
    });
  }

  /**
   * The start -> plan lag the marks show (INTAKE.startLagWindowMs): a mark gone since the last listing
   * was still there at that listing, so its start waited at least that long (a lower bound: an idle
   * leader's listings 15 s apart do not count as lag).
   */
  private startLag(
    now: number,
    present: ReadonlySet<string>,
    marked: Marks,
  ): number {
    for (const [jobId, markedAt] of this.#marksSeen) {
      if (!present.has(jobId)) this.#lags.push({ at: now, ms: Math.max(0, this.#marksSeenAt - markedAt) });
    }
    const seen = this.#marksSeen;
    this.#marksSeen = new Map(
      marked.filter((m) => seen.has(m.jobId) || now - m.markedAt <= INTAKE.freshMarkMs).map((m) => [m.jobId, m.markedAt]),
    );
    this.#marksSeenAt = now;
    while (this.#lags.length > 0 && now - (this.#lags[0]?.at ?? now) > INTAKE.startLagWindowMs) this.#lags.shift();
    return Math.min(INTAKE.maxStartLagMs, this.#lags.reduce((most, l) => Math.max(most, l.ms), 0));
  }

  /**
   * Judges the job's current start (the one its start record names), whichever of its starts the
   * marks name, and leaves the marks saying what is left to check: none once it is past planning, its
   * own while it waits. Another start's mark goes once it is spent (`#spent`): an earlier start's at
   * once, one no start record names yet (a take-over in flight marks its new start before its record
   * names it; a duplicate delivery's whose create found the id taken) only once it is old.
   */
  private async advance(
    jobId: string,
    startIds: readonly string[],
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    stuckAfterMs: number,
  ): Promise<{ readonly step: 'confirmed' | 'waiting' | 'restarted' | 'retired' | 'not_ours'; readonly stuckAt?: number }> {
    const { store, logger } = this.deps;
    const found = await store.readStart(jobId, ctx.signal);
    // The intake marked this job id while the check read (a submission of it being started now): the
    // mark is the intake's, and stays.
    if (this.#inFlight.has(jobId)) return { step: 'waiting' };
    const clear = (ids: readonly string[]): Promise<unknown> => Promise.all(ids.map((id) => store.clearUnconfirmed(jobId, id, ctx.signal)));
    // No record: a mark that may have landed before its record (written side by side), kept until old.
    if (found === undefined) {
      const spent = startIds.filter((id) => this.#markAgeMs(jobId, id) >= INTAKE.underWayFreshMs);
      await clear(spent);
      return { step: spent.length === startIds.length ? 'retired' : 'waiting' };
    }
    if (found.value.state !== 'active') {
      await clear(startIds);
      return { step: 'retired' };
    }
    // A newer leader has taken this start over: this one is stale and leaves it alone.
    if (found.value.epoch > ctx.epoch) return { step: 'not_ours' };
    const instance = jobViewOf(await orchestrations.getStatus(startInstanceId(found.value)), jobId);
    const step = nextStartStep(instance, found.value, ctx.epoch, this.now(), stuckAfterMs);
    const current = found.value.startId;
    const others = this.#spent(jobId, found.value, startIds);
    if (step.kind === 'wait') {
      // The start waited on keeps a mark of its own (one the plan of an earlier start could not remove).
      if (!startIds.includes(current)) await store.markUnconfirmed(jobId, current, ctx.signal);
      await clear(others);
      // A Pending instance counts as stuck this long after it was created (`nextStartStep`).
      const pending = instance?.runtimeStatus === 'Pending';
      const stuckAt = pending ? instance.createdTime.getTime() + stuckAfterMs + 1 : undefined;
      return { step: 'waiting', ...(stuckAt === undefined ? {} : { stuckAt }) };
    }
    if (step.kind === 'confirmed') {
      await clear([...startIds.filter((id) => id === current), ...others]);
      return { step: 'confirmed' };
    }
    const start = await this.takeOver(found, step.reason, ctx);
    // Someone changed the record first (a newer leader, or this one's last pass): judged again next pass.
    if (start === undefined) return { step: 'waiting' };
    // The new start was marked before its record named it (`takeOver`); the earlier ones' marks go.
    await clear([...startIds.filter((id) => id === current), ...others]);
    this.started(jobId);
    await startRecorded(start.value, orchestrations);
    logger.warn('intake.start_repaired', {
      jobId,
      reason: step.reason,
      instanceId: startInstanceId(start.value),
      startId: start.value.startId,
      previousStartId: current,
      previousEpoch: found.value.epoch,
      epoch: ctx.epoch,
    });
    return { step: 'restarted' };
  }

  /**
   * The marks of the job's starts other than `start`'s that no start needs: an earlier start's (the
   * record lists it), or one no record named that has been seen here for a minute.
   */
  #spent(jobId: string, start: StartRecord, startIds: readonly string[]): string[] {
    const earlier = new Set((start.previous ?? []).map((p) => p.startId));
    return startIds.filter((id) => id !== start.startId && (earlier.has(id) || this.#markAgeMs(jobId, id) >= INTAKE.underWayFreshMs));
  }

  /** How long this process has known a start's mark (0 when it has not listed it). */
  #markAgeMs(jobId: string, startId: string): number {
    const seenAt = this.#firstSeen.get(`${jobId}.${startId}`);
    return seenAt === undefined ? 0 : this.now().getTime() - seenAt;
  }

  /**
   * A new start id under this epoch and the next instance generation, written only over the version
   * read. The new start is marked first: a leader that stops between the two leaves a mark, so the
   * next one checks the job (a mark of an earlier start may be gone already: its plan, past its fence
   * just before the take-over, removes it). A write that loses removes the mark again.
   */
  private async takeOver(
    found: Versioned<StartRecord>,
    reason: string,
    ctx: IntakeContext,
  ): Promise<Versioned<StartRecord> | undefined> {
    const old = found.value;
    const startId = randomUUID();
    // Taken over, it runs alone: `instance` (a shared run's) goes.
    const { instance: _shared, ...alone } = old;
    const record: StartRecord = {
      ...alone,
      startId,
      generation: old.generation + 1,
      epoch: ctx.epoch,
      holder: ctx.holder,
      at: this.now().toISOString(),
      reason,
      run: { ...old.run, startId, epoch: ctx.epoch, holder: ctx.holder },
      previous: [...(old.previous ?? []), { startId: old.startId, generation: old.generation, epoch: old.epoch, at: old.at }]
        .slice(-MAX_PREVIOUS_STARTS),
    };
    await this.deps.store.markUnconfirmed(old.jobId, startId, ctx.signal);
    const written = await this.deps.store.replaceStart(record, found.etag, ctx.signal);
    if (written !== 'conflict') return { value: record, etag: written.etag };
    await this.deps.store.clearUnconfirmed(old.jobId, startId, ctx.signal);
    return undefined;
  }
}
