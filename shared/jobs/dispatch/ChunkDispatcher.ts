/**
 * A job's dispatch step (the `jobStep` activity; the plan sends the first window with one pass):
 * passes that observe the chunks in flight, decide with `decideStep`, record out-of-attempts chunks
 * as failed, and send what goes out. A step runs passes for a few seconds (`STEP_WAIT`, `nextPollMs`:
 * while results land, as often as an eighth of the window finishes, 50 ms to 1 s apart; backing off
 * to 1 s when nothing changes) and answers when the job is cancelled
 * or done, or after 2 s of refilling, or 5 s of quiet or of waiting for the last results once every
 * chunk is sent (a late call, `LATE_CALL_MS`, after one pass):
 * the window refills many times a second without a Durable round trip each time, and the
 * orchestration needs no durable timer between steps: a timer message is
 * held by the instance that received it and, if that instance dies, comes back only after the
 * control queue's visibility (1 minute at least), while an activity message comes back after
 * host.json's `workItemQueueVisibilityTimeout` (10 s).
 *
 * Guarantees: safe to run again with the same input (Durable may retry an activity): it sends the
 * same chunks again, which workers skip or discard (results are created once). Messages are sent
 * before the step answers, so a ledger never names a chunk as in flight that was not sent, unless
 * the send failed and the activity failed with it, or it is a first window the leader's intake
 * sends (JobActivities.prestage: the plan counts it as sent; a chunk of it that never went out is
 * sent again once unclaimed). Costs per pass: one listing of results per 100-chunk
 * group in flight (and one of claims, only once a chunk has been in flight long enough for a claim to
 * matter: `claimsMatter`), or, with at most `READ_RESULTS_UP_TO` chunks in flight and no claims, a
 * read of each one's result metadata; one cancel check, and one message per `CHUNKS_PER_MESSAGE`
 * chunks sent. The pass that finds the last results hands what it saw to the aggregation, which
 * then lists nothing when that names every chunk (a small job's only listing was that one).
 * Route: docs/architecture.md, "A submission from POST to result blob", step 5.
 */
import { DEFAULTS } from '../../config/settings';
import { type Logger } from '../../observability/log';
import { type Json } from '../../worktypes/WorkType';
import { JOB_LIMITS, type JobOptions } from '../jobLimits';
import { packInEnvelopes, type WorkItemMessage } from '../messageCodec';
import { mapLimit } from '../pool';
import { type ChunkResult, type ChunkResultEntry } from '../store/JobStore';
import { type Now, nowOf } from '../wallClock';
import {
  type ChunkObservation,
  claimsMatter,
  decideStep,
  type DispatchLedger,
  type DispatchPolicy,
  isLedgerDone,
  resumedLedger,
  type SendReason,
} from './DispatchLedger';
import { type LandedResults } from './LandedResults';
import { type ChunkItemsSource, type ChunkStore, type WorkQueue } from './PipelineStore';

/** What a step needs of the job (no items: those come from the staged input). */
export interface DispatchJob {
  readonly jobId: string;
  readonly workType: string;
  readonly epoch: number;
  readonly options: JobOptions;
  /** When the job was submitted (its index row's key); absent in steps of runs started before it was carried. */
  readonly submittedAt?: string;
}

export interface StepInput {
  readonly job: DispatchJob;
  readonly chunkCount: number;
  readonly itemCount: number;
  readonly ledger: DispatchLedger;
  /** The time (ISO) the step was asked for; its passes measure ages with the activity's clock. */
  readonly at: string;
  /** Set when the orchestration calls it again after a resume (the how-many-th repeat): see CallClaims. */
  readonly repeat?: number;
}

export interface StepWait {
  /** Between passes while results keep landing: at least this long (see `nextPollMs`). */
  readonly minBusyPollMs: number;
  /** After a pass that sent chunks but counted no result (no rate to go by yet). */
  readonly busyPollMs: number;
  /** Between passes after one that changed nothing, doubling to `maxPollMs`. */
  readonly pollMs: number;
  readonly maxPollMs: number;
  /** A step that changed something answers after about this long, unless every chunk is sent. */
  readonly busyReturnMs: number;
  /** A step that changed nothing, or whose job has every chunk sent, answers after at most this long. */
  readonly maxWaitMs: number;
}

/** How a step long-polls (see the module comment). */
export const STEP_WAIT: StepWait = {
  minBusyPollMs: 50,
  busyPollMs: 200,
  pollMs: 250,
  maxPollMs: 1_000,
  busyReturnMs: 2_000,
  maxWaitMs: 5_000,
};

