/**
 * The orchestration's activities: plan (fence the run, stage the job's items, send the first
 * window and wait a few seconds for its first results; for a small job the leader's intake did the
 * fence, the staging and the first window already: `prestage`, `sendFirstWindow`), step (count landed results, send chunks
 * again or expire them, top the window up: see dispatch/), aggregate (combine every chunk's partial
 * once, store the full result document where the summary cannot hold it, record the final summary)
 * and finish (record the final summary of a job that ended without aggregating: refused, failed).
 *
 * Guarantees: each activity is safe to run again (Durable may retry or replay-schedule it): staging
 * rewrites the same segments, a step sends the same chunks again (workers skip or discard them:
 * a chunk's result is created once), aggregation reads the same results and rewrites the same result
 * blob. Chunking is deterministic (chunk n holds items [n*size, (n+1)*size)) and the items are read
 * from the staged copy, so a re-sent chunk is exactly the one that went missing even if the user's
 * itemsBlob changed since. Aggregation folds partials in chunk order, counting each chunk's single
 * result once.
 * One call of a job's activities runs at a time: a plan, step or aggregate that runs past 3 s holds
 * the job's call lease, and a repeat after a resume waits while a live call holds it (CallClaims).
 * The plan step is the orchestration's fence (see intake/startSteps.ts): it does nothing for a job that already
 * has a final summary (it returns that summary), nor for a run whose start the job's start record no
 * longer names, nor for a run whose leader epoch is older than the lease's current one when it first
 * plans (a retried plan whose start already staged its input goes on: the leader that started it
 * may be the instance that died); the run then stands down. `finish` records the job's final
 * summary once, whichever run finishes first.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 5, 7; "The lease epoch from the elector to the fence", step 6
 */
import { publicMessage } from '../../errors';
import { type Logger } from '../../observability/log';
import { type Json } from '../../worktypes/WorkType';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { type JobReply } from '../delivery/DeliveryTargets';
import { OUTCOME_RESULT_INLINE_MAX_BYTES, outcomeOfSummary } from '../delivery/JobOutcome';
import { type DeliveryView, type OutcomeDelivery } from '../delivery/OutcomeDelivery';
import { type ChunkDispatcher, type DispatchJob, landedOf, STEP_WAIT, type StepInput, type StepOutcome } from '../dispatch/ChunkDispatcher';
import { type DispatchLedger, emptyLedger, isLedgerDone } from '../dispatch/DispatchLedger';
import { type ChunkItemsSource } from '../dispatch/PipelineStore';
import { JobError, type JobErrorInfo } from '../JobError';
import { type JobRun } from '../JobRun';
import { assertChunkCount } from '../JobSubmission';
import { type JobSummary } from '../JobSummary';
import { type JobStore } from '../store/JobStore';
import { type Now, nowOf } from '../wallClock';
import { type AggregateInput, aggregateJob } from './aggregation';
import { type CallClaims } from './CallClaims';
import { fence } from './fence';

export interface StagedCounts {
  readonly itemCount: number;
  readonly chunkCount: number;
  /** Set when the leader staged the input at intake and sends the first window itself (see `prestage`). */
  readonly firstWindowAt?: string;
  /**
   * Set when the leader stored nothing (`prestage`): inline items whose every chunk fits the first
   * window, sent from the run's own items. The plan sends from them too, and stages them only if its
   * wait ends with the job unfinished (the steps read chunks from the staged input).
   */
  readonly unstaged?: true;
}

/** Reads, checks and stores a job's items where the dispatcher reads them (input/InputStager.ts). */
export type StageInput = (run: JobRun, signal?: AbortSignal, options?: { readonly firstWindowAt?: string }) => Promise<StagedCounts>;

export interface JobPipelineDeps {
  readonly store: JobStore;
  readonly dispatcher: ChunkDispatcher;
  readonly stage: StageInput;
  /**
   * The input this run's own start staged on an earlier attempt of its plan, if any (absent: never).
   * Such a plan is the start's work going on after its instance died, not a new act of a stale
   * leader: it skips the lease-epoch check and the staging.
   */
  readonly staged?: (run: JobRun, signal?: AbortSignal) => Promise<StagedCounts | undefined>;
  readonly registry: WorkTypeRegistry;
  readonly logger: Logger;
  /** The leader lease's current epoch (undefined: no leader yet); without it the plan skips that check. */
  readonly leaseEpoch?: () => Promise<number | undefined>;
  readonly now?: Now;
  /** One running call per job (CallClaims); absent: no lease is taken (tests of one call). */
  readonly calls?: CallClaims;
  /**
   * After sending the first window, the plan waits this long (a step's long poll) for the first
   * results, so a small job needs no step of its own: two Durable hops fewer. Default STEP_WAIT.maxWaitMs.
   */
  readonly planWaitMs?: number;
  /** Where outcomes are delivered (absent: the deliver activity does nothing). */
  readonly delivery?: OutcomeDelivery;
  /**
   * Told when a plan of this process removed its start's mark: this process's intake counts the start
   * no longer under way (JobIntake.startConfirmed).
   */
  readonly startConfirmed?: (jobId: string) => void;
}

