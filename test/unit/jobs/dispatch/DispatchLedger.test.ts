import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ChunkObservation, claimsMatter, decideStep, type DispatchLedger, type DispatchPolicy, emptyLedger, isLedgerDone } from '../../../../shared/jobs/dispatch/DispatchLedger';

const POLICY: DispatchPolicy = { window: 4, silenceSeconds: 20, unclaimedSeconds: 15, overtakenSeconds: 10 };
const JOB = { chunkCount: 10, attempts: 3, deadlineSeconds: 300 };
const T0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (ms: number): string => new Date(T0 + ms).toISOString();
const NOTHING: ChunkObservation = { cancelled: false, results: [], claims: [] };

function started(): DispatchLedger {
  return decideStep(emptyLedger(10, 100), NOTHING, T0, JOB, POLICY).ledger;
}

describe('decideStep: the window', () => {
  it('sends the first window in chunk order and no more', () => {
    const d = decideStep(emptyLedger(10, 100), NOTHING, T0, JOB, POLICY);
    assert.deepEqual(d.send.map((s) => [s.chunk, s.dispatch, s.reason]), [[0, 1, 'first'], [1, 1, 'first'], [2, 1, 'first'], [3, 1, 'first']]);
    assert.equal(d.ledger.next, 4);
    assert.equal(d.ledger.inFlight.length, 4);
  });

  it('counts each landed result once and tops the window up by as many', () => {
    const seen: ChunkObservation = { cancelled: false, claims: [], results: [
      { chunk: 1, status: 'ok', itemCount: 10, itemsFailed: 2 },
      { chunk: 2, status: 'failed', itemCount: 10, itemsFailed: 10 },
    ] };
    const d = decideStep(started(), seen, T0 + 1000, JOB, POLICY);
    assert.equal(d.finished, 2);
    assert.deepEqual(d.ledger.progress, { chunks: { total: 10, done: 1, failed: 1 }, items: { total: 100, done: 8, failed: 12 } });
    assert.deepEqual(d.send.map((s) => s.chunk), [4, 5]);
    assert.deepEqual(d.ledger.inFlight.map((c) => c.chunk), [0, 3, 4, 5]);
    // The same results seen again by the next step count nothing: those chunks left the ledger.
    const again = decideStep(d.ledger, seen, T0 + 2000, JOB, POLICY);
    assert.equal(again.finished, 0);
    assert.deepEqual(again.ledger.progress, d.ledger.progress);
  });

  it('is done once every chunk was sent and none is in flight', () => {
    let ledger = started();
    for (let at = 1; !isLedgerDone(ledger); at++) {
      const results = ledger.inFlight.map((c) => ({ chunk: c.chunk, status: 'ok' as const, itemCount: 10, itemsFailed: 0 }));
      ledger = decideStep(ledger, { cancelled: false, claims: [], results }, T0 + at * 1000, JOB, POLICY).ledger;
      assert.ok(at < 10, 'finishes in ceil(10 / 4) + 1 steps');
    }
    assert.equal(ledger.progress.chunks.done, 10);
  });

  it('sends nothing once cancelled, but still counts what landed', () => {
    const seen: ChunkObservation = { cancelled: true, claims: [], results: [{ chunk: 0, status: 'ok', itemCount: 10, itemsFailed: 0 }] };
    const d = decideStep(started(), seen, T0 + 60_000, JOB, POLICY);
    assert.deepEqual(d.send, []);
    assert.equal(d.ledger.progress.chunks.done, 1);
  });
});

