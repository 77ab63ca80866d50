/**
 * The queue worker on every instance: one work-items message is one chunk of a job, or an envelope
 * of a few (the dispatcher packs chunks sent together), each handled as if it came alone. The host
 * decodes base64, redelivers on a throw (up to host.json queues.maxDequeueCount = 5) and passes
 * the delivery count in `triggerMetadata.dequeueCount`; the worker records a chunk as failed on
 * its job's last attempt so the message never needs the poison queue. Logic: WorkItemProcessor.
 * Its Durable client input is there for leader election, not for the work: see AppRoot.offer.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 6.
 */
import '../shared/app/stopHook';

import { app, type InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';

import { appRoot } from '../shared/app/appRoot';
import { doorbellOf } from '../shared/jobs/messageCodec';

const root = appRoot();

export async function workItemsWorker(message: unknown, context: InvocationContext): Promise<void> {
  // Not used by the worker itself: it lets this instance campaign for leadership (AppRoot.offer), at
  // once when the message is the doorbell that says the lease is free.
  root.offer(df.getClient(context), { leaseFree: doorbellOf(message) === 'lease-free' });
  const meta = context.triggerMetadata ?? {};
  const dequeueCount = Number(meta.dequeueCount ?? 1);
  const outcomes = await root.jobs.worker.handleMessage(message, {
    dequeueCount: Number.isFinite(dequeueCount) && dequeueCount >= 1 ? dequeueCount : 1,
    ...(typeof meta.id === 'string' ? { messageId: meta.id } : {}),
  });
  context.debug(`work item: ${outcomes.join(', ')}`);
}

app.storageQueue('workItemsWorker', {
  queueName: root.settings.jobs.workItemsQueue,
  connection: root.settings.storageConnectionName,
  extraInputs: [df.input.durableClient()],
  handler: workItemsWorker,
});
