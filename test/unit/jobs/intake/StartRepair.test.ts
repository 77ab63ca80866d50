/**
 * The start checks' count of starts under way, on the job store's in-memory twin: a plan of this
 * process that confirms a start frees its room once, a listing that still shows the mark of a start
 * confirmed here does not count it under way again, and what is remembered of those confirmations
 * stays bounded on a process that runs plans without leading (no listing ever prunes it there).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { StartRepair } from '../../../../shared/jobs/intake/StartRepair';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../../shared/observability/log';
import { MemoryDocuments } from '../support/MemoryDocuments';

function setup(clock: { t: number }): { store: JobStore; r: StartRepair } {
  const store = new JobStore(new MemoryDocuments(() => clock.t), 'job-results', () => Promise.resolve(undefined));
  return { store, r: new StartRepair({ store, logger: memoryLogger('intake'), now: () => new Date(clock.t) }) };
}

const ctx = { epoch: 1, holder: 'leader', signal: new AbortController().signal, progress: () => undefined };

/** Marks these starts now, lists the marks (as a leader's pass does) and answers how many the listing counts under way. */
async function underWayOnceListed(store: JobStore, r: StartRepair, jobIds: readonly string[]): Promise<number> {
  for (const jobId of jobIds) await store.markUnconfirmed(jobId, `start-${jobId}`);
  await r.listMarks(ctx);
  return r.underWay();
}

describe('StartRepair: starts under way', () => {
  it('a start confirmed here leaves the count once; a confirmation of a start it never counted changes nothing', () => {
    const clock = { t: Date.parse('2026-03-01T12:00:00.000Z') };
    const { r } = setup(clock);
    r.started('a');
    r.started('b');
    assert.equal(r.underWay(), 2);
    assert.equal(r.confirmedHere('a'), true);
    assert.equal(r.underWay(), 1);
    assert.equal(r.confirmedHere('a'), false, 'told twice');
    assert.equal(r.confirmedHere('never-started'), false);
    assert.equal(r.underWay(), 1);
  });

  it('remembers at most 1,000 confirmations, and none older than 10 s past that, however many plans it runs', async () => {
    // 5,000 plans confirmed here, 5 ms apart (25 s), on a process that lists no marks meanwhile.
    const plans = (clock: { t: number }, r: StartRepair): void => {
      for (let i = 0; i < 5_000; i++) {
        r.confirmedHere(`job-${i}`);
        clock.t += 5;
      }
    };
    // A listing that still shows their marks counts the starts whose confirmations it forgot, not the others.
    const clock = { t: Date.parse('2026-03-01T12:00:00.000Z') };
    const { store, r } = setup(clock);
    plans(clock, r);
    const recent = Array.from({ length: 1_000 }, (_, i) => `job-${4_000 + i}`);
    assert.equal(await underWayOnceListed(store, r, ['job-3999', ...recent]), 1, 'the last 1,000 are kept for a listing under way, no more');

    // Long after, one more confirmation: the old ones went.
    const later = { t: Date.parse('2026-03-01T12:00:00.000Z') };
    const old = setup(later);
    plans(later, old.r);
    later.t += 60_000;
    old.r.confirmedHere('late');
    assert.equal(await underWayOnceListed(old.store, old.r, ['job-4999', 'late']), 1, 'an old confirmation was kept');
  });
});
