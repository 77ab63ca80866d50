/**
 * The leader's intake of job submissions from the jobs queue, and its check of the starts still in
 * progress (together, the body of the coordination pass).
 *
 * A start is several writes nothing makes atomic: the Durable instance and its start message are
 * two writes on every backend (the development host writes the instance first, Azure Storage the
 * message first), and deleting the submission is a third; the leader can die, freeze or lose its
 * storage between any two. So a start is recorded before it is made:
 * 1. `jobs/<jobId>/start.json`, the start record, created once (the submission's fingerprint, the
 *    run input, a fresh start id, the leader's epoch, the instance generation), and the mark
 *    `unconfirmed-starts/<jobId>`;
 * 2. the Durable start of `job-<jobId>` (`job-<jobId>.<n>` after a repair), then the message delete.
 * A small input (inline, or an items blob up to `INTAKE.firstWindowMaxBytes`) is staged between 1 and
 * 2, after the plan's own checks (`FirstWindow.prestage`), while the pass has spent less than
 * `INTAKE.firstWindowBudgetMs` doing so, and once the run is started the leader
 * sends the job's first window itself, in the background of the pass: the first chunks do not wait
 * for the Durable queue hops to the plan activity, which finds the input staged and that window in
 * flight. A check that fails (a newer epoch, the id's earlier results, a cancel) or input the plan
 * must refuse leaves it all to the plan, which reports the outcome as for any job.
 * Every pass first checks each marked start (`nextStartStep`): an instance past its plan step (or
 * finished) confirms it and the mark goes; an instance that is missing, ended without doing the job
 * (it stood down), or Pending for longer than `stuckPendingSeconds` (its start message never came)
 * is started again. Every start again is a new start (new start id, the pass's epoch) under the next
 * generation's instance id, never under an id another start used: Durable refuses a start over a
 * Pending or Running instance, and over a finished one it replaces the history, so a late landing
 * of the earlier start (a leader frozen while its `startNew` was in flight) would wipe the run that
 * did the work. A newer leader takes over its predecessors' marked starts at its first pass. The
 * start record changes only with If-Match, and only by a leader whose epoch is at least the record's.
 *
 * Fencing: a run's plan step (JobActivities) does work only if the job has no final summary, the
 * start record names the run's start id, and the run's epoch is the lease's current one; otherwise
 * it stands down and ends with the recorded summary (or a superseded marker). Rejection records are
 * created once and changed only with If-Match; a poison copy whose record update loses that race is
 * deleted again.
 *
 * Guaranteed: a submission is deleted only after its start is recorded and tried, or its rejection
 * recorded with the original in `<jobsQueue>-poison`; every recorded start is checked by each pass,
 * whoever leads, until its orchestration is past planning, so an interrupted start is completed;
 * a start or repair by a leader that lost its lease, landing late, is refused by Durable (Pending or
 * Running instance) or does nothing; a finished job is never run again; the same submission twice
 * is a no-op, a different one under a used job id is rejected (DUPLICATE_JOB_ID). The pass stops
 * between messages once `signal` aborts and reports `progress()` for the leader's watchdog.
 * A start that lands late lands on its own instance id only: its run stands down at its plan step
 * (the start record names another start) and no other run's history is touched.
 * Not guaranteed: that a run past its plan step stops when a newer epoch
 * appears (its steps are idempotent); a single run when a healthy instance stays Pending past
 * `stuckPendingSeconds` (both work, results stay exact); a single poison copy when a leader dies
 * between sending it and recording it; retrying a start interrupted before its record was written
 * sooner than the message's visibility timeout (60 s).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3; "The lease epoch from the elector to the fence", step 5.
 */
import { randomUUID } from 'node:crypto';

import { type DequeuedMessageItem, type QueueClient } from '@azure/storage-queue';

import { type Logger } from '../../observability/log';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { type AcceptedJob, validateSubmission } from '../api/JobSubmission';
import { isSuperseded, type JobCustomStatus } from '../api/JobSummary';
import { type DeliveryTargets, type JobReply, replyOf } from '../delivery/DeliveryTargets';
import { outcomeOfRejection } from '../delivery/JobOutcome';
import { type OutcomeDelivery } from '../delivery/OutcomeDelivery';
import { type InputContainers } from '../input/InputContainers';
import { JobError, type JobErrorInfo } from '../JobError';
import { instanceIdFor, isValidJobId } from '../jobIds';
import { type JobRun } from '../JobRun';
import { decodeQueueMessage } from '../messageCodec';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { mapWhile } from '../pool';
import { type StagedCounts } from '../run/JobActivities';
import { initialState } from '../run/jobOrchestration';
import { fingerprintOf, isFinished, type OrchestrationClient, type OrchestrationSnapshot, runOf } from '../run/OrchestrationClient';
import { type JobRecord, type JobStore, type StartRecord, type Versioned } from '../store/JobStore';
import { type Now, nowOf } from '../wallClock';
import { QueueReadability } from './QueueReadability';

export interface IntakeContext {
  readonly epoch: number;
  readonly holder: string;
  readonly signal: AbortSignal;
  progress(): void;
  /** The pass stopped at its budget with submissions waiting: the next one should come at once. */
  again?(): void;
}

export interface IntakeDeps {
  readonly jobsQueue: QueueClient;
  readonly poisonQueue: QueueClient;
  readonly store: JobStore;
  readonly registry: WorkTypeRegistry;
  readonly inputContainers: InputContainers;
  readonly logger: Logger;
  readonly now?: Now;
  /** The leader's own first window for small inputs (see the module comment); absent: the plan does it all. */
  readonly firstWindow?: FirstWindow;
  /** Reply targets a submission may name, and the delivery of a rejection's outcome (absent: refused, nothing sent). */
  readonly delivery?: { readonly targets: DeliveryTargets; readonly outcomes: OutcomeDelivery };
}

/** JobActivities' `prestage` and `sendFirstWindow`, as the intake uses them. */
export interface FirstWindow {
  prestage(run: JobRun, signal?: AbortSignal): Promise<StagedCounts | undefined>;
  send(run: JobRun, staged: StagedCounts, signal?: AbortSignal): Promise<number>;
}

