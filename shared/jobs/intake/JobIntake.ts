/**
 * The leader's intake of job submissions from the jobs queue, and its check of the starts still in
 * progress (together, the body of the coordination pass). This file is the pump: it receives
 * batches, groups them by job id, and keeps up to `INTAKE.messageConcurrency` groups under way
 * within the pass's budget while the admission bound has room (`INTAKE.maxStartsUnderWay`: past it
 * the rest of a burst waits on the jobs queue); each message is handled by Submissions.ts (start,
 * or reject: Rejections.ts), and every pass checks the marked starts beside the taking (StartRepair.ts, `nextStartStep`
 * in startSteps.ts; one run of checks at a time, which may go on beside the next pass). The tuning
 * is `INTAKE` (intakeTerms.ts).
 *
 * Guaranteed: never two submissions naming one job id under way at once (a duplicate finds its
 * twin's start); the pass stops between messages once `signal` aborts and reports `progress()` for
 * the leader's watchdog; a new term does not overlap the last one's starts.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3; "The lease epoch from the elector to the fence", step 5.
 */
import { QueueReadability } from '../../storage/QueueReadability';
import { decodeQueueMessage } from '../messageCodec';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { type OrchestrationClient } from '../run/OrchestrationClient';
import { type ReceivedSubmission } from '../SubmissionQueue';
import { nowOf } from '../wallClock';
import { waitAtMost } from './beside';
import { INTAKE, type IntakeContext, type IntakeDeps, type IntakeOutcome, isAbort } from './intakeTerms';
import { type Marks, StartRepair } from './StartRepair';
import { Submissions } from './Submissions';

export interface IntakeReport {
  readonly received: number;
  readonly started: number;
  readonly alreadyStarted: number;
  readonly rejected: number;
  readonly retryLater: number;
  /** Submissions were left on the jobs queue this pass because the admission bound was full (`INTAKE.maxStartsUnderWay`). */
  readonly heldBack?: boolean;
  /** Milliseconds this pass spent checking the unconfirmed starts, and taking submissions. */
  readonly checksMs?: number;
  readonly takingMs?: number;
  /** Unconfirmed starts checked this pass, confirmed (their mark removed), and started again. */
  readonly checked: number;
  readonly confirmed: number;
  readonly restarted: number;
  /** The start marks this pass's listing showed (absent when it listed none: not due, or skipped). */
  readonly marks?: number;
}

/** What the leader's pass asks of one intake pass. */
export interface IntakePassOptions {
  /** false: leave the start marks unlisted this pass (the leader's quiet side reads, QuietReads.ts). */
  readonly listMarks?: boolean;
}

/** Messages naming one job id (else one message, keyed by its own id), taken in order by one lane. */
interface Group {
  readonly key: string;
  readonly messages: ReceivedSubmission[];
}

/** A group and when its batch was received (its messages stay invisible `INTAKE.visibilityTimeoutSeconds` from then). */
type ReceivedGroup = Group & { readonly receivedAt: number };

interface Tally {
  received: number;
  started: number;
  alreadyStarted: number;
  rejected: number;
  retryLater: number;
}

function emptyTally(): Tally {
  return { received: 0, started: 0, alreadyStarted: 0, rejected: 0, retryLater: 0 };
}

/** A batch's messages grouped by the job id they name (as far as it reads; else the message's own id), in order. */
function byJobId(messages: readonly ReceivedSubmission[]): Group[] {
  const groups = new Map<string, ReceivedSubmission[]>();
  for (const message of messages) {
    let key = `message:${message.messageId}`;
    try {
      const parsed = decodeQueueMessage(message.messageText);
      const jobId = parsed !== null && typeof parsed === 'object' && 'jobId' in parsed ? parsed.jobId : undefined;
      if (typeof jobId === 'string') key = `job:${jobId}`;
    } catch {
      // Not readable: Submissions.handle rejects it on its own.
    }
    groups.set(key, [...(groups.get(key) ?? []), message]);
  }
  return [...groups].map(([key, grouped]) => ({ key, messages: grouped }));
}

/**
 * Waits for `work` (which must not reject) until `until` (performance.now() time) at most: whether
 * it ended. Infinity: until it ends.
 */
function waitUntil(work: Promise<unknown> | undefined, until: number): Promise<boolean> {
  return work === undefined ? Promise.resolve(true) : waitAtMost(work, until - performance.now());
}

