/**
 * One submission off the jobs queue (`handle`): validated, then rejected (Rejections.ts) or started.
 *
 * A start is several writes nothing makes atomic: the Durable instance and its start message are
 * two writes on every backend (the development host writes the instance first, Azure Storage the
 * message first), and deleting the submission is a third; the leader can die, freeze or lose its
 * storage between any two. So a start is recorded before it is made:
 * 1. `jobs/<jobId>/start.json`, the start record, created once (the submission's fingerprint, the
 *    run input, a fresh start id, the leader's epoch, the instance generation), and its start mark
 *    (a row of the job index's table, StartMarks.ts), which the start checks (StartRepair.ts)
 *    follow until the run is past its plan;
 * 2. the Durable start of `job-<jobId>` (`job-<jobId>.<n>` after a repair), then the message delete.
 * A small input (inline, or an items blob up to `INTAKE.firstWindowMaxBytes`) is staged between 1 and
 * 2, after the plan's own checks (`FirstWindow.prestage`), while the pass has spent less than
 * `INTAKE.firstWindowBudgetMs` doing so (inline items whose chunks all fit the first window are
 * not staged, only checked, whatever the budget), and once the run is started the leader
 * sends the job's first window itself, in the background of the pass: the first chunks do not wait
 * for the Durable queue hops to the plan activity, which finds the input staged and that window in
 * flight. A check that fails (a newer epoch, the id's earlier results, a cancel) or input the plan
 * must refuse leaves it all to the plan, which reports the outcome as for any job.
 *
 * Past the admission bound (`INTAKE.maxStartsUnderWay`) no submission is begun (JobIntake): the
 * rest of a burst waits on the jobs queue.
 * Guaranteed: a submission is deleted only after its start is recorded and tried, or its
 * rejection recorded; the same
 * submission twice is a no-op, a different one under a used job id is rejected (DUPLICATE_JOB_ID);
 * a start by a leader that lost its lease, landing late, is refused by Durable (Pending or Running
 * instance) or does nothing (its run stands down at its plan step).
 * Not guaranteed: retrying a start interrupted before its record was written sooner than the
 * message's visibility timeout (60 s).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3; "The lease epoch from the elector to the fence", step 5.
 */
import { randomUUID } from 'node:crypto';

import { replyOf } from '../delivery/DeliveryTargets';
import { JobError } from '../JobError';
import { isValidJobId } from '../jobIds';
import { type JobRun } from '../JobRun';
import { type AcceptedJob, validateSubmission } from '../JobSubmission';
import { decodeQueueMessage } from '../messageCodec';
import { type StagedCounts } from '../run/JobActivities';
import { type OrchestrationClient } from '../run/OrchestrationClient';
import { type JobRecord, type StartRecord, type Versioned } from '../store/JobStore';
import { type ReceivedSubmission } from '../SubmissionQueue';
import { type Now, nowOf } from '../wallClock';
import { INTAKE, type IntakeContext, type IntakeDeps, type IntakeOutcome, isAbort } from './intakeTerms';
import { askedBy, duplicateError, type Rejection, Rejections, startFailed } from './Rejections';
import { StartBatches } from './StartBatches';
import { type StartRepair } from './StartRepair';
import { startInstanceId, startRecorded } from './startSteps';

export class Submissions {
  private readonly now: Now;

  /** The leader's term the submissions are taken under (`beginTerm`): a shared run is made within one. */
  #term = Number.NaN;

  private readonly rejections: Rejections;

  /** First windows being sent (see `sendFirstWindow`). */
  readonly #sending = new Set<Promise<void>>();

  /** Time this pass has spent staging inputs at intake (`INTAKE.firstWindowBudgetMs`). */
  #prestagingMs = 0;

  /** The shared runs being made (small jobs started at the same moment: StartBatches), and the client that starts them. */
  readonly #shared: StartBatches;
  #sharedClient: OrchestrationClient | undefined;

