/** When a client should ask again about a job (shared/jobs/api/retryAfter.ts). */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { RETRY_AFTER, retryAfterSeconds } from '../../../../shared/jobs/api/retryAfter';

const T0 = Date.parse('2026-12-02T00:00:00.000Z');
const at = (ms: number): string => new Date(T0 + ms).toISOString();
const items = (done: number, total: number, failed = 0): { chunks: { total: number; done: number; failed: number }; items: { total: number; done: number; failed: number } } => ({
  chunks: { total: 1, done: 0, failed: 0 },
  items: { total, done, failed },
});

describe('Retry-After for a job that has not ended', () => {
  it('asks a pending job again after a third of its wait so far, within 1 and 5 s', () => {
    assert.equal(retryAfterSeconds({ status: 'pending', createdAt: at(0), progress: null }, T0 + 500), 1);
    assert.equal(retryAfterSeconds({ status: 'pending', createdAt: at(0), progress: null }, T0 + 9_000), 3);
    assert.equal(retryAfterSeconds({ status: 'pending', createdAt: at(0), progress: null }, T0 + 60_000), RETRY_AFTER.pendingMaxSeconds);
  });

  it('asks a running job again at half the time its progress says is left (a third of its age with none), within 1-10 s', () => {
    // Nothing done yet: a third of its age.
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: null }, T0 + 2_000), 1);
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: items(0, 100) }, T0 + 12_000), 4);
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: null }, T0 + 120_000), 10);
    // Half done in 8 s: 8 s left, asked again in 4 s.
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: items(50, 100) }, T0 + 8_000), 4);
    // Failed items count as finished.
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: items(25, 100, 25) }, T0 + 8_000), 4);
    // A long job: at most 10 s; a nearly done one: at least 1 s.
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: items(1, 100) }, T0 + 60_000), 10);
    assert.equal(retryAfterSeconds({ status: 'running', createdAt: at(0), progress: items(99, 100) }, T0 + 1_000), 1);
  });

  it('says nothing once the job has ended', () => {
    for (const status of ['completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'] as const) {
      assert.equal(retryAfterSeconds({ status, createdAt: at(0), progress: null }, T0), undefined, status);
    }
  });
});
