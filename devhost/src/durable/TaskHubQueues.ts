/**
 * The task hub's queues, named and used as DurableTask.AzureStorage names and uses them: control
 * queues `<hub>-control-00` .. `-NN` (partitionCount, default 4) carry events for orchestration
 * instances (start, activity results, fired timers, raised events, termination), an instance's
 * partition being the FNV-1a hash of its id's UTF-8 bytes modulo the partition count
 * (AzureStorageOrchestrationService.GetControlQueueAsync, Fnv1aHashHelper); the work-item queue
 * `<hub>-workitems` carries one message per activity call.
 *
 * Guarantees: bodies are base64-encoded JSON (a raw control character in a message breaks every
 * receive on that queue in Azurite); a body too large for a queue message travels in a blob of
 * `<hub>-largemessages`, deleted after its message; messages never expire (timers may wait long).
 * Delivery is at least once: consumers make every step idempotent.
 */
import { randomUUID } from 'node:crypto';

import { type ContainerClient, RestError } from '@azure/storage-blob';
import { type QueueClient } from '@azure/storage-queue';

import { type Logger } from '../log';
import { blobServiceClient, queueServiceClient, type StorageConnection } from '../storage';
import { type HistoryEvent } from './HistoryEvent';
import { type TaskHubNames } from './taskHubNames';

/** Events for one orchestration instance. */
export interface ControlMessage {
  /** Unique per message, so a redelivered message is recognized after it was applied. */
  readonly mid: string;
  readonly instanceId: string;
  /** When set, the events belong to that execution only (older executions' events are dropped). */
  readonly executionId?: string;
  readonly events: HistoryEvent[];
}

export interface ActivityTask {
  readonly id: number;
  readonly name: string;
  readonly input: unknown;
}

/** One activity call an orchestration episode scheduled (DurableTask.Core sends one message per TaskScheduled). */
export interface ActivityWorkMessage {
  readonly mid: string;
  readonly instanceId: string;
  readonly executionId: string;
  readonly task: ActivityTask;
}

export interface ReceivedMessage<T> {
  readonly body: T;
  readonly messageId: string;
  popReceipt: string;
  readonly dequeueCount: number;
  readonly queueName: string;
  readonly largeBlob?: string;
}

interface Envelope<T> {
  readonly body?: T;
  readonly blob?: string;
}

/** Azure allows 64 KiB per message; the encoded envelope stays under it with room to spare. */
const MAX_ENCODED_LENGTH = 60_000;
/** Azure's ceiling for a message's initial invisibility is 7 days; longer delays are re-chained by the consumer. */
export const MAX_DELAY_SECONDS = 6 * 24 * 3600;

/** Fnv1aHashHelper.ComputeHash over the id's UTF-8 bytes, modulo the partition count. */
export function partitionOf(instanceId: string, count: number): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(instanceId, 'utf8')) {
    hash ^= byte;
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % count;
}

function isNotFound(err: unknown): boolean {
  return err instanceof RestError ? err.statusCode === 404 : (err as { statusCode?: unknown } | null)?.statusCode === 404;
}

export function newMessageId(): string {
  return randomUUID().replace(/-/g, '').slice(0, 20);
}

/** Which of the hub's queues a message was added to: a control queue (by partition) or the work-item queue. */
export type SentTo = { readonly kind: 'control'; readonly partition: number } | { readonly kind: 'work' };

export class TaskHubQueues {
  readonly #control: QueueClient[];
  #sentListener: ((to: SentTo) => void) | undefined;
  readonly #work: QueueClient;
  readonly #largeMessages: ContainerClient;
  #ready: Promise<void> | undefined;

  constructor(
    storage: StorageConnection,
    names: TaskHubNames,
    private readonly logger: Logger,
    /** The longest a message is kept invisible when sent; longer delays are re-chained by the consumer. */
    private readonly maxDelaySeconds: number = MAX_DELAY_SECONDS,
  ) {
    const queues = queueServiceClient(storage);
    this.#control = names.controlQueues.map((name) => queues.getQueueClient(name));
    this.#work = queues.getQueueClient(names.workItemQueue);
    this.#largeMessages = blobServiceClient(storage).getContainerClient(names.largeMessagesContainer);
  }

