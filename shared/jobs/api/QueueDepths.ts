/**
 * How many messages wait in the app's queues, for the live page (GET /api/queues): the jobs queue
 * (submissions the leader has not taken yet), its poison queue (rejected submissions, kept for
 * people), the work-items queue (chunks waiting for a worker) and its poison queue (messages the
 * host gave up on). One Get Queue Properties per queue, shared by every caller for `ttlMs` (5 s),
 * so an open page costs 4 reads per 5 s per instance it polls, however many pages are open.
 *
 * Not guaranteed: exact numbers. The service's count is approximate (it includes messages taken
 * and still invisible) and up to `ttlMs` old; a queue not created yet reads as `null`.
 */
import { isRestError, type QueueClient } from '@azure/storage-queue';

import { CachedRead } from '../../leader/CachedRead';
import { type Clock, systemClock } from '../../leader/Clock';

export type QueueRole = 'jobs' | 'jobs-poison' | 'work-items' | 'work-items-poison';

export interface QueueDepth {
  readonly role: QueueRole;
  readonly name: string;
  /** Approximate messages in the queue; null when the queue does not exist (yet). */
  readonly messages: number | null;
}

export interface QueueDepthsView {
  readonly queues: readonly QueueDepth[];
  /** When storage was read (this instance's clock). */
  readonly readAt: string;
}

export const QUEUE_DEPTHS_TTL_MS = 5_000;
/** One slow queue must not hold the page: each read gives up after this. */
const READ_TIMEOUT_MS = 5_000;

export class QueueDepths {
  private readonly cache: CachedRead<QueueDepthsView>;

  constructor(
    private readonly queues: ReadonlyArray<{ readonly role: QueueRole; readonly client: QueueClient }>,
    ttlMs = QUEUE_DEPTHS_TTL_MS,
    clock: Pick<Clock, 'now'> = systemClock,
  ) {
    this.cache = new CachedRead(() => this.readAll(), ttlMs, clock);
  }

  /** How many reads went to storage (each reads every queue). */
  get reads(): number {
    return this.cache.reads;
  }

  read(): Promise<QueueDepthsView> {
    return this.cache.get();
  }

  private async readAll(): Promise<QueueDepthsView> {
    const queues = await Promise.all(
      this.queues.map(async ({ role, client }): Promise<QueueDepth> => {
        try {
          const props = await client.getProperties({ abortSignal: AbortSignal.timeout(READ_TIMEOUT_MS) });
          return { role, name: client.name, messages: props.approximateMessagesCount ?? 0 };
        } catch (err) {
          if (isRestError(err) && err.statusCode === 404) return { role, name: client.name, messages: null };
          throw err;
        }
      }),
    );
    return { queues, readAt: new Date().toISOString() };
  }
}