/** While results land, a pass comes about when this share of the window has finished since the last one. */
export const REFILL_SHARE = 1 / 8;

/**
 * The wait before a step's next pass. A job's throughput is its window over the time a chunk holds a
 * slot, and that time includes the wait until a pass sees its result and sends the next chunk: with
 * a fixed 200 ms between passes, a 64-chunk window on one instance runs dry between refills (a worker
 * that finds the queue empty then backs off, up to host.json's `maxPollingInterval`): 1,000 chunks
 * took 7.6 s that way against 5.1 s with this cadence (jobs-throughput medians, chunk size 100). So while
 * results land, the next pass comes when `REFILL_SHARE` of the window should have finished at the
 * rate the last pass saw (`finished` results over `cycleMs`, the time since the pass before), within
 * `minBusyPollMs`..`maxPollMs`: a job that has the workers to itself is refilled every ~50 ms, one
 * that shares them with nine others is listed a few times a second, not twenty. Once every chunk has
 * been sent there is nothing to refill, and the pass that matters is the one that sees the last
 * result: the mark is then the next result (`allSent`), not an eighth of a window that will not come.
 * A pass that only sent waits `busyPollMs`; one that changed nothing backs off, doubling up to
 * `maxPollMs`, from twice the last busy wait (at most `pollMs`), or from `pollMs` when nothing has
 * changed yet (`quietMs` carries the back-off).
 */
export function nextPollMs(
  wait: StepWait,
  window: number,
  pass: Pick<StepOutcome, 'finished' | 'sent' | 'resent' | 'expired'>,
  cycleMs: number,
  quietMs: number,
  allSent = false,
): { readonly pollMs: number; readonly quietMs: number } {
  if (!changedAnything(pass)) return { pollMs: quietMs, quietMs: Math.min(quietMs * 2, wait.maxPollMs) };
  if (pass.finished === 0) return { pollMs: wait.busyPollMs, quietMs: wait.pollMs };
  const mark = allSent ? 1 : Math.max(1, window * REFILL_SHARE);
  const untilShare = (Math.max(cycleMs, 1) * mark) / pass.finished;
  const pollMs = Math.round(Math.min(wait.maxPollMs, Math.max(wait.minBusyPollMs, untilShare)));
  // A pass that then finds nothing (results come unevenly) waits twice this, not the quiet 250 ms.
  return { pollMs, quietMs: Math.min(wait.pollMs, pollMs * 2) };
}

export interface StepOutcome {
  readonly ledger: DispatchLedger;
  readonly cancelled: boolean;
  /** Chunks put on the queue for the first time, sent again, and recorded failed by this step. */
  readonly sent: number;
  readonly resent: number;
  readonly expired: number;
  /** Results this step counted. */
  readonly finished: number;
  /**
   * The results the passes saw (of the chunks they had in flight, and maybe their neighbours): the
   * aggregation that follows a done ledger folds them without listing the job again when they cover
   * every chunk. Never returned to the orchestration (JobActivities drops it).
   */
  readonly landed?: ChunkObservation['results'];
}

/** The results two passes (or a pass and a step) saw, one entry a chunk. */
export function landedOf(...seen: ReadonlyArray<StepOutcome['landed']>): ChunkResultEntry[] {
  const byChunk = new Map<number, ChunkResultEntry>();
  for (const entries of seen) for (const e of entries ?? []) byChunk.set(e.chunk, e);
  return [...byChunk.values()];
}

/** Whether a pass (or a step's passes together) saw a result, sent a chunk or expired one. */
export function changedAnything(o: Pick<StepOutcome, 'finished' | 'sent' | 'resent' | 'expired'>): boolean {
  return o.finished + o.sent + o.resent + o.expired > 0;
}

/**
 * Worker liveness: a worker claims a chunk once it has worked on it for `claimAfterSeconds` (most
 * chunks finish sooner and cost no claim write; until then the chunk counts as unclaimed, which is
 * re-sent only after `unclaimedSeconds`), then beats on its claim every `heartbeatSeconds`; a claim
 * silent for `silenceSeconds` belongs to a worker that died or hung. The silence is measured with
 * the worker's clock against the orchestration's, so it allows a few seconds of skew.
 */
export const CLAIM_LIVENESS = { claimAfterSeconds: 2, heartbeatSeconds: 5, silenceSeconds: 20 } as const;