  constructor(
    private readonly deps: IntakeDeps,
    /** The start checks, told of each start marked here (`startUnconfirmed`). */
    private readonly repair: StartRepair,
  ) {
    this.now = nowOf(deps);
    this.#shared = new StartBatches(INTAKE.jobsPerSharedRun, async (instanceId, input) => {
      const client = this.#sharedClient;
      if (client?.startBatch === undefined) throw new Error('No Durable client to start a shared run with.');
      await client.startBatch(instanceId, input);
    });
    this.rejections = new Rejections({
      poisonQueue: deps.poisonQueue,
      store: deps.store,
      logger: deps.logger,
      now: this.now,
      outcomes: deps.delivery?.outcomes,
      deleteMessage: (message, ctx) => this.deleteMessage(message, ctx),
      alreadyAccepted: (message, job, startId, ctx) => this.alreadyAccepted(message, job, startId, ctx),
    });
  }

  /** A pass begins: its staging time at intake starts from zero (`INTAKE.firstWindowBudgetMs`). */
  beginPass(): void {
    this.#prestagingMs = 0;
  }

  /** The first windows being sent now (the pass waits for them before it ends). */
  get sending(): ReadonlySet<Promise<void>> {
    return this.#sending;
  }

  /** A new term: shared runs are made within it (`handle`). */
  beginTerm(epoch: number): void {
    this.#term = epoch;
  }

  /** The term ended (its signal aborted). */
  endTerm(): void {
    this.#term = Number.NaN;
  }

  /**
   * A recorded start made: a small input staged at intake
   * (`prestage`), the Durable start, then the first window sent in the background. Answers what was staged.
   */
  private async makeStart(
    start: StartRecord,
    small: boolean,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    reached: (step: string) => void = () => undefined,
  ): Promise<StagedCounts | undefined> {
    let prestaged: StagedCounts | undefined;
    try {
      prestaged = small ? await this.prestage(start.run, ctx) : undefined;
    } catch (err) {
      // Its place in a shared run is given up (the others start without it).
      if (start.instance !== undefined) this.#shared.release(start.instance);
      throw err;
    }
    reached('staged');
    if (start.instance === undefined) await startRecorded(start, orchestrations, prestaged);
    else await this.#shared.join(start.instance, start.run, prestaged);
    reached('started');
    if (prestaged !== undefined) this.sendFirstWindow(start.run, prestaged, ctx);
    return prestaged;
  }

  /** `intake.started`, with the milliseconds of its steps (`ms`). */
  private logStarted(start: StartRecord, ctx: IntakeContext, prestaged: StagedCounts | undefined, ms: Record<string, number>): void {
    this.deps.logger.info('intake.started', {
      jobId: start.jobId,
      workType: start.run.workType,
      // A shared run's, or `job-<jobId>`.
      instanceId: startInstanceId(start),
      startId: start.startId,
      epoch: ctx.epoch,
      ...(prestaged === undefined ? {} : { firstWindow: true }),
      ms,
    });
  }

  /**
   * One submission. `starting` is told of its start once it is decided (it counts as under way from
   * then: JobIntake's admission bound).
   */
  async handle(
    message: ReceivedSubmission,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    starting: (jobId: string) => void = () => undefined,
    /** Whether other submissions are being started beside this one (a burst): a small job then shares a run (StartBatches). */
    crowded: () => boolean = () => false,
  ): Promise<IntakeOutcome> {
    const { logger, store } = this.deps;
    const reject = (rejection: Rejection): Promise<IntakeOutcome> => this.rejections.reject(rejection, ctx, orchestrations);
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
      return reject({ message, error: reason, submittedJobId: isValidJobId(asked) ? asked : undefined, reply });
    }

    const t0 = performance.now();
    const lap: Record<string, number> = {};
    const reached = (step: string): void => {
      lap[step] = Math.round(performance.now() - t0);
    };
    // From its mark until its start call settles, the start checks leave this start alone (StartRepair.settled).
    let startingHere = false;
    /** Its place in a shared run (StartBatches), until its start joins it. */
    let place: string | undefined;
    try {
      // What the id already holds. Its start record is read up front only where the record's checks
      // need it: a start is created once below and read when that finds one (createStart's
      // `exists`), so a new submission costs one read fewer. The checks run in the same order either
      // way (`judge`).
      const record = await store.readRecord(job.jobId, ctx.signal);
      const recordPasses = record === undefined || (record.status !== 'rejected' && record.fingerprint === job.fingerprint);
      const known = recordPasses ? undefined : await store.readStart(job.jobId, ctx.signal);
      reached('read');
      const judged = await this.judge(message, job, ctx, orchestrations, { known, record });
      if (judged !== undefined) return judged;

      // A small job taken in a burst shares a run (its place reserved before its record is written,
      // so the record can name the shared run it starts in: recorded before made). One start of this
      // id this process holds already (being repaired) is found by the create below, as any other.
      const heldHere = this.repair.holds(job.jobId);
      const sharing =
        job.source.kind === 'inline' && orchestrations.startBatch !== undefined && ctx.epoch === this.#term && !heldHere && crowded();
      if (sharing) {
        this.#sharedClient = orchestrations;
        place = this.#shared.reserve();
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
        ...(place === undefined ? {} : { instance: place }),
        epoch: ctx.epoch,
        holder: ctx.holder,
        at: this.now().toISOString(),
        run,
      };
      // The record and its mark at once: a mark without a record is retired by the next check, and a
      // record whose mark failed is marked by the message's next delivery (alreadyAccepted).
      // A start of this id this process holds already (accepted and waiting, or being repaired) is
      // found by the create below; this submission must not end that claim when it settles.
      this.repair.marking(job.jobId);
      startingHere = !heldHere;
      const [created] = await Promise.all([store.createStart(start, ctx.signal), store.markUnconfirmed(job.jobId, startId, ctx.signal)]);
      if (created === 'exists') {
        if (place !== undefined) this.#shared.release(place);
        place = undefined;
        // The id holds a start already (not read up front, above: the record passed, so `judge` had
        // not decided): judged against it now, as it would have been then. Its mark, written
        // alongside, is checked (or retired) by the start checks.
        const found = await store.readStart(job.jobId, ctx.signal);
        const judged = found === undefined ? undefined : await this.judge(message, job, ctx, orchestrations, { known: found, record });
        if (judged !== undefined) return judged;
        // Another delivery of this job id got there first: judge this message against its record next time.
        throw new Error(`The start record of job ${job.jobId} appeared while this submission was being started.`);
      }
      reached('recorded');
      const small = job.source.kind === 'inline' || (blobBytes ?? Infinity) <= INTAKE.firstWindowMaxBytes;
      starting(job.jobId);
      // From here its place is settled by the start itself (joined, or given up should it fail first).
      place = undefined;
      const prestaged = await this.makeStart(start, small, ctx, orchestrations, reached);
      // An HTTP submission's pending record stays: the start record speaks for the job now (JobStatusReader).
      await this.deleteMessage(message, ctx);
      // Milliseconds from taking the message to each step's end: where a start's time goes under load.
      this.logStarted(start, ctx, prestaged, { ...lap, done: Math.round(performance.now() - t0) });
      return 'started';
    } catch (err) {
      if (isAbort(err)) throw err;
      if (message.dequeueCount >= INTAKE.maxStartAttempts) return this.rejections.giveUp(message, job, err, ctx, orchestrations);
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
    } finally {
      if (place !== undefined) this.#shared.release(place);
      if (startingHere) this.repair.settled(job.jobId);
    }
  }

  /**
   * The submission against what its job id holds (its start record, its pending or rejected
   * record): the outcome when that decides it (a duplicate or a repeated rejection refused, a start
   * already recorded seen through), undefined when it is to be started.
   */
  private async judge(
    message: ReceivedSubmission,
    job: AcceptedJob,
    ctx: IntakeContext,
    orchestrations: OrchestrationClient,
    held: {
      readonly known: Versioned<StartRecord> | undefined;
      readonly record: JobRecord | undefined;
    },
  ): Promise<IntakeOutcome | undefined> {
    const { known, record } = held;
    const reject = (rejection: Rejection): Promise<IntakeOutcome> => this.rejections.reject(rejection, ctx, orchestrations);
    if (known !== undefined && known.value.fingerprint !== job.fingerprint) {
      const since = known.value.run.submittedAt;
      return reject({ message, error: duplicateError(job.jobId, since), ...askedBy(job) });
    }
    if (known?.value.state === 'active') return this.alreadyAccepted(message, job, known.value.startId, ctx);
    if (
      record !== undefined &&
      (record.status === 'rejected' ? record.messageId !== message.messageId : record.fingerprint !== job.fingerprint)
    ) {
      return reject({ message, error: duplicateError(job.jobId, record.createdAt), ...askedBy(job) });
    }
    if (record?.status === 'rejected') {
      // This very message was rejected before and came back (crash before its delete): finish that.
      return reject({ message, error: record.error ?? { code: 'SCHEMA_VIOLATION', message: 'rejected' }, ...askedBy(job) });
    }
    if (known !== undefined) {
      // Its start was given up (START_FAILED) and its rejection not recorded yet: record it now.
      return reject({ message, error: startFailed(message.dequeueCount, 'given up earlier'), ...askedBy(job) });
    }
    return undefined;
  }

  /** The plan's checks and the staging, at intake (FirstWindow.prestage); undefined when the plan is to do it. */
  private async prestage(run: JobRun, ctx: IntakeContext): Promise<StagedCounts | undefined> {
    const started = performance.now();
    let prepared: StagedCounts | undefined;
    try {
      prepared = await this.deps.firstWindow?.prestage(run, ctx.signal, this.#prestagingMs < INTAKE.firstWindowBudgetMs);
      return prepared;
    } catch (err) {
      if (isAbort(err)) throw err;
      // Storage trouble while staging: the plan stages (and retries) as it does for any job.
      this.deps.logger.warn('intake.first_window_failed', { jobId: run.jobId, stage: 'staging', error: err, epoch: ctx.epoch });
      return undefined;
    } finally {
      // Only staging counts against the pass's budget: a job left unstaged cost the intake reads, not writes.
      if (prepared?.unstaged !== true) this.#prestagingMs += performance.now() - started;
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
  private async alreadyAccepted(
    message: ReceivedSubmission,
    job: AcceptedJob,
    startId: string,
    ctx: IntakeContext,
  ): Promise<IntakeOutcome> {
    await this.deps.store.markUnconfirmed(job.jobId, startId, ctx.signal);
    await this.deleteMessage(message, ctx);
    this.deps.logger.info('intake.already_started', { jobId: job.jobId, messageId: message.messageId, epoch: ctx.epoch });
    return 'already_started';
  }

  private async deleteMessage(message: ReceivedSubmission, ctx: IntakeContext): Promise<void> {
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
}
