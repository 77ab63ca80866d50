/**
 * Issue 23, item 3: the shipped host.json's work-item visibility (`extensions.durableTask.storageProvider.
 * workItemQueueVisibilityTimeout`, 00:00:10) is safe for an activity that runs longer than it: a 30 s
 * activity runs once, because the host renews its work-item message's invisibility while it runs. Shown
 * on the real Durable extension (exthost/: 3.19.0, DurableTask.AzureStorage, where DurableTask.Core's
 * TaskActivityDispatcher renews the lock) and on the development host (its own backend), each with the
 * shipped host.json as is, its own task hub on the run's Azurite, reached through a storage proxy that
 * records the work-item queue's traffic and Azurite's answers.
 *
 * The app is a fixture (test/e2e/fixtures/slowActivityApp.ts): an orchestration whose one activity
 * records each invocation as a blob of its own, then sleeps 30 s. Per host, it asserts:
 * - the outcome: the orchestration completed with the activity's output; one invocation record; one
 *   message sent to the work-item queue, delivered by exactly one receive (DequeueCount 1), and deleted
 *   (Azurite answered 204) once the activity was done, so it can never come back;
 * - the mechanism: every receive on the work-item queue asked the shipped visibility (10 s), and
 *   Azurite hid the delivered message for that long; the message was held for more than twice the
 *   visibility (without renewals it would have come back at least twice), by renewals Azurite accepted,
 *   each sent before the previous lock ran out (the largest gap and the margin are reported).
 *
 * Red-checked by refusing the renewals at the proxy, and by a 4 s visibility (below DurableTask.Core's
 * 5 s renewal poll): see exthost/README.md. Without a .NET SDK the extensions host's case fails with
 * ExtHostUnavailable: never skipped.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';
import { AZURITE_ACCOUNT, eventually, type HostProcess, startHostProcess } from 'devhost/testing';

import { buildExtHost, startExtHostProcess } from '../../scripts/extHostProcess';
import { azuriteConnectionString, uniqueName } from '../support/env';
import { type RecordedRequest, startStorageProxy, type StorageProxy } from '../support/storageProxy';
import { type SlowOnceInput, type SlowOnceOutput, type SlowOnceRecord } from './fixtures/slowActivityApp';

/** Compiled layout: <outDir>/test/e2e/slowActivityOnce.js; the repository one level above <outDir>. */
const OUT_DIR = join(__dirname, '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
/** The activity's wall-clock time: three times the shipped visibility. */
const ACTIVITY_MS = 30_000;

/** host.json's `hh:mm:ss` TimeSpan, in ms. */
function timeSpanMs(value: unknown): number {
  const match = typeof value === 'string' ? /^(\d+):(\d{2}):(\d{2}(?:\.\d+)?)$/.exec(value) : null;
  if (match === null) throw new Error(`not a TimeSpan: ${JSON.stringify(value)}`);
  return Math.round(((Number(match[1]) * 60 + Number(match[2])) * 60 + Number(match[3])) * 1000);
}

function shippedVisibilityMs(): number {
  type HostJson = { extensions?: { durableTask?: { storageProvider?: { workItemQueueVisibilityTimeout?: unknown } } } };
  const hostJson = JSON.parse(readFileSync(join(REPO_ROOT, 'host.json'), 'utf8')) as HostJson;
  return timeSpanMs(hostJson.extensions?.durableTask?.storageProvider?.workItemQueueVisibilityTimeout);
}

/** An app folder: this build linked in, the fixture as its entry point, the shipped host.json unchanged. */
function fixtureAppRoot(): { dir: string; remove(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'slow-once-'));
  symlinkSync(OUT_DIR, join(dir, 'app'), 'dir');
  const main = 'app/test/e2e/fixtures/slowActivityApp.js';
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'slow-activity-once', main }));
  copyFileSync(join(REPO_ROOT, 'host.json'), join(dir, 'host.json'));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** One lock on the work-item message: its receive or a renewal, as the proxy saw it and Azurite answered. */
