/**
 * The jobs HTTP API: submit (POST /api/jobs), status (GET /api/jobs/{jobId}), full result
 * (GET /api/jobs/{jobId}/result), list (GET /api/jobs?status=&workType=&limit=&continuation=&counts=true,
 * from the job index), cancel
 * (DELETE /api/jobs/{jobId}), purge a finished job now (DELETE /api/jobs/{jobId}?purge=true),
 * the submission a started job ran, to resubmit it (GET /api/jobs/{jobId}/submission), where to
 * upload a job's items as a blob (GET /api/job-inputs: the blob endpoint and input containers).
 * Every route takes a function key (authLevel 'function'): results are data. Errors are JSON
 * `{ code, message }` with a stable code; an unexpected fault answers 500 INTERNAL without details
 * (they go to the log). The logic is in shared/jobs/api/: JobService.ts (one job), JobList.ts (the list)
 * and Retention.ts (a purge).
 * Only the routes that change something (submit, cancel, purge) hand their Durable client to the app's
 * root and so make this instance campaign (AppRoot.offer); a read never does.
 * Route: docs/architecture.md, "A submission from POST to result blob", steps 1 and 8.
 */
import '../shared/app/stopHook';

import { app, type HttpHandler, type HttpRequest, type HttpResponseInit, type InvocationContext, output } from '@azure/functions';
import * as df from 'durable-functions';

import { appRoot } from '../shared/app/appRoot';
import { RETRY_AFTER, retryAfterSeconds } from '../shared/jobs/api/retryAfter';
import { JobError } from '../shared/jobs/JobError';
import { WAKE_WORKERS_MESSAGE } from '../shared/jobs/messageCodec';
import { durableOrchestrationClient, type OrchestrationClient } from '../shared/jobs/run/OrchestrationClient';
import { isStorageUnreachable } from '../shared/storage/storageFaults';

const root = appRoot();

/** The work-items doorbell (messageCodec WAKE_WORKERS_MESSAGE): its write wakes this instance's work-items trigger. */
const wakeWorkers = output.storageQueue({ queueName: root.settings.jobs.workItemsQueue, connection: root.settings.storageConnectionName });
/**
 * One doorbell per instance at most this often: the trigger it woke polls on a short back-off for a
 * while, so the rest of a burst of POSTs needs none (each would cost a send, a receive and a delete).
 */
const DOORBELL_EVERY_MS = 2_000;
let doorbellAt = Number.NEGATIVE_INFINITY;

/** For the routes that only read: this invocation's client, kept to itself. */
function reading(context: InvocationContext): OrchestrationClient {
  return durableOrchestrationClient(df.getClient(context));
}

/** For the routes that change something: the client is also handed to the root (AppRoot.offer). */
function changing(context: InvocationContext): OrchestrationClient {
  const client = df.getClient(context);
  root.offer(client);
  return durableOrchestrationClient(client);
}

function errorResponse(err: unknown, context: InvocationContext): HttpResponseInit {
  if (err instanceof JobError) {
    root.jobs.logger.warn('api.refused', { function: context.functionName, code: err.code, reason: err.message });
    return { status: err.httpStatus, jsonBody: { code: err.code, message: err.message } };
  }
  if (isStorageUnreachable(err)) {
    const setting = root.settings.storageConnectionName;
    root.jobs.logger.error('api.storage_unreachable', { function: context.functionName, setting, error: err });
    return {
      status: 503,
      jsonBody: {
        code: 'SERVICE_UNAVAILABLE',
        message: `The app's storage (${setting}) could not be reached; nothing was changed. Try again.`,
      },
    };
  }
  root.jobs.logger.error('api.failed', { function: context.functionName, invocationId: context.invocationId, error: err });
  return { status: 500, jsonBody: { code: 'INTERNAL', message: 'Internal error; see the app log for this invocation.' } };
}

function guarded(handler: (request: HttpRequest, context: InvocationContext) => Promise<HttpResponseInit>): HttpHandler {
  return async (request, context) => {
    try {
      return await handler(request, context);
    } catch (err) {
      return errorResponse(err, context);
    }
  };
}

