/**
 * Delivers a job's outcome (JobOutcome) once it is recorded: to the submission's reply queue
 * (`replyTo`), to the app-wide outcome stream (`JOB_OUTCOMES_QUEUE`, when set), and as a signed POST
 * to its `callbackUrl`. Called by the orchestration's deliver activity after the final summary is
 * written, and by the intake for a rejection before it deletes the submission.
 *
 * Guarantees: at least once. Every send happens after the outcome is recorded and before the
 * delivery's own record (`jobs/<jobId>/delivery.json`) says it was made, so a process killed between
 * the two sends again when its caller runs again (Durable runs an activity whose worker died again;
 * a rejected submission that was not deleted comes back to the intake). A send that fails is
 * recorded (`retrying`) with a due mark, `deliveries-due/<jobId>`, and the leader's pass tries it
 * again with back-off (10 s, 30 s, 1, 2, 5, 10, 30 minutes, then hourly) until it succeeds or 24 h
 * have passed since the first try (`failed`). A send recorded as made is not made again by a later
 * call, so duplicates come only from a kill between a send and its record. Consumers deduplicate
 * by `jobId`.
 *
 * The record holds the outcome itself, so the retries need nothing else; the status API shows its
 * public part (`DeliveryView`: states, attempts, times, the last error; never the callback's URL,
 * which may carry a token, nor the secret).
 */
import { type QueueClient, type QueueServiceClient } from '@azure/storage-queue';

import { type Logger } from '../../observability/log';
import { type JobErrorInfo } from '../JobError';
import { type JobStore } from '../store/JobStore';
import { type Now, nowOf } from '../wallClock';
import { type SendCallback } from './CallbackSender';
import { hasReply, type JobReply } from './DeliveryTargets';
import { type JobOutcome, outcomeJson, outcomeQueueText } from './JobOutcome';

export type SendState = 'sent' | 'retrying' | 'failed';
export type CallbackState = 'delivered' | 'retrying' | 'failed';

interface Attempts {
  readonly attempts: number;
  readonly firstAt: string;
  readonly at: string;
  readonly nextAt?: string;
  readonly lastError?: JobErrorInfo;
}

export interface QueueDelivery extends Attempts {
  readonly queue: string;
  readonly state: SendState;
}

export interface CallbackDelivery extends Attempts {
  readonly host: string;
  readonly url: string;
  readonly state: CallbackState;
  readonly status?: number;
}

/** `jobs/<jobId>/delivery.json`. */
export interface DeliveryRecord {
  readonly v: 1;
  readonly jobId: string;
  readonly outcome: JobOutcome;
  readonly reply: JobReply;
  readonly replyTo?: QueueDelivery;
  readonly stream?: QueueDelivery;
  readonly callback?: CallbackDelivery;
}

/** What the status API and the live page show of a job's delivery. */
export interface DeliveryView {
  readonly replyTo?: {
    readonly queue: string;
    readonly state: SendState | 'waiting';
    readonly at?: string;
    readonly attempts?: number;
    readonly nextAt?: string;
    readonly lastError?: JobErrorInfo;
  };
  readonly callback?: {
    readonly host: string;
    readonly state: CallbackState | 'waiting';
    readonly attempts: number;
    readonly at?: string;
    readonly nextAt?: string;
    readonly lastError?: JobErrorInfo;
  };
}

/** Seconds to wait after each failed try (the last repeats) until `GIVE_UP_MS` after the first. */
export const RETRY_DELAYS_S = [10, 30, 60, 120, 300, 600, 1_800, 3_600] as const;
export const GIVE_UP_MS = 24 * 3_600_000;
/** Due deliveries the leader's pass tries at most per sweep, and how often it lists them. */
export const DELIVERY_SWEEP = { max: 20, everyMs: 5_000 } as const;

export interface OutcomeDeliveryDeps {
  readonly queues: QueueServiceClient;
  readonly store: JobStore;
  readonly outcomesQueue?: string | undefined;
  readonly sendCallback: SendCallback;
  readonly logger: Logger;
  readonly now?: Now;
}

export class OutcomeDelivery {
  private readonly now: Now;
  private readonly ensured = new Map<string, Promise<unknown>>();
  #lastDue = 0;