interface Lock {
  readonly kind: 'receive' | 'renewal';
  readonly at: number;
  readonly askedSeconds: number;
  readonly status: number | undefined;
  /** When Azurite's answer was back at the proxy. */
  readonly answeredAt: number | undefined;
  /** Azurite's TimeNextVisible (whole seconds), when it answered. */
  readonly nextVisibleAt: number | undefined;
}

interface WorkItemTraffic {
  readonly sent: number;
  readonly receives: number;
  /** Every receive's asked visibility, distinct values. */
  readonly askedSeconds: readonly number[];
  /** Each message a receive delivered: its id and DequeueCount. */
  readonly deliveries: ReadonlyArray<{ readonly messageId: string; readonly dequeueCount: number; readonly lock: Lock }>;
  readonly renewals: ReadonlyArray<Lock & { readonly messageId: string }>;
  readonly deletes: ReadonlyArray<{ readonly messageId: string; readonly at: number; readonly status: number | undefined }>;
}

function xmlValues(xml: string, tag: string): string[] {
  return [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, 'g'))].map((m) => m[1] ?? '');
}

/** The work-item queue's traffic (`<hub>-workitems`) among the proxy's records. */
function workItemTraffic(records: readonly RecordedRequest[], taskHub: string): WorkItemTraffic {
  const base = `/${AZURITE_ACCOUNT}/${taskHub.toLowerCase()}-workitems/messages`;
  const mine = records.filter((r) => r.service === 'queue' && (r.path === base || r.path.startsWith(`${base}/`)));
  const seconds = (r: RecordedRequest): number => Number(r.query.get('visibilitytimeout') ?? NaN);
  const idOf = (r: RecordedRequest): string => decodeURIComponent(r.path.slice(base.length + 1));
  const receives = mine.filter((r) => r.method === 'GET' && r.path === base && r.query.get('peekonly') !== 'true');
  // A receive's answer: <QueueMessagesList><QueueMessage><MessageId>..<TimeNextVisible>..<DequeueCount>..</QueueMessage>...
  const deliveries = receives.flatMap((r) =>
    (r.response?.body.toString('utf8') ?? '')
      .split('<QueueMessage>')
      .slice(1)
      .map((block) => {
        const next = xmlValues(block, 'TimeNextVisible')[0];
        const nextVisibleAt = next === undefined ? undefined : Date.parse(next);
        const answeredAt = r.response?.at;
        const lock: Lock = { kind: 'receive', at: r.at, askedSeconds: seconds(r), status: r.status, answeredAt, nextVisibleAt };
        const dequeueCount = Number(xmlValues(block, 'DequeueCount')[0] ?? NaN);
        return { messageId: xmlValues(block, 'MessageId')[0] ?? '', dequeueCount, lock };
      }),
  );
  const renewals = mine
    .filter((r) => r.method === 'PUT' && r.path.startsWith(`${base}/`))
    .map((r) => {
      const next = r.response?.headers['x-ms-time-next-visible'];
      return {
        kind: 'renewal' as const,
        messageId: idOf(r),
        at: r.at,
        askedSeconds: seconds(r),
        status: r.status,
        answeredAt: r.response?.at,
        nextVisibleAt: typeof next === 'string' ? Date.parse(next) : undefined,
      };
    });
  return {
    sent: mine.filter((r) => r.method === 'POST' && r.path === base).length,
    receives: receives.length,
    askedSeconds: [...new Set(receives.map(seconds))],
    deliveries,
    renewals,
    deletes: mine
      .filter((r) => r.method === 'DELETE' && r.path.startsWith(`${base}/`))
      .map((r) => ({ messageId: idOf(r), at: r.at, status: r.status })),
  };
}

interface Status {
  runtimeStatus?: string;
  output?: SlowOnceOutput | null;
}

