/**
 * The OpenAPI description against the running app (development host, Azurite, keys on): every
 * HTTP function the app registers is described (route, method, whether a key is needed) and
 * nothing else is; every operation is called for real, and every answer (successes and the errors
 * a client can provoke) validates against the response schema the document gives for its status.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import Ajv2020 from 'ajv/dist/2020';

import { registerTestWorkTypes } from '../../fixtures/ops/testWorkTypes';
import { eventually, type JobsHost, startJobsHost } from '../jobs/support/jobsHost';

interface Operation {
  readonly security?: unknown[];
  readonly responses: Record<string, { content?: Record<string, unknown> }>;
}
type OpenApi = { paths: Record<string, Record<string, Operation>> };

const doc = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', '..', 'schemas', 'openapi.json'), 'utf8')) as OpenApi;
const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

describe('the OpenAPI description matches the running app', () => {
  let h: JobsHost;
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema(doc, 'openapi');
  const called = new Set<string>();

  before(async () => {
    registerTestWorkTypes();
    h = await startJobsHost('oas', ['*'], { LEADER_TIMER_SCHEDULE: '*/1 * * * * *', LEADER_PASS_INTERVAL_SECONDS: '1' });
  });
  after(async () => {
    await h?.stop();
  });

  /** Which documented path a concrete URL path matches (`/jobs/abc` -> `/jobs/{jobId}`). */
  function documentedPath(path: string): string {
    const match = Object.keys(doc.paths).find((p) => new RegExp(`^${p.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path));
    assert.ok(match !== undefined, `${path} is not in the OpenAPI paths`);
    return match;
  }

  /** Calls the app and validates the answer against the document; returns the parsed body. */
  async function call(method: string, path: string, body?: string, key?: string | null): Promise<{ status: number; json: unknown }> {
    const res = await h.request(method, `/api${path}`, body, key);
    const template = documentedPath(path.split('?')[0] as string);
    const operation = doc.paths[template]?.[method.toLowerCase()];
    assert.ok(operation !== undefined, `${method} ${template} is not documented`);
    const response = operation.responses[String(res.status)];
    assert.ok(response !== undefined, `${method} ${template} answered ${res.status}, which the document does not list: ${res.text}`);
    called.add(`${method.toLowerCase()} ${template}`);
    const type = (res.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
    if (response.content === undefined) {
      assert.equal(res.text, '', `${method} ${path} ${res.status} has no documented body`);
      return { status: res.status, json: undefined };
    }
    assert.ok(type in response.content, `${method} ${path} ${res.status} answered ${type}, documented: ${Object.keys(response.content).join(', ')}`);
    if (type === 'application/json') {
      const pointer = `openapi#/paths/${template.replace(/\//g, '~1')}/${method.toLowerCase()}/responses/${res.status}/content/application~1json/schema`;
      const validate = ajv.getSchema(pointer) ?? ajv.compile({ $ref: pointer });
      assert.ok(validate(res.json), `${method} ${path} ${res.status}: ${ajv.errorsText(validate.errors)}\n${res.text.slice(0, 2000)}`);
    }
    return { status: res.status, json: res.json };
  }

  it('documents exactly the HTTP functions the app registers, with their methods and key requirement', () => {
    const registered = new Set<string>();
    for (const fn of h.host.app.list()) {
      if (fn.triggerType !== 'httpTrigger') continue;
      const trigger: Record<string, unknown> = fn.bindings[fn.triggerName] ?? {};
      const path = `/${String(trigger.route)}`;
      for (const method of (trigger.methods as string[] | undefined) ?? []) {
        const operation = doc.paths[path]?.[method.toLowerCase()];
        assert.ok(operation !== undefined, `${method} /api${path} (function ${fn.name}) is not in schemas/openapi.json`);
        const anonymous = trigger.authLevel === 'anonymous';
        assert.equal(Array.isArray(operation.security) && operation.security.length === 0, anonymous, `${fn.name}: the document's security must say whether a key is needed`);
        registered.add(`${method.toLowerCase()} ${path}`);
      }
    }
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const method of Object.keys(ops).filter((m) => METHODS.includes(m))) {
        assert.ok(registered.has(`${method} ${path}`), `the document lists ${method} ${path}, which the app does not serve`);
      }
    }
  });

  it('every answer of every route validates against the document', async () => {
    // Jobs: submit, refusals, status, list, result, submission, cancel.
    const accepted = await call('POST', '/jobs', JSON.stringify({ jobId: 'oas-sum', workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } }));
    assert.equal(accepted.status, 202);
    assert.equal((await call('POST', '/jobs', JSON.stringify({ workType: 'sum', items: [1], colour: 'red' }))).status, 400);
    assert.equal((await call('POST', '/jobs', JSON.stringify({ jobId: 'oas-sum', workType: 'sum', items: [4] }))).status, 409);
    assert.equal((await call('POST', '/jobs', JSON.stringify({ workType: 'noop', items: ['x'.repeat(60_000)] }))).status, 413);
    assert.equal((await call('POST', '/jobs', JSON.stringify({ workType: 'noop', items: [1] }), null)).status, 401);
    assert.equal((await call('GET', '/jobs/oas-sum')).status, 200);
    await eventually(async () => (((await call('GET', '/jobs/oas-sum')).json as { status: string }).status === 'completed' ? true : undefined), 60_000, 'the sum job');
    assert.equal((await call('GET', '/jobs/oas-sum/result')).status, 200);
    assert.deepEqual((await call('GET', '/jobs/oas-sum/submission')).json, { workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2, attempts: 3, deadlineSeconds: 300 } });
    assert.equal((await call('DELETE', '/jobs/oas-sum')).status, 409);
    assert.equal((await call('GET', '/jobs/nope')).status, 404);
    assert.equal((await call('GET', '/jobs/bad.id')).status, 400);
    assert.equal((await call('GET', '/jobs/nope/result')).status, 404);
    assert.equal((await call('GET', '/jobs/nope/submission')).status, 404);
    assert.equal((await call('GET', '/job-inputs')).status, 200);
    assert.equal((await call('GET', '/job-inputs', undefined, null)).status, 401);
    assert.equal((await call('DELETE', '/jobs/nope')).status, 404);
    // Long enough to be running when the cancel comes: 600 chunks of 2 s, up to 96 at a time (24 messages
    // of 4 chunks), take some 14 s; 100 of 0.5 s took 1.5 s, and the job could end between the read
    // that saw it running and the cancel.
    const slowItems = Array.from({ length: 600 }, () => 2_000);
    assert.equal((await call('POST', '/jobs', JSON.stringify({ jobId: 'oas-slow', workType: 'slow', items: slowItems, options: { chunkSize: 1 } }))).status, 202);
    await eventually(async () => (((await call('GET', '/jobs/oas-slow')).json as { status: string }).status === 'running' ? true : undefined), 60_000, 'the slow job to run');
    assert.equal((await call('DELETE', '/jobs/oas-slow')).status, 202);
    assert.equal((await call('GET', '/jobs')).status, 200);
    assert.equal((await call('GET', '/jobs?status=completed')).status, 200);
    assert.equal((await call('GET', '/jobs?status=bogus')).status, 400);

    // Leadership, health, the page and this document.
    await eventually(async () => (((await call('GET', '/leader', undefined, null)).json as { holder: string | null }).holder !== null ? true : undefined), 30_000, 'a leader');
    await eventually(async () => (((await call('GET', '/cluster')).json as { terms: unknown[] }).terms.length > 0 ? true : undefined), 30_000, 'a term');
    assert.equal((await call('GET', '/cluster', undefined, null)).status, 401);
    const queues = (await call('GET', '/queues')).json as { queues: Array<{ role: string }> };
    assert.deepEqual(queues.queues.map((q) => q.role), ['jobs', 'jobs-poison', 'work-items', 'work-items-poison']);
    assert.equal((await call('GET', '/queues', undefined, null)).status, 401);
    assert.equal((await call('GET', '/health', undefined, null)).status, 200);
    assert.equal((await call('GET', '/dashboard')).status, 200);
    assert.equal((await call('GET', '/dashboard', undefined, null)).status, 401);
    const served = await call('GET', '/openapi.json', undefined, null);
    assert.deepEqual(served.json, doc, 'the app serves the repository document');

    const documented = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m} ${path}`));
    assert.deepEqual([...called].sort(), documented.sort(), 'every documented operation was called');
  });
});
