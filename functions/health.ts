/**
 * GET /api/health (anonymous): 200 `{ status, instance, role, storage: { reachable } }`. It stays
 * 200 with status "degraded" while storage is unreachable, so a platform probe does not recycle
 * instances for a fault restarting cannot fix.
 */
import { app, type HttpResponseInit } from '@azure/functions';

import { healthView } from '../shared/leader/leaderStatus';
import { runtime } from './leaderTimer';

export async function getHealth(): Promise<HttpResponseInit> {
  return { status: 200, jsonBody: await healthView(runtime) };
}

app.http('health', { route: 'health', methods: ['GET'], authLevel: 'anonymous', handler: getHealth });