  constructor(private readonly deps: OutcomeDeliveryDeps) {
    this.now = nowOf(deps);
  }

  /** Whether anything is to be delivered for a job with this reply (its own targets, or the stream). */
  wanted(reply: JobReply | undefined): boolean {
    return hasReply(reply) || this.deps.outcomesQueue !== undefined;
  }

  /**
   * Delivers an outcome that is recorded (see the module comment). Throws only when the delivery's
   * record cannot be read or written (the caller runs it again).
   */
  async deliver(outcome: JobOutcome, reply: JobReply | undefined, signal?: AbortSignal): Promise<DeliveryView | undefined> {
    const own = reply ?? {};
    const recorded = hasReply(own) ? await this.deps.store.deliveries.readDelivery<DeliveryRecord>(outcome.jobId, signal) : undefined;
    let record: DeliveryRecord = recorded ?? { v: 1, jobId: outcome.jobId, outcome, reply: own };
    if (record.replyTo === undefined && own.replyTo !== undefined) {
      record = { ...record, replyTo: await this.sendQueue(own.replyTo, record.outcome, undefined, 'reply') };
    }
    const stream = this.deps.outcomesQueue;
    // The stream's state is kept only for jobs with a record of their own; for the others a redelivered
    // activity sends again (at least once, as documented).
    if (stream !== undefined && record.stream === undefined) {
      record = { ...record, stream: await this.sendQueue(stream, record.outcome, undefined, 'stream') };
    }
    if (record.callback === undefined && own.callbackUrl !== undefined) {
      record = { ...record, callback: await this.call(own.callbackUrl, record.outcome, undefined) };
    }
    if (!hasReply(own) && record.stream?.state === 'sent') return undefined;
    await this.save(record, signal);
    return deliveryView(record);
  }

  /**
   * The leader's pass: tries again the due deliveries whose time has come (at most
   * DELIVERY_SWEEP.max), and clears the marks of those that are done. Answers how many were tried.
   */
  async sweep(signal?: AbortSignal): Promise<number> {
    const due = await this.deps.store.deliveries.listDeliveriesDue(signal);
    this.#lastDue = due.length;
    let tried = 0;
    for (const jobId of due) {
      if (signal?.aborted === true || tried >= DELIVERY_SWEEP.max) break;
      const record = await this.deps.store.deliveries.readDelivery<DeliveryRecord>(jobId, signal);
      if (record === undefined) {
        await this.deps.store.deliveries.clearDeliveryDue(jobId, signal);
        continue;
      }
      const nowMs = this.now().getTime();
      const isDue = (d: Attempts & { state: string }): boolean => d.state === 'retrying' && Date.parse(d.nextAt ?? '') <= nowMs;
      let next = record;
      const { replyTo, stream, callback } = record;
      const outcome = record.outcome;
      if (replyTo !== undefined && isDue(replyTo)) {
        next = { ...next, replyTo: await this.sendQueue(replyTo.queue, outcome, replyTo, 'reply') };
      }
      if (stream !== undefined && isDue(stream)) next = { ...next, stream: await this.sendQueue(stream.queue, outcome, stream, 'stream') };
      if (callback !== undefined && isDue(callback)) next = { ...next, callback: await this.call(callback.url, outcome, callback) };
      if (next === record && pending(record)) continue;
      tried += 1;
      await this.save(next, signal);
    }
    return tried;
  }

  /** The deliveries the last sweep found marked due (whether or not their time had come). */
  get lastDue(): number {
    return this.#lastDue;
  }

  private async save(record: DeliveryRecord, signal?: AbortSignal): Promise<void> {
    await this.deps.store.deliveries.writeDelivery(record.jobId, record, signal);
    if (pending(record)) await this.deps.store.deliveries.markDeliveryDue(record.jobId, signal);
    else await this.deps.store.deliveries.clearDeliveryDue(record.jobId, signal);
  }

  private queue(name: string): QueueClient {
    const client = this.deps.queues.getQueueClient(name);
    if (!this.ensured.has(name)) {
      const created = client.createIfNotExists().catch((err: unknown) => {
        this.ensured.delete(name);
        throw err;
      });
      this.ensured.set(name, created);
    }
    return client;
  }

