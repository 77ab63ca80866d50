/**
 * Wakes job runs that stopped moving: the leader's pass, every `STALL_CHECK.intervalMs`, looks at the
 * job runs it follows and raises a `resume` event on each whose last update is more than
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
 * Which runs it follows: every run not finished that its leadership's first check listed (Pending,
 * Running, ContinuedAsNew), and every run the leader starts after that (`started`: only the leader's
 * intake starts runs). A followed run is read (that one instance's status) only once it could be
 * silent past `stalledAfterMs`: not before its last update seen (or its start, or the last resume
 * raised) plus that, and not twice within the interval; a read that finds it finished (or gone), or
 * Pending past `pendingFollowMs` (the intake's to start again), stops following it; so does a run
 * that delivers nothing once the leader's own process recorded its job's outcome (`finalRecordedAt`:
 * on one instance, every job of a burst), without a read. So a burst's runs are read at most about
 * once each, after they end, and between listings an idle leader's check makes no request.
 * Listing every instance instead, each check, cost a scan of the task hub that grows with the jobs
 * stored (finished ones too): 6.8 s of Azurite's CPU for one listing with 10,000 instances stored,
 * and an idle leader listed every 15 s. The listing is made again every
 * `STALL_CHECK.listEveryMs`, and never for more than 1/`listShare` of the time: a backstop for a run
 * no leader it knows of started (one a deposed leader started after this one listed is fenced at its
 * plan and stands down). A listing only adds runs; a run it does not show is dropped by its read.
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
 * the answer of the call that was repeated is ignored when it lands later. A run the leader follows
 * is asked within one check of its wait (while the check keeps within its budget, and its status
 * reads answer); one it does not follow (started by no leader it knows of) within the next listing.
 * Costs (the leader only): a listing of the unfinished instances per leadership and per
 * `listEveryMs`, one status read per run found due (with its input: the durable-functions client
 * cannot leave it out), and one read of the lease per run found idle. Bounded per pass: the due runs are
 * examined the longest silent first, `STALL_CHECK.concurrency` at a time, and none is begun past
 * `STALL_CHECK.budgetMs`; those left are the next pass's.
 * Not covered here: a run whose very first message (its start) is held has no status to resume; it
 * stays Pending, and the intake starts the job again once it is stuck (`INTAKE.stuckPendingSeconds`).
 */
import { type Logger } from '../../observability/log';
import { instanceIdFor, isBatchInstanceId, parseInstanceId } from '../jobIds';
import { type JobCustomStatus } from '../JobSummary';
import { mapWhile } from '../pool';
import { type BatchCustomStatus } from './batchOrchestration';
import { type ResumeRequest } from './jobOrchestration';
import { isFinished, jobsShownBy, type OrchestrationClient, type OrchestrationSnapshot, runOf } from './OrchestrationClient';

export const STALL_CHECK = {
  /** A Running job run not updated for this long is asked to resume. */
  stalledAfterMs: 15_000,
  /** How often the leader's pass looks. */
  intervalMs: 5_000,
  /** The longest wait before the same call is asked again (the back-off doubles up to this). */
  maxBackoffMs: 240_000,
  /** Due runs examined at once (each: a read of its status, of the job's call lease, then the raise). */
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
  /** A leader lists the unfinished instances again after this long (its first check always lists). */
  listEveryMs: 300_000,
  /** ...and not sooner than this many times the last listing's duration (a listing takes at most 1/20 of the time). */
  listShare: 20,
  /**
   * A run still Pending this long after its creation is no longer followed: it has no call to
   * resume, and a start that never began is the intake's (it starts the job again under a new
   * instance id once the start is stuck, INTAKE.stuckPendingSeconds, twice the start lag at most 4
   * minutes). Followed, an orphan would be read every interval and keep the leader busy for good.
   */
  pendingFollowMs: 300_000,
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
  /**
   * When this process saw the job's final summary recorded (JobStore.finalRecordedAt, on the same
   * clock as `now`), undefined when it has not. A run that delivers nothing is not followed past
   * that: its outcome is recorded and shows (JobStatusReader.settled), and all that is left of the
   * run is Durable marking it finished, which a resume would not hasten. Absent: never.
   */
  readonly finalRecordedAt?: (jobId: string) => number | undefined;
  readonly now?: () => number;
  readonly stalledAfterMs?: number;
  readonly intervalMs?: number;
  /** STALL_CHECK.budgetMs unless a test says otherwise. */
  readonly budgetMs?: number;
}

