/**
 * End to end on two host processes (the extensions host unless E2E_HOST=devhost: test/e2e/support/appHost.ts)
 * running the real app (this build's functions/*.js) against the run's Azurite, sharing one host id like one app scaled out:
 * - a `sum` job over 10,000 integers submitted by HTTP completes with the exact result, with
 *   partial progress visible while it runs, and a job sent as a plain queue message completes too;
 * - the leader's process is killed (SIGKILL) mid-job: the other instance becomes leader and the
 *   job completes exactly once, nothing lost or counted twice.
 *
 * host.json is the project's, except `queues.batchSize` 1 (one work item message at a time per
 * instance), so the job runs long enough to watch its progress and to kill a process midway, and
 * Durable visibility timeouts of 1 minute (control) and 30 s (activities) instead of 5 minutes.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { QueueServiceClient } from '@azure/storage-queue';
import { eventually, type HostProcess } from 'devhost/testing';

import { azuriteConnectionString, uniqueName, uniqueTableName } from '../support/env';
import { e2eHostName, startAppHost } from './support/appHost';

const OUT_DIR = join(__dirname, '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
const KEY = 'e2e-host-key-not-a-secret';

interface JobView {
  jobId: string;
  status: string;
  progress: { chunks: { total: number; done: number; failed: number }; items: { total: number; done: number; failed: number } } | null;
  result?: unknown;
  epoch: number | null;
}

interface LeaderView {
  holder: string | null;
  epoch: number | null;
}

function sumOf(items: readonly number[]): { count: number; sum: number; min: number; max: number } {
  return { count: items.length, sum: items.reduce((a, b) => a + b, 0), min: Math.min(...items), max: Math.max(...items) };
}

/** An app folder for the real app: this build's output linked in, host.json with batchSize 1. */
function createRealAppRoot(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'devhost-e2e-'));
  symlinkSync(OUT_DIR, join(dir, 'app'), 'dir');
  const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as Record<string, unknown>;
  // One work item message at a time per instance: the same semantics, slow enough that a job's
  // progress can be seen midway and a process can be killed while chunks are still queued.
  const extensions = (hostJson.extensions ?? {}) as Record<string, Record<string, unknown>>;
  // Durable messages held by the killed process come back after their visibility timeout: the
  // extension's minimum for control queues (1 minute) instead of its default 5, so the job finishes
  // within the test's bound (host.json durableTask.storageProvider, honored by the Durable backend).
  const durableTask = extensions.durableTask ?? {};
  const storageProvider = (durableTask.storageProvider ?? {}) as Record<string, unknown>;
  hostJson.extensions = {
    ...extensions,
    queues: { ...(extensions.queues ?? {}), batchSize: 1, newBatchThreshold: 0 },
    durableTask: { ...durableTask, storageProvider: { ...storageProvider, controlQueueVisibilityTimeout: '00:01:00', workItemQueueVisibilityTimeout: '00:00:30' } },
  };
  writeFileSync(join(dir, 'host.json'), JSON.stringify(hostJson));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'e2e-app', main: 'app/functions/*.js' }));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