export class JobIntake {
  /** Notices a jobs queue that answers no receive while it holds messages (Azurite only: storage/QueueReadability.ts). */
  private readonly readability: QueueReadability;

  /** The start checks and their state (the marks' listing, lags and back-offs). */
  private readonly repair: StartRepair;

  /** Each submission's handling: its start or its rejection. */
  private readonly submissions: Submissions;

  /**
   * Submissions received and not begun yet, by job id, for this pass or the next of the same term
   * while their receipts hold (`INTAKE.carriedForMs`).
   */
  #waiting: { readonly epoch: number; readonly groups: ReceivedGroup[] } | undefined;
  /** The age of the oldest message of the latest batch received, and when (performance.now()): `submissionWaitMs`. */
  #queueWait: { readonly at: number; readonly ms: number } | undefined;
  /** The start checks running (StartRepair.checkStarts), which may run on beside the next pass. */
  #checking: Promise<void> | undefined;
  /** The newest listing of the marks no run of checks has taken yet. */
  #marks: Marks | undefined;
  /** What every run of checks has counted, and what of it the last report took. */
  readonly #checks = { checked: 0, confirmed: 0, restarted: 0 };
  #checksReported = { checked: 0, confirmed: 0, restarted: 0 };
  /** The groups being started (by key), which run on across passes while a burst lasts (`takeSubmissions`). */
  readonly #taking = new Map<string, Promise<void>>();
  /** Submissions being handled whose start is not decided yet (`admits`). */
  #undecided = 0;
  /** What the submissions handled since the last report came to. */
  #tally: Tally = emptyTally();
  /** Resolved (and replaced) whenever a group ends or a batch lands: a pass waiting for room wakes. */
  #wake: () => void = () => undefined;
  #changed: Promise<void> = new Promise<void>((resolve) => (this.#wake = resolve));

  constructor(private readonly deps: IntakeDeps) {
    const now = nowOf(deps);
    this.readability = new QueueReadability({
      queue: deps.jobsQueue,
      logger: deps.logger,
      now,
      heldSeconds: INTAKE.visibilityTimeoutSeconds,
    });
    this.repair = new StartRepair({ store: deps.store, logger: deps.logger, now });
    this.submissions = new Submissions(deps, this.repair);
  }

  private readonly ensureQueues = onceUntilSuccess((signal) =>
    Promise.all([
      this.deps.jobsQueue.createIfNotExists({ abortSignal: signal }),
      this.deps.poisonQueue.createIfNotExists({ abortSignal: signal }),
      this.deps.store.ensureContainer(signal),
    ]),
  );

  /**
   * Checks the unconfirmed starts and, beside them, reads the jobs queue in batches until it is
   * empty, the pass budget is spent, or `signal` aborts.
   */
  async runPass(ctx: IntakeContext, orchestrations: OrchestrationClient, options: IntakePassOptions = {}): Promise<IntakeReport> {
    this.submissions.beginPass();
    const began = performance.now();
    // The starts under way are waited for until then at most; slower ones run on and count in a later pass.
    const settleBy = began + INTAKE.passBudgetMs + INTAKE.settleGraceMs;
    let leaveRunning = false;
    try {
      const report = await this.intakePass(ctx, orchestrations, began, settleBy, options);
      leaveRunning = report.more;
      return report.counts;
    } finally {
      // Unless a burst goes on (its starts run on into the next pass): the starts under way and the
      // first windows being sent (they stop between messages once `signal` aborts), all of them when
      // the term ended (a new term never overlaps them), else until `settleBy`.
      if (ctx.signal.aborted) {
        await this.settle();
        this.submissions.endTerm();
      } else if (!leaveRunning) await this.settle(settleBy);
    }
  }

