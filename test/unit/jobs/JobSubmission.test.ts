/**
 * The job contract: what is accepted (defaults, generated ids, fingerprints), every refusal's
 * stable code, and that schemas/job.schema.json publishes the enforced bounds (decoding the queue's
 * text: messageCodec.test.ts).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { InputContainers, reservedContainers } from '../../../shared/jobs/input/InputContainers';
import { JobError, type JobErrorCode } from '../../../shared/jobs/JobError';
import { JOB_LIMITS, JOB_OPTION_BOUNDS, JOB_OPTION_DEFAULTS } from '../../../shared/jobs/jobLimits';
import { MAX_NESTING_DEPTH, validateSubmission, type ValidationContext } from '../../../shared/jobs/JobSubmission';
import { builtInWorkTypes } from '../../../shared/worktypes/WorkTypeRegistry';

// The allow-list is wider than the settings would accept (job-*, azure-*), so the reserved containers
// are refused by the second line of defence too.
const inputContainers = new InputContainers(['inputs', 'job-*', 'coordinatorhub-*', 'azure-*'], reservedContainers('job-results', 'leader-election', 'CoordinatorHub'));
const ctx: ValidationContext = { registry: builtInWorkTypes(), generateJobId: () => 'generated-1', inputContainers };

/** `[[[...1...]]]`, nested `depth` arrays deep. */
function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

function codeOf(value: unknown): JobErrorCode {
  try {
    validateSubmission(value, ctx);
  } catch (err) {
    assert.ok(err instanceof JobError, `expected a JobError, got ${String(err)}`);
    assert.ok(err.message.length > 10, 'a message a person can act on');
    return err.code;
  }
  assert.fail(`accepted ${JSON.stringify(value).slice(0, 80)}`);
}

