/**
 * GET /api/queues (function key): how many messages wait in the jobs queue, the work-items queue
 * and their poison queues (shared/jobs/api/QueueDepths.ts; read at most every 5 s per instance), for
 * the live page. Errors are JSON `{ code, message }`: 503 SERVICE_UNAVAILABLE while storage cannot
 * be reached, 500 INTERNAL otherwise; the cause goes to the log.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 8.
 */
import { app, type HttpResponseInit, type InvocationContext } from '@azure/functions';

import { appRoot } from '../shared/app/appRoot';
import { poisonQueueName } from '../shared/app/jobComponents';
import { QueueDepths } from '../shared/jobs/api/QueueDepths';
import { queueServiceClient } from '../shared/storage/clients';
import { isStorageUnreachable } from '../shared/storage/storageFaults';

let depths: QueueDepths | undefined;

function queueDepths(): QueueDepths {
  if (depths === undefined) {
    const { settings } = appRoot();
    const queues = queueServiceClient(settings.storage);
    const { jobsQueue, workItemsQueue } = settings.jobs;
    depths = new QueueDepths([
      { role: 'jobs', client: queues.getQueueClient(jobsQueue) },
      { role: 'jobs-poison', client: queues.getQueueClient(poisonQueueName(jobsQueue)) },
      { role: 'work-items', client: queues.getQueueClient(workItemsQueue) },
      { role: 'work-items-poison', client: queues.getQueueClient(poisonQueueName(workItemsQueue)) },
    ]);
  }
  return depths;
}

export async function getQueues(_request: unknown, context: InvocationContext): Promise<HttpResponseInit> {
  const headers = { 'Cache-Control': 'no-store' };
  try {
    return { status: 200, headers, jsonBody: await queueDepths().read() };
  } catch (err) {
    const root = appRoot();
    root.jobs.logger.error('api.queues_failed', { function: context.functionName, error: err });
    if (isStorageUnreachable(err)) {
      const setting = root.settings.storageConnectionName;
      const message = `The app's storage (${setting}) could not be reached; try again.`;
      return { status: 503, headers, jsonBody: { code: 'SERVICE_UNAVAILABLE', message } };
    }
    return { status: 500, headers, jsonBody: { code: 'INTERNAL', message: 'Internal error; see the app log for this invocation.' } };
  }
}

app.http('queues', { route: 'queues', methods: ['GET'], authLevel: 'function', handler: getQueues });
