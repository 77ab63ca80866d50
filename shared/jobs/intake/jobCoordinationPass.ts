/**
 * The job pipeline's coordination pass, which the leader runs (on acquiring, on each of its timer
 * ticks, and on the runtime's own interval while it leads): it completes or repairs the starts
 * still in progress and, beside that, reads the jobs queue in batches and starts one orchestration per valid
 * submission (instance id `job-<jobId>`, stamped with the epoch), records invalid ones as rejected
 * jobs with their original message in `<jobsQueue>-poison`, and deletes a message only after that
 * (the guarantees are beside this file: Submissions.ts, StartRepair.ts). Idempotent (an extra pass
 * costs a read, never a duplicate); honours `ctx.signal` between messages and reports
 * `ctx.progress()` for the leader's watchdog. Followers never run it.
 *
 * The Durable client is the latest one a function handed over (shared/app/DurableClientHolder); a
 * pass before any handover logs `intake.no_durable_client` and does nothing.
 *
 * Beside the intake, every few seconds, it asks job runs that stopped moving to resume (StalledJobs:
 * a run whose control message is held by a dead instance would otherwise wait a minute); a failed
 * check is logged (`job.stall_check_failed`) and does not fail the pass.
 *
 * Then, side by side: the job index's upkeep (api/IndexUpkeep.ts: repairIndex every
 * UPKEEP_SCHEDULE.refreshEveryMs, the rows that say pending or running against their jobs;
 * walkIndex every walkEveryMs, missing and left-over rows; a failure is logged,
 * `index.upkeep_failed`), the retries of failed deliveries (`delivery.sweep_failed`), and, at most
 * once an hour, the retention sweep, which purges finished jobs older than JOB_RETENTION_DAYS
 * (api/Retention.ts, purgeExpired; 100 per sweep, oldest first; `job.retention_failed`). None fails the pass.
 *
 * The pass waits for the stall check, the upkeep, the delivery retries and the retention sweep at
 * most WAIT_BESIDE_MS each, and for none past PASS_WAIT_MS from its start; one that runs longer goes
 * on beside the next passes, which start no second one meanwhile (beside.ts). With the intake's own
 * bound (INTAKE.passBudgetMs + settleGraceMs), a pass lasts about 4 s at most under any burst.
 *
 * A pass that took submissions (or has some to retry), or whose stall check follows job runs not
 * seen finished, tells the runtime it was busy (`ctx.busy()`); an idle one lets the leader's pass interval grow to
 * LEADER_IDLE_PASS_INTERVAL_SECONDS, which is what an idle leader costs. Once nothing has shown
 * activity for a minute (no submission, start mark, open index row, delivery due or followed run:
 * QuietReads.ts), the start marks, the index refresh and the deliveries due are read at most every
 * 5 minutes; an idle pass is then its jobs-queue receive alone.
 */
import { type DurableClient } from 'durable-functions';

import { type Settings } from '../../config/settings';
import { type CoordinationContext } from '../../leader/CoordinatorRuntime';
import { type Logger } from '../../observability/log';
import { DELIVERY_SWEEP, type OutcomeDelivery } from '../delivery/OutcomeDelivery';
import { type BatchState } from '../run/batchOrchestration';
import { type CallClaims } from '../run/CallClaims';
import { durableOrchestrationClient, type OrchestrationClient } from '../run/OrchestrationClient';
import { StalledJobs } from '../run/StalledJobs';
import { type JobStore } from '../store/JobStore';
import { Beside } from './beside';
import { type IntakeReport, type JobIntake } from './JobIntake';
import { QuietReads } from './QuietReads';

export const RETENTION_SWEEP_INTERVAL_MS = 3_600_000;
/**
 * When the pass runs the index upkeep (IndexUpkeep; what one refresh or walk may do is its
 * INDEX_UPKEEP): the refresh every `refreshEveryMs`, the walk every `walkEveryMs`. So a pending or
 * running row disagrees with its job for at most `refreshEveryMs` plus one pass (while at most
 * INDEX_UPKEEP.refreshMax jobs are pending or running), and a row is missing or left over for at
 * most `walkEveryMs` plus one pass (docs/jobs.md, "The job index", states them for operators).
 */
