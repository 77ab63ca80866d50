/**
 * A clock-driven cluster for the dispatcher's tests: the real `ChunkDispatcher` makes each job's
 * passes at the cadence of its long-polling step (STEP_WAIT), and simulated workers take messages from the in-memory queue as the
 * Functions host does (a batch at a time, invisible while held, 10 minutes like the host's receive),
 * claim a chunk after 2 s of work and beat every 5 s (as WorkItemProcessor), and write each chunk's
 * result (the sum of its items) once. A worker can be
 * killed: what it held stays invisible until the queue's visibility ends, as on Azure.
 */
import { ChunkDispatcher, CLAIM_LIVENESS, type DispatchJob, nextPollMs, STEP_WAIT } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { type DispatchLedger, type DispatchPolicy, emptyLedger, isLedgerDone } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { createLogger } from '../../../../shared/observability/log';
import { MemoryPipeline, type QueuedMessage } from './MemoryPipeline';

export const HOST_RECEIVE_VISIBILITY_MS = 10 * 60_000;
/** A step's answer reaching the orchestration and the next step starting. */
const ROUND_TRIP_MS = 100;
const TICK_MS = 50;

export interface SimJob {
  readonly job: DispatchJob;
  readonly chunkCount: number;
  readonly itemCount: number;
  ledger: DispatchLedger;
  /** The quiet back-off, and when the last pass ran. */
  pollMs: number;
  lastPassAt: number;
  nextStepAt: number;
  readonly submittedAt: number;
  doneAt?: number;
  cancelled?: boolean;
  /** The most chunks of this job seen in flight (queued or held) at once. */
  maxInFlight: number;
}

interface Held {
  readonly m: QueuedMessage;
  finishAt?: number;
  nextBeatAt?: number;
  /** When the worker began the chunk. */
  startedAt?: string;
  /** Set once its claim is written (claimAfterSeconds after it began). */
  claimedAt?: string;
}

export class SimWorker {
  alive = true;
  readonly held: Held[] = [];
  constructor(
    readonly id: string,
    readonly batchSize: number,
    /** How long a chunk takes, by job. */
    readonly durationMs: (jobId: string, chunk: number) => number,
    /** Dies right after its next receive, before claiming anything. */
    public dieOnReceive = false,
  ) {}
}

export class SimCluster {
  t = 0;
  readonly store = new MemoryPipeline(() => this.t);
  readonly jobs = new Map<string, SimJob>();
  readonly workers: SimWorker[] = [];
  readonly dispatcher: ChunkDispatcher;

  constructor(readonly policy: DispatchPolicy) {
    this.dispatcher = new ChunkDispatcher({
      chunks: this.store,
      queue: this.store,
      items: this.store,
      policy,
      logger: createLogger('sim', () => undefined),
      instanceId: 'orchestration',
      now: () => new Date(this.t),
    });
  }

  addWorker(id: string, batchSize: number, durationMs: (jobId: string, chunk: number) => number): SimWorker {
    const w = new SimWorker(id, batchSize, durationMs);
    this.workers.push(w);
    return w;
  }

  /** Stages the job and runs its plan step (the first window goes out now). */
  async submit(jobId: string, items: readonly number[], chunkSize: number, attempts = 3, deadlineSeconds = 300): Promise<SimJob> {
    const { itemCount, chunkCount } = this.store.stage(jobId, items, chunkSize);
    const job: DispatchJob = { jobId, workType: 'sum', epoch: 1, options: { chunkSize, attempts, deadlineSeconds } };
    const first = await this.dispatcher.pass({ job, chunkCount, itemCount, ledger: emptyLedger(chunkCount, itemCount), at: new Date(this.t).toISOString() });
    const sim: SimJob = { job, chunkCount, itemCount, ledger: first.ledger, pollMs: STEP_WAIT.pollMs, lastPassAt: this.t, nextStepAt: this.t + ROUND_TRIP_MS, submittedAt: this.t, maxInFlight: first.ledger.inFlight.length };
    this.jobs.set(jobId, sim);
    return sim;
  }

  cancel(jobId: string): void {
    this.store.cancelled.add(jobId);
  }

  /** Runs until `until` (ms) or until every job is done. */
  async runUntil(until: number, stopWhen: () => boolean = () => [...this.jobs.values()].every((j) => j.doneAt !== undefined)): Promise<void> {
    while (this.t < until && !stopWhen()) {
      this.t += TICK_MS;
      for (const w of this.workers) await this.work(w);
      for (const j of this.jobs.values()) await this.stepIfDue(j);
    }
  }

