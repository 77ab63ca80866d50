/**
 * GET /api/health (anonymous): 200 `{ status, instance, role, storage: { reachable } }`. It stays
 * 200 with status "degraded" while storage is unreachable, so a platform probe does not recycle
 * instances for a fault restarting cannot fix. The lease read behind it is cached for 2 s.
 * Route: docs/architecture.md, "The lease epoch from the elector to the fence", step 2.
 */
import { app, type HttpResponseInit } from '@azure/functions';

import { appRoot } from '../shared/app/appRoot';
import { healthView } from '../shared/leader/leaderStatus';

const { status } = appRoot().leader();

export async function getHealth(): Promise<HttpResponseInit> {
  return { status: 200, jsonBody: await healthView(status) };
}

app.http('health', { route: 'health', methods: ['GET'], authLevel: 'anonymous', handler: getHealth });
