/**
 * schemas/openapi.json on its own: an OpenAPI 3.1 document whose job submission schema is exactly
 * schemas/job.schema.json (so the contract cannot drift between the two), whose every $ref
 * resolves, and whose every schema compiles with ajv's 2020-12 dialect.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import Ajv2020 from 'ajv/dist/2020';

const ROOT = join(__dirname, '..', '..', '..', '..');
const read = (name: string): Record<string, unknown> => JSON.parse(readFileSync(join(ROOT, 'schemas', name), 'utf8')) as Record<string, unknown>;

interface OpenApi {
  openapi: string;
  paths: Record<string, Record<string, { responses?: Record<string, { content?: Record<string, { schema?: unknown }> }> }>>;
  components: { schemas: Record<string, unknown> };
}

function refs(value: unknown, out: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((v) => refs(v, out));
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else refs(v, out);
    }
  }
  return out;
}

describe('the OpenAPI description (schemas/openapi.json)', () => {
  const doc = read('openapi.json') as unknown as OpenApi;

  it('embeds schemas/job.schema.json as JobSubmission, unchanged but for $schema and $id', () => {
    const { $schema: _schema, $id: _id, ...job } = read('job.schema.json');
    assert.deepEqual(
      doc.components.schemas.JobSubmission,
      job,
      'schemas/openapi.json components.schemas.JobSubmission differs from schemas/job.schema.json: copy the job schema there (without $schema and $id)',
    );
  });

  it('is OpenAPI 3.1 with the 2020-12 dialect, and every $ref points at a schema it defines', () => {
    assert.equal(doc.openapi, '3.1.0');
    const all = refs(doc);
    assert.ok(all.length > 20);
    for (const ref of all) {
      const name = /^#\/components\/schemas\/([A-Za-z]+)$/.exec(ref)?.[1];
      assert.ok(name !== undefined && name in doc.components.schemas, `unresolved $ref ${ref}`);
    }
  });

  it('every response schema compiles with ajv (2020-12)', () => {
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema(doc, 'openapi');
    let compiled = 0;
    for (const [path, ops] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        for (const [status, response] of Object.entries(op.responses ?? {})) {
          for (const type of Object.keys(response.content ?? {})) {
            const pointer = `openapi#/paths/${path.replace(/~/g, '~0').replace(/\//g, '~1')}/${method}/responses/${status}/content/${type.replace(/\//g, '~1')}/schema`;
            assert.doesNotThrow(() => ajv.compile({ $ref: pointer }), `${method} ${path} ${status}`);
            compiled += 1;
          }
        }
      }
    }
    assert.ok(compiled >= 30, `compiled ${compiled} response schemas`);
  });
});
