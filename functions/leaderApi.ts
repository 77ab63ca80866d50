/**
 * GET /api/leader (anonymous, read-only): who leads according to the lease blob: holder, epoch,
 * acquiredAt, lease state. Nothing about the answering instance and no error text: counters,
 * passes and errors are internals, for callers with a key (GET /api/cluster). Its cost is bounded:
 * the blob read is shared for 2 s per instance, however many requests arrive.
 *
 * GET /api/cluster (function key): the lease record, this instance's role, passes, last pass error
 * and counters, the recent terms and the instances seen recently (shared/leader/clusterView.ts), and
 * this instance's own storage requests per minute (shared/storage/requestCounter.ts).
 * Errors are JSON `{ code, message }` with no internals; the cause goes to the log.
 * Route: docs/architecture.md, "The lease epoch from the elector to the fence", step 2.
 */
import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';

import { appRoot, LEADER_READ_TTL_MS } from '../shared/app/appRoot';
import { toCoordinatorError } from '../shared/errors';
import { clusterView } from '../shared/leader/clusterView';
import { publicLeaderView, StorageUnavailableError } from '../shared/leader/leaderStatus';
import { appStorageRequests } from '../shared/storage/requestCounter';

const { status, clusterRecords, runtime } = appRoot().leader();

function failure(err: unknown, context: InvocationContext): HttpResponseInit {
  const error = toCoordinatorError(err);
  const cause = err instanceof StorageUnavailableError ? err.cause : err;
  context.warn(
    JSON.stringify({
      event: 'api.leader_failed',
      function: context.functionName,
      code: error.code,
      cause: cause instanceof Error ? cause.message : String(cause),
    }),
  );
  const headers = { 'Cache-Control': 'no-store' };
  if (err instanceof StorageUnavailableError) return { status: 503, headers, jsonBody: { code: err.code, message: err.message } };
  return { status: 500, headers, jsonBody: { code: 'INTERNAL', message: 'Internal error; see the app log for this invocation.' } };
}

export async function getLeader(_request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  try {
    const view = await publicLeaderView(status);
    return { status: 200, headers: { 'Cache-Control': `public, max-age=${LEADER_READ_TTL_MS / 1000}` }, jsonBody: view };
  } catch (err) {
    return failure(err, context);
  }
}

export async function getCluster(_request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  try {
    const view = await clusterView(status, clusterRecords, runtime.elector.timing);
    // This instance's own storage requests in the last minute (the host's polling is not the app's to see).
    const storageRequests = appStorageRequests.lastMinute();
    return { status: 200, headers: { 'Cache-Control': 'no-store' }, jsonBody: { ...view, storageRequests } };
  } catch (err) {
    return failure(err, context);
  }
}

app.http('leader', { route: 'leader', methods: ['GET'], authLevel: 'anonymous', handler: getLeader });
app.http('cluster', { route: 'cluster', methods: ['GET'], authLevel: 'function', handler: getCluster });
