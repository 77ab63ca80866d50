/**
 * The same jobs end to end on both local hosts: the development host (devhost/, its own Durable
 * backend) and the extensions host (exthost/: the real Durable extension 3.19 over Azure Storage,
 * the real queue and timer extensions, the app in a Node.js worker). Same build, same host.json, same
 * settings, one host process each, its own names on the run's Azurite:
 * - the README's job (an integer past 2^53 given as a string, chunks of 2) completes with the exact sum;
 * - 500 items in chunks of 25 (20 chunks through the work-items queue and back) complete with theirs;
 * - the orchestration instance is Completed in the Durable HTTP API (the extension's own handler on
 *   the extensions host), its output the job's summary;
 * - the 202 and each status answer of a job that has not ended carry `Retry-After`; an ended one's none;
 * - function keys are enforced alike: each route at its function's authLevel (a function key, a host
 *   key or the master key; anonymous routes open), the Durable webhooks at the system level.
 * How long each job took on each host is reported (t.diagnostic) for exthost/README.md's comparison;
 * it is not judged.
 *
 * Without a .NET SDK the extensions host's cases fail with ExtHostUnavailable saying so: never
 * skipped (CI has dotnet and NuGet).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import { eventually, type HostProcess, startHostProcess } from 'devhost/testing';

import { buildExtHost, startExtHostProcess } from '../../scripts/extHostProcess';
import { azuriteConnectionString, uniqueName, uniqueTableName } from '../support/env';
import { createRealAppRoot, type JobView, KEY } from './support/realApp';

const SYSTEM_KEY = 'both-hosts-system-key-not-a-secret';
const MASTER_KEY = 'both-hosts-master-key-not-a-secret';
/** A key of the `jobsList` function alone. */
const LIST_KEY = 'both-hosts-jobslist-key-not-a-secret';

interface HostKind {
  readonly name: string;
  readonly prepare?: () => void;
  readonly start: (options: { appRoot: string; hostId: string; instanceId: string; env: Record<string, string> }) => Promise<HostProcess>;
}

const HOSTS: readonly HostKind[] = [
  { name: 'development host', start: (o) => startHostProcess({ ...o, timeoutMs: 30_000 }) },
  { name: 'extensions host', prepare: () => void buildExtHost(), start: (o) => startExtHostProcess({ ...o, timeoutMs: 120_000 }) },
];

