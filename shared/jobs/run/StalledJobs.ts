/**
 * Wakes job runs that stopped moving: the leader's pass, every `STALL_CHECK.intervalMs`, lists the
 * Running orchestrations and raises a `resume` event on each job run whose last update is more than
 * `STALL_CHECK.stalledAfterMs` old; the run calls the activity it waits on again (jobOrchestration.ts
 * `call`).
 *
 * Why: a run moves only when a message on its control queue is processed. An instance that received
 * one (an activity's answer, an event) and died before its episode committed leaves that message
 * invisible for `controlQueueVisibilityTimeout` (1 minute in host.json, the least the extension
 * takes), and nothing else wakes the run: a job stalled a minute after a SIGKILL, past the L + 30 s
 * the recovery promises. A running job's run updates at least every few seconds (a step answers
 * within 5 s), so 15 s of silence means its message is held (or an activity is retrying), unless
 * Durable's queues run behind (a burst): then twice the start -> plan lag the intake sees
 * (`startLagMs`), when that is longer.
 *
 * A plan not begun is not lost either: a run whose first plan call waits while its start is still
 * marked unconfirmed (the plan removes the mark before anything else) is queued behind other
 * activities (a burst: 1,000 queued jobs had 343 such runs asked to resume, each a second plan call),
 * and its start is the intake's to check (`startUnconfirmed`).
 *
 * A slow call is not a lost one: a job activity that runs for more than a moment holds the job's
 * call lease (CallClaims.ts), so before asking, the check reads it and leaves a run whose call holds
 * it alone (`job.call_alive`); a lost call's lease runs out within 15 s of its instance's death.
 * A call made again after a resume says so in the run's custom status (`repeat`), and each repeat is
 * given twice as long as the call before it before the run counts as stalled (`stalledAfterMs`, 2x,
 * 4x, up to `maxBackoffMs`): a call that keeps not answering (its message queued behind a busy
 * worker) is not called again every 15 s. The rule lives in the run's status, so a new leader keeps
 * it. A resume raised and not yet taken (the run still shows the same call) is not raised again
 * within the same wait.
 *
 * Guarantees: a resume is harmless whenever it comes: every job activity is safe to run twice
 * (`ChunkDispatcher`, `JobActivities`: a spare step sends a window's chunks twice, workers keep one
 * result each), the repeated call waits for any live call of the job before it runs (CallClaims), and
 * the answer of the call that was repeated is ignored when it lands later. Costs one listing of
 * Running instances per check (the leader only), and one read of the lease per run found idle.
 * Bounded per pass: the silent runs are examined the longest silent first, `STALL_CHECK.concurrency`
 * at a time, and none is begun past `STALL_CHECK.budgetMs`; those left are the next pass's.
 * Not covered here: a run whose very first message (its start) is held has no status to resume; it
 * stays Pending, and the intake starts the job again once it is stuck (`INTAKE.stuckPendingSeconds`).
 */
import { type Logger } from '../../observability/log';
import { type JobCustomStatus } from '../api/JobSummary';
import { parseInstanceId } from '../jobIds';
import { mapWhile } from '../pool';
import { type ResumeRequest } from './jobOrchestration';
import { type OrchestrationClient } from './OrchestrationClient';

export const STALL_CHECK = {
  /** A Running job run not updated for this long is asked to resume. */
  stalledAfterMs: 15_000,
  /** How often the leader's pass looks. */
  intervalMs: 5_000,
  /** The longest wait before the same call is asked again (the back-off doubles up to this). */
  maxBackoffMs: 240_000,
  /** Silent runs examined at once (each: a read of the job's call lease, then the raise). */
  concurrency: 8,
  /**
   * A check begins no further run once it has run this long (its listing included; its first
   * `concurrency` runs always begin): the runs it did not reach are examined by the next pass's check,
   * whatever the interval.
   * One by one, a burst's silent runs held a pass for up to 18 s (1,000 jobs by HTTP, jobs-scale).
   */
  budgetMs: 2_000,
  /**
   * The start -> plan lag raises the silence a run is allowed (`startLagMs`) at most to this: past the
   * control queue's visibility (host.json, 1 minute) a held message comes back by itself, and a
   * resume would only add a call.
   */
  maxLagBoundMs: 60_000,
} as const;