export const UPKEEP_SCHEDULE = {
  refreshEveryMs: 10_000,
  /** The upkeep waits while passes take submissions, at most this long. */
  maxDeferMs: 60_000,
  walkEveryMs: 600_000,
} as const;
/** A pass this long logs `leader.pass_slow` with the time of each of its parts. */
export const SLOW_PASS_MS = 5_000;
/**
 * A pass waits this long for its stall check (beside the intake), then for its index upkeep, delivery
 * retries and retention sweep (side by side), each a Beside: what runs longer goes on beside the next
 * passes, which start no second one meanwhile. About the intake's budget; with PASS_WAIT_MS a pass
 * lasts about 4 s whatever the burst.
 */
export const WAIT_BESIDE_MS = 2_500;
/**
 * Nor does a pass wait for its upkeep, delivery retries or retention sweep past this long from its
 * start: after an intake that used its budget and grace (3.5 s) they get what is left. Waiting the
 * full WAIT_BESIDE_MS after the intake made passes of 5-5.2 s under a 1,000-job burst (the stall check's
 * 2.5 s beside the intake, then the upkeep's 2.5 s).
 */
export const PASS_WAIT_MS = 4_000;

export type JobCoordinationPass = (ctx: CoordinationContext) => Promise<IntakeReport | undefined>;

/**
 * The parts a pass runs, only as much of each as it uses (the app's JobComponents has them all). The
 * index upkeep and the retention sweep live in api/ (IndexUpkeep, Retention: they read jobs as the
 * status does), above this file, so they are named here by what the pass calls.
 */
export interface PassComponents {
  readonly intake: Pick<JobIntake, 'runPass' | 'submissionWaitMs' | 'startUnconfirmed' | 'startLagMs'>;
  readonly indexUpkeep: {
    /** The refresh (IndexUpkeep.repairIndex); `open`: the rows that said pending or running. */
    repairIndex(
      orchestrations: OrchestrationClient,
      options: { readonly signal?: AbortSignal; readonly queueWaitMs?: number },
    ): Promise<{ readonly open: number }>;
    /** The walk (IndexUpkeep.walkIndex). */
    walkIndex(orchestrations: OrchestrationClient, options: { readonly signal?: AbortSignal }): Promise<unknown>;
  };
  readonly retention: {
    /** The retention sweep (Retention.purgeExpired): answers the job ids it purged. */
    purgeExpired(orchestrations: OrchestrationClient, retentionDays: number): Promise<readonly string[]>;
  };
  readonly logger: Logger;
  readonly settings: { readonly jobs: Pick<Settings['jobs'], 'retentionDays'> };
  readonly calls: Pick<CallClaims, 'held'>;
  readonly store: Pick<JobStore, 'finalRecordedAt'>;
  readonly delivery?: Pick<OutcomeDelivery, 'sweep' | 'lastDue'>;
}

