import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';

import { startAzurite } from 'devhost/testing';

import { azuriteConnectionString, uniqueName } from '../../support/env';
import { blobPortOf, startTcpProxy, withBlobPort } from '../../support/tcpProxy';
import { FAST, type RealContender, realContender, sleep, waitFor } from './harness';

const everyone: RealContender[] = [];
const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const c of everyone) void c.elector.stop({ release: false });
  for (const cleanup of cleanups) await cleanup();
});

describe('leader election while storage is unreachable', { concurrency: true }, () => {
  it('a leader cut off by a blackhole steps down within the renew deadline, before its lease can expire; leadership returns with storage', async () => {
    const direct = azuriteConnectionString();
    const proxy = await startTcpProxy(blobPortOf(direct));
    cleanups.push(() => proxy.close());
    const viaProxy = withBlobPort(direct, proxy.port);
    const container = uniqueName('blackhole');
    const a = realContender(viaProxy, container, 'a');
    everyone.push(a);
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    const b = realContender(direct, container, 'b');
    everyone.push(b);
    b.elector.start();
    await sleep(5_500); // one renewal in
    proxy.blackhole();
    const cutAt = performance.now();
    const term = a.terms[0];
    assert.ok(term !== undefined);
    await waitFor(() => term.endedAt !== undefined, 15_000, 'a to step down');
    const lastGrantSentAt = a.store.lastGrantSentAt;
    assert.ok(lastGrantSentAt !== undefined && lastGrantSentAt < cutAt);
    const steppedDownAt = term.endedAt ?? 0;
    assert.equal(term.reason, 'deadline');
    const sinceGrant = steppedDownAt - lastGrantSentAt;
    // At the deadline, not before; late only by timer lag on a loaded machine, and long before L.
    assert.ok(sinceGrant >= FAST.renewDeadlineMs - 5 && sinceGrant <= FAST.renewDeadlineMs + 1_000, `stepped down ${Math.round(sinceGrant)} ms after its last renewal was sent`);
    assert.ok(a.elector.counters().renewFailures >= 1);

    // The follower on healthy storage gets the lease only once it has expired: after a stopped believing.
    const takeover = await waitFor(() => b.elector.role === 'leader', 15_000, 'b to lead');
    assert.ok(takeover > steppedDownAt);
    assert.ok(takeover >= lastGrantSentAt + FAST.leaseSeconds * 1000, 'b acquired before the lease could have expired');

    // Storage comes back for a; once b hands over, a leads again without a restart.
    proxy.restore();
    await b.elector.stop();
    await waitFor(() => a.elector.role === 'leader', 5_000, 'a to lead again');
    assert.equal(a.elector.epoch, 3);
  });

  it('a leader whose Azurite is stopped steps down within the renew deadline and leads again after a restart', async () => {
    const azurite = await startAzurite();
    cleanups.push(() => azurite.stop());
    const container = uniqueName('restart');
    const a = realContender(azurite.connectionString, container, 'a');
    everyone.push(a);
    a.elector.start();
    await waitFor(() => a.elector.role === 'leader', 10_000, 'a to lead');
    await sleep(1_000);
    await azurite.kill();
    const term = a.terms[0];
    assert.ok(term !== undefined);
    await waitFor(() => term.endedAt !== undefined, 15_000, 'a to step down');
    const lastGrantSentAt = a.store.lastGrantSentAt ?? 0;
    const sinceGrant = (term.endedAt ?? 0) - lastGrantSentAt;
    assert.equal(term.reason, 'deadline');
    assert.ok(sinceGrant <= FAST.renewDeadlineMs + 1_000 && sinceGrant < FAST.leaseSeconds * 1000, `stepped down ${Math.round(sinceGrant)} ms after its last renewal`);
    assert.equal(a.elector.role, 'follower');
    await azurite.restart();
    await waitFor(() => a.elector.role === 'leader', 20_000, 'a to lead again');
    assert.ok((a.elector.epoch ?? 0) > term.epoch);
  });
});
