import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { onceUntilSuccess } from '../../../shared/jobs/onceUntilSuccess';

describe('onceUntilSuccess', () => {
  it('shares one attempt between concurrent callers and remembers its success', async () => {
    let calls = 0;
    const ensure = onceUntilSuccess(async () => {
      calls += 1;
      await new Promise((r) => setTimeout(r, 10));
    });
    await Promise.all([ensure(), ensure(), ensure()]);
    await ensure();
    assert.equal(calls, 1);
  });

  it('forgets a failed attempt, so the next call tries again', async () => {
    let calls = 0;
    const ensure = onceUntilSuccess(() => {
      calls += 1;
      return calls === 1 ? Promise.reject(new Error('storage down')) : Promise.resolve();
    });
    await assert.rejects(ensure(), /storage down/);
    await ensure();
    await ensure();
    assert.equal(calls, 2);
  });

  it('passes the first caller\'s signal to the set-up', async () => {
    const controller = new AbortController();
    let seen: AbortSignal | undefined;
    await onceUntilSuccess((signal) => {
      seen = signal;
      return Promise.resolve();
    })(controller.signal);
    assert.equal(seen, controller.signal);
  });
});