/** A job run the check follows: what it knows of it, and when it is worth a look. */
interface Followed {
  readonly jobId: string;
  /** The jobs whose calls the run makes: its own, or a shared run's (each plan takes its own job's call lease). */
  readonly members: readonly string[];
  /** When the check began to follow it (a final recorded before then is an earlier job's under the same id). */
  readonly since: number;
  /** Whether its run delivers its outcome after recording it (a step still to come); undefined: not known. */
  readonly delivers?: boolean;
  /**
   * The run cannot have been silent since before this: its last update seen, or its start, or the
   * last resume raised on it (a run that takes one updates; one that does not is not asked again
   * within the same wait). Only ever moves forward.
   */
  quietSince: number;
  /** How many times its current call was made again (the status's `repeat`, 0 when none). */
  repeat: number;
  /** Not looked at again before this: examined (read, or shown by a listing) within the interval. */
  nextLook: number;
}

/** A job run found silent past its wait, and not left alone for a known reason. */
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
  /** The last resume raised per run: which call, and when. */
  readonly #raised = new Map<string, { readonly call: string; readonly at: number }>();
  /** The runs followed, by instance id. */
  readonly #followed = new Map<string, Followed>();
  /** The last listing: under which epoch, when it began, how long it took. */
  #listing: { readonly epoch: number; readonly at: number; readonly ms: number } | undefined;
  /** The last check stopped at its budget with due runs not examined: the next one comes at once. */
  #carried = false;

  constructor(deps: StallCheckDeps) {
    this.#deps = deps;
  }

  /**
   * Job runs followed: not finished as far as the check knows (the leader keeps passing at its busy
   * interval while there are some). A run that ended is counted until its next read, `stalledAfterMs`
   * (up to twice the start lag) after its last update seen, later while its reads fail.
   */
  get running(): number {
    return this.#followed.size;
  }

  /**
   * The leader's intake made (or tried) this run's start: it is followed from now (a run followed
   * already, whose start was made again, keeps what the check knows of it). `delivers`: its run
   * input's `deliver` (see `finalRecordedAt`).
   */
  started(instanceId: string, delivers?: boolean): void {
    const job = parseInstanceId(instanceId);
    if (job === undefined || this.#followed.has(instanceId)) return;
    this.#follow(instanceId, job.jobId, delivers);
  }

  /**
   * The leader's intake made (or tried) a shared run's start (batchOrchestration.ts): followed as a job
   * run is while its plans are out (they run side by side in one call, each under its own job's call
   * lease: the call is alive while any of them holds its lease, and not begun while every one of its
   * starts is still marked). Once its plans answered, the runs of its jobs that went on alone are
   * followed instead (its status names them), and it is no longer read: it only waits on those runs
   * and its jobs' last calls, and is never asked to resume.
   */
  startedShared(instanceId: string, jobIds: readonly string[]): void {
    const first = jobIds[0];
    if (first === undefined || !isBatchInstanceId(instanceId) || this.#followed.has(instanceId)) return;
    this.#follow(instanceId, first, undefined, jobIds);
  }

  #follow(instanceId: string, jobId: string, delivers: boolean | undefined, members: readonly string[] = [jobId]): void {
    const now = this.#now();
    const known = delivers === undefined ? {} : { delivers };
    this.#followed.set(instanceId, { jobId, members, since: now, ...known, quietSince: now, repeat: 0, nextLook: 0 });
  }

  /**
   * A shared run whose plans answered (its status past `planning`): the runs of its jobs that went on
   * alone are followed from now, and it is not (true).
   */
  #pastSharedPlans(instance: OrchestrationSnapshot): boolean {
    if (!isBatchInstanceId(instance.instanceId)) return false;
    const status = instance.customStatus as Pick<BatchCustomStatus, 'phase' | 'alone'> | null | undefined;
    if (status?.phase === undefined || status.phase === 'planning') return false;
    for (const jobId of status.alone ?? []) this.started(instanceIdFor(jobId));
    this.#followed.delete(instance.instanceId);
    return true;
  }

  /**
   * Checks when the interval has passed since the last check (at once when the last stopped at its
   * budget): lists the unfinished instances when this leadership has not yet (or the listing is due
   * again), then examines each followed run that could be silent past its wait by now. Answers the
   * resumes it raised.
   */
  async check(orchestrations: OrchestrationClient, epoch: number, signal?: AbortSignal): Promise<ResumeRequested[]> {
    const now = this.#now();
    const behind = Math.min(2 * (this.#deps.startLagMs?.() ?? 0), STALL_CHECK.maxLagBoundMs);
    const stalledAfter = Math.max(this.#deps.stalledAfterMs ?? STALL_CHECK.stalledAfterMs, behind);
    const interval = this.#deps.intervalMs ?? STALL_CHECK.intervalMs;
    if (!this.#carried && now - this.#lastCheck < interval) return [];
    this.#lastCheck = now;
    this.#carried = false;
    const listed = this.#listingDue(epoch, now) ? await this.#list(orchestrations, epoch) : undefined;

    // A followed run is due once it could be silent past `stalledAfter`; the listing's show their
    // status, the others are read. (Not past its call's back-off: the repeat count last seen may be a
    // call the run has since left; the fresh status decides, `#silent`.)
    const dueAt = this.#now();
    const due: Array<{ readonly instanceId: string; readonly followed: Followed; readonly quietMs: number }> = [];
    for (const [instanceId, followed] of this.#followed) {
      if (this.#recordedHere(followed)) {
        this.#followed.delete(instanceId);
        continue;
      }
      const quietMs = dueAt - followed.quietSince;
      if (followed.nextLook > dueAt || quietMs < stalledAfter) continue;
      due.push({ instanceId, followed, quietMs });
    }
    // The longest silent first, a few at a time, within the budget: a burst's silent runs do not hold the pass.
    due.sort((a, b) => b.quietMs - a.quietMs);
    const outcomes = new Map<string, ResumeRequested>();
    const budget = this.#deps.budgetMs ?? STALL_CHECK.budgetMs;
    // The first round always begins (a slow listing must not starve the checks), the rest within the budget.
    let begun = 0;
    const canStart = (): boolean => signal?.aborted !== true && (begun++ < STALL_CHECK.concurrency || this.#now() - now < budget);
    const examined = await mapWhile(due, STALL_CHECK.concurrency, canStart, async ({ instanceId, followed }) => {
      const instance = listed?.get(instanceId) ?? (await this.#read(orchestrations, instanceId, followed, epoch));
      if (instance === undefined || this.#pastSharedPlans(instance)) return;
      followed.nextLook = this.#now() + interval;
      const silent = this.#silent(instance, followed, stalledAfter);
      if (silent === undefined) return;
      const resumed = await this.#ask(orchestrations, silent, followed, epoch, stalledAfter);
      if (resumed !== undefined) outcomes.set(instanceId, resumed);
    });
    for (const id of this.#raised.keys()) if (!this.#followed.has(id)) this.#raised.delete(id);
    this.#carried = examined < due.length && signal?.aborted !== true;
    return due.flatMap(({ instanceId }) => outcomes.get(instanceId) ?? []);
  }

  /** A new leadership lists at once; otherwise every `listEveryMs`, and not for more than 1/`listShare` of the time. */
  #listingDue(epoch: number, now: number): boolean {
    const last = this.#listing;
    if (last === undefined || last.epoch !== epoch) return true;
    return now - last.at >= Math.max(STALL_CHECK.listEveryMs, STALL_CHECK.listShare * last.ms);
  }

  /**
   * Lists the unfinished instances and follows every job run among them. A followed run it does not
   * show stays followed until a read says it finished (a start that landed after the listing passed
   * its name shows nowhere else). Answers the listed job runs by instance id; undefined when the
   * listing failed (logged; the next check lists again, and the followed runs are looked at meanwhile).
   */
  async #list(orchestrations: OrchestrationClient, epoch: number): Promise<Map<string, OrchestrationSnapshot> | undefined> {
    const began = this.#now();
    let instances: OrchestrationSnapshot[];
    try {
      instances = await orchestrations.listActive();
    } catch (err) {
      this.#deps.logger.warn('job.stall_check_failed', { epoch, listing: true, error: err });
      return undefined;
    }
    const shown = new Map<string, OrchestrationSnapshot>();
    for (const instance of instances) {
      // A job run, or a shared run while its plans are out (`startedShared`).
      const members = parseInstanceId(instance.instanceId) === undefined ? jobsShownBy(instance).map((j) => j.jobId) : undefined;
      const job = parseInstanceId(instance.instanceId)?.jobId ?? members?.[0];
      if (job === undefined || this.#pastSharedPlans(instance)) continue;
      shown.set(instance.instanceId, instance);
      const followed = this.#followed.get(instance.instanceId);
      if (followed === undefined) {
        const quietSince = instance.lastUpdatedTime.getTime();
        // A shared run's delivery is not known from its input here: kept (undefined).
        const delivers = isBatchInstanceId(instance.instanceId) ? undefined : runOf(instance)?.deliver === true;
        const known = delivers === undefined ? {} : { delivers };
        const entry: Followed = { jobId: job, members: members ?? [job], since: began, ...known, quietSince, repeat: 0, nextLook: 0 };
        this.#followed.set(instance.instanceId, entry);
      }
      this.#learn(this.#followed.get(instance.instanceId), instance);
    }
    this.#listing = { epoch, at: began, ms: this.#now() - began };
    return shown;
  }

  /** The run's status alone; undefined when it finished or is gone (no longer followed) or the read failed (looked at next check). */
  async #read(
    orchestrations: OrchestrationClient,
    instanceId: string,
    followed: Followed,
    epoch: number,
  ): Promise<OrchestrationSnapshot | undefined> {
    let instance: OrchestrationSnapshot | undefined;
    try {
      instance = await orchestrations.getStatus(instanceId);
    } catch (err) {
      this.#deps.logger.warn('job.stall_check_failed', { instanceId, epoch, error: err });
      return undefined;
    }
    // Ended, gone, or a start that never began (the intake's): no longer followed.
    const abandoned = instance?.runtimeStatus === 'Pending' && this.#now() - instance.createdTime.getTime() >= STALL_CHECK.pendingFollowMs;
    if (instance === undefined || isFinished(instance.runtimeStatus) || abandoned) {
      if (this.#followed.get(instanceId) === followed) this.#followed.delete(instanceId);
      return undefined;
    }
    this.#learn(followed, instance);
    return instance;
  }

  /** A run that delivers nothing whose job's outcome this process saw recorded since it began to follow it. */
  #recordedHere(followed: Followed): boolean {
    if (followed.delivers !== false) return false;
    const at = this.#deps.finalRecordedAt?.(followed.jobId);
    return at !== undefined && at >= followed.since;
  }

  /** What a listing or a read shows of a followed run: its last update and its call's repeat count. */
  #learn(followed: Followed | undefined, instance: OrchestrationSnapshot): void {
    if (followed === undefined) return;
    const status = instance.customStatus as Partial<JobCustomStatus> | null | undefined;
    followed.quietSince = Math.max(followed.quietSince, instance.lastUpdatedTime.getTime());
    followed.repeat = typeof status?.repeat === 'number' ? status.repeat : 0;
  }

  /** The run as a silent one to ask, or undefined when it moved within its wait or is left alone for a known reason. */
  #silent(instance: OrchestrationSnapshot, followed: Followed, stalledAfter: number): SilentRun | undefined {
    const status = instance.customStatus as Partial<JobCustomStatus> | null | undefined;
    // Pending (its start message not taken yet: the intake's), or a run of an older version without a call count.
    if (typeof status?.generation !== 'number' || typeof status.wait !== 'number' || status.phase === 'done') return undefined;
    const idleMs = this.#now() - instance.lastUpdatedTime.getTime();
    // A repeat of a call (after earlier resumes) is given twice as long as the call before it.
    const wait = backoffMs(stalledAfter, followed.repeat + 1);
    if (idleMs < wait) return undefined;
    const call = `${status.generation}/${status.wait}`;
    const last = this.#raised.get(instance.instanceId);
    // Asked already and the run has not taken it yet (it still shows the same call): not asked again soon.
    if (last?.call === call && this.#now() - last.at < wait) return undefined;
    // A first plan call not begun yet (every start it plans still marked): queued behind other activities (a burst), not lost.
    const firstPlanCall = status.phase === 'planning' && status.generation === 1 && status.wait === 1;
    const unconfirmed = this.#deps.startUnconfirmed;
    if (firstPlanCall && unconfirmed !== undefined && followed.members.every((jobId) => unconfirmed(jobId))) return undefined;
    const { generation } = status;
    const phase = status.phase ?? 'unknown';
    return { instanceId: instance.instanceId, jobId: followed.jobId, idleMs, call, phase, generation, wait: status.wait };
  }

  /** Asks one silent run to resume its current call, unless a live call holds the job's lease. */
  async #ask(
    orchestrations: OrchestrationClient,
    run: SilentRun,
    followed: Followed,
    epoch: number,
    stalledAfterMs: number,
  ): Promise<ResumeRequested | undefined> {
    // Slow, not lost: looked at again after the interval (`nextLook`, set when it was examined).
    if (await this.#callAlive(followed.members, run.instanceId, epoch, run.idleMs)) return undefined;
    const request: ResumeRequest = { generation: run.generation, wait: run.wait };
    try {
      await orchestrations.raiseResume(run.instanceId, request);
    } catch (err) {
      // Finished since the listing (Durable answers 410), or Durable is unreachable: the next check sees.
      this.#deps.logger.warn('job.stall_check_failed', { instanceId: run.instanceId, epoch, error: err });
      return undefined;
    }
    const at = this.#now();
    this.#raised.set(run.instanceId, { call: run.call, at });
    // Taken, the run updates; not taken, it is not asked again within the same wait: either way, quiet from now.
    followed.quietSince = Math.max(followed.quietSince, at);
    const resumed: ResumeRequested = { ...request, instanceId: run.instanceId, jobId: run.jobId, idleMs: run.idleMs, phase: run.phase };
    const hint = 'the run had not moved; it calls its current activity again';
    this.#deps.logger.warn('job.resume_requested', { ...resumed, stalledAfterMs, epoch, hint });
    return resumed;
  }

  /**
   * A live call holds the call lease of one of the run's jobs (a shared run's plans: any of them):
   * slow, not lost. A failed read counts as not known alive.
   */
  async #callAlive(members: readonly string[], instanceId: string, epoch: number, idleMs: number): Promise<boolean> {
    const callHeld = this.#deps.callHeld;
    if (callHeld === undefined) return false;
    let held: readonly boolean[];
    try {
      held = await Promise.all(members.map((jobId) => callHeld(jobId)));
    } catch (err) {
      this.#deps.logger.warn('job.stall_check_failed', { instanceId, epoch, error: err });
      return false;
    }
    const jobId = members[held.indexOf(true)];
    if (jobId === undefined) return false;
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
