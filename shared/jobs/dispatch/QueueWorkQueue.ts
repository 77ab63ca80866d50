/**
 * The work queue on Azure Storage: base64 JSON messages, as the Functions host decodes them by
 * default; several chunks sent together travel as one envelope message (messageCodec).
 */
import { type QueueClient } from '@azure/storage-queue';

import { encodeQueueMessage, type WorkItemMessage, workItemPayload } from '../messageCodec';
import { onceUntilSuccess } from '../onceUntilSuccess';
import { type WorkQueue } from './PipelineStore';

export class QueueWorkQueue implements WorkQueue {
  constructor(private readonly queue: QueueClient) {}

  private readonly ensureQueue = onceUntilSuccess((signal) => this.queue.createIfNotExists({ abortSignal: signal }));

  async send(messages: readonly WorkItemMessage[], signal?: AbortSignal): Promise<void> {
    await this.ensureQueue(signal);
    await this.queue.sendMessage(encodeQueueMessage(workItemPayload(messages)), { abortSignal: signal });
  }
}
