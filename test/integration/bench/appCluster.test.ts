/**
 * The benchmarks' black-box harness (bench/appCluster.ts) against the real app: an extensions-host
 * process (the benches' default host) started as `npm start` starts one (instance id instance-1, settings from the sample file),
 * a job run through the HTTP API, and the claim-blob reading the recovery bench uses to pick the
 * instance to kill, on real blobs in Azurite.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { type AppCluster, claimedUnfinished, listNames, runJob, startAppCluster } from '../../../bench/appCluster';

const CONNECTION = process.env.AZURITE_CONNECTION_STRING ?? '';

describe('the bench harness (extensions host, Azurite)', () => {
  let cluster: AppCluster;

  before(async () => {
    assert.notEqual(CONNECTION, '', 'run through scripts/runTests (it starts Azurite)');
    cluster = await startAppCluster(CONNECTION, { instances: 1, label: 'test', host: 'extensions' });
  });

  after(async () => {
    await cluster?.stop();
  });

  it('runs a job through the HTTP API on an instance named as npm start names it, whose results say so', async () => {
    assert.equal(await cluster.leader(), 'instance-1');
    const outcome = await runJob(cluster, { jobId: 'harness-1', workType: 'sum', items: [1, 2, 3, 4, 5], options: { chunkSize: 2 } }, 120_000);
    assert.equal(outcome.view.status, 'completed');
    assert.deepEqual(outcome.view.result, { count: 5, sum: 15, min: 1, max: 5 });
    assert.ok(outcome.finishedAt > outcome.postedAt);
    assert.equal((await listNames(cluster.results, 'jobs/harness-1/results/')).length, 3);
    // Quick chunks are never claimed (a worker claims after 2 s on a chunk); results name their writer.
    assert.deepEqual(await listNames(cluster.results, 'jobs/harness-1/claims/'), []);
    const result = await cluster.results.getBlockBlobClient('jobs/harness-1/results/00000.json').downloadToBuffer();
    assert.equal((JSON.parse(result.toString('utf8')) as { writtenBy?: string }).writtenBy, 'instance-1');
    // A finished job holds nothing.
    const done = await claimedUnfinished(cluster, 'harness-1');
    assert.equal(done.holders.size, 0);
    assert.equal(done.results, 3);
  });

  it('names the holder of each claimed chunk without a result by its latest dispatch', async () => {
    const put = async (name: string, body: unknown): Promise<void> => {
      const text = JSON.stringify(body);
      await cluster.results.getBlockBlobClient(`jobs/harness-fake/${name}`).upload(text, Buffer.byteLength(text));
    };
    await put('claims/00000-1.json', { claimedBy: 'instance-old', claimedAt: '2026-01-01T00:00:00Z' });
    await put('claims/00000-2.json', { claimedBy: 'instance-new', claimedAt: '2026-01-01T00:00:30Z' });
    await put('claims/00001-1.json', { claimedBy: 'instance-old', claimedAt: '2026-01-01T00:00:00Z' });
    await put('results/00001.json', { status: 'ok' });
    await put('claims/00012-1.json', { claimedBy: 'instance-3', claimedAt: '2026-01-01T00:00:00Z' });
    const seen = await claimedUnfinished(cluster, 'harness-fake');
    assert.deepEqual([...seen.holders].sort((a, b) => a[0] - b[0]), [
      [0, 'instance-new'],
      [12, 'instance-3'],
    ]);
    assert.equal(seen.results, 1);
    assert.equal(seen.claimed, 3);
  });
});