describe(`two instances of the app on the ${e2eHostName()}`, () => {
  const conn = azuriteConnectionString();
  const hostId = uniqueName('e2e').slice(0, 32);
  const env: Record<string, string> = {
    FUNCTIONS_WORKER_RUNTIME: 'node',
    AzureWebJobsStorage: conn,
    CoordinatorStorage: conn,
    TASK_HUB_NAME: `E2e${randomBytes(6).toString('hex')}`,
    JOBS_QUEUE: uniqueName('e2e-jobs'),
    WORK_ITEMS_QUEUE: uniqueName('e2e-wi'),
    JOB_RESULTS_CONTAINER: uniqueName('e2e-res'),
    JOB_INDEX_TABLE: uniqueTableName('e2eidx'),
    LEADER_LEASE_CONTAINER: uniqueName('e2e-lease'),
    LEADER_TIMER_SCHEDULE: '*/2 * * * * *',
    COORDINATOR_INSTANCE_ID: '',
    DEVHOST_HOST_KEYS: KEY,
  };
  let app: { dir: string; remove(): void };
  const hosts = new Map<string, HostProcess>();

  const start = async (instanceId: string): Promise<void> => {
    hosts.set(instanceId, await startAppHost({ appRoot: app.dir, hostId, instanceId, env, timeoutMs: 30_000 }));
  };
  const live = (): HostProcess[] => [...hosts.values()].filter((h) => h.child.exitCode === null && h.child.signalCode === null);
  const call = async (method: string, path: string, body?: string): Promise<{ status: number; json: unknown; headers: Headers }> => {
    const target = live()[0];
    assert.ok(target !== undefined, 'an instance is running');
    const res = await fetch(`${target.baseUrl}${path}`, { method, headers: { 'x-functions-key': KEY, 'content-type': 'application/json' }, ...(body === undefined ? {} : { body }) });
    const text = await res.text();
    return { status: res.status, json: text === '' ? null : (JSON.parse(text) as unknown), headers: res.headers };
  };
  const job = async (jobId: string): Promise<JobView | undefined> => {
    const res = await call('GET', `/api/jobs/${encodeURIComponent(jobId)}`);
    return res.status === 200 ? (res.json as JobView) : undefined;
  };
  const finished = (jobId: string, timeoutMs: number): Promise<JobView> =>
    eventually(
      async () => {
        const view = await job(jobId);
        return view !== undefined && !['pending', 'running'].includes(view.status) ? view : undefined;
      },
      timeoutMs,
      `job ${jobId} to finish`,
    );

  before(async () => {
    app = createRealAppRoot();
    await start('e2e-a');
    await start('e2e-b');
  });

  after(async () => {
    await Promise.all(live().map((h) => h.stop()));
    app.remove();
  });

  it('completes a sum over 10,000 integers submitted by HTTP exactly, with progress visible, and a queue-submitted job too', async () => {
    const items = Array.from({ length: 10_000 }, (_, i) => ((i * 7919) % 1999) - 999);
    // 1,000 chunks: enough work (several seconds on two instances) for the status to show progress
    // midway; at 200 (chunkSize 50) the job could finish within its plan's first second of results.
    const posted = await call('POST', '/api/jobs', JSON.stringify({ workType: 'sum', items, options: { chunkSize: 10 } }));
    assert.equal(posted.status, 202, JSON.stringify(posted.json));
    const jobId = (posted.json as { jobId: string }).jobId;
    assert.ok((posted.headers.get('location') ?? '').includes(jobId));

    const queueItems = Array.from({ length: 2_000 }, (_, i) => i - 1_000);
    const text = JSON.stringify({ workType: 'sum', items: queueItems, options: { chunkSize: 250 } });
    const sent = await QueueServiceClient.fromConnectionString(conn)
      .getQueueClient(env.JOBS_QUEUE as string)
      .sendMessage(Buffer.from(text, 'utf8').toString('base64'));

    let sawPartial = false;
    const done = await eventually(
      async () => {
        const view = await job(jobId);
        const chunks = view?.progress?.chunks;
        if (view?.status === 'running' && chunks !== undefined && chunks.done > 0 && chunks.done < chunks.total) sawPartial = true;
        return view !== undefined && !['pending', 'running'].includes(view.status) ? view : undefined;
      },
      120_000,
      'the HTTP job to finish',
    );
    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    assert.deepEqual(done.progress, { chunks: { total: 1_000, done: 1_000, failed: 0 }, items: { total: 10_000, done: 10_000, failed: 0 } });
    assert.ok(sawPartial, 'partial progress was visible while the job ran');

    const viaQueue = await finished(`q-${sent.messageId}`, 60_000);
    assert.equal(viaQueue.status, 'completed', JSON.stringify(viaQueue));
    assert.deepEqual(viaQueue.result, sumOf(queueItems));
  });

  it('finishes a job exactly once after the leader process is killed mid-job, without waiting for the chunk deadline', async (t) => {
    const items = Array.from({ length: 10_000 }, (_, i) => ((i * 31) % 997) - 498);
    // The default 300 s deadline: the killed process's claimed chunk comes back through its silent heartbeat (20 s), not the deadline.
    // 1,000 chunks: the job runs several seconds on two instances, so the kill lands mid-job (200 chunks
    // took about 2 s once a chunk cost one result write, and the kill came as the job ended).
    const posted = await call('POST', '/api/jobs', JSON.stringify({ jobId: 'e2e-failover', workType: 'sum', items, options: { chunkSize: 10 } }));
    assert.equal(posted.status, 202, JSON.stringify(posted.json));

    const leader = await eventually(
      async () => {
        const view = (await call('GET', '/api/leader')).json as LeaderView;
        return view.holder !== null && hosts.has(view.holder) ? view : undefined;
      },
      30_000,
      'a leader',
    );
    // Mid-job: the orchestration runs and its 1,000 chunks are on the work queue, not yet all done.
    const running = await eventually(
      async () => {
        const view = await job('e2e-failover');
        return view?.status === 'running' ? view : undefined;
      },
      60_000,
      'the job to start running',
    );
    const victim = hosts.get(leader.holder as string);
    assert.ok(victim !== undefined);
    await victim.kill();
    const killedAt = Date.now();
    assert.ok((running.progress?.chunks.done ?? 0) < 1_000, 'killed before the job finished');
    const afterKill = await job('e2e-failover');
    assert.equal(afterKill?.status, 'running', `the job was still running after the kill: ${JSON.stringify(afterKill?.progress)}`);

    const done = await finished('e2e-failover', 150_000);
    t.diagnostic(`completed ${Math.round((Date.now() - killedAt) / 1000)} s after the leader was killed (chunk deadline 300 s)`);
    // Where the recovery's time went, from the survivor's log (s after the kill).
    const survivor = live()[0];
    const sinceKill = (e: Record<string, unknown>): string => ((Date.parse(String(e.ts)) - killedAt) / 1000).toFixed(1);
    const marks = ['leader.acquired', 'job.resume_requested', 'job.plan_refused', 'intake.start_repaired', 'job.chunks_resent', 'job.aggregated'].flatMap((event) =>
      (survivor?.events(event) ?? [])
        .filter((e) => Date.parse(String(e.ts)) >= killedAt)
        .map((e) => `${event} ${sinceKill(e)}${event === 'job.chunks_resent' ? ` (${JSON.stringify(Object.fromEntries(Object.entries(e).filter(([k]) => !['ts', 'level', 'component', 'event', 'jobId', 'epoch'].includes(k))))})` : ''}`),
    );
    const duplicates = (survivor?.events('workitem.duplicate_discarded') ?? []).filter((e) => e.jobId === 'e2e-failover').length;
    t.diagnostic(`recovery: ${marks.join('; ')}; duplicate deliveries discarded ${duplicates}`);

    assert.equal(done.status, 'completed', JSON.stringify(done));
    assert.deepEqual(done.result, sumOf(items));
    assert.deepEqual(done.progress, { chunks: { total: 1_000, done: 1_000, failed: 0 }, items: { total: 10_000, done: 10_000, failed: 0 } });

    const after = await eventually(
      async () => {
        const view = (await call('GET', '/api/leader')).json as LeaderView;
        return view.holder !== null && view.holder !== leader.holder && (view.epoch ?? 0) > (leader.epoch ?? 0) ? view : undefined;
      },
      60_000,
      'a new leader with a higher epoch',
    );
    assert.ok(hosts.has(after.holder as string));
    const listed = (await call('GET', '/api/jobs')).json as { jobs?: Array<{ jobId: string }> } | Array<{ jobId: string }>;
    const entries = Array.isArray(listed) ? listed : (listed.jobs ?? []);
    assert.equal(entries.filter((e) => e.jobId === 'e2e-failover').length, 1, 'the job exists once');
  });
});
