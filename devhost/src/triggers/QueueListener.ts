/**
 * The storage queue trigger, following the host's QueueListener and QueueProcessor:
 * - polls `batchSize` messages at a time, each received invisible for 10 minutes and kept invisible
 *   (renewed at half that) while its invocation runs; fetches the next batch once fewer than
 *   `newBatchThreshold` are running; an empty poll backs off exponentially with jitter from 100 ms to
 *   `maxPollingInterval`, and a write to the queue from this process (an output binding) wakes it;
 * - with `messageEncoding: base64` the body is base64-decoded; a message that is not valid base64
 *   goes straight to `<queue>-poison` unchanged, as the host's MessageDecodingFailed handler does;
 * - success deletes the message; failure makes it visible again after `visibilityTimeout`, and the
 *   attempt with `dequeueCount >= maxDequeueCount` moves it to `<queue>-poison` (a message already
 *   past the limit when received is moved without an invocation);
 * - the handler gets the body as a string (the v4 library parses JSON), and the trigger metadata the
 *   host gives: QueueTrigger, Id, DequeueCount, InsertionTime, ExpirationTime, NextVisibleTime,
 *   PopReceipt.
 *
 * Not guaranteed (same as the host): exactly-once. A process that dies mid-invocation leaves its
 * messages invisible until their 10 minutes pass, then they are delivered again.
 */
import { randomUUID } from 'node:crypto';

import { type DequeuedMessageItem, type QueueClient, RestError } from '@azure/storage-queue';

import { type FunctionInvoker, type HostedFunction } from '../contracts';
import { MIN_QUEUE_POLLING_INTERVAL_MS, type QueuesOptions } from '../HostConfig';
import { type Logger } from '../log';

/** The host receives with a fixed 10-minute visibility and renews it while the function runs. */
export const RECEIVE_VISIBILITY_SECONDS = 600;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

export function decodeBase64Strict(text: string): Buffer | undefined {
  const compact = text.replace(/\s+/g, '');
  if (compact.length % 4 !== 0 || !BASE64.test(compact)) return undefined;
  return Buffer.from(compact, 'base64');
}

function dotnetTime(date: Date | undefined): string | undefined {
  return date === undefined ? undefined : date.toISOString().replace('Z', '+00:00');
}

export interface QueueListenerOptions {
  readonly fn: HostedFunction;
  readonly queue: QueueClient;
  readonly poisonQueue: QueueClient;
  readonly options: QueuesOptions;
  readonly invoker: FunctionInvoker;
  readonly logger: Logger;
}

export class QueueListener {
  readonly #processing = new Set<Promise<void>>();
  #stopping = false;
  #loop: Promise<void> | undefined;
  #wake: (() => void) | undefined;
  #delayMs = MIN_QUEUE_POLLING_INTERVAL_MS;
  #queueExists = false;
  #poisonExists = false;

  constructor(private readonly o: QueueListenerOptions) {}

  get queueName(): string {
    return this.o.queue.name;
  }

  start(): void {
    this.#stopping = false;
    this.#loop = this.#run();
  }

  /** Something was written to this queue by this process: poll now instead of waiting out the backoff. */
  notify(): void {
    this.#wake?.();
  }

