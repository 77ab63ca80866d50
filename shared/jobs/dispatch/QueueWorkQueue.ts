/**
 * The work queue on Azure Storage: base64 JSON messages, as the Functions host decodes them by
 * default; several chunks sent together travel as one envelope message (messageCodec).
 *
 * Sends of a few chunks share messages: a send of fewer chunks than a message may carry
 * (`perMessage`, JOB_CHUNKS_PER_MESSAGE) that comes while an earlier one is on its way waits for
 * it, then everything that waited goes together, packed into envelopes of up to `perMessage`
 * chunks (and the 48 KiB of JSON a message may hold). Under a burst of small jobs (the leader's
 * intake sends each new job's first window, usually one chunk) a message then carries up to four
 * jobs' chunks: in a 1,000-job burst (jobs-scale) a job cost 0.3 work-items sends and deletes
 * instead of one each, transactions on Azure's bill (the burst's time did not move beyond
 * the noise: docs/figures.md). Nothing waits on a timer: a send made alone goes at once,
 * and a full send (a big job's window) never waits. A worker handles an envelope's parts each as
 * if it had come alone whatever their jobs (its own result, claim, cancel check and attempts), so
 * sharing a message changes no guarantee: a part that must be retried has the message delivered
 * again, and the parts that wrote their results skip on that delivery.
 *
 * Guarantees: every send answers for itself: it resolves once a message holding its chunks is on
 * the queue, and rejects when that message could not be sent (its chunks went nowhere; the
 * dispatcher's caller fails and is retried, as for a send of its own). One send's chunks are never
 * split across messages. A send whose signal aborts while it waits is dropped and rejects with the
 * abort; one already on its way is not recalled.
 */
import { type QueueClient } from '@azure/storage-queue';

import { encodeQueueMessage, packInEnvelopes, type WorkItemMessage, workItemPayload } from '../messageCodec';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { type WorkQueue } from './PipelineStore';

/** A request that sends waits behind may not hold them for long (a full send keeps its caller's signal alone). */
const SHARED_SEND_TIMEOUT_MS = 30_000;

interface Waiting {
  readonly messages: readonly WorkItemMessage[];
  /** The parts' JSON and a comma each. */
  readonly bytes: number;
  readonly signal: AbortSignal | undefined;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
  readonly onAbort: () => void;
}

export interface WorkQueueCounts {
  /** Queue messages sent. */
  readonly messages: number;
  /** Sends answered (each `send` call that resolved). */
  readonly sends: number;
}

export class QueueWorkQueue implements WorkQueue {
  readonly #perMessage: number;
  readonly #waiting: Waiting[] = [];
  /** A send (alone, or a round of shared messages) is on its way: sends of a few chunks wait. */
  #busy = false;
  #messages = 0;
  #sends = 0;

  /** `perMessage`: the most chunks a message carries (JOB_CHUNKS_PER_MESSAGE); 1 shares nothing. */
  constructor(
    private readonly queue: QueueClient,
    perMessage = 1,
  ) {
    this.#perMessage = Math.max(1, Math.floor(perMessage));
  }

  private readonly ensureQueue = onceUntilSuccess((signal) => this.queue.createIfNotExists({ abortSignal: signal }));

  /** What this queue has sent so far (its test reads it). */
  counts(): WorkQueueCounts {
    return { messages: this.#messages, sends: this.#sends };
  }

  async send(messages: readonly WorkItemMessage[], signal?: AbortSignal): Promise<void> {
    await this.ensureQueue(signal);
    signal?.throwIfAborted();
    if (messages.length >= this.#perMessage) {
      await this.sendMessage(messages, signal);
    } else if (!this.#busy) {
      this.#busy = true;
      try {
        const timeout = AbortSignal.timeout(SHARED_SEND_TIMEOUT_MS);
        await this.sendMessage(messages, signal === undefined ? timeout : AbortSignal.any([signal, timeout]));
      } finally {
        this.#busy = false;
        this.#drain();
      }
    } else {
      await this.#wait(messages, signal);
    }
    this.#sends += 1;
  }

  private async sendMessage(messages: readonly WorkItemMessage[], signal: AbortSignal | undefined): Promise<void> {
    await this.queue.sendMessage(encodeQueueMessage(workItemPayload(messages)), { abortSignal: signal });
    this.#messages += 1;
  }

  #wait(messages: readonly WorkItemMessage[], signal: AbortSignal | undefined): Promise<void> {
    const bytes = messages.reduce((sum, m) => sum + Buffer.byteLength(JSON.stringify(m), 'utf8') + 1, 0);
    return new Promise<void>((resolve, reject) => {
      const waiting: Waiting = {
        messages,
        bytes,
        signal,
        resolve: () => {
          signal?.removeEventListener('abort', waiting.onAbort);
          resolve();
        },
        reject: (err) => {
          signal?.removeEventListener('abort', waiting.onAbort);
          reject(err instanceof Error ? err : new Error(String(err)));
        },
        onAbort: () => {
          const at = this.#waiting.indexOf(waiting);
          if (at < 0) return;
          this.#waiting.splice(at, 1);
          const reason: unknown = signal?.reason;
          reject(reason instanceof Error ? reason : new Error('The work-item send was aborted before it was sent.'));
        },
      };
      signal?.addEventListener('abort', waiting.onAbort, { once: true });
      this.#waiting.push(waiting);
    });
  }

  /** Sends everything that waited as one round of shared messages; what waits meanwhile goes in the next. */
  #drain(): void {
    if (this.#busy || this.#waiting.length === 0) return;
    const round = this.#waiting.splice(0, this.#waiting.length);
    this.#busy = true;
    void Promise.all(
      // In order, each send whole, at most `perMessage` chunks and the message size to a message.
      packInEnvelopes(round, this.#perMessage, (w) => w.messages.length, (w) => w.bytes).map(async (group) => {
        try {
          // A timeout of its own: one shared by a round's many sends held a listener for each of them
          // (Node warns past 10 on one signal).
          await this.sendMessage(
            group.flatMap((w) => w.messages),
            AbortSignal.timeout(SHARED_SEND_TIMEOUT_MS),
          );
          for (const w of group) w.resolve();
        } catch (err) {
          for (const w of group) w.reject(err);
        }
      }),
    ).finally(() => {
      this.#busy = false;
      this.#drain();
    });
  }
}