export type PlanOutcome =
  | {
      readonly ok: true;
      readonly cancelled: boolean;
      readonly chunkCount: number;
      readonly itemCount: number;
      readonly ledger: DispatchLedger;
      /** Present when every chunk finished while the plan waited: the job is aggregated and recorded. */
      readonly summary?: JobSummary;
    }
  | { readonly ok: false; readonly error: JobErrorInfo }
  /** This run must not do the job: `summary` is the job's recorded final summary, or a superseded marker. */
  | { readonly ok: false; readonly standDown: JobSummary };

/** A shared run's answer for one of its jobs: its plan's outcome, or its plan failed and its own run plans it again. */
export type SharedPlanOutcome = PlanOutcome | { readonly ok: false; readonly retryAlone: string };

/** A step's outcome; once its ledger is done, the step aggregates too and answers the recorded summary. */
/** Without `landed`: what a pass saw stays in the activity (the history gets the counts). */
export interface JobStepOutcome extends Omit<StepOutcome, 'landed'> {
  readonly summary?: JobSummary;
}

export interface PlanInput {
  readonly run: JobRun;
  /** The orchestration's time (ISO) the first window is sent at. */
  readonly at: string;
  /** What the intake staged for this start before starting it (`prestage`): the plan need not read its manifest. */
  readonly prestaged?: StagedCounts;
  /** Set when the orchestration calls it again after a resume: see CallClaims. */
  readonly repeat?: number;
}

/** The deliver activity's input: the recorded summary and where its outcome goes. */
export interface DeliverInput {
  readonly summary: JobSummary;
  readonly reply?: JobReply;
  readonly createdAt: string;
}

/** The calls' names in the log (the activities' names in jobOrchestration.ts). */
const JOB_CALLS = { plan: 'plan', step: 'step', aggregate: 'aggregate' } as const;

/** The plan's wait answers this long after the first results landed (see `plan`). */
const PLAN_BUSY_RETURN_MS = 1_000;

/** The part of a run a step needs: never its inline items, which would ride in every step's history. */
export function dispatchJobOf(run: JobRun): DispatchJob {
  return { jobId: run.jobId, workType: run.workType, epoch: run.epoch, options: run.options, submittedAt: run.submittedAt };
}

export class JobActivities {

  private readonly now: Now;

  /** The deps with the clock resolved, for the fence and the aggregation. */
  private readonly parts: JobPipelineDeps & { readonly now: Now };

  constructor(private readonly deps: JobPipelineDeps) {
    this.now = nowOf(deps);
    this.parts = { ...deps, now: this.now };
  }


  /**
   * The plans of a shared run's jobs (batchOrchestration.ts), side by side: each is its job's own
   * plan (its fence, its call lease), answered in the order given, all of them ended: a plan that
   * throws (storage failing after its own checks) answers `retryAlone`, and its job goes on alone,
   * its own run planning it again, while the others' outcomes stand.
   */
  async planShared(inputs: readonly PlanInput[]): Promise<SharedPlanOutcome[]> {
    const settled = await Promise.allSettled(inputs.map((input) => this.plan(input)));
    return settled.map((s, i) => {
      if (s.status === 'fulfilled') return s.value;
      this.deps.logger.warn('job.plan_failed', { jobId: inputs[i]?.run.jobId, shared: true, error: s.reason });
      return { ok: false, retryAlone: publicMessage(s.reason instanceof Error ? s.reason.message : String(s.reason)) };
    });
  }

  /** Plans under the job's call lease (CallClaims): a repeat waits while a live call holds it. */
  async plan(input: PlanInput): Promise<PlanOutcome> {
    return this.exclusive(input.run.jobId, JOB_CALLS.plan, input, () => this.planCall(input));
  }

  private async planCall(input: PlanInput): Promise<PlanOutcome> {
    const confirming: Array<Promise<void>> = [];
    try {
      const outcome = await this.planChecked(input, confirming);
      // The job goes on to its steps: its index row says so (a job the plan finished has its final row).
      // Not awaited: the answer does not wait for a best-effort write (it logs its own failure).
      if (outcome.ok && outcome.summary === undefined && !outcome.cancelled) void this.deps.store.noteRunning(input.run);
      return outcome;
    } finally {
      await Promise.all(confirming);
    }
  }

