/**
 * The job's dispatch ledger and the rules of one dispatch step, as a pure function of the ledger, what
 * storage shows of the chunks in flight, and the orchestration's time.
 *
 * Guarantees: at most `window` chunks are in flight (sent, not yet finished); a chunk is counted
 * once, when the step that first sees its result removes it from the ledger; chunks are first sent
 * in order, so a job's window moves through it. A chunk is sent again when
 * - its worker went quiet: the claim on its latest round is `silenceSeconds` without a heartbeat, or
 *   older than the job's deadline (a new round, up to `attempts` rounds, then it is expired as failed);
 * - nobody claimed it: `unclaimedSeconds` after its send (doubling with each such re-send), or sooner
 *   when a chunk sent later was claimed, or finished, `overtakenSeconds` ago (the queue hands messages
 *   out roughly in order, so an earlier unclaimed one sits invisible with a worker that died before
 *   it could claim it). Same round: a queue wait is not an attempt. Workers claim a chunk only once
 *   it has run `CLAIM_LIVENESS.claimAfterSeconds` (a chunk that finishes sooner costs no claim write),
 *   so the ledger keeps a few marks of when later-sent chunks were seen finished.
 * Not guaranteed: that a re-sent chunk runs once; a false alarm costs a duplicate message, and the
 * second copy is skipped (its result exists) or its result discarded (results are created once).
 */
import { type Json } from '../../worktypes/WorkType';
import { type JobProgress } from '../JobSummary';

export interface InFlightChunk {
  readonly chunk: number;
  /** 1 for the first send; +1 each time a claimed chunk went quiet and was sent again. */
  readonly dispatch: number;
  /** The orchestration time (ms since the epoch) of this chunk's latest send. */
  readonly sentAt: number;
  /** Re-sends of this round because nobody claimed it. */
  readonly resends: number;
}

export interface DispatchLedger {
  /** Chunks [0, next) were sent at least once. */
  readonly next: number;
  readonly inFlight: readonly InFlightChunk[];
  /** Counts of the chunks that left the ledger with a result. */
  readonly progress: JobProgress;
  /** The highest round any chunk reached. */
  readonly highestDispatch: number;
  /**
   * Evidence for the overtaken rule from chunks that finished: `sentAt` is the latest send among the
   * chunks whose results a pass saw at `seenAt`. Increasing in both; at most one mark per second,
   * and of the marks older than `overtakenSeconds` only the latest is kept. Absent: none yet.
   */
  readonly finishedMarks?: ReadonlyArray<{ readonly sentAt: number; readonly seenAt: number }>;
}

export interface DispatchPolicy {
  /** Chunks of one job in flight at most. */
  readonly window: number;
  readonly silenceSeconds: number;
  readonly unclaimedSeconds: number;
  readonly overtakenSeconds: number;
}

/** What storage shows of the in-flight chunks (only those). */
export interface ChunkObservation {
  readonly cancelled: boolean;
  readonly results: ReadonlyArray<{
    readonly chunk: number;
    readonly status: 'ok' | 'failed';
    readonly itemCount: number;
    readonly itemsFailed: number;
    /** As the result's metadata carries them (the aggregation folds them: see StepOutcome.landed). */
    readonly partial?: Json;
    readonly errorCode?: string;
  }>;
  readonly claims: ReadonlyArray<{
    readonly chunk: number;
    readonly dispatch: number;
    readonly claimedAt: string;
    readonly beatAt?: string;
  }>;
}

export type SendReason = 'first' | 'silent' | 'deadline' | 'unclaimed' | 'overtaken';

export interface StepDecision {
  readonly ledger: DispatchLedger;
  /** Chunks to put on the queue now, with their round. */
  readonly send: ReadonlyArray<{ readonly chunk: number; readonly dispatch: number; readonly reason: SendReason }>;
  /** Chunks out of attempts, to record as failed (DEADLINE_EXCEEDED). */
  readonly expire: ReadonlyArray<{ readonly chunk: number; readonly dispatch: number }>;
  /** Chunks whose results this step counted. */
  readonly finished: number;
}