export const DISPATCH_DEFAULTS: DispatchPolicy = {
  // JOB_DISPATCH_WINDOW's default (settings.ts keeps every default).
  window: DEFAULTS.dispatchWindow,
  silenceSeconds: CLAIM_LIVENESS.silenceSeconds,
  unclaimedSeconds: 15,
  overtakenSeconds: 10,
};

const SEND_CONCURRENCY = 16;

/**
 * Chunks sent together go out this many to a queue message (an envelope, messageCodec), within the
 * message size: a chunk then costs a quarter of a send, a receive and a delete instead of one each
 * (the result write stays one per chunk, and so do claims, re-sends and exactly-once). On Azurite
 * the work phase of a job is bound by storage transactions: 200 chunks took ~4 per chunk, the bare
 * queue 2. A worker handles an envelope's parts at once, each as if it had come alone, so a window of
 * 256 chunks is 64 messages, a worker instance's 24 at a time with 40 queued behind them. JOB_CHUNKS_PER_MESSAGE's
 * default (settings.ts keeps every default).
 */
export const CHUNKS_PER_MESSAGE = DEFAULTS.chunksPerMessage;

/** A chunk's message and the bytes of its JSON (measured once, when the message is made). */
export interface SizedMessage {
  readonly message: WorkItemMessage;
  readonly bytes: number;
}

const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value), 'utf8');

export const sized = (message: WorkItemMessage): SizedMessage => ({ message, bytes: jsonBytes(message) });

/** Consecutive messages, at most `perMessage` and `JOB_LIMITS.maxMessageJsonBytes` of JSON to a pack. */
export function packMessages(messages: readonly SizedMessage[], perMessage: number): WorkItemMessage[][] {
  return packInEnvelopes(messages, perMessage, () => 1, (m) => m.bytes + 1).map((pack) => pack.map((m) => m.message));
}

/**
 * A plan or step that starts this long after the orchestration asked for it (its input's `at`) is a
 * late call: the redelivery of one whose instance died (the work-item queue's visibility, 10 s in
 * host.json), a retry after a long enough back-off (the first comes 2 s after a failure: not late), or
 * the repeat a `resume` asked for. It runs one pass and answers instead of long-polling:
 * a stale copy whose answer the orchestration will ignore (it already re-called the activity) would
 * otherwise keep refilling the window for seconds from its outdated ledger, sending chunks the
 * current step sends too (a kill during a plan cost 320 duplicate deliveries of 1,000 chunks in the
 * two-instance failover test), and a current one gets a fresh ledger back to the orchestration sooner.
 */
export const LATE_CALL_MS = 10_000;

export interface DispatcherDeps {
  readonly chunks: ChunkStore;
  readonly queue: WorkQueue;
  readonly items: ChunkItemsSource;
  readonly policy: DispatchPolicy;
  readonly logger: Logger;
  /** Recorded as the writer of expired chunks' results. */
  readonly instanceId: string;
  readonly now?: Now;
  /** Waits between a step's passes (tests pass a virtual one). */
  readonly sleep?: (ms: number) => Promise<void>;
  /**
   * Results written by this process's workers: a step waiting for its last results (every chunk
   * sent) looks again once they have all landed here, not at its next poll (LandedResults).
   */
  readonly landed?: LandedResults;
  /** Chunks to a queue message at most; CHUNKS_PER_MESSAGE unless a test says otherwise. */
  readonly chunksPerMessage?: number;
}

export class ChunkDispatcher {
  private readonly now: Now;

  constructor(private readonly deps: DispatcherDeps) {
    this.now = nowOf(deps);
  }

