/**
 * What the intake's parts share: the pass they run under (IntakeContext), what the intake is built
 * from (IntakeDeps), what became of a submission (IntakeOutcome), and the tuning of the pump, the
 * start checks and the rejections (INTAKE), in one place so each bound is read from one constant.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 3.
 */
import { type Logger } from '../../observability/log';
import { type WorkTypeRegistry } from '../../worktypes/WorkTypeRegistry';
import { type DeliveryTargets } from '../delivery/DeliveryTargets';
import { type OutcomeDelivery } from '../delivery/OutcomeDelivery';
import { type InputContainers } from '../input/InputContainers';
import { type JobRun } from '../JobRun';
import { type StagedCounts } from '../run/JobActivities';
import { type JobStore } from '../store/JobStore';
import { type SubmissionQueue } from '../SubmissionQueue';
import { type Now } from '../wallClock';

export interface IntakeContext {
  readonly epoch: number;
  readonly holder: string;
  readonly signal: AbortSignal;
  progress(): void;
  /** The pass stopped at its budget with submissions waiting: the next one should come at once. */
  again?(): void;
}

export interface IntakeDeps {
  readonly jobsQueue: SubmissionQueue;
  readonly poisonQueue: SubmissionQueue;
  readonly store: JobStore;
  readonly registry: WorkTypeRegistry;
  readonly inputContainers: InputContainers;
  readonly logger: Logger;
  readonly now?: Now;
  /** The leader's own first window for small inputs (see Submissions.ts); absent: the plan does it all. */
  readonly firstWindow?: FirstWindow;
  /** Reply targets a submission may name, and the delivery of a rejection's outcome (absent: refused, nothing sent). */
  readonly delivery?: { readonly targets: DeliveryTargets; readonly outcomes: OutcomeDelivery };
}

/** JobActivities' `prestage` and `sendFirstWindow`, as the intake uses them. */
export interface FirstWindow {
  /** `mayStage` false: only a job that needs nothing staged (`StagedCounts.unstaged`) is prepared; any other answers undefined. */
  prestage(run: JobRun, signal?: AbortSignal, mayStage?: boolean): Promise<StagedCounts | undefined>;
  send(run: JobRun, staged: StagedCounts, signal?: AbortSignal): Promise<number>;
}

export type IntakeOutcome = 'started' | 'already_started' | 'rejected' | 'retry_later';

export const INTAKE = {
  /**
   * Submissions received at once: the most one receive returns, so a burst waiting on the jobs queue
   * is taken off it in the fewest requests.
   */
  batchSize: 32,
  maxBatchesPerPass: 8,
  /**
   * Receives out at once behind a full batch (a burst parked on the jobs queue; otherwise one). One
   * receive at a time took a 1,000-message burst off the queue at about 35 a second, under a second
   * for each receive of 32 while storage is saturated; the acceptance of each (two writes and a read,
   * then the delete) is a quarter of a second.
   */
  receivesInFlight: 3,
  /**
   * Small jobs (inline items) started at the same moment of a burst share one Durable instance, this
   * many at most (run/batchOrchestration.ts, StartBatches.ts): Durable's cost of an instance, about
   * half of a small job's storage requests, is paid once a shared run.
   */
  jobsPerSharedRun: 10,
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
   * passes of up to 51 s spent on resumes, 59 transactions per job). Past the bound the rest of a
   * burst waits on the jobs queue, where a submission costs nothing on Azure while it waits (JobIntake
   * receives no batch it could not begin). A mark older than `underWayFreshMs` does not count: stuck
   * starts cannot stop the intake. A plan of the leader's process says when it removed its start's
   * mark (StartRepair.confirmedHere), so such a start leaves the count at once, and a pass waiting for
   * room goes on.
   */
  maxStartsUnderWay: 192,
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
   * pass, which follows at once and takes them first (JobIntake's `#waiting`), and the rest of a burst waits on
   * the queue. So a pass lasts this plus the starts already under way, at most `settleGraceMs` (a start
   * is about a second under a burst's load), and the stall check and the index upkeep never wait
   * behind a whole batch.
   */
  passBudgetMs: 2_500,
  /**
   * Past its budget a pass waits this much longer at most for the starts under way (a start takes 1-6 s
   * under a burst's load); slower ones run on beside the next pass and count in the pass they end in.
   * So the intake's part of a pass lasts at most about `passBudgetMs` plus this, whatever the burst
   * (it was 6.7 s at most with 1,000 queued jobs while the pass waited for every start it began).
   */
  settleGraceMs: 1_000,
  /**
   * Submissions kept from a pass are taken by the next only while their receipt is this fresh: they
   * stay invisible for `visibilityTimeoutSeconds` after the receive, and a start must not outlive it
   * (another leader's pass would receive the message again). Older ones are left to reappear.
   */
  carriedForMs: 40_000,
  /**
   * How long the wait the intake last saw on the jobs queue (JobIntake.submissionWaitMs) stands for
   * the queue's: a minute after the last batch, the queue is taken to wait no longer.
   */
  queueWaitFreshMs: 60_000,
  /**
   * The stall check follows the start -> plan lag of this last stretch only (JobIntake.startLagMs):
   * once a burst is over its lag stops raising how long a run may be silent within this long.
   */
  recentLagMs: 30_000,
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
   * Inline items whose chunks fit the first window are not staged (`StagedCounts.unstaged`): they
   * are prepared at intake whatever the budget, and do not count against it.
   */
  firstWindowBudgetMs: 250,
} as const;

export function isAbort(err: unknown): boolean {
  return err instanceof Error && err.name === 'AbortError';
}