  private async sendQueue(
    name: string,
    outcome: JobOutcome,
    before: QueueDelivery | undefined,
    kind: 'reply' | 'stream',
  ): Promise<QueueDelivery> {
    const at = this.now().toISOString();
    try {
      const client = this.queue(name);
      await this.ensured.get(name);
      // Never expires: a consumer may start reading the queue long after the job ended.
      await client.sendMessage(outcomeQueueText(outcome), { messageTimeToLive: -1 });
      const attempts = (before?.attempts ?? 0) + 1;
      this.deps.logger.info('delivery.sent', { jobId: outcome.jobId, kind, queue: name, status: outcome.status, attempts });
      return { queue: name, state: 'sent', attempts, firstAt: before?.firstAt ?? at, at };
    } catch (err) {
      const error = { code: 'DELIVERY_FAILED', message: `queue ${name}: ${(err as Error).message}`.slice(0, 500) };
      return { queue: name, ...this.failed(outcome.jobId, kind, before, at, error, false) };
    }
  }

  private async call(url: string, outcome: JobOutcome, before: CallbackDelivery | undefined): Promise<CallbackDelivery> {
    const at = this.now().toISOString();
    const host = new URL(url).host;
    const result = await this.deps.sendCallback({ url, jobId: outcome.jobId, body: outcomeJson(outcome) });
    const attempts = (before?.attempts ?? 0) + 1;
    if (result.ok) {
      const fields = { jobId: outcome.jobId, kind: 'callback', host, status: outcome.status, httpStatus: result.status, attempts };
      this.deps.logger.info('delivery.sent', fields);
      return { host, url, state: 'delivered', attempts, firstAt: before?.firstAt ?? at, at, status: result.status };
    }
    return { host, url, ...this.failed(outcome.jobId, 'callback', before, at, result.error, result.permanent) };
  }

  private failed(
    jobId: string,
    kind: string,
    before: Attempts | undefined,
    at: string,
    error: JobErrorInfo,
    permanent: boolean,
  ): Attempts & { state: 'retrying' | 'failed' } {
    const attempts = (before?.attempts ?? 0) + 1;
    const firstAt = before?.firstAt ?? at;
    const delayS = RETRY_DELAYS_S[Math.min(attempts - 1, RETRY_DELAYS_S.length - 1)] ?? 3_600;
    const nextMs = Date.parse(at) + delayS * 1000;
    const giveUp = permanent || nextMs - Date.parse(firstAt) > GIVE_UP_MS;
    const next = giveUp ? {} : { nextAt: new Date(nextMs).toISOString() };
    const fields = { jobId, kind, code: error.code, error: error.message, attempts, ...next };
    this.deps.logger.warn(giveUp ? 'delivery.failed' : 'delivery.retrying', fields);
    return giveUp
      ? { state: 'failed', attempts, firstAt, at, lastError: error }
      : { state: 'retrying', attempts, firstAt, at, nextAt: new Date(nextMs).toISOString(), lastError: error };
  }
}

function pending(record: DeliveryRecord): boolean {
  return [record.replyTo, record.stream, record.callback].some((d) => d?.state === 'retrying');
}

/** The public part of a delivery record. */
export function deliveryView(record: DeliveryRecord): DeliveryView {
  const attempts = (d: Attempts): Pick<Attempts, 'attempts' | 'at' | 'nextAt' | 'lastError'> => ({
    attempts: d.attempts,
    at: d.at,
    ...(d.nextAt === undefined ? {} : { nextAt: d.nextAt }),
    ...(d.lastError === undefined ? {} : { lastError: d.lastError }),
  });
  const { replyTo, callback } = record;
  return {
    ...(replyTo === undefined ? {} : { replyTo: { queue: replyTo.queue, state: replyTo.state, ...attempts(replyTo) } }),
    ...(callback === undefined ? {} : { callback: { host: callback.host, state: callback.state, ...attempts(callback) } }),
  };
}

/** A job with a reply whose outcome is not delivered yet (it runs, or its delivery was not recorded yet). */
export function waitingView(reply: JobReply): DeliveryView {
  return {
    ...(reply.replyTo === undefined ? {} : { replyTo: { queue: reply.replyTo, state: 'waiting' } }),
    ...(reply.callbackUrl === undefined ? {} : { callback: { host: new URL(reply.callbackUrl).host, state: 'waiting', attempts: 0 } }),
  };
}