  /**
   * Passes over the window, topping it up, until the job is cancelled or done, or `busyReturnMs` passed
   * since the step began with at least one change and chunks left to send, or `maxWaitMs` passed: the orchestration
   * records a step's ledger every few seconds while the window refills many times a second.
   */
  async step(input: StepInput, wait: StepWait = STEP_WAIT, items: ChunkItemsSource = this.deps.items): Promise<StepOutcome> {
    const started = this.now().getTime();
    const late = this.isLate(input.at);
    let ledger = input.ledger;
    const total = { sent: 0, resent: 0, expired: 0, finished: 0 };
    let quietMs = wait.pollMs;
    // The first pass counts what landed since the previous step's last pass, over a Durable round
    // trip this activity cannot see: taken as one busy wait (an overestimate of the rate at worst,
    // which only makes the next pass come sooner).
    let previousAt = started - wait.busyPollMs;
    const watch = this.deps.landed?.watch(input.job.jobId);
    // Every result the step's passes saw, for the aggregation that may follow (a pass reads only what
    // is in flight), when the job fits one window (a bigger one's are listed by the aggregation anyway,
    // and are not held here); else the last pass's.
    const gather = input.chunkCount <= this.deps.policy.window;
    let landed: StepOutcome['landed'] = [];
    try {
      for (;;) {
        const landedBefore = watch?.count() ?? 0;
        const at = this.now();
        const outcome = await this.pass({ ...input, ledger, at: at.toISOString() }, undefined, items, false, watch?.results());
        ledger = outcome.ledger;
        total.sent += outcome.sent;
        total.resent += outcome.resent;
        total.expired += outcome.expired;
        total.finished += outcome.finished;
        landed = gather ? landedOf(landed, outcome.landed) : outcome.landed;
        const result = { ledger, cancelled: outcome.cancelled, ...total, ...(landed === undefined ? {} : { landed }) };
        if (outcome.cancelled || isLedgerDone(ledger) || late) return result;
        const allSent = ledger.next >= input.chunkCount;
        const next = nextPollMs(wait, this.deps.policy.window, outcome, at.getTime() - previousAt, quietMs, allSent);
        previousAt = at.getTime();
        const pollMs = next.pollMs;
        quietMs = next.quietMs;
        // Once every chunk is out there is nothing left to refill, and answering at busyReturnMs would
        // put a Durable round trip (two queue polls) between the last results and the aggregation: the
        // step waits for them, up to maxWaitMs. The last pass lands at the step's time limit.
        const limit = changedAnything(total) && !allSent ? wait.busyReturnMs : wait.maxWaitMs;
        const remaining = limit - (at.getTime() - started);
        if (remaining < wait.minBusyPollMs) return result;
        const pause = Math.min(pollMs, remaining);
        // Waiting for the last results: once those still in flight have all landed in this process
        // (counted from before this pass looked, so none is missed), look at once. Results written
        // elsewhere are found at the next poll, as without the watch.
        if (watch !== undefined && allSent) await watch.until(landedBefore + ledger.inFlight.length, pause);
        else await (this.deps.sleep ?? defaultSleep)(pause);
      }
    } finally {
      watch?.close();
    }
  }

  /** Chunks a job keeps in flight at most (`JOB_DISPATCH_WINDOW`). */
  get window(): number {
    return this.deps.policy.window;
  }

  /** Whether a call asked for at `at` (ISO) starts late (`LATE_CALL_MS`): it runs one pass, no long poll. */
  isLate(at: string): boolean {
    const asked = Date.parse(at);
    return Number.isFinite(asked) && this.now().getTime() - asked > LATE_CALL_MS;
  }

  /**
   * The starting ledger of a plan whose input was already staged (see `resumedLedger`): its first
   * window counts as sent at `firstWindowAt` when the leader sent it at intake, else long ago.
   */
  resumedLedger(chunkCount: number, itemCount: number, at: string, firstWindowAt?: string): DispatchLedger {
    const sentAt = firstWindowAt === undefined ? undefined : Date.parse(firstWindowAt);
    return resumedLedger(chunkCount, itemCount, Date.parse(at), this.deps.policy, sentAt);
  }

