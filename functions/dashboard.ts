/**
 * GET /api/dashboard (function key): the live page, built once per process from dashboard/ by
 * shared/observability/dashboardPage.ts (which says what the page holds and what its
 * Content-Security-Policy allows), served with that policy and `no-referrer`.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 8.
 */
import { app, type HttpResponseInit } from '@azure/functions';

import { buildDashboardPage, type DashboardPage } from '../shared/observability/dashboardPage';

let page: DashboardPage | undefined;

export function getDashboard(): Promise<HttpResponseInit> {
  page ??= buildDashboardPage();
  return Promise.resolve({
    status: 200,
    headers: {
      'Content-Type': 'text/html; charset=utf-8',
      'Content-Security-Policy': page.contentSecurityPolicy,
      'Referrer-Policy': 'no-referrer',
      'X-Content-Type-Options': 'nosniff',
      'Cache-Control': 'no-store',
    },
    body: page.html,
  });
}

app.http('dashboard', { route: 'dashboard', methods: ['GET'], authLevel: 'function', handler: getDashboard });