  private async planChecked(input: PlanInput, confirming: Array<Promise<void>>): Promise<PlanOutcome> {
    const { run } = input;
    // The fence's reads and the check for this start's staged input, at once (one round trip, not four).
    const stagedRead =
      input.prestaged !== undefined ? Promise.resolve(input.prestaged) : (this.deps.staged?.(run) ?? Promise.resolve(undefined));
    // A start the intake staged is past the epoch check (`fence`): no read of the lease.
    // The run's first call of its plan (no resume, not a redelivery) need not read the final summary (`fence`).
    const fresh = input.repeat === undefined && !this.deps.dispatcher.isLate(input.at);
    const fenced = await fence(this.parts, run, stagedRead.then((s) => s !== undefined), input.prestaged === undefined, fresh);
    const resumed = await stagedRead;
    if (fenced !== undefined) {
      const reason = fenced.superseded?.reason ?? 'finished';
      this.deps.logger.warn('job.plan_refused', { jobId: run.jobId, startId: run.startId, epoch: run.epoch, reason });
      return { ok: false, standDown: fenced };
    }
    // This start has landed (its run passed the fence): the intake need not check it again.
    confirming.push(this.confirmStart(run));
    // The cancel marker, unless this start's input is staged (its plan's earlier attempt, or the
    // intake's `prestage`, read it before staging): the dispatch pass below reads it before it sends
    // anything (a cancel found there ends the plan too).
    const cancelled = resumed === undefined && (await this.deps.store.isCancelled(run.jobId));
    if (cancelled) {
      return { ok: true, cancelled: true, chunkCount: 0, itemCount: 0, ledger: emptyLedger(0, 0) };
    }
    if (this.deps.registry.get(run.workType) === undefined) {
      return {
        ok: false,
        error: new JobError('UNKNOWN_WORK_TYPE', `Work type "${run.workType}" is not registered on this instance.`).toJSON(),
      };
    }
    let staged: StagedCounts;
    try {
      staged = resumed ?? (await this.deps.stage(run));
    } catch (err) {
      // Bad input is an outcome the job reports; anything else (storage down) is retried by Durable.
      if (err instanceof JobError && err.isUserError) return { ok: false, error: err.toJSON() };
      throw err;
    }
    const { chunkCount, itemCount } = staged;
    // One pass: the first window goes out with the plan (a retry sends only what is missing of it).
    const job = dispatchJobOf(run);
    const ledger =
      resumed === undefined
        ? emptyLedger(chunkCount, itemCount)
        : this.deps.dispatcher.resumedLedger(chunkCount, itemCount, input.at, resumed.firstWindowAt);
    // Nothing staged (`prestage`): the chunks come from the run's own items, as the leader's window did.
    const unstaged = resumed?.unstaged === true ? inlineItems(run) : undefined;
    // A fresh ledger follows this plan's own read of the cancel marker, above.
    const firstInput = { job, chunkCount, itemCount, ledger, at: input.at };
    const first = await this.deps.dispatcher.pass(firstInput, undefined, unstaged, resumed === undefined);
    const how = resumed === undefined ? {} : resumed.firstWindowAt === undefined ? { resumed: true } : { prestaged: true };
    this.deps.logger.info('job.planned', {
      jobId: run.jobId,
      items: itemCount,
      chunks: chunkCount,
      sent: first.sent,
      ...(resumed === undefined ? {} : { ...how, resent: first.resent, finished: first.finished }),
      epoch: run.epoch,
      startId: run.startId,
    });
    // A late plan (a redelivery or a resumed repeat: LATE_CALL_MS) answers after its one pass.
    const waitMs = this.deps.dispatcher.isLate(input.at) ? 0 : (this.deps.planWaitMs ?? STEP_WAIT.maxWaitMs);
    if (first.cancelled) return { ok: true, cancelled: true, chunkCount, itemCount, ledger: first.ledger };
    // Done at the first pass (its results landed while the run waited for its plan, a burst's usual
    // case), or late: no long poll. A done job is aggregated from what that pass read, not listed.
    const waited =
      isLedgerDone(first.ledger) || waitMs <= 0
        ? first
        : await this.deps.dispatcher.step(
          { job, chunkCount, itemCount, ledger: first.ledger, at: input.at },
          // Back to the orchestration after 1 s of results rather than a step's 2 s: the job's progress
          // (its custom status) shows from the first results even when the whole job takes 2 s. A job
          // whose every chunk went out with the first window is waited for instead (up to waitMs) and
          // aggregated here: its plan is its only activity.
          { ...STEP_WAIT, maxWaitMs: waitMs, busyReturnMs: Math.min(waitMs, PLAN_BUSY_RETURN_MS) },
          unstaged,
        );
    // What the first pass saw counts too: the aggregation lists nothing when the passes saw every result.
    const seen = waited === first ? first : { ...waited, landed: landedOf(first.landed, waited.landed) };
    const done = await this.aggregateIfDone(job, chunkCount, itemCount, seen);
    // The steps that follow read chunks from the staged input: an unstaged job still running is staged now.
    if (done.summary === undefined && !waited.cancelled) await this.stageUnstaged(run, resumed);
    return {
      ok: true,
      cancelled: waited.cancelled,
      chunkCount,
      itemCount,
      ledger: waited.ledger,
      ...(done.summary === undefined ? {} : { summary: done.summary }),
    };
  }