/** A submission to reject: its message, why, and what it asked for as far as it could be read. */
interface Rejection {
  readonly message: DequeuedMessageItem;
  readonly error: JobErrorInfo;
  /** The job id the submission asked for, when it named a valid one. */
  readonly submittedJobId?: string | undefined;
  /** The submission's fingerprint, when it was valid enough to have one. */
  readonly fingerprint?: string | undefined;
  /** Where its outcome goes, when its reply fields were valid on their own. */
  readonly reply?: JobReply | undefined;
}

/** What a valid submission asked for, for its rejection record. */
function askedBy(job: AcceptedJob): Pick<Rejection, 'submittedJobId' | 'fingerprint' | 'reply'> {
  return { submittedJobId: job.jobId, fingerprint: job.fingerprint, reply: job.reply };
}

export type IntakeOutcome = 'started' | 'already_started' | 'rejected' | 'retry_later';

export interface IntakeReport {
  readonly received: number;
  readonly started: number;
  readonly alreadyStarted: number;
  readonly rejected: number;
  readonly retryLater: number;
  /** Milliseconds this pass spent checking the unconfirmed starts, and taking submissions. */
  readonly checksMs?: number;
  readonly takingMs?: number;
  /** Unconfirmed starts checked this pass, confirmed (their mark removed), and started again. */
  readonly checked: number;
  readonly confirmed: number;
  readonly restarted: number;
}

export const INTAKE = {
  /**
   * Submissions received at once. On Azurite a receive costs in proportion to the messages the
   * account's queues hold, and a burst parks them all on the jobs queue: fewer, larger receives.
   */
  batchSize: 32,
  maxBatchesPerPass: 8,
  /** Long enough to start one batch; a message whose start failed comes back after this. */
  visibilityTimeoutSeconds: 60,
  /** A valid submission whose start keeps failing is rejected (START_FAILED) at this delivery. */
  maxStartAttempts: 10,
  /**
   * A Pending instance this old (Durable's created time) lost its start message: the job starts
   * again under a new instance id. Durable moves a healthy instance out of Pending within seconds;
   * a false alarm costs a duplicate run whose results are discarded, never a wrong result.
   */
  stuckPendingSeconds: 30,
  /**
   * Under a burst, Durable's queues hold starts for longer than that (1,000 queued jobs: plans 10-60 s
   * after their starts), and a healthy start taken for stuck is a second run of the job. So the checks
   * follow the lag the marks show: a mark gone from a listing waited at least its age at the listing
   * before, which showed it. Counted: marks first listed within `freshMarkMs` of being made (one left
   * from long ago says nothing of the queues now); the lag is the largest of the last
   * `startLagWindowMs`, at most `maxStartLagMs`. A mark is first checked once it is as old as the lag,
   * and a Pending instance counts as stuck only past twice the lag (and never before 30 s).
   */
  startLagWindowMs: 120_000,
  /**
   * Admission: no further submission is begun while this many starts are on their way to their plans
   * (the fresh marks of the last listing, younger than `underWayFreshMs`, plus the starts made and
   * begun since). Durable takes starts faster than its activity slots run their plans (20 per
   * instance by default), and a run that waits 15 s for its plan's slot looks stalled: the stall
   * check asks it to resume, and the plan is called twice (1,000 queued jobs without this bound:
   * passes of up to 51 s spent on resumes, 59 transactions per job). Past the bound the burst waits
   * on the jobs queue, where waiting costs nothing. A mark older than `underWayFreshMs` does not
   * count: stuck starts cannot stop the intake.
   */
  maxStartsUnderWay: 64,
  underWayFreshMs: 60_000,
  freshMarkMs: 10_000,
  maxStartLagMs: 120_000,
  /** Unconfirmed starts checked per pass; the rest wait for the next one. */
  maxChecksPerPass: 200,
  /**
   * A start is checked once its mark is this old: one made seconds ago is still on its way to its
   * plan (a burst's pass re-checked hundreds of fresh starts, ~4 reads each, before reading on).
   */
  checkAfterMs: 3_000,
  /**
   * A marked start found still on its way is checked again 3 s later, then 6 s, then 12, and every
   * 15 s after that: a burst of fresh starts is not re-read by every pass while their runs wait for
   * their plans (the plan removes its start's mark itself once past its fence). A Pending start is
   * checked again the moment it counts as stuck (`stuckPendingSeconds`), whatever its back-off.
   */
  maxCheckBackoffMs: 15_000,
  /** The marked starts are listed at most this often (a burst's passes follow each other at once). */
  checkEveryMs: 2_000,
  /** Marked starts checked at once. */
  checkConcurrency: 8,
  /**
   * Submissions handled at once (those naming one job id, one after another). A start is about ten
   * storage round trips, 1-2 s under a burst's load, half of it the Durable start, so a pass's budget
   * holds about one round of lanes: 48 take a 1,000-job burst in 178 s where 16 took 191-223 s
   * (jobs-scale, same machine), at no more storage cost per job.
   */
  messageConcurrency: 48,
  /**
   * A pass takes no further submission once it has run this long (from its start; the start checks
   * run beside the taking): the submissions of the batch in hand that no lane has begun are kept for the next
   * pass, which follows at once and takes them first (`#carried`), and the rest of a burst waits on
   * the queue. So a pass lasts this plus the starts already under way (a start is about a second
   * under a burst's load), and the stall check and the index upkeep never wait behind a whole batch.
   */
  passBudgetMs: 2_500,
  /**
   * Submissions kept from a pass are taken by the next only while their receipt is this fresh: they
   * stay invisible for `visibilityTimeoutSeconds` after the receive, and a start must not outlive it
   * (another leader's pass would receive the message again). Older ones are left to reappear.
   */
  carriedForMs: 40_000,
  /** The start checks begin no further check once they have run this long; the rest are due next pass. */
  checkBudgetMs: 1_000,
  /**
   * An items blob up to this size is staged by the leader at intake, which then sends the first
   * window itself (a 100,000-number array is ~0.6 MB, staged in ~60 ms); a bigger one is staged by
   * the plan activity, off the intake's path (the Durable hops are small beside its staging).
   */
  firstWindowMaxBytes: 1024 * 1024,
  /**
   * A pass stages inputs at intake for at most this long (summed): a burst of submissions is taken at
   * once and the rest of it staged by the plans, on every instance, instead of one after another here
   * (ten jobs of 20,000 items at once: the last one started 6.5 s after its POST without this bound).
   */
  firstWindowBudgetMs: 250,
} as const;