export interface StallCheckDeps {
  readonly logger: Logger;
  /** Whether a live call of the job holds its call lease (CallClaims.held); absent: never. */
  readonly callHeld?: (jobId: string) => Promise<boolean>;
  /**
   * Whether the job's start is still marked unconfirmed (JobIntake.startUnconfirmed): its plan has not
   * begun (the plan removes the mark first), so its run waits for an activity slot, not for an answer
   * a dead instance holds; the intake's start checks own it. Absent: never.
   */
  readonly startUnconfirmed?: (jobId: string) => boolean;
  /**
   * How far behind Durable's queues run (JobIntake.startLagMs: the start -> plan lag of the starts
   * of the last 30 s). A run counts as stalled only once silent past twice that, when longer than
   * `stalledAfterMs`: under a burst an activity's answer waits its turn in a control queue as long as
   * a start does, and a resume then is a second call of an activity that already answered (1,000 jobs
   * by HTTP: 256 runs asked to resume, silent 15-82 s). The same rule as a stuck Pending start's
   * (INTAKE.stuckPendingSeconds), at most `STALL_CHECK.maxLagBoundMs`. Absent: no lag.
   */
  readonly startLagMs?: () => number;
  readonly now?: () => number;
  readonly stalledAfterMs?: number;
  readonly intervalMs?: number;
  /** STALL_CHECK.budgetMs unless a test says otherwise. */
  readonly budgetMs?: number;
}

/** A job run the listing showed silent past its wait, and not left alone for a known reason. */
interface SilentRun {
  readonly instanceId: string;
  readonly jobId: string;
  readonly idleMs: number;
  /** `<generation>/<wait>`: the call the run waits on. */
  readonly call: string;
  readonly phase: string;
  readonly generation: number;
  readonly wait: number;
}

export interface ResumeRequested extends ResumeRequest {
  readonly instanceId: string;
  readonly jobId: string;
  readonly idleMs: number;
  readonly phase: string;
}

export class StalledJobs {
  readonly #deps: StallCheckDeps;
  #lastCheck = Number.NEGATIVE_INFINITY;
  /** The last resume raised per run: which call, when, and how many times that call was asked. */
  readonly #raised = new Map<string, { readonly call: string; readonly at: number }>();
  /**
   * When each run was last found alive (its call holds the lease): not read again within the
   * interval, so a check carried on at the next pass reaches the runs it did not, instead of the
   * longest silent ones again.
   */
  readonly #aliveAt = new Map<string, number>();

  #running = 0;
  /** The last check's listing was empty. */
  #noneRunning = false;
  /** The last check stopped at its budget with silent runs not examined: the next one comes at once. */
  #carried = false;

  constructor(deps: StallCheckDeps) {
    this.#deps = deps;
  }

  /** Job runs the last check found Running (the leader keeps passing at its busy interval while there are some). */
  get running(): number {
    return this.#running;
  }

