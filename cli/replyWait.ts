/**
 * `coordinator submit --reply-to <queue> --wait`: the job is submitted with that `replyTo` and a
 * fresh `correlationId`, and the command reads the reply queue until the job's outcome arrives
 * (docs/jobs.md, "Outcomes"). The app says where its queues are (GET /api/job-inputs: the queue
 * endpoint and JOB_REPLY_QUEUES, never a credential); this command reads with its own identity, as
 * the items upload does: on Azurite the public development account's key, elsewhere
 * `DefaultAzureCredential` (on Azure: Storage Queue Data Contributor on the account, which the
 * deployment grants to `deployerPrincipalId`). Other consumers' messages it receives are made
 * visible again at once; its own is deleted.
 */
import { type QueueServiceClient } from '@azure/storage-queue';

import { allowListed } from '../shared/config/settings';
import { type JobOutcome } from '../shared/jobs/delivery/JobOutcome';
import { CliError, type CoordinatorClient, EXIT } from './CoordinatorClient';
import { storageCredential } from './storageAccess';

/** What the outcome message carries that the command shows (schemas/job-outcome.schema.json). */
export type ReplyOutcome = Pick<JobOutcome, 'jobId' | 'correlationId' | 'status' | 'result' | 'resultUrl' | 'error' | 'errors'>;

interface ReplyTarget {
  readonly queueServiceUrl: string;
  readonly replyQueues: readonly string[];
}

async function queueService(serviceUrl: string): Promise<QueueServiceClient> {
  const queue = await import('@azure/storage-queue');
  return new queue.QueueServiceClient(serviceUrl, await storageCredential(serviceUrl, 'queue'));
}

/** Checks the queue against the app's allow-list before anything is submitted. */
export async function replyTarget(client: CoordinatorClient, queue: string): Promise<ReplyTarget> {
  const target = await client.request<ReplyTarget>('GET', '/job-inputs');
  if (!allowListed(target.replyQueues, queue)) {
    throw new CliError(EXIT.usage, `--reply-to ${queue}: not a reply queue of this app; allowed: ${target.replyQueues.join(', ')} (JOB_REPLY_QUEUES).`);
  }
  return target;
}

/** Reads the reply queue until the outcome of `jobId` with `correlationId` arrives; undefined after `timeoutMs`. */
export async function waitForReply(
  target: ReplyTarget,
  queue: string,
  jobId: string,
  correlationId: string,
  timeoutMs: number,
  intervalMs: number,
): Promise<ReplyOutcome | undefined> {
  const client = (await queueService(target.queueServiceUrl)).getQueueClient(queue);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await client.exists()) {
      const got = await client.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 });
      for (const m of got.receivedMessageItems) {
        let outcome: ReplyOutcome | undefined;
        try {
          outcome = JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as ReplyOutcome;
        } catch {
          outcome = undefined;
        }
        if (outcome?.jobId === jobId && outcome.correlationId === correlationId) {
          await client.deleteMessage(m.messageId, m.popReceipt);
          return outcome;
        }
        // Someone else's: visible again at once.
        await client.updateMessage(m.messageId, m.popReceipt, undefined, 0);
      }
    }
    if (Date.now() + intervalMs > deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
