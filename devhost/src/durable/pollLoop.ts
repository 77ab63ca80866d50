/**
 * The receive loop that every task hub queue is polled with (TaskHubQueue's polling in
 * DurableTask.AzureStorage): wait while there is no room for more messages, receive, back off on
 * an empty or failed receive, and hand a batch over without waiting for it. Control queues and the
 * work-item queue differ only in what room means and what is done with a batch.
 */
import { type LogFields, type Logger } from '../log';
import { type QueuePoller } from './QueuePoller';

export interface PollLoop<T> {
  readonly poller: QueuePoller;
  readonly logger: Logger;
  /** Logged (warn) when a receive fails, with `error` added to the fields. */
  readonly receiveFailed: { readonly event: string; readonly fields?: LogFields };
  isStopping(): boolean;
  /** How many messages may be received now; none (0 or less) waits for `waitForRoom`. */
  room(): number;
  waitForRoom(): Promise<void>;
  receive(room: number): Promise<T[]>;
  /** Takes a non-empty batch; must not block the loop (the batch is processed in the background). */
  take(batch: T[]): void;
}

export async function pollLoop<T>(loop: PollLoop<T>): Promise<void> {
  while (!loop.isStopping()) {
    const room = loop.room();
    if (room <= 0) {
      await loop.waitForRoom();
      continue;
    }
    let batch: T[];
    try {
      batch = await loop.receive(room);
    } catch (err) {
      loop.logger.warn(loop.receiveFailed.event, { ...loop.receiveFailed.fields, error: err instanceof Error ? err.message : String(err) });
      await loop.poller.wait();
      continue;
    }
    if (batch.length === 0) {
      await loop.poller.wait();
      continue;
    }
    loop.poller.reset();
    loop.take(batch);
  }
}