export function emptyLedger(chunkCount: number, itemCount: number): DispatchLedger {
  return {
    next: 0,
    inFlight: [],
    progress: { chunks: { total: chunkCount, done: 0, failed: 0 }, items: { total: itemCount, done: 0, failed: 0 } },
    highestDispatch: 1,
  };
}

/**
 * The ledger of a plan whose input was already staged: by an earlier attempt of this plan (retried
 * after its instance died), whose first window may have gone out (and partly finished) or not, or
 * by the leader that took the submission, which sends the first window itself (`sentAt`). Every
 * chunk of the first window counts as sent at `sentAt`; by default long enough ago to go out again
 * at once unless the first pass finds its result or its claim, so a retry re-sends only what is
 * missing, where a fresh first window would send them all again.
 */
export function resumedLedger(
  chunkCount: number,
  itemCount: number,
  at: number,
  policy: DispatchPolicy,
  sentAt: number = at - policy.unclaimedSeconds * 1000,
): DispatchLedger {
  const next = Math.min(policy.window, chunkCount);
  const inFlight = Array.from({ length: next }, (_, chunk) => ({ chunk, dispatch: 1, sentAt, resends: 0 }));
  return { ...emptyLedger(chunkCount, itemCount), next, inFlight };
}

export function isLedgerDone(ledger: DispatchLedger): boolean {
  return ledger.next >= ledger.progress.chunks.total && ledger.inFlight.length === 0;
}

/**
 * One step: count the results that landed, decide what goes out again, top the window up. With
 * `cancelled` it sends nothing. `expire`d chunks stay in flight until their failed result is seen,
 * so a worker's result that lands first is the one counted.
 */
export function decideStep(
  ledger: DispatchLedger,
  seen: ChunkObservation,
  at: number,
  job: { readonly chunkCount: number; readonly attempts: number; readonly deadlineSeconds: number },
  policy: DispatchPolicy,
): StepDecision {
  const results = new Map(seen.results.map((r) => [r.chunk, r]));
  const claimOf = (c: InFlightChunk) => seen.claims.find((k) => k.chunk === c.chunk && k.dispatch === c.dispatch);
  let { chunks, items } = ledger.progress;
  const waiting: InFlightChunk[] = [];
  let latestFinishedSend = -Infinity;
  for (const c of ledger.inFlight) {
    const r = results.get(c.chunk);
    if (r === undefined) {
      waiting.push(c);
      continue;
    }
    latestFinishedSend = Math.max(latestFinishedSend, c.sentAt);
    chunks = { ...chunks, done: chunks.done + (r.status === 'ok' ? 1 : 0), failed: chunks.failed + (r.status === 'ok' ? 0 : 1) };
    items = { ...items, done: items.done + r.itemCount - r.itemsFailed, failed: items.failed + r.itemsFailed };
  }
  const finished = ledger.inFlight.length - waiting.length;
  const progress = { chunks, items };
  const finishedMarks = markFinished(ledger.finishedMarks ?? [], latestFinishedSend, at, policy.overtakenSeconds * 1000);
  const marked = finishedMarks.length === 0 ? {} : { finishedMarks };
  if (seen.cancelled) return { ledger: { ...ledger, inFlight: waiting, progress, ...marked }, send: [], expire: [], finished };

  // The latest send that a worker has already claimed, or finished, a while ago: earlier unclaimed sends were overtaken.
  let overtakenBefore = -Infinity;
  for (const c of ledger.inFlight) {
    const claimedAt = Date.parse(claimOf(c)?.claimedAt ?? '');
    if (Number.isFinite(claimedAt) && at - claimedAt >= policy.overtakenSeconds * 1000) {
      overtakenBefore = Math.max(overtakenBefore, c.sentAt);
    }
  }
  for (const m of finishedMarks) {
    if (at - m.seenAt >= policy.overtakenSeconds * 1000) overtakenBefore = Math.max(overtakenBefore, m.sentAt);
  }

  const send: Array<StepDecision['send'][number]> = [];
  const expire: Array<StepDecision['expire'][number]> = [];
  const inFlight: InFlightChunk[] = [];
  let highestDispatch = ledger.highestDispatch;
  for (const c of waiting) {
    const claim = claimOf(c);
    if (claim !== undefined) {
      const reason = quietReason(claim, at, job.deadlineSeconds, policy);
      if (reason === undefined) {
        inFlight.push(c);
      } else if (c.dispatch >= job.attempts) {
        expire.push({ chunk: c.chunk, dispatch: c.dispatch });
        inFlight.push(c);
      } else {
        const next = { chunk: c.chunk, dispatch: c.dispatch + 1, sentAt: at, resends: 0 };
        highestDispatch = Math.max(highestDispatch, next.dispatch);
        send.push({ chunk: c.chunk, dispatch: next.dispatch, reason });
        inFlight.push(next);
      }
      continue;
    }
    const aged = at - c.sentAt >= policy.unclaimedSeconds * 1000 * 2 ** c.resends;
    const overtaken = c.sentAt < overtakenBefore;
    if (aged || overtaken) {
      send.push({ chunk: c.chunk, dispatch: c.dispatch, reason: aged ? 'unclaimed' : 'overtaken' });
      inFlight.push({ ...c, sentAt: at, resends: c.resends + 1 });
    } else {
      inFlight.push(c);
    }
  }

  let next = ledger.next;
  while (inFlight.length < policy.window && next < job.chunkCount) {
    inFlight.push({ chunk: next, dispatch: 1, sentAt: at, resends: 0 });
    send.push({ chunk: next, dispatch: 1, reason: 'first' });
    next += 1;
  }
  return { ledger: { next, inFlight, progress, highestDispatch, ...marked }, send, expire, finished };
}