describe('decideStep: chunks that went quiet', () => {
  const claim = (chunk: number, claimedAt: number, beatAt = claimedAt, dispatch = 1) => ({ chunk, dispatch, claimedAt: iso(claimedAt), beatAt: iso(beatAt) });

  it('sends a claimed chunk again as a new round when its heartbeat is 20 s silent, not a moment before', () => {
    const seen = (claims: ChunkObservation['claims']): ChunkObservation => ({ cancelled: false, results: [], claims });
    const ledger = started();
    const claims = [claim(0, 1000, 6000), claim(1, 1000, 21_000), claim(2, 1000, 21_000), claim(3, 1000, 21_000)];
    assert.deepEqual(decideStep(ledger, seen(claims), T0 + 25_999, JOB, POLICY).send, []);
    const d = decideStep(ledger, seen(claims), T0 + 26_000, JOB, POLICY);
    assert.deepEqual(d.send, [{ chunk: 0, dispatch: 2, reason: 'silent' }]);
    assert.equal(d.ledger.highestDispatch, 2);
    assert.deepEqual(d.ledger.inFlight.find((c) => c.chunk === 0), { chunk: 0, dispatch: 2, sentAt: T0 + 26_000, resends: 0 });
  });

  it('sends a beating chunk again only after the job deadline, and expires it after the last attempt', () => {
    const job = { ...JOB, chunkCount: 1, attempts: 2, deadlineSeconds: 60 };
    let ledger = decideStep(emptyLedger(1, 10), NOTHING, T0, job, POLICY).ledger;
    const seen = (claims: ChunkObservation['claims']): ChunkObservation => ({ cancelled: false, results: [], claims });
    assert.deepEqual(decideStep(ledger, seen([claim(0, 1000, 60_000)]), T0 + 60_999, job, POLICY).send, []);
    const d = decideStep(ledger, seen([claim(0, 1000, 60_000)]), T0 + 61_000, job, POLICY);
    assert.deepEqual(d.send, [{ chunk: 0, dispatch: 2, reason: 'deadline' }]);
    ledger = d.ledger;
    const last = decideStep(ledger, seen([claim(0, 1000, 60_000), claim(0, 62_000, 121_000, 2)]), T0 + 122_000, job, POLICY);
    assert.deepEqual(last.send, []);
    assert.deepEqual(last.expire, [{ chunk: 0, dispatch: 2 }]);
    assert.equal(last.ledger.inFlight.length, 1, 'stays in flight until its failed result is seen');
  });

  it('sends an unclaimed chunk again in the same round after 15 s, then after 30 s more, then 60 s', () => {
    let ledger = decideStep(emptyLedger(1, 10), NOTHING, T0, { ...JOB, chunkCount: 1 }, POLICY).ledger;
    const sends: number[] = [];
    for (let s = 1; s <= 120; s++) {
      const d = decideStep(ledger, NOTHING, T0 + s * 1000, { ...JOB, chunkCount: 1 }, POLICY);
      if (d.send.length > 0) {
        assert.deepEqual(d.send, [{ chunk: 0, dispatch: 1, reason: 'unclaimed' }]);
        sends.push(s);
      }
      ledger = d.ledger;
    }
    assert.deepEqual(sends, [15, 45, 105]);
    assert.equal(ledger.highestDispatch, 1, 'waiting on the queue is not an attempt');
  });

  it('sends an unclaimed chunk again as soon as one sent in a later step was claimed 10 s ago', () => {
    const two = { ...POLICY, window: 2 };
    let ledger = decideStep(emptyLedger(10, 100), NOTHING, T0, JOB, two).ledger;
    const results = [{ chunk: 1, status: 'ok' as const, itemCount: 10, itemsFailed: 0 }];
    ledger = decideStep(ledger, { cancelled: false, claims: [], results }, T0 + 1000, JOB, two).ledger;
    assert.deepEqual(ledger.inFlight.map((c) => c.chunk), [0, 2]);
    const seen: ChunkObservation = { cancelled: false, results: [], claims: [claim(2, 2000, 2000)] };
    assert.deepEqual(decideStep(ledger, seen, T0 + 11_999, JOB, two).send, []);
    assert.deepEqual(decideStep(ledger, seen, T0 + 12_000, JOB, two).send, [{ chunk: 0, dispatch: 1, reason: 'overtaken' }]);
  });

  it('sends an unclaimed chunk again as soon as one sent in a later step was seen finished 10 s ago (it never needed a claim)', () => {
    const two = { ...POLICY, window: 2 };
    let ledger = decideStep(emptyLedger(10, 100), NOTHING, T0, JOB, two).ledger;
    const ok = (chunk: number) => ({ chunk, status: 'ok' as const, itemCount: 10, itemsFailed: 0 });
    // Chunk 1 (sent at 0) finishes: chunk 2 goes out at 1 s; chunk 2 finishes (seen at 2 s), without a claim.
    ledger = decideStep(ledger, { cancelled: false, claims: [], results: [ok(1)] }, T0 + 1000, JOB, two).ledger;
    ledger = decideStep(ledger, { cancelled: false, claims: [], results: [ok(2)] }, T0 + 2000, JOB, two).ledger;
    assert.deepEqual(ledger.inFlight.map((c) => c.chunk), [0, 3]);
    assert.deepEqual(ledger.finishedMarks, [{ sentAt: T0, seenAt: T0 + 1000 }, { sentAt: T0 + 1000, seenAt: T0 + 2000 }]);
    // Chunk 0 shares its send with chunk 1, so chunk 1's finish is no evidence; chunk 2's is, 10 s on.
    assert.deepEqual(decideStep(ledger, NOTHING, T0 + 11_999, JOB, two).send, []);
    const d = decideStep(ledger, NOTHING, T0 + 12_000, JOB, two);
    assert.deepEqual(d.send, [{ chunk: 0, dispatch: 1, reason: 'overtaken' }]);
    // Of the marks old enough to count, only the latest is kept.
    assert.deepEqual(d.ledger.finishedMarks, [{ sentAt: T0 + 1000, seenAt: T0 + 2000 }]);
  });

  it('keeps at most one finished mark per second, however often results land', () => {
    let ledger = decideStep(emptyLedger(1000, 10_000), NOTHING, T0, { ...JOB, chunkCount: 1000 }, POLICY).ledger;
    for (let t = 200; t <= 30_000; t += 200) {
      const results = ledger.inFlight.map((c) => ({ chunk: c.chunk, status: 'ok' as const, itemCount: 10, itemsFailed: 0 }));
      ledger = decideStep(ledger, { cancelled: false, claims: [], results }, T0 + t, { ...JOB, chunkCount: 1000 }, POLICY).ledger;
    }
    const marks = ledger.finishedMarks ?? [];
    assert.ok(marks.length >= 10 && marks.length <= 12, `${marks.length} marks`);
    for (let i = 1; i < marks.length; i++) assert.ok((marks[i]?.seenAt ?? 0) - (marks[i - 1]?.seenAt ?? 0) >= 1000);
  });

  it('needs the claims only once a chunk has been in flight as long as the shortest rule (10 s here)', () => {
    const ledger = started();
    assert.equal(claimsMatter(ledger, T0 + 9_999, JOB, POLICY), false);
    assert.equal(claimsMatter(ledger, T0 + 10_000, JOB, POLICY), true);
    assert.equal(claimsMatter(ledger, T0 + 5_000, { deadlineSeconds: 5 }, POLICY), true, 'a 5 s deadline runs from the claim');
    // Without the claims, none of the rules can fire before then: the decision is the same as with them.
    const claims = ledger.inFlight.map((c) => ({ chunk: c.chunk, dispatch: 1, claimedAt: iso(0), beatAt: iso(0) }));
    for (const t of [1_000, 5_000, 9_999]) {
      assert.deepEqual(decideStep(ledger, NOTHING, T0 + t, JOB, POLICY), decideStep(ledger, { ...NOTHING, claims }, T0 + t, JOB, POLICY));
    }
  });

  it('does not take a chunk sent in the same step as overtaking', () => {
    const ledger = started();
    const seen: ChunkObservation = { cancelled: false, results: [], claims: [claim(3, 100, 10_000)] };
    assert.deepEqual(decideStep(ledger, seen, T0 + 14_000, JOB, POLICY).send, []);
  });
});