  /**
   * One pass at `input.at`: observe, decide, expire, send. `items`: where the chunks' items come
   * from when not the staged input (the leader's first window of inline items has them in hand).
   */
  async pass(
    input: StepInput,
    signal?: AbortSignal,
    items: ChunkItemsSource = this.deps.items,
    /** The caller read the cancel marker just now and nothing is in flight yet (a job's first window): nothing to observe. */
    firstWindow = false,
    /** Results of the job created in this process (LandedResults): taken as they are, not read. */
    known: readonly ChunkResultEntry[] = [],
  ): Promise<StepOutcome> {
    const { job } = input;
    const inFlight = input.ledger.inFlight.map((c) => c.chunk);
    const at = Date.parse(input.at);
    const withClaims = claimsMatter(input.ledger, at, job.options, this.deps.policy);
    // Of the chunks in flight, those whose result landed here (one entry a chunk) are not read; the
    // cancel marker still is (cached: CancelMarkers), even when every one of them landed here.
    const flying = new Set(inFlight);
    const landedHere = new Map(known.filter((e) => flying.has(e.chunk)).map((e) => [e.chunk, e]));
    const unknown = inFlight.filter((c) => !landedHere.has(c));
    const read =
      firstWindow && inFlight.length === 0
        ? { cancelled: false, results: [], claims: [] }
        : await this.deps.chunks.observeChunks(job.jobId, unknown, withClaims, signal);
    const seen = { ...read, results: [...read.results.filter((r) => !landedHere.has(r.chunk)), ...landedHere.values()] };
    const decision = decideStep(input.ledger, seen, at, { chunkCount: input.chunkCount, ...job.options }, this.deps.policy);
    if (seen.cancelled) return { ledger: decision.ledger, cancelled: true, sent: 0, resent: 0, expired: 0, finished: decision.finished };

    await mapLimit(decision.expire, SEND_CONCURRENCY, ({ chunk, dispatch }) => this.expire(job, input.itemCount, chunk, dispatch, signal));
    const sending =
      decision.send.length === 0
        ? new Map<number, Json[]>()
        : await items.items(job.jobId, decision.send.map((s) => s.chunk), signal);
    const messages = await mapLimit(decision.send, SEND_CONCURRENCY, async ({ chunk, dispatch, reason }) => {
      const chunkItems = sending.get(chunk);
      if (chunkItems === undefined) throw new Error(`The staged input of job ${job.jobId} has no items for chunk ${chunk}`);
      return this.message(job, chunk, dispatch, chunkItems, reason !== 'first', signal);
    });
    const packs = packMessages(messages, this.deps.chunksPerMessage ?? CHUNKS_PER_MESSAGE);
    await mapLimit(packs, SEND_CONCURRENCY, (pack) => this.deps.queue.send(pack, signal));

    const resent = decision.send.filter((s) => s.reason !== 'first');
    if (resent.length > 0 || decision.expire.length > 0) {
      const reasons: Partial<Record<SendReason, number>> = {};
      for (const s of resent) reasons[s.reason] = (reasons[s.reason] ?? 0) + 1;
      this.deps.logger.warn('job.chunks_resent', {
        jobId: job.jobId,
        epoch: job.epoch,
        resent: resent.length,
        expired: decision.expire.length,
        ...reasons,
      });
    }
    return {
      ledger: decision.ledger,
      cancelled: false,
      sent: decision.send.length - resent.length,
      resent: resent.length,
      expired: decision.expire.length,
      finished: decision.finished,
      landed: seen.results,
    };
  }


  /** A chunk's message (and its JSON's size): its items inline, or in a blob the message names when they are too big for it. */
  private async message(
    job: DispatchJob,
    chunk: number,
    dispatch: number,
    items: Json[],
    resent: boolean,
    signal?: AbortSignal,
  ): Promise<SizedMessage> {
    const size = job.options.chunkSize;
    const base = {
      v: 1 as const,
      jobId: job.jobId,
      chunk,
      workType: job.workType,
      firstIndex: chunk * size,
      itemCount: items.length,
      attempts: job.options.attempts,
      epoch: job.epoch,
      dispatch,
      ...(resent ? { resent: true as const } : {}),
    };
    const inline: WorkItemMessage = { ...base, items };
    const bytes = jsonBytes(inline);
    if (bytes <= JOB_LIMITS.maxMessageJsonBytes) return { message: inline, bytes };
    return sized({ ...base, itemsRef: await this.deps.chunks.writeChunkItems(job.jobId, chunk, items, signal) });
  }

  private async expire(job: DispatchJob, itemCount: number, chunk: number, dispatch: number, signal?: AbortSignal): Promise<void> {
    const count = Math.min(job.options.chunkSize, itemCount - chunk * job.options.chunkSize);
    const result: ChunkResult = {
      jobId: job.jobId,
      chunk,
      status: 'failed',
      itemCount: count,
      itemsFailed: count,
      partial: null,
      itemErrors: [],
      error: {
        code: 'DEADLINE_EXCEEDED',
        message:
          `No result on each of ${dispatch} dispatches: the worker that claimed it went silent ` +
          `(no heartbeat for ${this.deps.policy.silenceSeconds} s) or took over ${job.options.deadlineSeconds} s.`,
      },
      attempt: dispatch,
      dispatch,
      writtenBy: `orchestration@${this.deps.instanceId}`,
      writtenAt: this.now().toISOString(),
    };
    // If a worker's result lands first, the conditional create keeps the worker's.
    await this.deps.chunks.writeChunkResult(result, signal);
  }
}

function defaultSleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
