/**
 * The jobs HTTP API: submit (POST /api/jobs), status (GET /api/jobs/{jobId}), full result
 * (GET /api/jobs/{jobId}/result), list (GET /api/jobs?status=&limit=&continuation=), cancel
 * (DELETE /api/jobs/{jobId}), purge a finished job now (DELETE /api/jobs/{jobId}?purge=true),
 * the submission a started job ran, to resubmit it (GET /api/jobs/{jobId}/submission).
 * Every route takes a function key (authLevel 'function'): results are data. Errors are JSON
 * `{ code, message }` with a stable code; an unexpected fault answers 500 INTERNAL without details
 * (they go to the log). The logic is in shared/jobs/JobService.ts.
 */
import { app, type HttpHandler, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';
import * as df from 'durable-functions';

import { jobComponents } from '../shared/jobs/jobComponents';
import { JobError } from '../shared/jobs/JobError';
import { durableJobOrchestrations, type JobOrchestrations } from '../shared/jobs/JobOrchestrations';
import { nudgeProcessRuntime } from '../shared/leader/CoordinatorRuntime';
import { isStorageUnreachable } from '../shared/storage/storageFaults';
import { offerDurableClient } from './coordinationPass';

function orchestrations(context: InvocationContext): JobOrchestrations {
  return durableJobOrchestrations(offerDurableClient(df.getClient(context)));
}

function errorResponse(err: unknown, context: InvocationContext): HttpResponseInit {
  if (err instanceof JobError) {
    jobComponents().logger.warn('api.refused', { function: context.functionName, code: err.code, reason: err.message });
    return { status: err.httpStatus, jsonBody: { code: err.code, message: err.message } };
  }
  if (isStorageUnreachable(err)) {
    const setting = jobComponents().settings.storageConnectionName;
    jobComponents().logger.error('api.storage_unreachable', { function: context.functionName, setting, error: err });
    return { status: 503, jsonBody: { code: 'SERVICE_UNAVAILABLE', message: `The app's storage (${setting}) could not be reached; nothing was changed. Try again.` } };
  }
  jobComponents().logger.error('api.failed', { function: context.functionName, invocationId: context.invocationId, error: err });
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
  const submitted = await jobComponents().service.submit(new Uint8Array(await request.arrayBuffer()), orchestrations(context));
  // When this instance leads, its intake takes the submission now rather than at its next pass.
  if (submitted.enqueued) nudgeProcessRuntime();
  const location = new URL(submitted.location, request.url).href;
  return { status: 202, headers: { Location: location }, jsonBody: { jobId: submitted.jobId, statusUrl: location, enqueued: submitted.enqueued } };
});

export const getJob = guarded(async (request, context) => {
  const view = await jobComponents().service.get(request.params.jobId ?? '', orchestrations(context));
  // Absolute, like statusUrl and Location: the service knows the route, the request knows the host.
  return { status: 200, jsonBody: view.resultUrl === undefined ? view : { ...view, resultUrl: new URL(view.resultUrl, request.url).href } };
});

export const getJobResult = guarded(async (request) => {
  const text = await jobComponents().service.resultText(request.params.jobId ?? '');
  return { status: 200, headers: { 'Content-Type': 'application/json' }, body: text };
});

export const listJobs = guarded(async (request, context) => {
  const status = request.query.get('status') ?? undefined;
  const page = await jobComponents().service.list(orchestrations(context), status === '' ? undefined : status, {
    limit: request.query.get('limit') ?? undefined,
    continuation: request.query.get('continuation') ?? undefined,
  });
  if (page.continuation === undefined) return { status: 200, jsonBody: { jobs: page.jobs } };
  const next = new URL(request.url);
  next.searchParams.set('continuation', page.continuation);
  return { status: 200, jsonBody: { jobs: page.jobs, continuation: page.continuation, nextUrl: next.href } };
});

export const cancelJob = guarded(async (request, context) => {
  if (request.query.get('purge') === 'true') {
    return { status: 200, jsonBody: { ...(await jobComponents().service.purge(request.params.jobId ?? '', orchestrations(context))), purged: true } };
  }
  const view = await jobComponents().service.cancel(request.params.jobId ?? '', orchestrations(context));
  return { status: 202, jsonBody: { jobId: view.jobId, status: 'cancelling', statusUrl: new URL(`/api/jobs/${view.jobId}`, request.url).href } };
});

export const getJobSubmission = guarded(async (request, context) => {
  return { status: 200, jsonBody: await jobComponents().service.submission(request.params.jobId ?? '', orchestrations(context)) };
});

const durableClient = df.input.durableClient();

app.http('jobsSubmit', { route: 'jobs', methods: ['POST'], authLevel: 'function', extraInputs: [durableClient], handler: submitJob });
app.http('jobsList', { route: 'jobs', methods: ['GET'], authLevel: 'function', extraInputs: [durableClient], handler: listJobs });
app.http('jobsGet', { route: 'jobs/{jobId}', methods: ['GET'], authLevel: 'function', extraInputs: [durableClient], handler: getJob });
app.http('jobsResult', { route: 'jobs/{jobId}/result', methods: ['GET'], authLevel: 'function', handler: getJobResult });
app.http('jobsSubmission', { route: 'jobs/{jobId}/submission', methods: ['GET'], authLevel: 'function', extraInputs: [durableClient], handler: getJobSubmission });
app.http('jobsCancel', { route: 'jobs/{jobId}', methods: ['DELETE'], authLevel: 'function', extraInputs: [durableClient], handler: cancelJob });
