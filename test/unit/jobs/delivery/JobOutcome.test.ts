/**
 * The outcome message's pointer to a result too big to go inline (shared/jobs/delivery/JobOutcome.ts):
 * the absolute URL where the app knows its host name (Azure's and the development host's
 * WEBSITE_HOSTNAME), the path otherwise; and a summary with a result blob gets it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { outcomeOfSummary, resultPath } from '../../../../shared/jobs/delivery/JobOutcome';
import { type JobSummary } from '../../../../shared/jobs/JobSummary';

describe('the outcome message', () => {
  it('points at the full result by absolute URL where the host name is known', () => {
    assert.equal(resultPath('j-1', 'func-abc.azurewebsites.net'), 'https://func-abc.azurewebsites.net/api/jobs/j-1/result');
    assert.equal(resultPath('j-1', 'localhost:7071'), 'http://localhost:7071/api/jobs/j-1/result');
    assert.equal(resultPath('j-1', '127.0.0.1:40123'), 'http://127.0.0.1:40123/api/jobs/j-1/result');
    assert.equal(resultPath('j-1', undefined), '/api/jobs/j-1/result');
    assert.equal(resultPath('j-1', ' '), '/api/jobs/j-1/result');
  });

  it('carries resultUrl instead of result when the result is in a blob', () => {
    const summary = {
      jobId: 'big-1',
      status: 'completed',
      workType: 'wordcount',
      resultBlob: 'jobs/big-1/result.json',
      progress: { chunks: { total: 1, done: 1, failed: 0 }, items: { total: 1, done: 1, failed: 0 } },
      finishedAt: '2026-11-26T12:00:00.000Z',
      epoch: 3,
    } as unknown as JobSummary;
    const saved = process.env.WEBSITE_HOSTNAME;
    process.env.WEBSITE_HOSTNAME = 'func-abc.azurewebsites.net';
    try {
      const outcome = outcomeOfSummary(summary, { replyTo: 'job-replies', correlationId: 'c-1' }, null);
      assert.equal(outcome.resultUrl, 'https://func-abc.azurewebsites.net/api/jobs/big-1/result');
      assert.equal(outcome.result, undefined);
      assert.equal(outcome.correlationId, 'c-1');
    } finally {
      if (saved === undefined) delete process.env.WEBSITE_HOSTNAME;
      else process.env.WEBSITE_HOSTNAME = saved;
    }
  });
});
