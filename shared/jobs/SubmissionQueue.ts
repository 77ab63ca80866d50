/**
 * The narrow view of a queue that the intake and the service use for submissions (the jobs queue
 * and its poison queue): the operations they call, typed by the fields they read. The SDK's
 * `QueueClient` is one as it is; the in-memory twin (test/unit/jobs/support/MemoryQueue.ts) is the
 * other, and test/integration/jobs/intake/submissionQueue.test.ts holds both to the same cases.
 */
import { type DequeuedMessageItem } from '@azure/storage-queue';

/** A received message, by the fields the intake reads. */
export type ReceivedSubmission = Pick<DequeuedMessageItem, 'messageId' | 'popReceipt' | 'messageText' | 'dequeueCount' | 'insertedOn'>;

interface Signal {
  readonly abortSignal?: AbortSignal | undefined;
}

export interface SubmissionQueue {
  readonly name: string;
  createIfNotExists(options?: Signal): Promise<unknown>;
  /** Up to `numberOfMessages` visible messages, each invisible for `visibilityTimeout` seconds and counted a delivery. */
  receiveMessages(
    options: Signal & { readonly numberOfMessages: number; readonly visibilityTimeout: number },
  ): Promise<{ readonly receivedMessageItems: ReceivedSubmission[] }>;
  /** Deletes the delivery `popReceipt` names (a later delivery's receipt replaces it: 404). */
  deleteMessage(messageId: string, popReceipt: string, options?: Signal): Promise<unknown>;
  /** `messageTimeToLive` -1: never expires. */
  sendMessage(
    text: string,
    options?: Signal & { readonly messageTimeToLive?: number },
  ): Promise<{ readonly messageId: string; readonly popReceipt: string }>;
  getProperties(options?: Signal): Promise<{ readonly approximateMessagesCount?: number }>;
}
