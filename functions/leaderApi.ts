/**
 * GET /api/leader (anonymous, read-only): who leads according to the lease blob (holder, epoch,
 * acquiredAt, lease state), this instance's role and counters. Errors are JSON `{ code, message }`.
 */
import { app, type HttpRequest, type HttpResponseInit, type InvocationContext } from '@azure/functions';

import { toCoordinatorError } from '../shared/errors';
import { leaderView, StorageUnavailableError } from '../shared/leader/leaderStatus';
import { runtime } from './leaderTimer';

export async function getLeader(_request: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> {
  try {
    return { status: 200, jsonBody: await leaderView(runtime) };
  } catch (err) {
    const error = toCoordinatorError(err);
    context.warn(JSON.stringify({ event: 'api.leader_failed', code: error.code, cause: err instanceof StorageUnavailableError ? String(err.cause) : error.message }));
    if (err instanceof StorageUnavailableError) return { status: 503, jsonBody: { code: err.code, message: err.message } };
    return { status: 500, jsonBody: { code: 'INTERNAL', message: 'Internal error; see the app log for this invocation.' } };
  }
}

app.http('leader', { route: 'leader', methods: ['GET'], authLevel: 'anonymous', handler: getLeader });
