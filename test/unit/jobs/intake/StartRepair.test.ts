/**
 * The start checks' count of starts under way, on the job store's in-memory twin: a plan of this
 * process that confirms a start frees its room once, and what is remembered of those confirmations
 * stays bounded on a process that runs plans without leading (no listing ever prunes it there).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { StartRepair } from '../../../../shared/jobs/intake/StartRepair';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../../shared/observability/log';
import { MemoryDocuments } from '../support/MemoryDocuments';

function repair(clock: { t: number }): StartRepair {
  const store = new JobStore(new MemoryDocuments(() => clock.t), 'job-results', () => Promise.resolve(undefined));
  return new StartRepair({ store, logger: memoryLogger('intake'), now: () => new Date(clock.t) });
}

describe('StartRepair: starts under way', () => {
  it('a start confirmed here leaves the count once; a confirmation of a start it never counted changes nothing', () => {
    const clock = { t: Date.parse('2026-03-01T12:00:00.000Z') };
    const r = repair(clock);
    r.started('a');
    r.started('b');
    assert.equal(r.underWay(), 2);
    assert.equal(r.confirmedHere('a'), true);
    assert.equal(r.underWay(), 1);
    assert.equal(r.confirmedHere('a'), false, 'told twice');
    assert.equal(r.confirmedHere('never-started'), false);
    assert.equal(r.underWay(), 1);
  });

  it('remembers at most 1,000 confirmations, and none older than 10 s past that, however many plans it runs', () => {
    const clock = { t: Date.parse('2026-03-01T12:00:00.000Z') };
    const r = repair(clock);
    for (let i = 0; i < 5_000; i++) {
      r.confirmedHere(`job-${i}`);
      clock.t += 5;
    }
    assert.ok(r.confirmationsKept <= 1_000, `${r.confirmationsKept} kept`);
    assert.ok(r.confirmationsKept > 900, 'the recent ones are kept for a listing under way');
    clock.t += 60_000;
    r.confirmedHere('late');
    assert.equal(r.confirmationsKept, 1, 'the old ones went');
  });
});