export function jobCoordinationPass(
  components: PassComponents,
  durableClient: () => DurableClient | undefined,
  /** The schedule's clock (tests move it); the work itself runs on real time. */
  clock: () => number = Date.now,
  /** How long a pass waits for each of its side works (Infinity: until they end, for tests that read their effects). */
  waitBesideMs: number = WAIT_BESIDE_MS,
): JobCoordinationPass {
  const stallChecks = new Beside(waitBesideMs);
  const upkeeps = new Beside(waitBesideMs);
  const deliveries = new Beside(waitBesideMs);
  const sweeps = new Beside(waitBesideMs);
  let lastSweep = 0;
  let lastDeliverySweep = -Infinity;
  // While no job comes or goes, the start marks, the index refresh and the deliveries due are read seldom.
  const quiet = new QuietReads(clock);
  const upkeep = indexUpkeep(components, clock, () => components.intake.submissionWaitMs(), quiet);
  let upkeepAt = clock();
  const stalls = new StalledJobs({
    logger: components.logger,
    callHeld: (jobId) => components.calls.held(jobId),
    startUnconfirmed: (jobId) => components.intake.startUnconfirmed(jobId),
    startLagMs: () => components.intake.startLagMs(),
    finalRecordedAt: (jobId) => components.store.finalRecordedAt(jobId),
  });
  return async (ctx) => {
    const client = durableClient();
    if (client === undefined) {
      components.logger.warn('intake.no_durable_client', {
        epoch: ctx.epoch,
        hint: 'the pass runs again on the next timer firing, which brings a client',
      });
      return undefined;
    }
    quiet.term(ctx.epoch);
    const orchestrations = durableOrchestrationClient(client);
    // Every run the intake starts is followed by the stall check from then on (it lists the instances seldom).
    const starting: OrchestrationClient = {
      ...orchestrations,
      start: async (instanceId, input) => {
        try {
          await orchestrations.start(instanceId, input);
        } finally {
          stalls.started(instanceId, input.run.deliver === true);
        }
      },
      ...(orchestrations.startBatch === undefined
        ? {}
        : {
          startBatch: async (instanceId: string, input: BatchState) => {
            try {
              await orchestrations.startBatch?.(instanceId, input);
            } finally {
              stalls.startedShared(instanceId, input.runs.map((r) => r.run.jobId));
            }
          },
        }),
    };
    const began = performance.now();
    const ms: Record<string, number> = {};
    // The stall check beside the intake, not behind it: a burst's intake takes its whole budget.
    const apart = async <T>(phase: string, work: () => Promise<T>): Promise<T> => {
      const t0 = performance.now();
      try {
        return await work();
      } finally {
        ms[phase] = Math.round(performance.now() - t0);
      }
    };
    const [report] = await Promise.all([
      apart('intake', () => components.intake.runPass(ctx, starting, { listMarks: quiet.allow('start marks') })),
      apart('stallCheck', async () => {
        if (ctx.signal.aborted) return;
        // At most `waitBesideMs`: a listing (a new leadership's first) takes seconds with many runs
        // stored, and the check goes on beside the next passes.
        await stallChecks.run(async () => {
          try {
            // Its listing timed apart (`ms.stallListing`, when it ends within this pass): the part its budget cannot cut.
            const listing = { ...orchestrations, listActive: () => apart('stallListing', () => orchestrations.listActive()) };
            await stalls.check(listing, ctx.epoch, ctx.signal);
          } catch (err) {
            components.logger.warn('job.stall_check_failed', { epoch: ctx.epoch, error: err });
          }
        });
        ctx.progress();
      }),
    ]);
    // Busy (the next pass after LEADER_PASS_INTERVAL_SECONDS): submissions were taken, wait for a
    // retry or were held back by the admission bound, or the stall check follows job runs. Otherwise the leader's passes back off to
    // LEADER_IDLE_PASS_INTERVAL_SECONDS (CoordinatorRuntime), and a submission by HTTP wakes them.
    const startsWait = report?.heldBack === true;
    const taking = report !== undefined && (report.received > 0 || report.retryLater > 0 || startsWait);
    const working = taking || stalls.running > 0;
    if (working) ctx.busy?.();
    // Activity for the quiet side reads: the same, or a start still marked (the stall check may not follow it yet).
    if (working || (report?.marks ?? 0) > 0) quiet.active();
    // Not while submissions are being taken: the upkeep's checks are status reads of several storage
    // reads each, and every job of an HTTP burst waits pending on the queue long enough to be checked
    // (1,000 POSTs: passes of 10-21 s, 312-414 s for the burst). It runs in a pass that took none, or
    // once it has waited UPKEEP_SCHEDULE.maxDeferMs, so a steady stream cannot hold it off for good.
    const busy = report !== undefined && (report.received > 0 || startsWait) && clock() - upkeepAt < UPKEEP_SCHEDULE.maxDeferMs;
    const upkeepDue = !ctx.signal.aborted && !busy;
    if (upkeepDue) upkeepAt = clock();
    // Deliveries that failed (a reply queue, a callback) are tried again on their back-off schedule.
    const delivery = components.delivery;
    const sweepTime = clock() - lastDeliverySweep >= DELIVERY_SWEEP.everyMs;
    const deliveryDue = delivery !== undefined && !ctx.signal.aborted && sweepTime && quiet.allow('deliveries due');
    if (deliveryDue) lastDeliverySweep = clock();
    const retentionDays = components.settings.jobs.retentionDays;
    const retentionDue = retentionDays > 0 && !ctx.signal.aborted && clock() - lastSweep >= RETENTION_SWEEP_INTERVAL_MS;
    if (retentionDue) lastSweep = clock();
    // The three at once, each waited for at most `waitBesideMs` and not past PASS_WAIT_MS from the
    // pass's start (the delivery sweep's listing took 2-3.5 s in a 1,000-job burst; the retention
    // sweep lists every job): the rest goes on beside.
    const untilPassWait = Math.max(0, began + PASS_WAIT_MS - performance.now());
    const waitMs = Number.isFinite(waitBesideMs) ? Math.min(waitBesideMs, untilPassWait) : waitBesideMs;
    const beside = (phase: string, due: boolean, runner: Beside, work: () => Promise<void>): Promise<void> =>
      apart(phase, async () => {
        if (!due) return;
        await runner.run(work, waitMs);
        ctx.progress();
      });
    await Promise.all([
      beside('indexUpkeep', upkeepDue, upkeeps, () => upkeep(orchestrations, ctx)),
      beside('deliverySweep', deliveryDue, deliveries, async () => {
        try {
          const tried = (await delivery?.sweep(ctx.signal)) ?? 0;
          if (tried > 0) components.logger.info('delivery.swept', { tried, epoch: ctx.epoch });
          if ((delivery?.lastDue ?? 0) > 0) quiet.active();
        } catch (err) {
          components.logger.warn('delivery.sweep_failed', { epoch: ctx.epoch, error: err });
        }
      }),
      beside('retention', retentionDue, sweeps, async () => {
        try {
          const purged = await components.retention.purgeExpired(orchestrations, retentionDays);
          if (purged.length > 0) components.logger.info('job.retention_sweep', { purged: purged.length, retentionDays, epoch: ctx.epoch });
        } catch (err) {
          components.logger.warn('job.retention_failed', { epoch: ctx.epoch, error: err });
        }
      }),
    ]);
    const totalMs = Math.round(performance.now() - began);
    // Where a long pass's time went.
    if (totalMs >= SLOW_PASS_MS) {
      components.logger.warn('leader.pass_slow', {
        totalMs,
        ms: { ...ms, startChecks: report?.checksMs, takingSubmissions: report?.takingMs },
        received: report?.received,
        checked: report?.checked,
        epoch: ctx.epoch,
      });
    }
    return report;
  };
}