  /** Stops polling and waits for running invocations (bounded by `timeoutMs`); true when all finished. */
  async stop(timeoutMs: number): Promise<boolean> {
    this.#stopping = true;
    this.#wake?.();
    await this.#loop;
    const all = Promise.all([...this.#processing]).then(() => true);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const finished = await Promise.race([all, timeout]);
    if (timer !== undefined) clearTimeout(timer);
    return finished;
  }

  async #run(): Promise<void> {
    while (!this.#stopping) {
      let found = false;
      try {
        if (!this.#queueExists) {
          // The host checks existence first rather than polling a missing queue into errors.
          this.#queueExists = await this.o.queue.exists();
        }
        if (this.#queueExists) {
          const batch = await this.o.queue.receiveMessages({ numberOfMessages: this.o.options.batchSize, visibilityTimeout: RECEIVE_VISIBILITY_SECONDS });
          for (const message of batch.receivedMessageItems) {
            found = true;
            const task: Promise<void> = this.#process(message).finally(() => this.#processing.delete(task));
            this.#processing.add(task);
          }
        }
      } catch (err) {
        this.#queueExists = false;
        this.o.logger.warn('queue.poll_failed', { function: this.o.fn.name, queue: this.queueName, error: err });
      }
      if (found) {
        this.#delayMs = MIN_QUEUE_POLLING_INTERVAL_MS;
        while (this.#processing.size > this.o.options.newBatchThreshold && !this.#stopping) {
          await Promise.race(this.#processing);
        }
      } else {
        await this.#sleep(this.#nextBackoff());
      }
    }
  }

  #nextBackoff(): number {
    const current = this.#delayMs;
    const doubled = Math.min(this.o.options.maxPollingIntervalMs, current * 2);
    // Randomized like the host's RandomizedExponentialBackoffStrategy, so instances do not poll in lockstep.
    this.#delayMs = Math.max(MIN_QUEUE_POLLING_INTERVAL_MS, Math.round(doubled * (0.8 + Math.random() * 0.2)));
    return current;
  }

  async #sleep(ms: number): Promise<void> {
    await new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = () => {
        this.#delayMs = MIN_QUEUE_POLLING_INTERVAL_MS;
        done();
      };
    });
    this.#wake = undefined;
  }

  async #process(message: DequeuedMessageItem): Promise<void> {
    const fn = this.o.fn.name;
    const { maxDequeueCount, messageEncoding, visibilityTimeoutMs } = this.o.options;
    try {
      if (message.dequeueCount > maxDequeueCount) {
        await this.#poison(message, popReceiptOf(message));
        return;
      }
      let body: string;
      if (messageEncoding === 'base64') {
        const decoded = decodeBase64Strict(message.messageText);
        if (decoded === undefined) {
          this.o.logger.warn('queue.decoding_failed', {
            function: fn,
            queue: this.queueName,
            messageId: message.messageId,
            hint: 'Message decoding has failed! Check MessageEncoding settings.',
          });
          await this.#poison(message, popReceiptOf(message));
          return;
        }
        body = decoded.toString('utf8');
      } else {
        body = message.messageText;
      }

      const receipt = { popReceipt: message.popReceipt, nextVisibleOn: message.nextVisibleOn };
      const renewal = this.#keepInvisible(message, receipt);
      let ok = true;
      try {
        await this.o.invoker.invoke(fn, {
          trigger: body,
          triggerMetadata: {
            QueueTrigger: body,
            Id: message.messageId,
            DequeueCount: message.dequeueCount,
            InsertionTime: dotnetTime(message.insertedOn),
            ExpirationTime: dotnetTime(message.expiresOn),
            NextVisibleTime: dotnetTime(receipt.nextVisibleOn),
            PopReceipt: receipt.popReceipt,
            sys: { MethodName: fn, UtcNow: new Date().toISOString(), RandGuid: randomUUID() },
          },
        });
      } catch (err) {
        ok = false;
        this.o.logger.warn('queue.invocation_failed', {
          function: fn,
          queue: this.queueName,
          messageId: message.messageId,
          dequeueCount: message.dequeueCount,
          error: err,
        });
      } finally {
        renewal.stop();
        await renewal.settled;
      }

      if (ok) {
        await this.#delete(message.messageId, receipt.popReceipt);
      } else if (message.dequeueCount >= maxDequeueCount) {
        await this.#poison(message, receipt.popReceipt);
      } else {
        await this.o.queue.updateMessage(message.messageId, receipt.popReceipt, undefined, Math.round(visibilityTimeoutMs / 1000)).catch((err: unknown) => {
          // 404 / pop receipt mismatch: someone else has the message now, nothing to release.
          if (!(err instanceof RestError) || (err.statusCode !== 404 && err.statusCode !== 400)) throw err;
        });
      }
    } catch (err) {
      this.o.logger.error('queue.message_handling_failed', { function: fn, queue: this.queueName, messageId: message.messageId, error: err });
    }
  }

  /** Renews the message's invisibility at half its period while the invocation runs. */
  #keepInvisible(message: DequeuedMessageItem, receipt: { popReceipt: string; nextVisibleOn: Date }): { stop(): void; settled: Promise<void> } {
    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    let settled: Promise<void> = Promise.resolve();
    const schedule = (): void => {
      timer = setTimeout(() => {
        settled = this.o.queue
          .updateMessage(message.messageId, receipt.popReceipt, undefined, RECEIVE_VISIBILITY_SECONDS)
          .then((res) => {
            receipt.popReceipt = res.popReceipt ?? receipt.popReceipt;
            receipt.nextVisibleOn = res.nextVisibleOn ?? receipt.nextVisibleOn;
          })
          .catch((err: unknown) => this.o.logger.warn('queue.visibility_renewal_failed', { queue: this.queueName, messageId: message.messageId, error: err }))
          .finally(() => {
            if (!stopped) schedule();
          });
      }, (RECEIVE_VISIBILITY_SECONDS * 1000) / 2);
      timer.unref();
    };
    schedule();
    return {
      stop: () => {
        stopped = true;
        if (timer !== undefined) clearTimeout(timer);
      },
      get settled() {
        return settled;
      },
    };
  }

  async #poison(message: DequeuedMessageItem, popReceipt: string): Promise<void> {
    if (!this.#poisonExists) {
      await this.o.poisonQueue.createIfNotExists();
      this.#poisonExists = true;
    }
    this.o.logger.warn('queue.message_poisoned', {
      function: this.o.fn.name,
      queue: this.queueName,
      poisonQueue: this.o.poisonQueue.name,
      messageId: message.messageId,
      dequeueCount: message.dequeueCount,
      maxDequeueCount: this.o.options.maxDequeueCount,
    });
    // The original text, unchanged: the poison queue keeps exactly what was sent.
    await this.o.poisonQueue.sendMessage(message.messageText);
    await this.#delete(message.messageId, popReceipt);
  }

  async #delete(messageId: string, popReceipt: string): Promise<void> {
    try {
      await this.o.queue.deleteMessage(messageId, popReceipt);
    } catch (err) {
      // Pop receipt mismatch or gone: another consumer owns it now (the host logs and moves on).
      if (!(err instanceof RestError) || (err.statusCode !== 404 && err.statusCode !== 400)) throw err;
      this.o.logger.debug('queue.delete_skipped', { queue: this.queueName, messageId, status: err.statusCode });
    }
  }
}

function popReceiptOf(message: DequeuedMessageItem): string {
  return message.popReceipt;
}