/** The next step for a recorded start, from what Durable shows (see the module comment). */
export type StartStep =
  | { readonly kind: 'confirmed' }
  | { readonly kind: 'wait' }
  /** Take the record over (new start id, this epoch, the next instance generation) and start it. */
  | { readonly kind: 'take_over'; readonly reason: string };

const PAST_PLAN: ReadonlySet<string> = new Set<JobCustomStatus['phase']>(['running', 'aggregating']);
const MAX_PREVIOUS_STARTS = 5;

export function nextStartStep(
  instance: OrchestrationSnapshot | undefined,
  start: StartRecord,
  epoch: number,
  now: Date,
  /** How long a Pending instance may wait for its start message (the intake's `stuckAfterMs`). */
  stuckAfterMs: number = INTAKE.stuckPendingSeconds * 1000,
): StartStep {
  const olderEpoch = start.epoch < epoch;
  // Every start again is a new start (new start id, this epoch) under an instance id of its own (the
  // next generation): the earlier start may still land late (a leader frozen while its start was in
  // flight), and on a finished instance Durable would replace the history of the run that did the work.
  const again = (reason: string): StartStep => ({ kind: 'take_over', reason });
  if (instance === undefined) return again('no instance');
  const status = instance.runtimeStatus;
  // Ended: with the job's outcome (whichever start's run produced or answered it), or having stood down.
  if (isFinished(status)) return isSuperseded(instance.output) ? again('its run stood down') : { kind: 'confirmed' };
  const stuck = status === 'Pending' && now.getTime() - instance.createdTime.getTime() > stuckAfterMs;
  if (runOf(instance)?.startId === start.startId) {
    const custom = instance.customStatus as Partial<JobCustomStatus> | null | undefined;
    // Its plan stood down as superseded (a newer leader's epoch), and Durable keeps it Running until
    // the calls it made answer (a plan held by a dead instance: 20 s or more): this newer leader takes
    // the start over in the next generation now. (A leader of the run's own epoch that sees this has
    // lost the lease: it waits, as before.)
    if (custom?.superseded === true && olderEpoch) return { kind: 'take_over', reason: 'its run stood down' };
    const phase = custom?.phase;
    if (status === 'ContinuedAsNew' || (phase !== undefined && PAST_PLAN.has(phase))) return { kind: 'confirmed' };
    // A Pending instance may never get its start message; Durable refuses to start over it.
    if (status === 'Pending' && (stuck || olderEpoch)) {
      return { kind: 'take_over', reason: stuck ? 'stuck Pending' : 'Pending under an older epoch' };
    }
    return { kind: 'wait' };
  }
  // Another start holds the instance id (a stale or superseded one): it stands down at its plan step.
  if (stuck) return { kind: 'take_over', reason: 'another start is stuck Pending there' };
  return { kind: 'wait' };
}

/** Messages naming one job id (else one message, keyed by its own id), taken in order by one lane. */
interface Group {
  readonly key: string;
  readonly messages: DequeuedMessageItem[];
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
function byJobId(messages: readonly DequeuedMessageItem[]): Group[] {
  const groups = new Map<string, DequeuedMessageItem[]>();
  for (const message of messages) {
    let key = `message:${message.messageId}`;
    try {
      const parsed = decodeQueueMessage(message.messageText);
      const jobId = parsed !== null && typeof parsed === 'object' && 'jobId' in parsed ? parsed.jobId : undefined;
      if (typeof jobId === 'string') key = `job:${jobId}`;
    } catch {
      // Not readable: handleMessage rejects it on its own.
    }
    groups.set(key, [...(groups.get(key) ?? []), message]);
  }
  return [...groups].map(([key, grouped]) => ({ key, messages: grouped }));
}

export class JobIntake {
  private readonly now: Now;

  /** Notices a jobs queue that Azurite answers with nothing while it holds messages (QueueReadability). */
  private readonly readability: QueueReadability;

  /** First windows being sent (see `sendFirstWindow`). */
  readonly #sending = new Set<Promise<void>>();

  /** When the marked starts were last listed (`INTAKE.checkEveryMs`). */
  #checkedAt = Number.NEGATIVE_INFINITY;
  /**
   * The fresh marks of the last listing (job id -> marked at: first listed within `freshMarkMs`) and
   * when it was, and the lags of the marks gone since (`startLagWindowMs`).
   */
  #marksSeen = new Map<string, number>();
  #marksSeenAt = 0;
  /** Starts on their way to their plans at the last listing (`maxStartsUnderWay`), and starts made since. */
  #underWayAtListing = 0;
  /** The job ids the last listing showed marked, and the starts this intake marked since (`startUnconfirmed`). */
  #marksListed: ReadonlySet<string> = new Set();
  readonly #markedHere = new Map<string, number>();
  #startedSinceListing = 0;
  readonly #lags: Array<{ readonly at: number; readonly ms: number }> = [];

  /** When each marked start that was waiting is due for its next check (`INTAKE.maxCheckBackoffMs`). */
  readonly #checkBackoff = new Map<string, { nextAt: number; waitMs: number }>();

  /** Time this pass has spent staging inputs at intake (`INTAKE.firstWindowBudgetMs`). */
  #prestagingMs = 0;

  /**
   * Submissions received and not begun yet, by job id, for this pass or the next of the same term
   * while their receipts hold (`INTAKE.carriedForMs`).
   */
  #waiting: { readonly epoch: number; readonly groups: ReceivedGroup[] } | undefined;
  /** The groups being started (by key), which run on across passes while a burst lasts (`takeSubmissions`). */
  readonly #taking = new Map<string, Promise<void>>();
  /** What the submissions handled since the last report came to. */
  #tally: Tally = emptyTally();
  /** Resolved (and replaced) whenever a group ends or a batch lands: a pass waiting for room wakes. */
  #wake: () => void = () => undefined;
  #changed: Promise<void> = new Promise<void>((resolve) => (this.#wake = resolve));