for (const kind of HOSTS) {
  describe(`jobs end to end on the ${kind.name}`, () => {
    const conn = azuriteConnectionString();
    const taskHub = `Both${randomBytes(6).toString('hex')}`;
    const env: Record<string, string> = {
      FUNCTIONS_WORKER_RUNTIME: 'node',
      AzureWebJobsStorage: conn,
      CoordinatorStorage: conn,
      TASK_HUB_NAME: taskHub,
      JOBS_QUEUE: uniqueName('both-jobs'),
      WORK_ITEMS_QUEUE: uniqueName('both-wi'),
      JOB_RESULTS_CONTAINER: uniqueName('both-res'),
      JOB_INDEX_TABLE: uniqueTableName('bothidx'),
      LEADER_LEASE_CONTAINER: uniqueName('both-lease'),
      LEADER_TIMER_SCHEDULE: '*/2 * * * * *',
      COORDINATOR_INSTANCE_ID: '',
      COORDINATOR_LOG_LEVEL: 'info',
      DEVHOST_HOST_KEYS: KEY,
      DEVHOST_SYSTEM_KEYS: `durabletask_extension=${SYSTEM_KEY}`,
      DEVHOST_MASTER_KEY: MASTER_KEY,
      DEVHOST_FUNCTION_KEYS: `jobsList=${LIST_KEY}`,
    };
    let app: { dir: string; remove(): void } | undefined;
    let host: HostProcess | undefined;

    const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown; retryAfter: string | null }> => {
      assert.ok(host !== undefined);
      const res = await fetch(`${host.baseUrl}${path}`, {
        method,
        headers: { 'x-functions-key': KEY, 'content-type': 'application/json' },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      return { status: res.status, json: text === '' ? null : (JSON.parse(text) as unknown), retryAfter: res.headers.get('retry-after') };
    };

    const runJob = async (items: readonly unknown[], chunkSize: number): Promise<{ view: JobView; ms: number }> => {
      const jobId = `both-${randomBytes(4).toString('hex')}`;
      const started = Date.now();
      const posted = await call('POST', '/api/jobs', { jobId, workType: 'sum', items, options: { chunkSize } });
      assert.equal(posted.status, 202, JSON.stringify(posted.json));
      assert.equal(posted.retryAfter, '1', 'the 202 says when to ask first');
      const view = await eventually(
        async () => {
          const answer = await call('GET', `/api/jobs/${jobId}`);
          const got = answer.json as JobView;
          const ended = ['completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'].includes(got.status);
          // Until it ends, when to ask again (1-10 s); once ended, nothing to wait for.
          if (ended) assert.equal(answer.retryAfter, null, JSON.stringify(got));
          else assert.match(answer.retryAfter ?? '', /^([1-9]|10)$/, JSON.stringify(got));
          return ended ? got : undefined;
        },
        60_000,
        `job ${jobId} to finish on the ${kind.name}`,
      );
      return { view, ms: Date.now() - started };
    };

    before(
      async () => {
        kind.prepare?.();
        app = createRealAppRoot();
        const instanceId = `both-${kind.name.split(' ')[0] ?? 'host'}`;
        host = await kind.start({ appRoot: app.dir, hostId: uniqueName('both').slice(0, 32), instanceId, env });
      },
      { timeout: 600_000 },
    );

    after(async () => {
      const code = await host?.stop();
      app?.remove();
      assert.equal(code, 0, `the ${kind.name} stopped with ${String(code)}:\n${host?.lines().slice(-40).join('\n') ?? ''}`);
    });

    it('enforces function keys at each route\'s level, and the system key on the Durable webhooks', async () => {
      const baseUrl = host?.baseUrl;
      assert.ok(baseUrl !== undefined);
      const answer = async (method: string, path: string, key?: string, body?: unknown): Promise<{ status: number; text: string }> => {
        const res = await fetch(`${baseUrl}${path}`, {
          method,
          headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { 'x-functions-key': key }) },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        });
        return { status: res.status, text: await res.text() };
      };
      const jobId = `keys-${randomBytes(4).toString('hex')}`;
      const submission = { jobId, workType: 'sum', items: [1, 2], options: { chunkSize: 2 } };
      // A mutating route refuses a request without a key, or with a wrong one or another function's, with an empty 401.
      for (const key of [undefined, 'not-a-key', LIST_KEY, SYSTEM_KEY]) {
        const refused = await answer('POST', '/api/jobs', key, submission);
        assert.deepEqual(refused, { status: 401, text: '' }, `POST /api/jobs with ${key === undefined ? 'no key' : 'a key that does not open it'}`);
      }
      // ... and nothing was submitted.
      assert.equal((await answer('GET', `/api/jobs/${jobId}`, KEY)).status, 404);
      // A function's own key opens that function only; host and master keys open every function.
      assert.equal((await answer('GET', '/api/jobs?limit=1', LIST_KEY)).status, 200);
      assert.equal((await answer('GET', '/api/cluster', LIST_KEY)).status, 401);
      assert.equal((await answer('GET', '/api/cluster', KEY)).status, 200);
      assert.equal((await answer('GET', '/api/cluster', MASTER_KEY)).status, 200);
      // The key may come as `code` in the query; anonymous routes need none.
      assert.equal((await fetch(`${baseUrl}/api/jobs?limit=1&code=${KEY}`)).status, 200);
      assert.equal((await answer('GET', '/api/health')).status, 200);
      // The Durable webhooks are system-level: the durabletask_extension key or the master key, not a host key.
      const webhook = `/runtime/webhooks/durabletask/instances/job-${jobId}`;
      for (const key of [undefined, KEY, LIST_KEY]) assert.equal((await answer('GET', webhook, key)).status, 401, `webhook with ${key ?? 'no key'}`);
      for (const key of [SYSTEM_KEY, MASTER_KEY]) assert.equal((await answer('GET', webhook, key)).status, 404, 'an instance that does not exist');
    });

    it('completes the README job with the exact sum past 2^53', async (t) => {
      const { view, ms } = await runJob([1, 2, 3, '9007199254740993'], 2);
      assert.equal(view.status, 'completed', JSON.stringify(view));
      assert.deepEqual(view.result, { count: 4, sum: '9007199254740999', min: 1, max: '9007199254740993' });
      t.diagnostic(`${kind.name}: 4 items in 2 chunks, submitted to completed in ${ms} ms`);
    });

    it('completes 500 items in 20 chunks exactly, and the Durable API shows the instance Completed', async (t) => {
      const items = Array.from({ length: 500 }, (_, i) => i + 1);
      const { view, ms } = await runJob(items, 25);
      assert.equal(view.status, 'completed', JSON.stringify(view));
      assert.deepEqual(view.result, { count: 500, sum: 125_250, min: 1, max: 500 });
      assert.deepEqual(view.progress?.chunks, { total: 20, done: 20, failed: 0 });
      t.diagnostic(`${kind.name}: 500 items in 20 chunks, submitted to completed in ${ms} ms`);

      // The job shows its recorded outcome as soon as it is written; its run finishes a Durable hop later.
      const baseUrl = host?.baseUrl;
      assert.ok(baseUrl !== undefined);
      type Instance = { runtimeStatus?: string; name?: string; output?: { status?: string } };
      const read = async (): Promise<Instance> =>
        (await (await fetch(`${baseUrl}/runtime/webhooks/durabletask/instances/job-${view.jobId}?code=${SYSTEM_KEY}`)).json()) as Instance;
      const instance = await eventually(async () => {
        const got = await read();
        return got.runtimeStatus === 'Running' || got.runtimeStatus === 'Pending' ? undefined : got;
      }, 20_000, `the run of ${view.jobId} to finish`);
      assert.equal(instance.name, 'jobOrchestrator');
      assert.equal(instance.runtimeStatus, 'Completed', JSON.stringify(instance));
      assert.equal(instance.output?.status, 'completed', JSON.stringify(instance.output));
    });
  });
}