interface RunResult {
  readonly status: Status;
  readonly records: readonly SlowOnceRecord[];
  readonly traffic: WorkItemTraffic;
  readonly startedAt: number;
  readonly finishedAt: number;
}

interface HostKind {
  readonly name: string;
  readonly start: (options: { appRoot: string; hostId: string; instanceId: string; env: Record<string, string> }) => Promise<HostProcess>;
}

const HOSTS: readonly HostKind[] = [
  { name: 'development host', start: (o) => startHostProcess({ ...o, timeoutMs: 30_000 }) },
  { name: 'extensions host', start: (o) => startExtHostProcess({ ...o, timeoutMs: 120_000 }) },
];

describe(`a ${ACTIVITY_MS / 1000} s activity under the shipped work-item visibility runs once`, () => {
  const conn = azuriteConnectionString();
  const visibilityMs = shippedVisibilityMs();
  const container = uniqueName('slow-once');
  let app: { dir: string; remove(): void } | undefined;
  const proxies: StorageProxy[] = [];
  const hosts: HostProcess[] = [];
  const results = new Map<string, RunResult | Error>();

  const runOn = async (kind: HostKind, index: number): Promise<RunResult> => {
    assert.ok(app !== undefined);
    const taskHub = `SlowOnce${randomBytes(5).toString('hex')}`;
    const proxy = await startStorageProxy(conn, { keepResponse: (r) => r.service === 'queue' && r.path.includes('-workitems/messages') });
    proxies.push(proxy);
    const env = {
      FUNCTIONS_WORKER_RUNTIME: 'node',
      AzureWebJobsStorage: proxy.connectionString,
      TASK_HUB_NAME: taskHub,
      SLOW_ONCE_STORAGE: conn,
      SLOW_ONCE_CONTAINER: container,
    };
    const host = await kind.start({ appRoot: app.dir, hostId: `slow-once-${index}`, instanceId: `slow-once-${index}`, env });
    hosts.push(host);
    const runId = `run-${index}-${randomBytes(4).toString('hex')}`;
    const api = `${host.baseUrl}/runtime/webhooks/durabletask`;
    const input: SlowOnceInput = { runId, sleepMs: ACTIVITY_MS };
    const startedAt = Date.now();
    const started = await fetch(`${api}/orchestrators/slowOnce/${runId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(input),
    });
    assert.equal(started.status, 202, `${kind.name}: ${await started.text()}`);
    const status = await eventually(
      async () => {
        const got = (await (await fetch(`${api}/instances/${runId}`)).json()) as Status;
        return ['Pending', 'Running'].includes(got.runtimeStatus ?? 'Pending') ? undefined : got;
      },
      ACTIVITY_MS + 60_000,
      `${runId} to finish on the ${kind.name}`,
    );
    const finishedAt = Date.now();
    const blobs = BlobServiceClient.fromConnectionString(conn).getContainerClient(container);
    const records: SlowOnceRecord[] = [];
    for await (const blob of blobs.listBlobsFlat({ prefix: `${runId}/` })) {
      records.push(JSON.parse((await blobs.getBlobClient(blob.name).downloadToBuffer()).toString('utf8')) as SlowOnceRecord);
    }
    return { status, records, traffic: workItemTraffic(proxy.requests(), taskHub), startedAt, finishedAt };
  };

  before(
    async () => {
      buildExtHost();
      app = fixtureAppRoot();
      // Both hosts at once: the file's wall time is one host's start and one run.
      await Promise.all(
        HOSTS.map(async (kind, index) => {
          results.set(kind.name, await runOn(kind, index).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err)))));
        }),
      );
    },
    { timeout: 170_000 },
  );

  after(async () => {
    await Promise.all(hosts.map((h) => h.stop()));
    await Promise.all(proxies.map((p) => p.close()));
    app?.remove();
  });

  it(`the shipped workItemQueueVisibilityTimeout is the one this test holds (10 s, under a ${ACTIVITY_MS / 1000} s activity)`, () => {
    assert.equal(visibilityMs, 10_000, 'host.json changed: check this test still makes its point (an activity over twice the visibility)');
  });

  for (const kind of HOSTS) {
    it(`on the ${kind.name}: the activity ran once, its message renewed in time under a ${visibilityMs / 1000} s visibility`, (t) => {
      const result = results.get(kind.name);
      if (result instanceof Error) throw result;
      assert.ok(result !== undefined, 'the run happened');
      const { status, records, traffic } = result;
      const trace = JSON.stringify({ status, records, traffic });

      // The outcome.
      assert.equal(status.runtimeStatus, 'Completed', trace);
      assert.equal(records.length, 1, `invocations of the activity: ${trace}`);
      const [record] = records;
      assert.ok(record !== undefined);
      assert.equal(status.output?.invocationId, record.invocationId, trace);
      assert.ok((status.output?.sleptMs ?? 0) >= ACTIVITY_MS, trace);
      assert.equal(traffic.sent, 1, `messages sent to the work-item queue: ${trace}`);
      assert.equal(traffic.deliveries.length, 1, `deliveries of work-item messages: ${trace}`);
      const [delivery] = traffic.deliveries;
      assert.ok(delivery !== undefined);
      assert.equal(delivery.dequeueCount, 1, trace);
      // A delete that races a renewal is refused for its old pop receipt, and the provider tries once more.
      const removed = traffic.deletes.find((d) => d.messageId === delivery.messageId && d.status === 204);
      assert.ok(removed !== undefined, `the message was deleted (Azurite answered 204): ${trace}`);

      // The mechanism: the shipped visibility, renewed in time.
      const askedSeconds = visibilityMs / 1000;
      assert.deepEqual(traffic.askedSeconds, [askedSeconds], `every receive's visibilitytimeout: ${trace}`);
      const received = delivery.lock;
      assert.ok(received.nextVisibleAt !== undefined && received.answeredAt !== undefined, trace);
      // Azurite hid the message for the visibility from some moment between the receive's request and its
      // answer (TimeNextVisible has whole seconds, so up to a second less).
      const hiddenMs = received.nextVisibleAt - received.at;
      assert.ok(
        received.nextVisibleAt > received.at + visibilityMs - 1_000 && received.nextVisibleAt <= received.answeredAt + visibilityMs,
        `TimeNextVisible ${hiddenMs} ms after the receive (answered after ${received.answeredAt - received.at} ms): ${trace}`,
      );
      const renewals = traffic.renewals.filter((r) => r.messageId === delivery.messageId && r.at < removed.at);
      assert.ok(removed.at - received.at > 2 * visibilityMs, `held ${removed.at - received.at} ms: ${trace}`);
      assert.ok(renewals.length >= 2, `renewals: ${trace}`);
      const locks: Lock[] = [received, ...renewals];
      for (const lock of renewals) {
        assert.equal(lock.askedSeconds, askedSeconds, trace);
        assert.equal(lock.status, 204, `Azurite refused a renewal: ${trace}`);
      }
      const gaps = locks.slice(1).map((lock, i) => lock.at - (locks[i]?.at ?? lock.at));
      gaps.push(removed.at - (locks.at(-1)?.at ?? removed.at));
      const largestGap = Math.max(...gaps);
      assert.ok(largestGap < visibilityMs, `a lock ran out before the next renewal (gaps ${gaps.join(', ')} ms)`);

      t.diagnostic(
        `${kind.name}: started to Completed in ${result.finishedAt - result.startedAt} ms; message held ${removed.at - received.at} ms ` +
          `(hidden ${hiddenMs} ms at the receive); ` +
          `${renewals.length} renewals at +${renewals.map((r) => r.at - received.at).join(', +')} ms; ` +
          `largest gap ${largestGap} ms (margin ${visibilityMs - largestGap} ms); ${traffic.receives} receives on the work-item queue`,
      );
    });
  }
});