  /**
   * Waits for every start under way and every first window being sent, or until `until`
   * (performance.now() time), whichever comes first.
   */
  private async settle(until = Number.POSITIVE_INFINITY): Promise<void> {
    while (this.#taking.size > 0 || this.submissions.sending.size > 0 || this.#checking !== undefined) {
      const all = Promise.all([...this.#taking.values(), ...this.submissions.sending, this.#checking]);
      if (!(await waitUntil(all, until))) return;
    }
  }

  private notify(): void {
    const wake = this.#wake;
    this.#changed = new Promise<void>((resolve) => (this.#wake = resolve));
    wake();
  }

  private async intakePass(
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    began: number,
    settleBy: number,
    options: IntakePassOptions,
  ): Promise<{ readonly counts: IntakeReport; readonly more: boolean }> {
    await this.ensureQueues(ctx.signal);
    // A new term does not overlap the last one's starts (they stop between messages once its signal aborted).
    if (this.#waiting !== undefined && this.#waiting.epoch !== ctx.epoch) await this.settle();
    this.submissions.beginTerm(ctx.epoch);
    const withinBudget = (): boolean => performance.now() - began < INTAKE.passBudgetMs;
    // The checks beside the taking, not before it: under a burst they read dozens of starts a pass.
    const listed = options.listMarks === false ? undefined : await this.repair.listMarks(ctx);
    // The newest listing, until a run of checks takes it (one still running keeps it for the next).
    if (listed !== undefined) this.#marks = listed;
    let checksMs: number | undefined;
    // One run of checks at a time: one still running from an earlier pass (a take-over's Durable start
    // under a burst takes seconds) goes on, and this pass waits for it no longer than for its starts.
    if (this.#checking === undefined) {
      const marked = this.#marks;
      this.#marks = undefined;
      const running: Promise<void> = this.repair
        .checkStarts(marked, ctx, orchestrations, this.#checks)
        .then(
          () => void (checksMs = performance.now() - began),
          (err: unknown) => {
            if (!isAbort(err)) this.deps.logger.warn('intake.start_checks_failed', { error: err, epoch: ctx.epoch });
          },
        )
        .finally(() => {
          if (this.#checking === running) this.#checking = undefined;
        });
      this.#checking = running;
    }
    const [, taken] = await Promise.all([
      waitUntil(this.#checking, settleBy),
      this.takeSubmissions(began, withinBudget, settleBy, ctx, orchestrations),
    ]);
    // Settled here (not in runPass) when nothing more waits, so this pass reports its own starts
    // (those that end by `settleBy`; a slower one counts in the pass it ends in).
    if (ctx.signal.aborted) await this.settle();
    else if (!taken.more) await this.settle(settleBy);
    const tally = this.#tally;
    this.#tally = emptyTally();
    // What the checks counted since the last report (a run that outlived its pass counts in a later one).
    const totals = { ...this.#checks };
    const reported = this.#checksReported;
    this.#checksReported = totals;
    const checks = {
      checked: totals.checked - reported.checked,
      confirmed: totals.confirmed - reported.confirmed,
      restarted: totals.restarted - reported.restarted,
    };
    const checksTime = checksMs === undefined ? {} : { checksMs: Math.round(checksMs) };
    const marks = listed === undefined ? {} : { marks: listed.length };
    const takingMs = Math.round(performance.now() - began);
    const heldBack = taken.heldBack ? { heldBack: true } : {};
    const counts: IntakeReport = { ...tally, ...checks, ...checksTime, ...marks, ...heldBack, takingMs };
    if (counts.received > 0 || counts.started > 0 || counts.confirmed > 0 || counts.restarted > 0) {
      const underWay = this.#taking.size > 0 ? { underWay: this.#taking.size } : {};
      this.deps.logger.info('intake.pass', { ...counts, ...underWay, epoch: ctx.epoch });
    }
    // Submissions wait, or a full last batch (a burst): no pause before the next pass.
    if (taken.more && !ctx.signal.aborted) ctx.again?.();
    return { counts, more: taken.more };
  }

  /**
   * Takes submissions, at most `INTAKE.messageConcurrency` groups under way at once (a group: the
   * messages naming one job id, in order; never two under way for one job id, so a duplicate finds
   * its twin's start), while `withinBudget()`. The next batch is received while the groups under way
   * run (when fewer groups wait than there are lanes), and each group that ends makes room for the
   * next at once, so no lane waits for a batch's slowest start. At the budget, the groups under way
   * run on into the next pass (which follows at once) when more submissions wait, and the ones not
   * begun wait for it; answers whether more wait. A failed receive fails the pass. A receive still
   * out at the budget's end is waited for until `settleBy` at most (under a filling account's load
   * Azurite took 2.6 s for one, and the pass 5.1 s): one that lands later hands its batch to the pass
   * under way then (its groups join `#waiting` of the same term), so no message waits out its
   * visibility for want of a pass to take it.
   */
  private async takeSubmissions(
    began: number,
    withinBudget: () => boolean,
    settleBy: number,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<{ readonly more: boolean; readonly heldBack: boolean }> {
    const at = performance.now();
    const waiting = this.#waiting?.epoch === ctx.epoch ? this.#waiting.groups.filter((g) => at - g.receivedAt < INTAKE.carriedForMs) : [];
    this.#waiting = { epoch: ctx.epoch, groups: waiting };
    let batches = 0;
    /** No further receive this pass: the queue answered none, the batches are used up, or a receive failed. */
    let drained = false;
    let full = false;
    let failure: { readonly error: unknown } | undefined;
    /** The admission bound held submissions back at some point of this pass. */
    let heldBack = false;
    /** The receives out now: one, or up to `INTAKE.receivesInFlight` once a batch came back full (a burst waits on the queue). */
    const receiving = new Set<Promise<void>>();
    /** This call has answered: a receive that lands now reports to whichever pass takes its batch. */
    let over = false;
    /** `settled` is called before the pass is woken, so it sees this receive gone. */
    const receive = async (settled: () => void): Promise<void> => {
      try {
        const received = await this.deps.jobsQueue.receiveMessages({
          numberOfMessages: INTAKE.batchSize,
          visibilityTimeout: INTAKE.visibilityTimeoutSeconds,
          abortSignal: ctx.signal,
        });
        const receivedAt = performance.now();
        ctx.progress();
        const items = received.receivedMessageItems;
        full = items.length === INTAKE.batchSize;
        if (items.length === 0) {
          drained = true;
          if (batches === 0) await this.readability.afterEmptyReceive(ctx.signal);
          return;
        }
        batches += 1;
        if (batches >= INTAKE.maxBatchesPerPass) drained = true;
        this.readability.sawMessages();
        this.noteQueueWait(items);
        const groups = byJobId(items).map((g) => ({ ...g, receivedAt }));
        // This pass's `waiting` is `#waiting.groups` until the next pass of the term replaces it with its own.
        const current = this.#waiting;
        if (!over) waiting.push(...groups);
        else if (current?.epoch === ctx.epoch) current.groups.push(...groups);
        // Else the term ended: the messages reappear after their visibility for the next leader.
      } catch (error) {
        drained = true;
        if (!over) failure = { error };
        else if (!isAbort(error)) this.deps.logger.warn('intake.receive_failed', { error, epoch: ctx.epoch });
      } finally {
        settled();
        this.notify();
      }
    };
    const startReceive = (): void => {
      // The receive awaits before it can settle: `out` is assigned by then.
      const out: Promise<void> = receive(() => receiving.delete(out));
      receiving.add(out);
    };
    const begin = (key: string, work: Promise<void>): void => {
      const handling = work
        .catch((err: unknown) => {
          // Aborted between messages (the term ended): the rest of the group reappears for the next leader.
          if (!isAbort(err)) this.deps.logger.warn('intake.start_failed', { error: err, epoch: ctx.epoch });
        })
        .finally(() => {
          this.#taking.delete(key);
          this.notify();
        });
      this.#taking.set(key, handling);
    };
    while (!ctx.signal.aborted && withinBudget()) {
      // Submissions are taken while starts may be begun (the admission bound); past it the rest of a
      // burst waits on the jobs queue, and this pass waits for room (a plan here confirming its start,
      // `startConfirmed`) until its budget.
      const taking = this.admits();
      if (!taking) heldBack = true;
      // No batch is received that could not be begun soon (each receive counts toward a message's deliveries).
      // Behind a full batch several are out at once: while a burst is parked on the queue every queue
      // request in the account costs in proportion to the messages held, so it is taken off quickly.
      const receives = full ? INTAKE.receivesInFlight : 1;
      while (
        !drained &&
        receiving.size < receives &&
        batches + receiving.size < INTAKE.maxBatchesPerPass &&
        waiting.length < INTAKE.messageConcurrency &&
        taking
      ) {
        startReceive();
      }
      while (this.#taking.size < INTAKE.messageConcurrency && this.admits()) {
        const next = waiting.findIndex((g) => !this.#taking.has(g.key));
        if (next < 0) break;
        const group = waiting.splice(next, 1)[0] as Group;
        begin(group.key, this.takeGroup(group.messages, ctx, orchestrations));
      }
      if (!this.admits()) heldBack = true;
      if (this.#taking.size === 0 && receiving.size === 0 && waiting.length === 0 && (taking || drained)) break;
      // Room, a batch, or the budget's end, whichever comes first.
      await waitAtMost(this.#changed, INTAKE.passBudgetMs - (performance.now() - began));
    }
    // A batch that lands as the budget runs out waits for the next pass too (see above for one that lands later still).
    const late = receiving.size > 0 && !(await waitUntil(Promise.all(receiving), settleBy));
    over = true;
    if (failure !== undefined) throw failure.error;
    // Groups not begun, a full last batch (the queue may hold more), a batch still on its way, or
    // submissions held back by the bound that did not find the queue empty.
    return { more: waiting.length > 0 || full || late || (heldBack && !drained), heldBack };
  }

  /** Whether the job's start was marked unconfirmed at the last listing of the marks (at most a few seconds old while busy). */
  startUnconfirmed(jobId: string): boolean {
    return this.repair.startUnconfirmed(jobId);
  }

  /**
   * How long submissions wait on the jobs queue now: the oldest message of the latest batch received,
   * when that batch is recent (`INTAKE.queueWaitFreshMs`), else 0. The index upkeep leaves a pending
   * row that young alone: its job is still on the queue, and its row says so rightly.
   */
  submissionWaitMs(): number {
    const seen = this.#queueWait;
    return seen !== undefined && performance.now() - seen.at < INTAKE.queueWaitFreshMs ? seen.ms : 0;
  }

  /**
   * The wait of the batch's first deliveries (a message received again after a failed start waited
   * for its own retry, not behind the queue), at most a minute (`queueWaitFreshMs`, as long as the
   * upkeep may be deferred).
   */
  private noteQueueWait(items: readonly ReceivedSubmission[]): void {
    const now = nowOf(this.deps)().getTime();
    const first = items.filter((m) => m.dequeueCount === 1);
    if (first.length === 0) return;
    const oldest = Math.min(...first.map((m) => m.insertedOn?.getTime() ?? now));
    this.#queueWait = { at: performance.now(), ms: Math.min(INTAKE.queueWaitFreshMs, Math.max(0, now - oldest)) };
  }

  /**
   * How far behind Durable's queues run now: the largest start -> plan lag the marked starts showed
   * in the last `INTAKE.recentLagMs` (StartRepair.lagMs), 0 once no listing that recent showed one.
   */
  startLagMs(): number {
    return this.repair.lagMs(INTAKE.recentLagMs);
  }

  /**
   * Whether another submission may be begun now (`INTAKE.maxStartsUnderWay`): the starts under way,
   * and the submissions being handled whose start is not decided yet, each of which may become one.
   */
  private admits(): boolean {
    return this.repair.underWay() + this.#undecided < INTAKE.maxStartsUnderWay;
  }

  /**
   * A plan of this process got a start past its fence (JobActivities, `startConfirmed`): it is no
   * longer under way, and a pass waiting for room goes on at once.
   */
  startConfirmed(jobId: string): void {
    if (this.repair.confirmedHere(jobId)) this.notify();
  }

  /** One group's messages, one after another (see takeSubmissions); counted in the report of the pass they end in. */
  private async takeGroup(
    messages: readonly ReceivedSubmission[],
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<void> {
    for (const message of messages) {
      // Stop between messages: an unhandled one simply becomes visible again for the next leader.
      if (ctx.signal.aborted) return;
      this.#tally.received += 1;
      // Undecided until its start is (then it counts as under way: StartRepair.started) or it ends otherwise.
      this.#undecided += 1;
      let decided = false;
      const decide = (): void => {
        if (decided) return;
        decided = true;
        this.#undecided -= 1;
      };
      const starting = (jobId: string): void => {
        this.repair.started(jobId);
        decide();
      };
      let outcome: IntakeOutcome;
      try {
        outcome = await this.submissions.handle(message, ctx, orchestrations, starting, () => this.#taking.size > 1);
      } finally {
        decide();
      }
      const tally = this.#tally;
      if (outcome === 'started') tally.started += 1;
      else if (outcome === 'already_started') tally.alreadyStarted += 1;
      else if (outcome === 'rejected') tally.rejected += 1;
      else tally.retryLater += 1;
      ctx.progress();
    }
  }
}
