import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { CANCEL_CHECK_MS, CancelMarkers } from '../../../../shared/jobs/store/CancelMarkers';
import { sharedRead } from '../../../../shared/jobs/store/sharedRead';

describe('sharedRead', () => {
  it('gives concurrent callers one read, and reads again once it settled', async () => {
    let reads = 0;
    const epoch = sharedRead(async () => {
      reads += 1;
      await new Promise((r) => setTimeout(r, 10));
      return reads;
    });
    assert.deepEqual(await Promise.all([epoch(), epoch(), epoch()]), [1, 1, 1]);
    assert.equal(await epoch(), 2, 'a call after the read settled reads again: nothing is kept');
    assert.equal(reads, 2);
  });

  it('hands a failure to the callers that shared it, and the next call reads again', async () => {
    let reads = 0;
    const epoch = sharedRead(() => (++reads === 1 ? Promise.reject(new Error('lease blob unreachable')) : Promise.resolve(7)));
    const shared = await Promise.allSettled([epoch(), epoch()]);
    assert.deepEqual(shared.map((s) => s.status), ['rejected', 'rejected']);
    assert.equal(await epoch(), 7);
    assert.equal(reads, 2);
  });
});

describe('CancelMarkers', () => {
  function markers(answers: Array<boolean | Error>): { cancels: CancelMarkers; reads: () => number; clock: { t: number } } {
    let reads = 0;
    const clock = { t: 1_000_000 };
    const cancels = new CancelMarkers(
      () => {
        const answer = answers[Math.min(reads++, answers.length - 1)];
        return answer instanceof Error ? Promise.reject(answer) : Promise.resolve(answer ?? false);
      },
      () => new Date(clock.t),
    );
    return { cancels, reads: () => reads, clock };
  }

  it('reads a job\'s marker at most once per CANCEL_CHECK_MS, concurrent askers sharing the read', async () => {
    const { cancels, reads, clock } = markers([false, true]);
    assert.deepEqual(await Promise.all([cancels.isCancelled('a'), cancels.isCancelled('a')]), [false, false]);
    clock.t += CANCEL_CHECK_MS - 1;
    assert.equal(await cancels.isCancelled('a'), false, 'not read again within the age');
    assert.equal(reads(), 1);
    clock.t += 1;
    assert.equal(await cancels.isCancelled('a'), true, 'read again once the age passed: the cancel is seen');
    clock.t += 60 * CANCEL_CHECK_MS;
    assert.equal(await cancels.isCancelled('a'), true, 'a cancel found is kept');
    assert.equal(reads(), 2);
    await cancels.isCancelled('b');
    assert.equal(reads(), 3, 'each job has its own read');
  });

  it('forgets a failed read, and sees a cancel this process made without a read', async () => {
    const { cancels, reads } = markers([new Error('storage down'), false]);
    await assert.rejects(cancels.isCancelled('a'), /storage down/);
    assert.equal(await cancels.isCancelled('a'), false, 'the next asker reads again');
    assert.equal(reads(), 2);
    cancels.noteCancelled('a');
    assert.equal(await cancels.isCancelled('a'), true);
    assert.equal(reads(), 2);
  });
});