export const submitJob = guarded(async (request, context) => {
  const submitted = await root.jobs.service.submit(new Uint8Array(await request.arrayBuffer()), changing(context));
  // When this instance leads, its intake takes the submission now rather than at its next pass; and
  // this instance's work-items trigger polls at once (the doorbell, at most every 2 s), ready for the first chunks.
  if (submitted.enqueued) {
    root.nudge();
    if (performance.now() - doorbellAt >= DOORBELL_EVERY_MS) {
      doorbellAt = performance.now();
      context.extraOutputs.set(wakeWorkers, WAKE_WORKERS_MESSAGE);
    }
  }
  const location = new URL(submitted.location, request.url).href;
  return {
    status: 202,
    // A new submission waits for the leader's next pass (shared/jobs/api/retryAfter.ts).
    headers: { Location: location, 'Retry-After': String(RETRY_AFTER.pendingSeconds) },
    jsonBody: { jobId: submitted.jobId, statusUrl: location, enqueued: submitted.enqueued },
  };
});

export const getJob = guarded(async (request, context) => {
  const view = await root.jobs.service.get(request.params.jobId ?? '', reading(context));
  // Until it ends, when to ask again (shared/jobs/api/retryAfter.ts).
  const retryAfter = retryAfterSeconds(view, Date.now());
  const headers = retryAfter === undefined ? undefined : { 'Retry-After': String(retryAfter) };
  // Absolute, like statusUrl and Location: the service knows the route, the request knows the host.
  const jsonBody = view.resultUrl === undefined ? view : { ...view, resultUrl: new URL(view.resultUrl, request.url).href };
  return { status: 200, ...(headers === undefined ? {} : { headers }), jsonBody };
});

export const getJobResult = guarded(async (request) => {
  const text = await root.jobs.service.resultText(request.params.jobId ?? '');
  return { status: 200, headers: { 'Content-Type': 'application/json' }, body: text };
});

export const listJobs = guarded(async (request, context) => {
  const param = (name: string): string | undefined => {
    const value = request.query.get(name) ?? undefined;
    return value === '' ? undefined : value;
  };
  const page = await root.jobs.jobList.list(reading(context), param('status'), {
    limit: request.query.get('limit') ?? undefined,
    continuation: request.query.get('continuation') ?? undefined,
    workType: param('workType'),
    counts: request.query.get('counts') === 'true',
  });
  const counts = page.counts === undefined ? {} : { counts: page.counts };
  if (page.continuation === undefined) return { status: 200, jsonBody: { jobs: page.jobs, ...counts } };
  const next = new URL(request.url);
  next.searchParams.set('continuation', page.continuation);
  return { status: 200, jsonBody: { jobs: page.jobs, continuation: page.continuation, nextUrl: next.href, ...counts } };
});

export const cancelJob = guarded(async (request, context) => {
  if (request.query.get('purge') === 'true') {
    return { status: 200, jsonBody: { ...(await root.jobs.retention.purge(request.params.jobId ?? '', changing(context))), purged: true } };
  }
  const view = await root.jobs.service.cancel(request.params.jobId ?? '', changing(context));
  return {
    status: 202,
    jsonBody: { jobId: view.jobId, status: 'cancelling', statusUrl: new URL(`/api/jobs/${view.jobId}`, request.url).href },
  };
});

export const getJobSubmission = guarded(async (request, context) => {
  return { status: 200, jsonBody: await root.jobs.service.submission(request.params.jobId ?? '', reading(context)) };
});

/** Where `coordinator submit` uploads items above the inline limit: the blob endpoint and the input containers. */
export const getJobInputs = guarded(() => Promise.resolve({ status: 200, jsonBody: root.jobs.inputTarget }));

const durableClient = df.input.durableClient();

app.http('jobsSubmit', {
  route: 'jobs',
  methods: ['POST'],
  authLevel: 'function',
  extraInputs: [durableClient],
  extraOutputs: [wakeWorkers],
  handler: submitJob,
});
app.http('jobsList', { route: 'jobs', methods: ['GET'], authLevel: 'function', extraInputs: [durableClient], handler: listJobs });
app.http('jobsGet', { route: 'jobs/{jobId}', methods: ['GET'], authLevel: 'function', extraInputs: [durableClient], handler: getJob });
app.http('jobsResult', { route: 'jobs/{jobId}/result', methods: ['GET'], authLevel: 'function', handler: getJobResult });
app.http('jobsSubmission', {
  route: 'jobs/{jobId}/submission',
  methods: ['GET'],
  authLevel: 'function',
  extraInputs: [durableClient],
  handler: getJobSubmission,
});
app.http('jobsCancel', {
  route: 'jobs/{jobId}',
  methods: ['DELETE'],
  authLevel: 'function',
  extraInputs: [durableClient],
  handler: cancelJob,
});
app.http('jobInputs', { route: 'job-inputs', methods: ['GET'], authLevel: 'function', handler: getJobInputs });