  /** Best effort: a start left marked is still checked by the intake, which confirms it from the run's status; this spares that check. */
  private async confirmStart(run: JobRun): Promise<void> {
    try {
      await this.deps.store.confirmStart(run);
      this.deps.startConfirmed?.(run.jobId);
    } catch (err) {
      this.deps.logger.warn('job.start_confirm_failed', { jobId: run.jobId, startId: run.startId, error: err });
    }
  }

  /**
   * At intake, by the leader taking the submission, before it starts the run: the plan's checks
   * (the lease's epoch is still the run's, no cancel, a known work type),
   * then the staging, with the manifest saying the first window goes out now (`sendFirstWindow`, once
   * the run is started). Inline items whose chunks all fit the first window are not staged
   * (`StagedCounts.unstaged`): the run carries them, and its plan stages them only if the job is
   * still unfinished when the plan answers. The run's plan then finds its input staged and that window in flight, so
   * the first chunks do not wait for the two Durable queue hops before the plan activity (on the
   * shipped settings, up to 0.25 s each). Undefined when a check fails or the input is refused: the
   * plan then does it all itself and reports the outcome, as for any job.
   */
  async prestage(run: JobRun, signal?: AbortSignal, mayStage = true): Promise<StagedCounts | undefined> {
    if (this.deps.registry.get(run.workType) === undefined) return undefined;
    const source = run.source;
    const chunkSize = run.options.chunkSize;
    const inlineChunks = source.kind === 'inline' ? Math.ceil(source.items.length / chunkSize) : undefined;
    // The whole job goes out with the first window: nothing to stage unless the plan's wait ends unfinished.
    // (Inline items were checked at submission; their count is checked below, as staging does.)
    const fits = inlineChunks !== undefined && inlineChunks <= this.deps.dispatcher.window;
    if (!fits && !mayStage) return undefined;
    const [leaseEpoch, cancelled] = await Promise.all([this.deps.leaseEpoch?.(), this.deps.store.isCancelled(run.jobId, signal)]);
    if ((leaseEpoch !== undefined && leaseEpoch > run.epoch) || cancelled) return undefined;
    const firstWindowAt = this.now().toISOString();
    try {
      if (fits && source.kind === 'inline') {
        assertChunkCount(source.items.length, chunkSize);
        return { itemCount: source.items.length, chunkCount: inlineChunks, firstWindowAt, unstaged: true };
      }
      return await this.deps.stage(run, signal, { firstWindowAt });
    } catch (err) {
      if (err instanceof JobError && err.isUserError) return undefined;
      throw err;
    }
  }

  /** The first window of a job `prestage` staged (one pass from an empty ledger); answers how many chunks went out. */
  async sendFirstWindow(run: JobRun, staged: StagedCounts, signal?: AbortSignal): Promise<number> {
    // Checked again after the start: a leader paused since `prestage` sends nothing once a newer epoch
    // leads (the run's plan re-sends the window when it finds it unclaimed).
    const leaseEpoch = await this.deps.leaseEpoch?.();
    if (leaseEpoch !== undefined && leaseEpoch > run.epoch) return 0;
    const { chunkCount, itemCount } = staged;
    const at = staged.firstWindowAt ?? this.now().toISOString();
    const ledger = emptyLedger(chunkCount, itemCount);
    // Inline items are in the run: no read of the input just staged (its manifest and segment).
    // The cancel marker was read by `prestage`, a moment ago: a cancel since then stops the plan's passes and the workers.
    const input = { job: dispatchJobOf(run), chunkCount, itemCount, ledger, at };
    const pass = await this.deps.dispatcher.pass(input, signal, inlineItems(run), true);
    return pass.sent;
  }