  private async stepIfDue(j: SimJob): Promise<void> {
    if (j.doneAt !== undefined || this.t < j.nextStepAt) return;
    const out = await this.dispatcher.pass({ job: j.job, chunkCount: j.chunkCount, itemCount: j.itemCount, ledger: j.ledger, at: new Date(this.t).toISOString() });
    j.ledger = out.ledger;
    j.maxInFlight = Math.max(j.maxInFlight, out.ledger.inFlight.length);
    // The step activity's passes at its cadence (nextPollMs), backing off while nothing changes
    // (the orchestration's round trip between steps, every few seconds, is left out).
    const next = nextPollMs(STEP_WAIT, this.policy.window, out, this.t - j.lastPassAt, j.pollMs, out.ledger.next >= j.chunkCount);
    j.lastPassAt = this.t;
    j.nextStepAt = this.t + next.pollMs;
    j.pollMs = next.quietMs;
    if (out.cancelled) {
      j.cancelled = true;
      j.doneAt = this.t;
    } else if (isLedgerDone(out.ledger)) {
      j.doneAt = this.t;
    }
  }

  private async work(w: SimWorker): Promise<void> {
    if (!w.alive) return;
    const now = new Date(this.t).toISOString();
    for (const h of [...w.held]) {
      const msg = h.m.message;
      if (h.finishAt !== undefined && this.t >= h.finishAt) {
        const items = msg.items ?? [];
        await this.store.writeChunkResult({
          jobId: msg.jobId, chunk: msg.chunk, status: 'ok', itemCount: items.length, itemsFailed: 0,
          partial: (items as number[]).reduce((a, b) => a + b, 0), itemErrors: [], attempt: h.m.dequeueCount, dispatch: msg.dispatch,
          writtenBy: w.id, writtenAt: now,
        });
        this.store.delete(h.m.id);
        w.held.splice(w.held.indexOf(h), 1);
      } else if (h.nextBeatAt !== undefined && this.t >= h.nextBeatAt && h.startedAt !== undefined) {
        // As WorkItemProcessor: the claim after claimAfterSeconds of work, then a beat every heartbeatSeconds.
        const beat = { claimedAt: h.startedAt, dequeueCount: h.m.dequeueCount, beatAt: now };
        if (h.claimedAt === undefined) await this.store.claimChunk(msg.jobId, msg.chunk, msg.dispatch, { ...beat, claimedBy: w.id });
        else await this.store.beatClaim(msg.jobId, msg.chunk, msg.dispatch, beat);
        h.claimedAt = h.startedAt;
        h.nextBeatAt = this.t + CLAIM_LIVENESS.heartbeatSeconds * 1000;
      }
    }
    // The host fetches a new batch once fewer than batchSize/2 are running (newBatchThreshold).
    if (w.held.length > w.batchSize / 2) return;
    const got = this.store.receive(w.batchSize, HOST_RECEIVE_VISIBILITY_MS);
    if (w.dieOnReceive && got.length > 0) {
      w.alive = false;
      return;
    }
    for (const m of got) {
      const msg = m.message;
      const firstSend = m.dequeueCount === 1 && msg.dispatch === 1;
      if ((!firstSend && (await this.store.chunkResultExists(msg.jobId, msg.chunk))) || (await this.store.isCancelled(msg.jobId))) {
        this.store.delete(m.id);
        continue;
      }
      const finishAt = this.t + w.durationMs(msg.jobId, msg.chunk);
      w.held.push({ m, finishAt, nextBeatAt: this.t + CLAIM_LIVENESS.claimAfterSeconds * 1000, startedAt: now });
    }
  }

  /** The worker holding a claimed, unfinished chunk of the job, if any. */
  holderOf(jobId: string): SimWorker | undefined {
    return this.workers.find((w) => w.alive && w.held.some((h) => h.m.message.jobId === jobId && h.claimedAt !== undefined));
  }

  /** Every chunk has exactly one result, and the results add up to the items' sum. */
  exactSum(jobId: string): number {
    let sum = 0;
    for (const r of this.store.results.values()) if (r.jobId === jobId && r.status === 'ok') sum += r.partial as number;
    return sum;
  }
}
