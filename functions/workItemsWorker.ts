/**
 * The queue worker on every instance: one work-items message is one chunk of a job. The host
 * decodes base64, redelivers on a throw (up to host.json queues.maxDequeueCount = 5) and passes
 * the delivery count in `triggerMetadata.dequeueCount`; the worker records a chunk as failed on
 * its job's last attempt so the message never needs the poison queue. Logic: WorkItemProcessor.
 */
import { app, type InvocationContext } from '@azure/functions';

import { loadSettings } from '../shared/config/settings';
import { jobComponents } from '../shared/jobs/jobComponents';

const settings = loadSettings();

export async function workItemsWorker(message: unknown, context: InvocationContext): Promise<void> {
  const meta = context.triggerMetadata ?? {};
  const dequeueCount = Number(meta.dequeueCount ?? 1);
  const outcome = await jobComponents().worker.handle(message, {
    dequeueCount: Number.isFinite(dequeueCount) && dequeueCount >= 1 ? dequeueCount : 1,
    ...(typeof meta.id === 'string' ? { messageId: meta.id } : {}),
  });
  context.debug(`work item: ${outcome}`);
}

app.storageQueue('workItemsWorker', {
  queueName: settings.jobs.workItemsQueue,
  connection: settings.storageConnectionName,
  handler: workItemsWorker,
});