  constructor(private readonly deps: IntakeDeps) {
    this.now = nowOf(deps);
    this.readability = new QueueReadability({
      queue: deps.jobsQueue,
      logger: deps.logger,
      now: this.now,
      heldSeconds: INTAKE.visibilityTimeoutSeconds,
    });
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
  async runPass(ctx: IntakeContext, orchestrations: OrchestrationClient): Promise<IntakeReport> {
    this.#prestagingMs = 0;
    let leaveRunning = false;
    try {
      const report = await this.intakePass(ctx, orchestrations);
      leaveRunning = report.more;
      return report.counts;
    } finally {
      // Unless a burst goes on (its starts run on into the next pass): the starts under way and the
      // first windows being sent (they stop between messages once `signal` aborts).
      if (!leaveRunning || ctx.signal.aborted) await this.settle();
    }
  }

  /** Waits for every start under way and every first window being sent. */
  private async settle(): Promise<void> {
    while (this.#taking.size > 0 || this.#sending.size > 0) await Promise.all([...this.#taking.values(), ...this.#sending]);
  }

  private notify(): void {
    const wake = this.#wake;
    this.#changed = new Promise<void>((resolve) => (this.#wake = resolve));
    wake();
  }

  private async intakePass(
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<{ readonly counts: IntakeReport; readonly more: boolean }> {
    const checks = { checked: 0, confirmed: 0, restarted: 0 };
    await this.ensureQueues(ctx.signal);
    // A new term does not overlap the last one's starts (they stop between messages once its signal aborted).
    if (this.#waiting !== undefined && this.#waiting.epoch !== ctx.epoch) await this.settle();
    const began = performance.now();
    const withinBudget = (): boolean => performance.now() - began < INTAKE.passBudgetMs;
    // The checks beside the taking, not before it: under a burst they read dozens of starts a pass.
    const marked = await this.listMarks(ctx);
    const [checksMs, taken] = await Promise.all([
      this.checkStarts(marked, ctx, orchestrations, checks).then(() => performance.now() - began),
      this.takeSubmissions(withinBudget, ctx, orchestrations),
    ]);
    // Settled here (not in runPass) when nothing more waits, so this pass reports its own starts.
    if (!taken.more || ctx.signal.aborted) await this.settle();
    const tally = this.#tally;
    this.#tally = emptyTally();
    const counts: IntakeReport = { ...tally, ...checks, checksMs: Math.round(checksMs), takingMs: Math.round(performance.now() - began) };
    if (counts.received > 0 || counts.confirmed > 0 || counts.restarted > 0) {
      this.deps.logger.info('intake.pass', { ...counts, ...(taken.more ? { underWay: this.#taking.size } : {}), epoch: ctx.epoch });
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
   * begun wait for it; answers whether more wait. A failed receive fails the pass.
   */
  private async takeSubmissions(
    withinBudget: () => boolean,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<{ readonly more: boolean }> {
    const at = performance.now();
    const waiting = this.#waiting?.epoch === ctx.epoch ? this.#waiting.groups.filter((g) => at - g.receivedAt < INTAKE.carriedForMs) : [];
    this.#waiting = { epoch: ctx.epoch, groups: waiting };
    let batches = 0;
    /** No further receive this pass: the queue answered none, the batches are used up, or a receive failed. */
    let drained = false;
    let full = false;
    let failure: { readonly error: unknown } | undefined;
    let receiving: Promise<void> | undefined;
    const receive = async (): Promise<void> => {
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
        waiting.push(...byJobId(items).map((g) => ({ ...g, receivedAt })));
      } catch (error) {
        drained = true;
        failure = { error };
      } finally {
        receiving = undefined;
        this.notify();
      }
    };
    const begin = (group: Group): void => {
      const handling = this.takeGroup(group.messages, ctx, orchestrations)
        .catch((err: unknown) => {
          // Aborted between messages (the term ended): the rest of the group reappears for the next leader.
          if (!isAbort(err)) this.deps.logger.warn('intake.start_failed', { error: err, epoch: ctx.epoch });
        })
        .finally(() => {
          this.#taking.delete(group.key);
          this.notify();
        });
      this.#taking.set(group.key, handling);
    };
    while (!ctx.signal.aborted && withinBudget()) {
      // No batch is received that could not be begun soon (each receive counts toward a message's deliveries).
      if (!drained && receiving === undefined && waiting.length < INTAKE.messageConcurrency && this.admits()) receiving = receive();
      while (this.#taking.size < INTAKE.messageConcurrency && this.admits()) {
        const next = waiting.findIndex((g) => !this.#taking.has(g.key));
        if (next < 0) break;
        begin(waiting.splice(next, 1)[0] as Group);
      }
      if (this.#taking.size === 0 && receiving === undefined && waiting.length === 0) break;
      // Room, a batch, or the budget's end, whichever comes first.
      const changed = this.#changed;
      let timer: NodeJS.Timeout | undefined;
      const left = Math.max(0, INTAKE.passBudgetMs - (performance.now() - at));
      await Promise.race([changed, new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
    // A batch that landed as the budget ran out waits for the next pass too.
    while (receiving !== undefined) await receiving;
    if (failure !== undefined) throw failure.error;
    // Groups not begun, or a full last batch (the queue may hold more).
    return { more: waiting.length > 0 || full };
  }

  /** Whether the job's start was marked unconfirmed at the last listing of the marks (at most a few seconds old while busy). */
  startUnconfirmed(jobId: string): boolean {
    return this.#marksListed.has(jobId) || this.#markedHere.has(jobId);
  }

  /** Whether another submission may be begun (`INTAKE.maxStartsUnderWay`). */
  private admits(): boolean {
    return this.#underWayAtListing + this.#startedSinceListing + this.#taking.size < INTAKE.maxStartsUnderWay;
  }

  /** One group's messages, one after another (see takeSubmissions); counted in the report of the pass they end in. */
  private async takeGroup(
    messages: readonly DequeuedMessageItem[],
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<void> {
    for (const message of messages) {
      // Stop between messages: an unhandled one simply becomes visible again for the next leader.
      if (ctx.signal.aborted) return;
      this.#tally.received += 1;
      const outcome = await this.handleMessage(message, ctx, orchestrations);
      const tally = this.#tally;
      if (outcome === 'started') {
        tally.started += 1;
        this.#startedSinceListing += 1;
      }
      else if (outcome === 'already_started') tally.alreadyStarted += 1;
      else if (outcome === 'rejected') tally.rejected += 1;
      else tally.retryLater += 1;
      ctx.progress();
    }
  }

  /** One pass over the marked starts: confirm, wait, or start again (see the module comment). */
  /**
   * The marked starts, listed at most every `INTAKE.checkEveryMs` (a listing walks every blob of the
   * container on Azurite: not on every one of a burst's back-to-back passes); undefined when not due.
   * Before any submission is taken: the admission bound counts them.
   */
  private async listMarks(ctx: IntakeContext): Promise<ReadonlyArray<{ readonly jobId: string; readonly markedAt: number }> | undefined> {
    const at = this.now().getTime();
    if (at - this.#checkedAt < INTAKE.checkEveryMs) return undefined;
    this.#checkedAt = at;
    const marked = await this.deps.store.listUnconfirmed(ctx.signal);
    ctx.progress();
    this.#underWayAtListing = marked.filter((m) => this.now().getTime() - m.markedAt < INTAKE.underWayFreshMs).length;
    this.#marksListed = new Set(marked.map((m) => m.jobId));
    // Marks made before this listing began are in it (or already gone: their plans began); later ones are kept.
    for (const [jobId, markedAt] of this.#markedHere) if (markedAt < at) this.#markedHere.delete(jobId);
    this.#startedSinceListing = 0;
    return marked;
  }

  private async checkStarts(
    marked: ReadonlyArray<{ readonly jobId: string; readonly markedAt: number }> | undefined,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    counts: { checked: number; confirmed: number; restarted: number },
  ): Promise<void> {
    if (marked === undefined) return;
    const now = this.now().getTime();
    const present = new Set(marked.map((m) => m.jobId));
    const lag = this.startLag(now, present, marked);
    for (const jobId of this.#checkBackoff.keys()) if (!present.has(jobId)) this.#checkBackoff.delete(jobId);
    const due = marked
      .filter((m) => now - m.markedAt >= Math.max(INTAKE.checkAfterMs, lag) && (this.#checkBackoff.get(m.jobId)?.nextAt ?? 0) <= now)
      .slice(0, INTAKE.maxChecksPerPass);
    const checking = performance.now();
    // Past the budget the rest stay due (their back-off untouched): the next pass checks them.
    const withinBudget = (): boolean => !ctx.signal.aborted && performance.now() - checking < INTAKE.checkBudgetMs;
    await mapWhile(due, INTAKE.checkConcurrency, withinBudget, async ({ jobId }) => {
      counts.checked += 1;
      try {
        const { step, stuckAt } = await this.advance(jobId, ctx, orchestrations, Math.max(INTAKE.stuckPendingSeconds * 1000, 2 * lag));
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
    marked: ReadonlyArray<{ readonly jobId: string; readonly markedAt: number }>,
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

  private async advance(
    jobId: string,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    stuckAfterMs: number,
  ): Promise<{ readonly step: 'confirmed' | 'waiting' | 'restarted' | 'retired' | 'not_ours'; readonly stuckAt?: number }> {
    const { store, logger } = this.deps;
    const found = await store.readStart(jobId, ctx.signal);
    if (found === undefined || found.value.state !== 'active') {
      await store.clearUnconfirmed(jobId, ctx.signal);
      return { step: 'retired' };
    }
    // A newer leader has taken this start over: this one is stale and leaves it alone.
    if (found.value.epoch > ctx.epoch) return { step: 'not_ours' };
    const instance = await orchestrations.getStatus(instanceIdFor(jobId, found.value.generation));
    const step = nextStartStep(instance, found.value, ctx.epoch, this.now(), stuckAfterMs);
    if (step.kind === 'wait') {
      // A Pending instance counts as stuck this long after it was created (`nextStartStep`).
      const pending = instance?.runtimeStatus === 'Pending';
      const stuckAt = pending ? instance.createdTime.getTime() + stuckAfterMs + 1 : undefined;
      return { step: 'waiting', ...(stuckAt === undefined ? {} : { stuckAt }) };
    }
    if (step.kind === 'confirmed') {
      await store.clearUnconfirmed(jobId, ctx.signal);
      await store.dropPendingRecord(jobId, ctx.signal);
      return { step: 'confirmed' };
    }
    let start = found;
    if (step.kind === 'take_over') {
      const taken = await this.takeOver(found, step.reason, ctx);
      // Someone changed the record first (a newer leader, or this one's last pass): judged again next pass.
      if (taken === undefined) return { step: 'waiting' };
      start = taken;
      // Marked again: the earlier start's plan may have removed the mark since it was listed.
      await store.markUnconfirmed(jobId, ctx.signal);
    }
    await this.start(start.value, orchestrations);
    logger.warn('intake.start_repaired', {
      jobId,
      reason: step.reason,
      instanceId: instanceIdFor(jobId, start.value.generation),
      startId: start.value.startId,
      previousStartId: step.kind === 'take_over' ? found.value.startId : undefined,
      previousEpoch: found.value.epoch,
      epoch: ctx.epoch,
    });
    return { step: 'restarted' };
  }

  /** A new start id under this epoch and the next instance generation, written only over the version read. */
  private async takeOver(
    found: Versioned<StartRecord>,
    reason: string,
    ctx: IntakeContext,
  ): Promise<Versioned<StartRecord> | undefined> {
    const old = found.value;
    const startId = randomUUID();
    const record: StartRecord = {
      ...old,
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
    const written = await this.deps.store.replaceStart(record, found.etag, ctx.signal);
    return written === 'conflict' ? undefined : { value: record, etag: written.etag };
  }

  /** Starts the record's run; an instance already running this very start counts as success. */
  private async start(start: StartRecord, orchestrations: OrchestrationClient, prestaged?: StagedCounts): Promise<void> {
    const instanceId = instanceIdFor(start.jobId, start.generation);
    try {
      await orchestrations.start(instanceId, initialState(start.run, undefined, prestaged));
    } catch (err) {
      const existing = await orchestrations.getStatus(instanceId);
      if (existing !== undefined && runOf(existing)?.startId === start.startId) return;
      throw err;
    }
  }

  async handleMessage(message: DequeuedMessageItem, ctx: IntakeContext, orchestrations: OrchestrationClient): Promise<IntakeOutcome> {
    const { logger, store } = this.deps;
    let parsed: unknown;
    let job: AcceptedJob;
    let blobBytes: number | undefined;
    try {
      parsed = decodeQueueMessage(message.messageText);
      job = validateSubmission(parsed, {
        registry: this.deps.registry,
        generateJobId: () => `q-${message.messageId}`,
        inputContainers: this.deps.inputContainers,
        delivery: this.deps.delivery?.targets,
      });
      if (job.source.kind === 'blob') {
        blobBytes = await store.externalSize(job.source, ctx.signal);
        if (blobBytes === undefined) {
          throw new JobError('ITEMS_BLOB_NOT_FOUND', `itemsBlob ${job.source.container}/${job.source.blob} does not exist.`);
        }
      }
    } catch (err) {
      if (isAbort(err)) throw err;
      let reason: JobError;
      if (err instanceof JobError) reason = err;
      else if (message.dequeueCount < INTAKE.maxStartAttempts) {
        // Not a verdict on the submission (a storage fault reading itemsBlob, a work type that threw):
        // leave it for a later pass, like a failed start, rather than abort this pass for the rest.
        logger.warn('intake.validation_failed', {
          messageId: message.messageId,
          dequeueCount: message.dequeueCount,
          error: err,
          epoch: ctx.epoch,
        });
        return 'retry_later';
      } else {
        reason = new JobError(
          'VALIDATION_FAILED',
          `The submission could not be checked after ${message.dequeueCount} tries: ` +
            `${err instanceof Error ? err.message : String(err)}`,
        );
      }
      const asked = parsed !== null && typeof parsed === 'object' && 'jobId' in parsed ? (parsed).jobId : undefined;
      // Its reply fields, when they are valid on their own: a submission refused for anything else still gets its outcome.
      const replied =
        parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
          ? replyOf(parsed as Record<string, unknown>, this.deps.delivery?.targets)
          : undefined;
      const reply = replied !== undefined && 'reply' in replied ? replied.reply : undefined;
      return this.reject({ message, error: reason, submittedJobId: isValidJobId(asked) ? asked : undefined, reply }, ctx, orchestrations);
    }

    const t0 = performance.now();
    const lap: Record<string, number> = {};
    const reached = (step: string): void => {
      lap[step] = Math.round(performance.now() - t0);
    };
    try {
      // What the id already holds, read at once (one round trip, not three; the instance only
      // matters for a job started before start records existed).
      const [known, legacy, record] = await Promise.all([
        store.readStart(job.jobId, ctx.signal),
        orchestrations.getStatus(instanceIdFor(job.jobId)),
        store.readRecord(job.jobId, ctx.signal),
      ]);
      reached('read');
      if (known !== undefined && known.value.fingerprint !== job.fingerprint) {
        const since = known.value.run.submittedAt;
        return this.reject({ message, error: duplicateError(job.jobId, since), ...askedBy(job) }, ctx, orchestrations);
      }
      if (known?.value.state === 'active') return await this.alreadyAccepted(message, job, ctx);
      if (known === undefined) {
        // Started before start records existed (or by an earlier version of the app).
        const existing = legacy;
        if (existing !== undefined) {
          if (fingerprintOf(existing) !== job.fingerprint) {
            const since = existing.createdTime.toISOString();
            return this.reject({ message, error: duplicateError(job.jobId, since), ...askedBy(job) }, ctx, orchestrations);
          }
          await this.deleteMessage(message, ctx);
          logger.info('intake.already_started', { jobId: job.jobId, messageId: message.messageId, epoch: ctx.epoch });
          return 'already_started';
        }
      }
      if (
        record !== undefined &&
        (record.status === 'rejected' ? record.messageId !== message.messageId : record.fingerprint !== job.fingerprint)
      ) {
        return this.reject({ message, error: duplicateError(job.jobId, record.createdAt), ...askedBy(job) }, ctx, orchestrations);
      }
      if (record?.status === 'rejected') {
        // This very message was rejected before and came back (crash before its delete): finish that.
        return this.reject(
          { message, error: record.error ?? { code: 'SCHEMA_VIOLATION', message: 'rejected' }, ...askedBy(job) },
          ctx,
          orchestrations,
        );
      }
      if (known !== undefined) {
        // Its start was given up (START_FAILED) and its rejection not recorded yet: record it now.
        return this.reject({ message, error: startFailed(message.dequeueCount, 'given up earlier'), ...askedBy(job) }, ctx, orchestrations);
      }

      const startId = randomUUID();
      const run: JobRun = {
        jobId: job.jobId,
        workType: job.workType,
        fingerprint: job.fingerprint,
        options: job.options,
        source: job.source,
        epoch: ctx.epoch,
        holder: ctx.holder,
        submittedAt: record?.createdAt ?? message.insertedOn.toISOString(),
        via: record === undefined ? 'queue' : record.via,
        startId,
        ...(job.reply === undefined ? {} : { reply: job.reply }),
        ...(this.deps.delivery?.outcomes.wanted(job.reply) === true ? { deliver: true as const } : {}),
      };
      const start: StartRecord = {
        v: 1,
        jobId: job.jobId,
        fingerprint: job.fingerprint,
        state: 'active',
        startId,
        generation: 1,
        epoch: ctx.epoch,
        holder: ctx.holder,
        at: this.now().toISOString(),
        run,
      };
      // The record and its mark at once: a mark without a record is retired by the next check, and a
      // record whose mark failed is marked by the message's next delivery (alreadyAccepted).
      this.#markedHere.set(job.jobId, this.now().getTime());
      const [created] = await Promise.all([store.createStart(start, ctx.signal), store.markUnconfirmed(job.jobId, ctx.signal)]);
      if (created === 'exists') {
        // Another delivery of this job id got there first: judge this message against its record next time.
        throw new Error(`The start record of job ${job.jobId} appeared while this submission was being started.`);
      }
      reached('recorded');
      const small = job.source.kind === 'inline' || (blobBytes ?? Infinity) <= INTAKE.firstWindowMaxBytes;
      const prestaged = small && this.#prestagingMs < INTAKE.firstWindowBudgetMs ? await this.prestage(run, ctx) : undefined;
      reached('staged');
      await this.start(start, orchestrations, prestaged);
      reached('started');
      if (prestaged !== undefined) this.sendFirstWindow(run, prestaged, ctx);
      await Promise.all([this.deleteMessage(message, ctx), record === undefined ? undefined : store.deleteRecord(job.jobId, ctx.signal)]);
      logger.info('intake.started', {
        jobId: job.jobId,
        workType: job.workType,
        instanceId: instanceIdFor(job.jobId),
        startId,
        epoch: ctx.epoch,
        ...(prestaged === undefined ? {} : { firstWindow: true }),
        // Milliseconds from taking the message to each step's end: where a start's time goes under load.
        ms: { ...lap, done: Math.round(performance.now() - t0) },
      });
      return 'started';
    } catch (err) {
      if (isAbort(err)) throw err;
      if (message.dequeueCount >= INTAKE.maxStartAttempts) return this.giveUp(message, job, err, ctx, orchestrations);
      // Left on the queue: it comes back after the visibility timeout and the next pass retries (the
      // pass's check of unconfirmed starts retries a recorded start sooner).
      logger.warn('intake.start_failed', {
        jobId: job.jobId,
        messageId: message.messageId,
        dequeueCount: message.dequeueCount,
        error: err,
        epoch: ctx.epoch,
      });
      return 'retry_later';
    }
  }

  /** The plan's checks and the staging, at intake (FirstWindow.prestage); undefined when the plan is to do it. */
  private async prestage(run: JobRun, ctx: IntakeContext): Promise<StagedCounts | undefined> {
    const started = performance.now();
    try {
      return await this.deps.firstWindow?.prestage(run, ctx.signal);
    } catch (err) {
      if (isAbort(err)) throw err;
      // Storage trouble while staging: the plan stages (and retries) as it does for any job.
      this.deps.logger.warn('intake.first_window_failed', { jobId: run.jobId, stage: 'staging', error: err, epoch: ctx.epoch });
      return undefined;
    } finally {
      this.#prestagingMs += performance.now() - started;
    }
  }

  /**
   * Sends the first window of a job staged at intake without holding up the pass's next submission;
   * the pass waits for these sends before it ends. A failed send is logged: its chunks count as sent
   * in the plan's ledger and go out again once unclaimed (`DISPATCH_DEFAULTS.unclaimedSeconds`).
   */
  private sendFirstWindow(run: JobRun, staged: StagedCounts, ctx: IntakeContext): void {
    const firstWindow = this.deps.firstWindow;
    if (firstWindow === undefined) return;
    const sending: Promise<void> = firstWindow.send(run, staged, ctx.signal).then(
      () => undefined,
      (err: unknown) => {
        if (isAbort(err)) return;
        this.deps.logger.warn('intake.first_window_failed', { jobId: run.jobId, stage: 'sending', error: err, epoch: ctx.epoch });
      },
    ).finally(() => this.#sending.delete(sending));
    this.#sending.add(sending);
  }

  /** A submission whose start is already recorded: the pass's check of unconfirmed starts sees it through. */
  private async alreadyAccepted(message: DequeuedMessageItem, job: AcceptedJob, ctx: IntakeContext): Promise<IntakeOutcome> {
    await this.deps.store.markUnconfirmed(job.jobId, ctx.signal);
    await this.deleteMessage(message, ctx);
    this.deps.logger.info('intake.already_started', { jobId: job.jobId, messageId: message.messageId, epoch: ctx.epoch });
    return 'already_started';
  }

  /**
   * The last delivery of a submission whose start kept failing: rejected with START_FAILED, its start
   * record retired first (so no late start of it does work), unless its start went through after all.
   */
  private async giveUp(
    message: DequeuedMessageItem,
    job: AcceptedJob,
    cause: unknown,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<IntakeOutcome> {
    const { store } = this.deps;
    const found = await store.readStart(job.jobId, ctx.signal);
    if (found !== undefined && found.value.state === 'active' && found.value.fingerprint === job.fingerprint) {
      // A newer leader's start (it took the record over): not this one's to give up. Left for that leader.
      if (found.value.epoch > ctx.epoch) {
        this.deps.logger.warn('intake.start_failed', {
          jobId: job.jobId,
          messageId: message.messageId,
          dequeueCount: message.dequeueCount,
          error: cause,
          epoch: ctx.epoch,
          hint: `the start record belongs to epoch ${found.value.epoch}; left to that leader`,
        });
        return 'retry_later';
      }
      const instance = await orchestrations.getStatus(instanceIdFor(job.jobId, found.value.generation));
      if (instance !== undefined && runOf(instance)?.startId === found.value.startId) return this.alreadyAccepted(message, job, ctx);
      const given: StartRecord = { ...found.value, state: 'rejected', epoch: ctx.epoch, holder: ctx.holder, at: this.now().toISOString() };
      const retired = await store.replaceStart(given, found.etag, ctx.signal);
      if (retired === 'conflict') throw new Error(`The start record of job ${job.jobId} changed while its start was being given up.`);
      await store.clearUnconfirmed(job.jobId, ctx.signal);
    }
    const reason = startFailed(message.dequeueCount, cause instanceof Error ? cause.message : String(cause));
    return this.reject({ message, error: reason, ...askedBy(job) }, ctx, orchestrations);
  }

  private async deleteMessage(message: DequeuedMessageItem, ctx: IntakeContext): Promise<void> {
    try {
      await this.deps.jobsQueue.deleteMessage(message.messageId, message.popReceipt, { abortSignal: ctx.signal });
    } catch (err) {
      // 404 (already deleted) or 400 PopReceiptMismatch (our visibility lapsed during a slow batch and
      // the message was received again): the work it asked for is done here and any redelivery is a
      // no-op, so this is not a failure to retry or to reject.
      const { statusCode, code } = err as { statusCode?: number; code?: string };
      if (statusCode !== 404 && code !== 'PopReceiptMismatch') throw err;
      this.deps.logger.info('intake.delete_missed', { messageId: message.messageId, epoch: ctx.epoch });
    }
  }

  /**
   * Records the rejection, copies the original message to the poison queue (once), then deletes it.
   * The record lives under the submitted job id when that id is free, else under `m-<message id>`.
   */
  private async reject(rejection: Rejection, ctx: IntakeContext, orchestrations: OrchestrationClient): Promise<IntakeOutcome> {
    const { logger } = this.deps;
    const { message, error, submittedJobId, fingerprint, reply } = rejection;
    let recordId = `m-${message.messageId}`;
    const mayUseJobId = submittedJobId !== undefined && error.code !== 'DUPLICATE_JOB_ID';
    if (mayUseJobId && !(await this.idTaken(submittedJobId, fingerprint, ctx, orchestrations))) recordId = submittedJobId;
    const at = this.now().toISOString();
    const record: JobRecord = {
      jobId: recordId,
      status: 'rejected',
      createdAt: at,
      updatedAt: at,
      error: { code: error.code, message: error.message },
      epoch: ctx.epoch,
      messageId: message.messageId,
      via: 'queue',
      ...(fingerprint === undefined ? {} : { fingerprint }),
      ...(submittedJobId === undefined ? {} : { submittedJobId }),
      ...(reply === undefined ? {} : { reply }),
    };
    let stored = await this.recordRejection(record, message, ctx);
    if (stored.value.poisonMessageId === undefined) stored = await this.copyToPoison(message, stored, ctx);
    // The outcome goes out after the rejection is recorded and before the message is deleted: a leader
    // killed in between leaves the message, whose next delivery finds the record and sends again.
    if (!(await this.deliverRejection(stored.value, reply, message, ctx))) return 'retry_later';
    await this.deleteMessage(message, ctx);
    logger.warn('intake.rejected', {
      jobId: stored.value.jobId,
      submittedJobId,
      code: error.code,
      reason: error.message,
      messageId: message.messageId,
      epoch: ctx.epoch,
    });
    return 'rejected';
  }

  /**
   * Sends a rejection's outcome (its reply queue, the outcome stream, its callback). False when the
   * delivery's record could not be written: the message stays for a later pass, until its last
   * delivery (then the rejection stands without its reply, logged as `delivery.abandoned`).
   */
  private async deliverRejection(
    record: JobRecord,
    reply: JobReply | undefined,
    message: DequeuedMessageItem,
    ctx: IntakeContext,
  ): Promise<boolean> {
    const delivery = this.deps.delivery;
    if (delivery === undefined || !delivery.outcomes.wanted(reply)) return true;
    try {
      await delivery.outcomes.deliver(outcomeOfRejection(record, reply), reply, ctx.signal);
      return true;
    } catch (err) {
      if (isAbort(err)) throw err;
      const last = message.dequeueCount >= INTAKE.maxStartAttempts;
      const fields = { jobId: record.jobId, messageId: message.messageId, error: err, epoch: ctx.epoch };
      this.deps.logger.warn(last ? 'delivery.abandoned' : 'delivery.record_failed', fields);
      return last;
    }
  }

  /** Whether a job id belongs to something else already (an instance, or another submission's start record). */
  private async idTaken(
    jobId: string,
    fingerprint: string | undefined,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
  ): Promise<boolean> {
    if ((await orchestrations.getStatus(instanceIdFor(jobId))) !== undefined) return true;
    const start = await this.deps.store.readStart(jobId, ctx.signal);
    return start !== undefined && start.value.fingerprint !== fingerprint;
  }

  /** Creates the rejection record once, or finds the one an earlier delivery of this message made. */
  private async recordRejection(record: JobRecord, message: DequeuedMessageItem, ctx: IntakeContext): Promise<Versioned<JobRecord>> {
    const { store } = this.deps;
    const created = await store.createRecordVersioned(record, ctx.signal);
    if (created !== 'exists') return { value: record, etag: created.etag };
    const existing = await store.readRecordVersioned(record.jobId, ctx.signal);
    if (existing?.value.messageId === message.messageId) return existing;
    const pendingByHttp = existing?.value.status === 'pending' && existing.value.fingerprint === record.fingerprint;
    if (existing !== undefined && pendingByHttp && record.jobId === record.submittedJobId) {
      // The HTTP API accepted this submission and it turned out invalid later (e.g. its blob vanished).
      const replaced: JobRecord = { ...record, createdAt: existing.value.createdAt, via: existing.value.via };
      const written = await store.replaceRecordIf(replaced, existing.etag, ctx.signal);
      if (written === 'conflict') throw new Error(`The record of job ${record.jobId} changed while it was being rejected.`);
      return { value: replaced, etag: written.etag };
    }
    const moved: JobRecord = { ...record, jobId: `m-${message.messageId}` };
    const again = await store.createRecordVersioned(moved, ctx.signal);
    if (again !== 'exists') return { value: moved, etag: again.etag };
    const earlier = await store.readRecordVersioned(moved.jobId, ctx.signal);
    if (earlier === undefined) throw new Error(`The rejection record ${moved.jobId} vanished while it was being read.`);
    return earlier;
  }

  /**
   * Copies the original to the poison queue and records the copy with If-Match; a copy whose record
   * update loses (another leader recorded its own copy first) is deleted again, so one copy stays.
   */
  private async copyToPoison(
    message: DequeuedMessageItem,
    stored: Versioned<JobRecord>,
    ctx: IntakeContext,
  ): Promise<Versioned<JobRecord>> {
    const { store, poisonQueue, logger } = this.deps;
    const sent = await poisonQueue.sendMessage(message.messageText, { abortSignal: ctx.signal, messageTimeToLive: -1 });
    const updated: JobRecord = { ...stored.value, poisonMessageId: sent.messageId, updatedAt: this.now().toISOString() };
    const written = await store.replaceRecordIf(updated, stored.etag, ctx.signal);
    if (written !== 'conflict') return { value: updated, etag: written.etag };
    // No abort signal: the undo must happen even if this leader has just stepped down.
    await poisonQueue.deleteMessage(sent.messageId, sent.popReceipt);
    logger.warn('intake.poison_copy_undone', { jobId: stored.value.jobId, messageId: message.messageId, epoch: ctx.epoch });
    const latest = await store.readRecordVersioned(stored.value.jobId, ctx.signal);
    if (latest?.value.poisonMessageId === undefined) {
      throw new Error(`The record of ${stored.value.jobId} changed while its poison copy was being recorded.`);
    }
    return latest;
  }
}

function isAbort(err: unknown): boolean {
  return err instanceof Error && err.name === 'AbortError';
}

function startFailed(deliveries: number, why: string): JobError {
  return new JobError('START_FAILED', `The job could not be started after ${deliveries} tries: ${why}`);
}

function duplicateError(jobId: string, since: string): JobError {
  return new JobError(
    'DUPLICATE_JOB_ID',
    `Job id "${jobId}" is already used by a different submission (since ${since}); the existing job was left untouched. ` +
      `Submit with a new jobId.`,
  );
}
