/**
 * The records kept beside the lease for operators, on Azurite with the real SDK: the term history
 * (read-modify-write under the etag, keyed by epoch, trimmed) and the instance heartbeats (one
 * blob per instance, read by one listing, judged by the service's Last-Modified).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BlobServiceClient, type ContainerClient } from '@azure/storage-blob';
import { eventually } from 'devhost/testing';

import { ClusterRecords } from '../../../shared/leader/ClusterRecords';
import { type HeartbeatState, InstanceHeartbeats, listInstances } from '../../../shared/leader/InstanceHeartbeats';
import { TermHistory } from '../../../shared/leader/TermHistory';
import { azuriteConnectionString, uniqueName } from '../../support/env';
import { debugMemoryLogger as memoryLogger } from '../../unit/leader/contender';
import { sleep } from './harness';

function container(): ContainerClient {
  return BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient(uniqueName('records'));
}

describe('term history beside the lease (Azurite)', () => {
  it('adds each term once, records its end, keeps the newest first, and creates its container', async () => {
    const history = new TermHistory(container(), 'coordinator.terms.json');
    assert.deepEqual(await history.read(), []);
    await history.recordStart({ epoch: 1, holder: 'a', acquiredAt: '2026-01-01T00:00:00.000Z' });
    await history.recordStart({ epoch: 2, holder: 'b', acquiredAt: '2026-01-01T00:01:00.000Z' });
    await history.recordStart({ epoch: 2, holder: 'b', acquiredAt: 'again' });
    await history.recordEnd({ epoch: 2, holder: 'b', endedAt: '2026-01-01T00:02:00.000Z', reason: 'released' });
    // Not this holder's term, and a term never recorded: nothing is invented.
    await history.recordEnd({ epoch: 1, holder: 'b', endedAt: 'x', reason: 'lost' });
    await history.recordEnd({ epoch: 9, holder: 'z', endedAt: 'x', reason: 'lost' });
    assert.deepEqual(await history.read(), [
      { epoch: 2, holder: 'b', acquiredAt: '2026-01-01T00:01:00.000Z', endedAt: '2026-01-01T00:02:00.000Z', endReason: 'released' },
      { epoch: 1, holder: 'a', acquiredAt: '2026-01-01T00:00:00.000Z' },
    ]);
  });

  it('loses no term when writers race (etag retries), and a late stale term keeps its place by epoch', async () => {
    const c = container();
    const writers = [1, 2, 3, 4].map(() => new TermHistory(c, 'coordinator.terms.json', { maxTerms: 3 }));
    await writers[0]?.recordStart({ epoch: 10, holder: 'first', acquiredAt: 't10' });
    await Promise.all(writers.map((w, i) => w.recordStart({ epoch: 20 + i, holder: `w${i}`, acquiredAt: `t${20 + i}` })));
    await writers[0]?.recordStart({ epoch: 11, holder: 'stale', acquiredAt: 't11' });
    assert.deepEqual((await writers[1]?.read())?.map((t) => t.epoch), [23, 22, 21], 'newest 3 kept, the stale epoch 11 sorted below them and trimmed');
  });

  it('reads a malformed history as empty and writes over it', async () => {
    const c = container();
    await c.createIfNotExists();
    await c.getBlockBlobClient('coordinator.terms.json').upload('{"terms": [{"epoch": "x"}, 7]', 28);
    const history = new TermHistory(c, 'coordinator.terms.json');
    assert.deepEqual(await history.read(), []);
    await history.recordStart({ epoch: 3, holder: 'c', acquiredAt: 't3' });
    assert.deepEqual(await history.read(), [{ epoch: 3, holder: 'c', acquiredAt: 't3' }]);
  });
});

describe('instance heartbeats beside the lease (Azurite)', () => {
  it('lists every instance with its role, the leader first; a stop says goodbye; a silent one is told apart', async () => {
    const c = container();
    const logger = memoryLogger('beats');
    let aState: HeartbeatState = { role: 'follower', epoch: undefined, passes: 0 };
    const a = new InstanceHeartbeats(c, 'lease.instances/', 'inst-a', () => aState, logger, { intervalMs: 200 });
    const b = new InstanceHeartbeats(c, 'lease.instances/', 'inst-b', () => ({ role: 'follower', epoch: undefined, passes: 0 }), logger, { intervalMs: 200 });
    a.start();
    b.start();
    await sleep(300);
    aState = { role: 'leader', epoch: 4, passes: 7 };
    a.beatSoon();
    // The beat is a blob write: on a loaded machine it may take longer than a fixed sleep.
    const seen = await eventually(async () => {
      const listed = await listInstances(c, 'lease.instances/', { intervalMs: 200 });
      return listed.find((i) => i.id === 'inst-a')?.role === 'leader' ? listed : undefined;
    }, 10_000, "inst-a's leader beat");
    assert.deepEqual(
      seen.map((i) => [i.id, i.role, i.epoch, i.passes, i.state]),
      [
        ['inst-a', 'leader', 4, 7, 'alive'],
        ['inst-b', 'follower', null, 0, 'alive'],
      ],
    );
    assert.ok(seen.every((i) => i.startedAt !== null && i.ageSeconds < 5));
    await b.stop();
    const later = await listInstances(c, 'lease.instances/', { intervalMs: 200, now: new Date(Date.now() + 10_000) });
    assert.deepEqual(later.map((i) => [i.id, i.role, i.state]), [
      ['inst-a', 'leader', 'silent'],
      ['inst-b', 'stopped', 'stopped'],
    ]);
    await a.stop();
    assert.deepEqual(logger.lines.filter((l) => l.event === 'instance.heartbeat_failed'), []);
  });

  it('a leader beats at its own interval, says so, and is judged silent by it; a follower by its own', async () => {
    const c = container();
    const logger = memoryLogger('beats');
    let aState: HeartbeatState = { role: 'leader', epoch: 3, passes: 0 };
    const options = { intervalMs: 60_000, leaderIntervalMs: 300 };
    const a = new InstanceHeartbeats(c, 'lease.instances/', 'inst-a', () => aState, logger, options);
    const b = new InstanceHeartbeats(c, 'lease.instances/', 'inst-b', () => ({ role: 'follower', epoch: undefined, passes: 0 }), logger, options);
    a.start();
    b.start();
    await sleep(2_600);
    const seen = await listInstances(c, 'lease.instances/', { intervalMs: 60_000 });
    const byId = new Map(seen.map((i) => [i.id, i]));
    assert.equal(byId.get('inst-a')?.intervalSeconds, 0.3);
    assert.equal(byId.get('inst-b')?.intervalSeconds, 60);
    // Last-Modified has whole seconds: the leader's beat is at most ~1 s old, the follower's is its first, 2 s and more.
    assert.ok((byId.get('inst-a')?.ageSeconds ?? 99) <= 1.5, `leader beat age ${byId.get('inst-a')?.ageSeconds}`);
    assert.ok((byId.get('inst-b')?.ageSeconds ?? 0) >= 1.5, `follower beat age ${byId.get('inst-b')?.ageSeconds}`);
    // 3 s on: more than 2 of the leader's intervals + 1 s, well within the follower's.
    const later = await listInstances(c, 'lease.instances/', { intervalMs: 60_000, now: new Date(Date.now() + 3_000) });
    assert.deepEqual(later.map((i) => [i.id, i.state]), [['inst-b', 'alive'], ['inst-a', 'silent']]);
    // An idle leader (its passes back off, finding no work): its next beat says the followers' interval.
    aState = { role: 'leader', epoch: 3, passes: 0, idle: true };
    await sleep(1_000);
    const idle = await listInstances(c, 'lease.instances/', { intervalMs: 60_000 });
    assert.deepEqual(idle.map((i) => [i.id, i.role, i.intervalSeconds]), [['inst-a', 'leader', 60], ['inst-b', 'follower', 60]]);
    // Stepping down: the next beat comes at once and says the follower's interval.
    aState = { role: 'follower', epoch: undefined, passes: 0 };
    a.beatSoon();
    await sleep(500);
    const after = await listInstances(c, 'lease.instances/', { intervalMs: 60_000 });
    assert.deepEqual(after.map((i) => [i.id, i.role, i.intervalSeconds]), [['inst-a', 'follower', 60], ['inst-b', 'follower', 60]]);
    await Promise.all([a.stop(), b.stop()]);
    assert.deepEqual(logger.lines.filter((l) => l.event === 'instance.heartbeat_failed'), []);
  });

  it('the leader forgets instances unseen for longer than forgetAfterMs', async () => {
    const c = container();
    await c.createIfNotExists();
    await c.getBlockBlobClient('lease.instances/long-gone').upload('', 0, { metadata: { role: 'follower' } });
    await sleep(1_100);
    const logger = memoryLogger('beats');
    const leader = new InstanceHeartbeats(c, 'lease.instances/', 'inst-l', () => ({ role: 'leader', epoch: 1, passes: 0 }), logger, { intervalMs: 60_000, forgetAfterMs: 1_000 });
    leader.start();
    // The first beat and its sweep come at once; under load they may take seconds, so wait for the sweep's log line.
    await eventually(() => Promise.resolve(logger.lines.find((l) => l.event === 'instance.forgotten' && l.instance === 'long-gone')), 20_000, 'long-gone forgotten');
    const listed = (await listInstances(c, 'lease.instances/')).map((i) => i.id);
    assert.deepEqual(listed, ['inst-l'], JSON.stringify({ listed, lines: logger.lines }));
    await leader.stop();
  });

  it('ClusterRecords names its blobs after the lease blob and never touches the lease blob itself', async () => {
    const c = container();
    const records = new ClusterRecords(c, 'coordinator', { heartbeats: { intervalMs: 60_000 } });
    const recorder = records.recorder('me', () => ({ role: 'leader', epoch: 1, passes: 0 }), memoryLogger('rec'));
    recorder.start();
    recorder.termStarted({ epoch: 1, holder: 'me', acquiredAt: 't1' });
    recorder.termEnded({ epoch: 1, holder: 'me', reason: 'released' });
    await recorder.stopped();
    const names: string[] = [];
    for await (const blob of c.listBlobsFlat()) names.push(blob.name);
    assert.deepEqual(names.sort(), ['coordinator.instances/me', 'coordinator.terms.json']);
    assert.deepEqual(await records.terms(), [{ epoch: 1, holder: 'me', acquiredAt: 't1', endedAt: (await records.terms())[0]?.endedAt, endReason: 'released' }]);
    assert.deepEqual((await records.instances()).map((i) => [i.id, i.state]), [['me', 'stopped']]);
  });
});