describe('job contract', () => {
  it('accepts a minimal job, fills defaults and generates the id', () => {
    const job = validateSubmission({ workType: 'sum', items: [1, 2, '3'] }, ctx);
    assert.equal(job.jobId, 'generated-1');
    assert.deepEqual(job.options, JOB_OPTION_DEFAULTS);
    assert.deepEqual(job.source, { kind: 'inline', items: [1, 2, '3'] });
    assert.match(job.fingerprint, /^[0-9a-f]{64}$/);
  });

  it('keeps a given job id and a blob source', () => {
    const job = validateSubmission({ jobId: 'My_Job-1', workType: 'noop', itemsBlob: 'inputs/2026/batch.v1.json', options: { chunkSize: 50 } }, ctx);
    assert.equal(job.jobId, 'My_Job-1');
    assert.deepEqual(job.source, { kind: 'blob', container: 'inputs', blob: '2026/batch.v1.json' });
    assert.equal(job.options.chunkSize, 50);
    assert.equal(job.options.attempts, JOB_OPTION_DEFAULTS.attempts);
  });

  it('gives equal submissions equal fingerprints whatever their key order, and different ones different', () => {
    const a = validateSubmission({ workType: 'sum', items: [1, 2], options: { attempts: 2, chunkSize: 10 } }, ctx);
    const b = validateSubmission({ options: { chunkSize: 10, attempts: 2 }, items: [1, 2], workType: 'sum', jobId: 'other' }, ctx);
    const c = validateSubmission({ workType: 'sum', items: [1, 3], options: { attempts: 2, chunkSize: 10 } }, ctx);
    const d = validateSubmission({ workType: 'sum', items: [1, 2] }, ctx);
    assert.equal(a.fingerprint, b.fingerprint);
    assert.notEqual(a.fingerprint, c.fingerprint);
    assert.notEqual(a.fingerprint, d.fingerprint, 'options are part of the submission');
  });

  const refused: Array<[string, unknown, JobErrorCode]> = [
    ['an array', [1, 2], 'NOT_AN_OBJECT'],
    ['null', null, 'NOT_AN_OBJECT'],
    ['a string', 'sum', 'NOT_AN_OBJECT'],
    ['no workType', { items: [1] }, 'SCHEMA_VIOLATION'],
    ['a numeric workType', { workType: 3, items: [1] }, 'SCHEMA_VIOLATION'],
    ['an unknown workType', { workType: 'mine', items: [1] }, 'UNKNOWN_WORK_TYPE'],
    ['a workType that is no name', { workType: 'Sum!', items: [1] }, 'UNKNOWN_WORK_TYPE'],
    ['neither items nor itemsBlob', { workType: 'sum' }, 'ITEMS_MISSING'],
    ['both items and itemsBlob', { workType: 'sum', items: [1], itemsBlob: 'a-b/c' }, 'ITEMS_AMBIGUOUS'],
    ['empty items', { workType: 'sum', items: [] }, 'ITEMS_EMPTY'],
    ['items that are an object', { workType: 'sum', items: { 0: 1 } }, 'SCHEMA_VIOLATION'],
    ['a job id with a slash', { jobId: 'a/b', workType: 'sum', items: [1] }, 'INVALID_JOB_ID'],
    ['a job id with ..', { jobId: '..', workType: 'sum', items: [1] }, 'INVALID_JOB_ID'],
    ['a job id with %', { jobId: 'a%2Fb', workType: 'sum', items: [1] }, 'INVALID_JOB_ID'],
    ['a 65-character job id', { jobId: 'x'.repeat(65), workType: 'sum', items: [1] }, 'INVALID_JOB_ID'],
    ['an empty job id', { jobId: '', workType: 'sum', items: [1] }, 'INVALID_JOB_ID'],
    ['a numeric job id', { jobId: 42, workType: 'sum', items: [1] }, 'INVALID_JOB_ID'],
    ['a float for sum', { workType: 'sum', items: [1, 2.5] }, 'ITEM_REJECTED'],
    ['an unsafe integer for sum', { workType: 'sum', items: [2 ** 60] }, 'ITEM_REJECTED'],
    ['a word for sum', { workType: 'sum', items: ['12a'] }, 'ITEM_REJECTED'],
    ['a wordcount item with ..', { workType: 'wordcount', items: ['texts/../secret.txt'] }, 'ITEM_REJECTED'],
    ['itemsBlob without a container', { workType: 'sum', itemsBlob: 'file.json' }, 'INVALID_ITEMS_BLOB'],
    ['itemsBlob with ..', { workType: 'sum', itemsBlob: 'inputs/../x.json' }, 'INVALID_ITEMS_BLOB'],
    ['itemsBlob with an uppercase container', { workType: 'sum', itemsBlob: 'Inputs/x.json' }, 'INVALID_ITEMS_BLOB'],
    ['itemsBlob in the app\'s own container', { workType: 'sum', itemsBlob: 'job-results/records/x.json' }, 'INVALID_ITEMS_BLOB'],
    ['itemsBlob in a container not on the allow-list', { workType: 'sum', itemsBlob: 'other/x.json' }, 'INVALID_ITEMS_BLOB'],
    ['chunkSize 0', { workType: 'sum', items: [1], options: { chunkSize: 0 } }, 'OPTION_OUT_OF_RANGE'],
    ['chunkSize over the bound', { workType: 'sum', items: [1], options: { chunkSize: JOB_OPTION_BOUNDS.chunkSize.max + 1 } }, 'OPTION_OUT_OF_RANGE'],
    ['attempts over maxDequeueCount', { workType: 'sum', items: [1], options: { attempts: 6 } }, 'OPTION_OUT_OF_RANGE'],
    ['a fractional deadline', { workType: 'sum', items: [1], options: { deadlineSeconds: 10.5 } }, 'OPTION_OUT_OF_RANGE'],
    ['an itemsBlob in the host\'s key store', { workType: 'sum', itemsBlob: 'azure-webjobs-secrets/host.json' }, 'INVALID_ITEMS_BLOB'],
    ['an itemsBlob in the Durable task hub\'s containers', { workType: 'sum', itemsBlob: 'coordinatorhub-largemessages/x.json' }, 'INVALID_ITEMS_BLOB'],
    ['a wordcount item in the host\'s key store', { workType: 'wordcount', items: ['azure-webjobs-secrets/host.json'] }, 'ITEM_REJECTED'],
    ['items nested 3,000 levels deep', { workType: 'noop', items: [nested(3_000)] }, 'NESTING_TOO_DEEP'],
    ['an unknown option', { workType: 'sum', items: [1], options: { retries: 3 } }, 'SCHEMA_VIOLATION'],
    ['an unknown property', { workType: 'sum', items: [1], priority: 'high' }, 'SCHEMA_VIOLATION'],
    ['too many chunks', { workType: 'noop', items: new Array(JOB_LIMITS.maxChunks + 1).fill(0), options: { chunkSize: 1 } }, 'ITEMS_TOO_MANY'],
  ];
  for (const [what, value, code] of refused) {
    it(`refuses ${what} with ${code}`, () => {
      assert.equal(codeOf(value), code);
    });
  }

  it('accepts nesting up to the limit and refuses one level more (the submission and its items array are two levels)', () => {
    assert.doesNotThrow(() => validateSubmission({ workType: 'noop', items: [nested(MAX_NESTING_DEPTH - 2)] }, ctx));
    assert.equal(codeOf({ workType: 'noop', items: [nested(MAX_NESTING_DEPTH - 1)] }), 'NESTING_TOO_DEEP');
  });

  it('names the bad characters of a job id', () => {
    assert.throws(() => validateSubmission({ jobId: 'a/b%c', workType: 'sum', items: [1] }, ctx), /contains "\/", "%"/);
  });

  it('publishes the same defaults and bounds in the JSON Schema as the code enforces', () => {
    const schema = JSON.parse(readFileSync(join(__dirname, '..', '..', '..', '..', 'schemas', 'job.schema.json'), 'utf8')) as {
      properties: { options: { properties: Record<string, { default: number; minimum: number; maximum: number }> }; items: { maxItems: number } };
    };
    const options = schema.properties.options.properties;
    for (const [name, bounds] of Object.entries(JOB_OPTION_BOUNDS)) {
      assert.equal(options[name]?.minimum, bounds.min, name);
      assert.equal(options[name]?.maximum, bounds.max, name);
      assert.equal(options[name]?.default, JOB_OPTION_DEFAULTS[name as keyof typeof JOB_OPTION_DEFAULTS], name);
    }
    assert.equal(schema.properties.items.maxItems, JOB_LIMITS.maxItems);
  });
});
