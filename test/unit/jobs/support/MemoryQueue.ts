/**
 * The in-memory twin of a submissions queue (shared/jobs/SubmissionQueue.ts) on a clock the test
 * moves: messages in the order sent; a receive makes each message invisible for its visibility
 * timeout, counts a delivery and gives a new pop receipt (the previous one no longer deletes it:
 * 400 PopReceiptMismatch; a deleted message: 404); the count includes invisible messages. `sent` keeps every text ever sent.
 * test/integration/jobs/intake/submissionQueue.test.ts holds it and the Azure queue to the same cases.
 */
import { randomUUID } from 'node:crypto';

import { RestError } from '@azure/storage-queue';

import { type ReceivedSubmission, type SubmissionQueue } from '../../../../shared/jobs/SubmissionQueue';

interface Held {
  readonly messageId: string;
  readonly messageText: string;
  readonly insertedOn: Date;
  popReceipt: string;
  dequeueCount: number;
  visibleAt: number;
}

export class MemoryQueue implements SubmissionQueue {
  readonly #messages: Held[] = [];
  readonly sent: string[] = [];

  constructor(
    readonly name: string,
    private readonly now: () => number = Date.now,
  ) {}

  /** The messages held now (visible or not), oldest first. */
  get texts(): string[] {
    return this.#messages.map((m) => m.messageText);
  }

  createIfNotExists(): Promise<unknown> {
    return Promise.resolve();
  }

  receiveMessages(options: { readonly numberOfMessages: number; readonly visibilityTimeout: number }): Promise<{ receivedMessageItems: ReceivedSubmission[] }> {
    if (!(options.visibilityTimeout >= 1 && options.visibilityTimeout <= 604_800)) {
      return Promise.reject(new RestError('One of the query parameters specified in the request URI is outside the permissible range.', {
        statusCode: 400,
        code: 'OutOfRangeQueryParameterValue',
      }));
    }
    const now = this.now();
    const taken = this.#messages.filter((m) => m.visibleAt <= now).slice(0, options.numberOfMessages);
    for (const m of taken) {
      m.visibleAt = now + options.visibilityTimeout * 1000;
      m.dequeueCount += 1;
      m.popReceipt = randomUUID();
    }
    const receivedMessageItems = taken.map(({ messageId, messageText, insertedOn, popReceipt, dequeueCount }) => ({
      messageId,
      messageText,
      insertedOn,
      popReceipt,
      dequeueCount,
    }));
    return Promise.resolve({ receivedMessageItems });
  }

  deleteMessage(messageId: string, popReceipt: string): Promise<unknown> {
    const at = this.#messages.findIndex((m) => m.messageId === messageId);
    if (at < 0) return Promise.reject(new RestError('The specified message does not exist.', { statusCode: 404, code: 'MessageNotFound' }));
    if (this.#messages[at]?.popReceipt !== popReceipt) {
      return Promise.reject(new RestError('The specified pop receipt did not match.', { statusCode: 400, code: 'PopReceiptMismatch' }));
    }
    this.#messages.splice(at, 1);
    return Promise.resolve({});
  }

  sendMessage(text: string): Promise<{ messageId: string; popReceipt: string }> {
    const held: Held = { messageId: randomUUID(), messageText: text, insertedOn: new Date(this.now()), popReceipt: randomUUID(), dequeueCount: 0, visibleAt: this.now() };
    this.#messages.push(held);
    this.sent.push(text);
    return Promise.resolve({ messageId: held.messageId, popReceipt: held.popReceipt });
  }

  getProperties(): Promise<{ approximateMessagesCount: number }> {
    return Promise.resolve({ approximateMessagesCount: this.#messages.length });
  }
}
