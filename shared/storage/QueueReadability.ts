/**
 * Only for Azurite: notices a jobs queue that holds messages no receive returns, and tells the
 * operator what to do. On Azure it never fires (Azure refuses such a message at send); it is here
 * for the developer whose local run on Azurite would otherwise wait silently.
 *
 * Azurite accepts a message whose text holds a raw control character, and from then on answers
 * every receive of that queue with nothing: every submission behind it, HTTP ones included (they
 * travel through the same queue), waits silently. The intake cannot read or delete the bad message,
 * so it says so: when the queue has held messages while every receive came back empty for longer
 * than a dead leader can hold one (the intake's visibility timeout, plus a margin), it logs
 * `intake.queue_unreadable` (level error, code JOBS_QUEUE_UNREADABLE) with the queue, the message
 * count and the fix, and repeats it every 5 minutes while the state lasts.
 *
 * Cost: one queue properties read per minute, and only while receives come back empty (so all day
 * on an idle leader); nothing when the queue is busy. Every minute, not every 30 s: on Azure the
 * check only costs, and a minute late it is still a hint (reported after about 2 minutes instead of 90 s).
 * Not guaranteed: telling a bad message from messages held invisible on purpose for longer than
 * the margin (nothing in this app does that to the jobs queue).
 */
import { type Logger } from '../observability/log';

/** The queue, by what the check reads of it (the SDK's QueueClient is one). */
export interface ReadableQueue {
  readonly name: string;
  getProperties(options?: { readonly abortSignal?: AbortSignal | undefined }): Promise<{ readonly approximateMessagesCount?: number }>;
}

export const QUEUE_READABILITY = {
  /** Check the queue's message count at most this often while receives come back empty. */
  checkEverySeconds: 60,
  /** Repeat the error this often while the state lasts. */
  repeatEverySeconds: 300,
} as const;

export class QueueReadability {
  #emptySince: number | undefined;
  #lastCheck: number | undefined;
  #lastReported: number | undefined;

  constructor(
    private readonly deps: {
      readonly queue: ReadableQueue;
      readonly logger: Logger;
      readonly now: () => Date;
      /** How long a received message may legitimately stay invisible (the intake's visibility timeout). */
      readonly heldSeconds: number;
    },
  ) {}

  /** A receive returned messages: the queue reads. */
  sawMessages(): void {
    this.#emptySince = undefined;
  }

  /** A pass's first receive came back empty. Resolves true when it reported the queue unreadable. */
  async afterEmptyReceive(signal?: AbortSignal): Promise<boolean> {
    const now = this.deps.now().getTime();
    if (this.#lastCheck !== undefined && now - this.#lastCheck < QUEUE_READABILITY.checkEverySeconds * 1000) return false;
    this.#lastCheck = now;
    let count: number;
    try {
      count = (await this.deps.queue.getProperties({ abortSignal: signal })).approximateMessagesCount ?? 0;
    } catch {
      // Storage trouble shows elsewhere (the pass fails or the health check says degraded).
      return false;
    }
    if (count === 0) {
      this.#emptySince = undefined;
      return false;
    }
    this.#emptySince ??= now;
    const stuckMs = now - this.#emptySince;
    // A dead leader's received messages come back after heldSeconds; anything longer is not that.
    if (stuckMs < (this.deps.heldSeconds + QUEUE_READABILITY.checkEverySeconds) * 1000) return false;
    if (this.#lastReported !== undefined && now - this.#lastReported < QUEUE_READABILITY.repeatEverySeconds * 1000) return false;
    this.#lastReported = now;
    const queue = this.deps.queue.name;
    this.deps.logger.error('intake.queue_unreadable', {
      code: 'JOBS_QUEUE_UNREADABLE',
      queue,
      messages: count,
      since: new Date(this.#emptySince).toISOString(),
      action:
        `The jobs queue "${queue}" holds ${count} message(s) but every receive comes back empty, so no submission is taken. ` +
        'On Azurite this is a message whose text holds a raw control character (Azure refuses such a message when it is sent). ' +
        `Find it with Azure Storage Explorer and delete it, or clear the queue (az storage message clear --queue-name ${queue}), ` +
        'then resubmit the jobs that were behind it (GET /api/jobs?status=pending lists the HTTP ones).',
    });
    return true;
  }
}
