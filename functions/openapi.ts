/**
 * GET /api/openapi.json (anonymous): the OpenAPI 3.1 description of every route, the repository's
 * schemas/openapi.json (the build carries it, as it carries the job schema it embeds). It holds no
 * data and no secret; tools that import an API (API Management, client generators) read it keyless.
 * Route: on neither route of docs/architecture.md: it describes their HTTP side (see its "The folders").
 */
import { app, type HttpResponseInit } from '@azure/functions';

import openapi from '../schemas/openapi.json';

export function getOpenApi(): Promise<HttpResponseInit> {
  return Promise.resolve({ status: 200, headers: { 'Cache-Control': 'public, max-age=300' }, jsonBody: openapi });
}

app.http('openapi', { route: 'openapi.json', methods: ['GET'], authLevel: 'anonymous', handler: getOpenApi });