  /** Stages the input of a job the intake left unstaged (`StagedCounts.unstaged`), before the plan hands it to steps. */
  private async stageUnstaged(run: JobRun, counts: StagedCounts | undefined): Promise<void> {
    if (counts?.unstaged !== true) return;
    await this.deps.stage(run, undefined, counts.firstWindowAt === undefined ? {} : { firstWindowAt: counts.firstWindowAt });
  }

  /** Counts the results that landed, sends chunks again or expires them, and tops the window up (a long poll). */
  async step(input: StepInput): Promise<JobStepOutcome> {
    return this.exclusive(input.job.jobId, JOB_CALLS.step, input, async () =>
      this.aggregateIfDone(input.job, input.chunkCount, input.itemCount, await this.deps.dispatcher.step(input)),
    );
  }

  /** Runs a call of the job's current activity under its call lease (see CallClaims), when the app gave one. */
  private async exclusive<T>(
    jobId: string,
    call: string,
    input: { readonly repeat?: number },
    work: () => Promise<T>,
  ): Promise<T> {
    const calls = this.deps.calls;
    if (calls === undefined) return work();
    // Only a repeat waits for the lease: a late call (a redelivery) is the copy of a call whose
    // instance died, whose lease may run 15 s more; waiting for it would add that to every recovery.
    return calls.run({ jobId, call, claimFirst: (input.repeat ?? 0) > 0 }, work);
  }

  /** The last chunk's result landed: aggregate here, one Durable hop fewer than a separate activity. */
  private async aggregateIfDone(job: DispatchJob, chunkCount: number, itemCount: number, outcome: StepOutcome): Promise<JobStepOutcome> {
    // What the last pass saw stays here: the orchestration's history gets the counts, not the results.
    const { landed, ...answer } = outcome;
    if (answer.cancelled || !isLedgerDone(answer.ledger)) return answer;
    // Inside the plan's or step's own call: no lease of its own.
    return { ...answer, summary: await aggregateJob(this.parts, { run: job, chunkCount, itemCount, cancelled: false }, landed) };
  }

  /** Records the job's final summary once and answers the stored one (a run that finished first wins). */
  async finish(summary: JobSummary): Promise<JobSummary> {
    return this.deps.store.writeFinal(summary);
  }

  /**
   * Delivers the job's recorded outcome (delivery/OutcomeDelivery.ts). The summary the orchestration
   * holds is the recorded one; it is read again only when the job's id changed hands (never: the
   * id is the job's). Throws when the delivery's record cannot be written (Durable retries).
   */
  async deliver(input: DeliverInput): Promise<DeliveryView | undefined> {
    const delivery = this.deps.delivery;
    if (delivery === undefined) return undefined;
    try {
      const summary = delivery.wanted(input.reply) ? await this.withResultInline(input.summary) : input.summary;
      return await delivery.deliver(outcomeOfSummary(summary, input.reply, input.createdAt), input.reply);
    } catch (err) {
      this.deps.logger.warn('delivery.record_failed', { jobId: input.summary.jobId, error: err });
      throw err;
    }
  }

  /**
   * A result kept out of the status (over 4 KiB) goes into the outcome message itself when it fits one
   * (OUTCOME_RESULT_INLINE_MAX_BYTES): one read of the result blob; a bigger one stays a URL.
   */
  private async withResultInline(summary: JobSummary): Promise<JobSummary> {
    if (summary.result !== undefined || summary.resultBlob === undefined) return summary;
    const text = await this.deps.store.readJobResultText(summary.jobId);
    if (text === undefined || Buffer.byteLength(text, 'utf8') > OUTCOME_RESULT_INLINE_MAX_BYTES) return summary;
    // The blob is the job's result document ({ jobId, status, result, ... }, what GET .../result serves).
    const document = JSON.parse(text) as { result?: Json };
    return document.result === undefined ? summary : { ...summary, result: document.result };
  }

  /** Aggregates under the job's call lease (an aggregation of 10,000 chunks takes seconds). */
  async aggregate(input: AggregateInput): Promise<JobSummary> {
    return this.exclusive(input.run.jobId, JOB_CALLS.aggregate, input, () => aggregateJob(this.parts, input));
  }

}

/** The chunks of a run's inline items, from the run itself (undefined for an items blob). */
function inlineItems(run: JobRun): ChunkItemsSource | undefined {
  const source = run.source;
  if (source.kind !== 'inline') return undefined;
  const size = run.options.chunkSize;
  return { items: (_jobId, chunks) => Promise.resolve(new Map(chunks.map((c) => [c, source.items.slice(c * size, (c + 1) * size)]))) };
}
