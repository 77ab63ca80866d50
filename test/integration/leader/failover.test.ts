import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';

import { NotLeaderError } from '../../../shared/leader/errors';
import { azuriteConnectionString, uniqueName } from '../../support/env';
import { blobClient, FAST, type RealContender, realContender, sleep, waitFor } from './harness';

const everyone: RealContender[] = [];
function contender(...args: Parameters<typeof realContender>): RealContender {
  const c = realContender(...args);
  everyone.push(c);
  return c;
}

after(() => {
  for (const c of everyone) void c.elector.stop({ release: false });
});

function leaderOf(cs: RealContender[]): RealContender | undefined {
  return cs.find((c) => c.elector.role === 'leader');
}

describe('leader failover against Azurite', { concurrency: true }, () => {
  it('after a crash (renewals stop, no release) a follower takes over once the lease expired, not before', async () => {
    const conn = azuriteConnectionString();
    const container = uniqueName('crash');
    const a = contender(conn, container, 'a');
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    const followers = [contender(conn, container, 'b'), contender(conn, container, 'c')];
    for (const f of followers) f.elector.start();
    await sleep(6_000); // past one renewal, so expiry counts from a renewal rather than the acquisition
    assert.equal(leaderOf(followers), undefined);
    void a.elector.stop({ release: false });
    const lastGrantSentAt = a.store.lastGrantSentAt;
    assert.ok(lastGrantSentAt !== undefined);
    assert.equal(a.store.releasedAt, undefined);
    const takeover = await waitFor(() => leaderOf(followers) !== undefined, 25_000, 'a follower to lead');
    const earliestExpiry = lastGrantSentAt + FAST.leaseSeconds * 1000;
    assert.ok(takeover >= earliestExpiry, `took over ${Math.round(earliestExpiry - takeover)} ms before the lease could expire`);
    // After expiry a follower needs at most one campaign period plus its own acquire/read/write round trips.
    assert.ok(takeover - earliestExpiry <= FAST.retryPeriodMs + 1_500, `took over ${Math.round(takeover - earliestExpiry)} ms after expiry`);
    const next = leaderOf(followers);
    assert.equal(next?.elector.epoch, 2);
    const props = await blobClient(conn, container).getProperties();
    assert.equal(props.metadata?.holder, next?.elector.holder);
    assert.equal(props.metadata?.epoch, '2');
  });

  it('graceful stop: the release waits for leader work to drain, and a follower leads within one retry period after it', async () => {
    const conn = azuriteConnectionString();
    const container = uniqueName('graceful');
    const a = contender(conn, container, 'a');
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    const followers = [contender(conn, container, 'b'), contender(conn, container, 'c')];
    for (const f of followers) f.elector.start();
    await sleep(1_000);
    const term = a.terms[0];
    assert.ok(term !== undefined);
    const stopAt = performance.now();
    await a.elector.stop();
    const releasedAt = a.store.releasedAt;
    assert.ok(releasedAt !== undefined, 'released');
    assert.ok(term.endedAt !== undefined && term.endedAt - stopAt < 50, 'work told to stop at once');
    assert.equal(a.elector.counters().released, 1);
    const takeover = await waitFor(() => leaderOf(followers) !== undefined, 10_000, 'a follower to lead');
    // One campaign period, plus acquire/read/write round trips on a loaded machine.
    assert.ok(takeover - releasedAt <= FAST.retryPeriodMs + 1_000, `follower led ${Math.round(takeover - releasedAt)} ms after the release`);
  });

  it('graceful stop releases only after slow leader work has finished', async () => {
    const conn = azuriteConnectionString();
    const container = uniqueName('drain');
    let finishedAt: number | undefined;
    const a = contender(conn, container, 'a', {
      onTerm: async (term) => {
        await new Promise<void>((resolve) => term.leadership.signal.addEventListener('abort', () => resolve(), { once: true }));
        await sleep(1_200);
        finishedAt = performance.now();
      },
    });
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    await a.elector.stop();
    assert.ok(finishedAt !== undefined && a.store.releasedAt !== undefined);
    assert.ok(a.store.releasedAt >= finishedAt, 'released before the work drained');
    assert.equal((await blobClient(conn, container).getProperties()).leaseState, 'available');
  });

  it("a lease broken by someone else aborts the leader's signal at its next renewal", async () => {
    const conn = azuriteConnectionString();
    const container = uniqueName('broken');
    const a = contender(conn, container, 'a');
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    await sleep(500);
    const brokenAt = performance.now();
    await blobClient(conn, container).getBlobLeaseClient().breakLease(0);
    const term = a.terms[0];
    assert.ok(term !== undefined);
    await waitFor(() => term.endedAt !== undefined, 10_000, 'the signal to abort');
    const endedAt = term.endedAt ?? 0;
    assert.equal(term.reason, 'lost');
    const renewInterval = a.elector.timing.renewIntervalMs;
    assert.ok(endedAt - brokenAt <= renewInterval + 1_000, `noticed ${Math.round(endedAt - brokenAt)} ms after the break`);
    assert.equal(a.elector.counters().lost, 1);
  });

  it('a leader whose lease another instance took cannot write through it, and learns it lost', async () => {
    const conn = azuriteConnectionString();
    const container = uniqueName('taken');
    const a = contender(conn, container, 'a');
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    const leadership = a.terms[0]?.leadership;
    assert.ok(leadership !== undefined);
    await leadership.writeThroughLease({ checkpoint: 'a-1' });
    const blob = blobClient(conn, container);
    await blob.getBlobLeaseClient().breakLease(0);
    const intruder = blob.getBlobLeaseClient('99999999-9999-4999-8999-999999999999');
    await intruder.acquireLease(15);
    await assert.rejects(leadership.writeThroughLease({ checkpoint: 'a-2' }), NotLeaderError);
    assert.ok(leadership.signal.aborted);
    assert.equal(a.terms[0]?.reason, 'lost');
    assert.equal((await blob.getProperties()).metadata?.checkpoint, 'a-1');
    await intruder.releaseLease();
  });
});