/**
 * The index upkeep on its schedule: the refresh every UPKEEP_SCHEDULE.refreshEveryMs, the walk every
 * walkEveryMs (the first one a walk interval after this leader's first pass: a new leader does not
 * list every job at once). A failure waits for the next turn.
 */
export function indexUpkeep(
  components: Pick<PassComponents, 'indexUpkeep' | 'logger'>,
  clock: () => number = Date.now,
  /** How long submissions wait on the jobs queue now (JobIntake.submissionWaitMs); absent: 0. */
  queueWaitMs?: () => number,
  /** The pass's quiet side reads: the refresh runs only when they allow it, and open rows are activity. */
  quiet?: Pick<QuietReads, 'allow' | 'active'>,
): (orchestrations: OrchestrationClient, ctx: Pick<CoordinationContext, 'epoch' | 'signal'>) => Promise<void> {
  let lastRefresh = -Infinity;
  let lastWalk: number | undefined;
  return async (orchestrations, ctx) => {
    const now = clock();
    lastWalk ??= now;
    if (now - lastRefresh >= UPKEEP_SCHEDULE.refreshEveryMs && (quiet?.allow('index refresh') ?? true)) {
      lastRefresh = now;
      try {
        const queueWait = queueWaitMs?.() ?? 0;
        const refreshed = await components.indexUpkeep.repairIndex(orchestrations, { signal: ctx.signal, queueWaitMs: queueWait });
        if (refreshed.open > 0) quiet?.active();
      } catch (err) {
        components.logger.warn('index.upkeep_failed', { kind: 'refresh', epoch: ctx.epoch, error: err });
      }
    }
    if (!ctx.signal.aborted && now - lastWalk >= UPKEEP_SCHEDULE.walkEveryMs) {
      lastWalk = now;
      try {
        await components.indexUpkeep.walkIndex(orchestrations, { signal: ctx.signal });
      } catch (err) {
        components.logger.warn('index.upkeep_failed', { kind: 'walk', epoch: ctx.epoch, error: err });
      }
    }
  };
}