  ensureReady(): Promise<void> {
    this.#ready ??= Promise.all([...this.#control, this.#work].map((q) => q.createIfNotExists()))
      .then(() => this.#largeMessages.createIfNotExists())
      .then(() => undefined)
      .catch((err: unknown) => {
        this.#ready = undefined;
        throw err;
      });
    return this.#ready;
  }

  /** The index of the control queue (partition) that carries `instanceId`'s events. */
  partitionFor(instanceId: string): number {
    return partitionOf(instanceId, this.#control.length);
  }

  controlQueueFor(instanceId: string): QueueClient {
    const queue = this.#control[this.partitionFor(instanceId)];
    if (queue === undefined) throw new Error('No control queue configured.');
    return queue;
  }

  /**
   * Called after each message this process adds to one of the hub's queues: the dispatcher wakes its
   * poller of that queue, as TaskHubQueue.AddMessageAsync resets its BackoffPollingHelper.
   */
  onSent(listener: (to: SentTo) => void): void {
    this.#sentListener = listener;
  }

  /** Sends events to the instance's control queue, invisible for `delaySeconds` (timers). */
  async sendControl(message: ControlMessage, delaySeconds = 0): Promise<void> {
    const partition = this.partitionFor(message.instanceId);
    await this.#send(this.controlQueueFor(message.instanceId), message, delaySeconds);
    this.#sentListener?.({ kind: 'control', partition });
  }

  async sendWork(message: ActivityWorkMessage): Promise<void> {
    await this.#send(this.#work, message, 0);
    this.#sentListener?.({ kind: 'work' });
  }

  get controlQueueCount(): number {
    return this.#control.length;
  }

  /** Up to `max` (at most 32) messages of control queue `partition`. */
  receiveControl(partition: number, max: number, visibilitySeconds: number): Promise<Array<ReceivedMessage<ControlMessage>>> {
    const queue = this.#control[partition];
    if (queue === undefined) throw new Error(`No control queue ${partition}.`);
    return this.#receive<ControlMessage>(queue, max, visibilitySeconds);
  }

  receiveWork(max: number, visibilitySeconds: number): Promise<Array<ReceivedMessage<ActivityWorkMessage>>> {
    return this.#receive<ActivityWorkMessage>(this.#work, max, visibilitySeconds);
  }

  /** Makes a message visible again after `visibilitySeconds` without consuming it (ControlQueue.AbandonMessageAsync). */
  async abandon(message: ReceivedMessage<unknown>, visibilitySeconds: number): Promise<void> {
    try {
      await this.#queue(message.queueName).updateMessage(message.messageId, message.popReceipt, undefined, Math.max(0, Math.round(visibilitySeconds)));
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** Keeps a message hidden for another `visibilitySeconds` (long activities). */
  async extendVisibility(message: ReceivedMessage<unknown>, visibilitySeconds: number): Promise<void> {
    const response = await this.#queue(message.queueName).updateMessage(message.messageId, message.popReceipt, undefined, visibilitySeconds);
    if (response.popReceipt !== undefined) message.popReceipt = response.popReceipt;
  }

  /** Deletes a consumed message (already gone is fine: another consumer finished it). */
  async delete(message: ReceivedMessage<unknown>): Promise<void> {
    try {
      await this.#queue(message.queueName).deleteMessage(message.messageId, message.popReceipt);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    if (message.largeBlob !== undefined) await this.#largeMessages.deleteBlob(message.largeBlob, { deleteSnapshots: 'include' }).catch(() => undefined);
  }

  #queue(name: string): QueueClient {
    const queue = [...this.#control, this.#work].find((q) => q.name === name);
    if (queue === undefined) throw new Error(`Unknown queue ${name}.`);
    return queue;
  }

  async #send(queue: QueueClient, body: unknown, delaySeconds: number): Promise<void> {
    await this.ensureReady();
    let encoded = Buffer.from(JSON.stringify({ body } satisfies Envelope<unknown>)).toString('base64');
    if (encoded.length > MAX_ENCODED_LENGTH) {
      const blobName = `${randomUUID()}.json`;
      const text = JSON.stringify(body);
      await this.#largeMessages.getBlockBlobClient(blobName).upload(text, Buffer.byteLength(text));
      encoded = Buffer.from(JSON.stringify({ blob: blobName } satisfies Envelope<unknown>)).toString('base64');
    }
    // Whole seconds only: rounded down, so a timer arrives up to a second early and its consumer
    // holds it until it is due (never late by the rounding, never fired early).
    const visibilityTimeout = Math.min(this.maxDelaySeconds, Math.max(0, Math.floor(delaySeconds)));
    await queue.sendMessage(encoded, { messageTimeToLive: -1, ...(visibilityTimeout > 0 ? { visibilityTimeout } : {}) });
  }

  async #receive<T>(queue: QueueClient, max: number, visibilitySeconds: number): Promise<Array<ReceivedMessage<T>>> {
    await this.ensureReady();
    const response = await queue.receiveMessages({ numberOfMessages: Math.min(32, Math.max(1, max)), visibilityTimeout: visibilitySeconds });
    const received: Array<ReceivedMessage<T>> = [];
    for (const item of response.receivedMessageItems) {
      const base = { messageId: item.messageId, popReceipt: item.popReceipt, dequeueCount: item.dequeueCount, queueName: queue.name };
      let body: T | undefined;
      let largeBlob: string | undefined;
      try {
        const envelope = JSON.parse(Buffer.from(item.messageText, 'base64').toString('utf8')) as Envelope<T>;
        if (envelope.blob !== undefined) {
          largeBlob = envelope.blob;
          body = JSON.parse((await this.#largeMessages.getBlockBlobClient(envelope.blob).downloadToBuffer()).toString('utf8')) as T;
        } else {
          body = envelope.body;
        }
      } catch (err) {
        if (!(err instanceof SyntaxError) && !isNotFound(err)) throw err;
        body = undefined;
      }
      if (body === undefined) {
        // Not ours, corrupted, or its payload blob is gone: it can never be processed, so it is
        // dropped loudly instead of blocking the queue.
        this.logger.error('durable.message.unreadable', { code: 'DURABLE_BAD_MESSAGE', queue: queue.name, messageId: item.messageId, excerpt: item.messageText.slice(0, 200) });
        await queue.deleteMessage(item.messageId, item.popReceipt).catch(() => undefined);
        continue;
      }
      received.push({ ...base, body, ...(largeBlob === undefined ? {} : { largeBlob }) });
    }
    return received;
  }
}