  /**
   * Checks when the interval has passed since the last check, or, after a check that found no run
   * Running, once `stalledAfterMs` has: a run that starts later cannot be stalled sooner, so an idle
   * leader lists the runs half as often, and a stall is still asked about within one pass of
   * its `stalledAfterMs`. Answers the resumes it raised.
   */
  async check(orchestrations: OrchestrationClient, epoch: number, signal?: AbortSignal): Promise<ResumeRequested[]> {
    const now = this.#now();
    const behind = Math.min(2 * (this.#deps.startLagMs?.() ?? 0), STALL_CHECK.maxLagBoundMs);
    const stalledAfter = Math.max(this.#deps.stalledAfterMs ?? STALL_CHECK.stalledAfterMs, behind);
    const interval = this.#deps.intervalMs ?? STALL_CHECK.intervalMs;
    if (!this.#carried && now - this.#lastCheck < (this.#noneRunning ? Math.max(interval, stalledAfter) : interval)) return [];
    this.#lastCheck = now;
    this.#carried = false;
    const running = await orchestrations.listRunning();
    this.#noneRunning = running.length === 0;
    const seen = new Set<string>();
    const silent: SilentRun[] = [];
    for (const instance of running) {
      const job = parseInstanceId(instance.instanceId);
      const status = instance.customStatus as Partial<JobCustomStatus> | null | undefined;
      if (job === undefined || typeof status?.generation !== 'number' || typeof status.wait !== 'number') continue;
      seen.add(instance.instanceId);
      const idleMs = this.#now() - instance.lastUpdatedTime.getTime();
      // A repeat of a call (after earlier resumes) is given twice as long as the call before it.
      const repeat = typeof status.repeat === 'number' ? status.repeat : 0;
      if (status.phase === 'done' || idleMs < backoffMs(stalledAfter, repeat + 1)) continue;
      const call = `${status.generation}/${status.wait}`;
      const last = this.#raised.get(instance.instanceId);
      // Asked already and the run has not taken it yet (it still shows the same call): not asked again soon.
      if (last?.call === call && this.#now() - last.at < backoffMs(stalledAfter, repeat + 1)) continue;
      const aliveAt = this.#aliveAt.get(instance.instanceId);
      if (aliveAt !== undefined && this.#now() - aliveAt < interval) continue;
      // A first plan call not begun yet: queued behind other activities (a burst), not lost.
      const firstPlanCall = status.phase === 'planning' && status.generation === 1 && status.wait === 1;
      if (firstPlanCall && this.#deps.startUnconfirmed?.(job.jobId) === true) continue;
      const { generation, wait } = status;
      silent.push({ instanceId: instance.instanceId, jobId: job.jobId, idleMs, call, phase: status.phase ?? 'unknown', generation, wait });
    }
    for (const id of this.#raised.keys()) if (!seen.has(id)) this.#raised.delete(id);
    for (const id of this.#aliveAt.keys()) if (!seen.has(id)) this.#aliveAt.delete(id);
    this.#running = seen.size;

    // The longest silent first, a few at a time, within the budget: a burst's silent runs do not hold the pass.
    silent.sort((a, b) => b.idleMs - a.idleMs);
    const outcomes = new Map<SilentRun, ResumeRequested>();
    const budget = this.#deps.budgetMs ?? STALL_CHECK.budgetMs;
    // The first round always begins (a slow listing must not starve the checks), the rest within the budget.
    let begun = 0;
    const canStart = (): boolean => signal?.aborted !== true && (begun++ < STALL_CHECK.concurrency || this.#now() - now < budget);
    const examined = await mapWhile(silent, STALL_CHECK.concurrency, canStart, async (run) => {
      const resumed = await this.#ask(orchestrations, run, epoch, stalledAfter);
      if (resumed !== undefined) outcomes.set(run, resumed);
    });
    this.#carried = examined < silent.length && signal?.aborted !== true;
    return silent.flatMap((run) => outcomes.get(run) ?? []);
  }

  /** Asks one silent run to resume its current call, unless a live call holds the job's lease. */
  async #ask(
    orchestrations: OrchestrationClient,
    run: SilentRun,
    epoch: number,
    stalledAfterMs: number,
  ): Promise<ResumeRequested | undefined> {
    if (await this.#callAlive(run.jobId, run.instanceId, epoch, run.idleMs)) {
      this.#aliveAt.set(run.instanceId, this.#now());
      return undefined;
    }
    this.#aliveAt.delete(run.instanceId);
    const request: ResumeRequest = { generation: run.generation, wait: run.wait };
    try {
      await orchestrations.raiseResume(run.instanceId, request);
    } catch (err) {
      // Finished since the listing (Durable answers 410), or Durable is unreachable: the next check sees.
      this.#deps.logger.warn('job.stall_check_failed', { instanceId: run.instanceId, epoch, error: err });
      return undefined;
    }
    this.#raised.set(run.instanceId, { call: run.call, at: this.#now() });
    const resumed: ResumeRequested = { ...request, instanceId: run.instanceId, jobId: run.jobId, idleMs: run.idleMs, phase: run.phase };
    const hint = 'the run had not moved; it calls its current activity again';
    this.#deps.logger.warn('job.resume_requested', { ...resumed, stalledAfterMs, epoch, hint });
    return resumed;
  }

  /** A live call holds the job's call lease: slow, not lost (a failed read counts as not known alive). */
  async #callAlive(jobId: string, instanceId: string, epoch: number, idleMs: number): Promise<boolean> {
    if (this.#deps.callHeld === undefined) return false;
    try {
      if (!(await this.#deps.callHeld(jobId))) return false;
    } catch (err) {
      this.#deps.logger.warn('job.stall_check_failed', { instanceId, epoch, error: err });
      return false;
    }
    this.#deps.logger.debug('job.call_alive', { jobId, instanceId, idleMs, epoch });
    return true;
  }

  #now(): number {
    return (this.#deps.now ?? Date.now)();
  }
}

/** How long the `n`-th call of the same activity (1: the first) may be silent before it counts as stalled. */
export function backoffMs(stalledAfterMs: number, n: number): number {
  return Math.min(STALL_CHECK.maxBackoffMs, stalledAfterMs * 2 ** Math.max(0, n - 1));
}