/**
 * Whether a pass at `at` needs the claims of the chunks in flight: only a chunk in flight for the
 * shortest of the overtaken, unclaimed, silence and deadline times can be silent, late, unclaimed or
 * overtaken (a claim or a finished mark counts only once it is that old, and it is never older than
 * its chunk's send). A window that moves faster skips the listing of claims.
 */
export function claimsMatter(
  ledger: DispatchLedger,
  at: number,
  job: { readonly deadlineSeconds: number },
  policy: DispatchPolicy,
): boolean {
  const ageMs = Math.min(policy.overtakenSeconds, policy.unclaimedSeconds, policy.silenceSeconds, job.deadlineSeconds) * 1000;
  return ledger.inFlight.some((c) => at - c.sentAt >= ageMs);
}

/** Adds this pass's evidence (`latestSend` of the chunks it saw finish) to the marks; see `finishedMarks`. */
function markFinished(
  marks: NonNullable<DispatchLedger['finishedMarks']>,
  latestSend: number,
  at: number,
  overtakenMs: number,
): NonNullable<DispatchLedger['finishedMarks']> {
  let kept = [...marks];
  const last = kept[kept.length - 1];
  if (Number.isFinite(latestSend) && (last === undefined || (latestSend > last.sentAt && at - last.seenAt >= 1_000))) {
    kept.push({ sentAt: latestSend, seenAt: at });
  }
  // Of the marks old enough to count, the latest one says everything the others do.
  const aged = kept.filter((m) => at - m.seenAt >= overtakenMs);
  if (aged.length > 1) kept = kept.slice(aged.length - 1);
  return kept;
}

function quietReason(
  claim: ChunkObservation['claims'][number],
  at: number,
  deadlineSeconds: number,
  policy: DispatchPolicy,
): 'silent' | 'deadline' | undefined {
  const claimedAt = Date.parse(claim.claimedAt);
  const beatAt = claim.beatAt === undefined ? NaN : Date.parse(claim.beatAt);
  // A claim without a readable time is treated as just made: never late on a guess.
  if (Number.isFinite(claimedAt) && at - claimedAt >= deadlineSeconds * 1000) return 'deadline';
  if (Number.isFinite(beatAt) && at - beatAt >= policy.silenceSeconds * 1000) return 'silent';
  return undefined;
}
