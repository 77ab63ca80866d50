/**
 * The job-id rules: which ids are valid and how a refusal names the problem, the instance ids a job
 * id gives (and only those parse back), and that the store, which needs these rules, loads without
 * the schema validator.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { JobError } from '../../../shared/jobs/JobError';
import { assertJobId, instanceIdFor, isValidJobId, jobIdFromInstanceId, parseInstanceId } from '../../../shared/jobs/jobIds';

describe('job ids', () => {
  it('accepts 1-64 letters, digits, _ and -, and refuses anything else with INVALID_JOB_ID naming the problem', () => {
    for (const id of ['a', 'A-9_z', 'x'.repeat(64)]) assert.ok(isValidJobId(id), id);
    for (const id of ['', 'x'.repeat(65), 'a/b', 'a.b', 7, null]) assert.ok(!isValidJobId(id), String(id));
    assert.throws(() => assertJobId('a/b%c'), (err: unknown) => err instanceof JobError && err.code === 'INVALID_JOB_ID' && /"\/", "%"/.test(err.message));
    assert.throws(() => assertJobId(''), /1-64 characters/);
  });

  it('derives instance ids per generation and parses back only those', () => {
    assert.equal(instanceIdFor('j1'), 'job-j1');
    assert.equal(instanceIdFor('j1', 3), 'job-j1.3');
    assert.deepEqual(parseInstanceId('job-j1.3'), { jobId: 'j1', generation: 3 });
    assert.deepEqual(parseInstanceId('job-j1'), { jobId: 'j1', generation: 1 });
    assert.equal(jobIdFromInstanceId('job-j1.1'), undefined, 'generation 1 has no suffix');
    assert.equal(jobIdFromInstanceId('other-j1'), undefined);
  });

  it('lets the store load without the schema validator (ajv) or the job schema', () => {
    const store = join(__dirname, '..', '..', '..', 'shared', 'jobs', 'store', 'JobStore.js');
    const script = `require(${JSON.stringify(store)}); console.log(Object.keys(require.cache).filter((k) => /[\\\\/]ajv[\\\\/]|job\\.schema\\.json/.test(k)).length)`;
    assert.equal(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8' }).trim(), '0');
  });
});
