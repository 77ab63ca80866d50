/**
 * A differential check of the development host's Durable backend against the real extension: the
 * development host's reference orchestrations (devhost/test/fixtures/referenceApp.ts, TypeScript,
 * durable-functions v3) run on both hosts, the development host and the extensions host (exthost/:
 * Durable extension 3.19.0 over Azure Storage, the orchestrators replayed through its out-of-proc
 * shim), each case started and read through the same Durable HTTP API
 * (`/runtime/webhooks/durabletask`, `showHistory`), and compared:
 * - runtime status, output and custom status are the same, failure texts included (an orchestrator's
 *   own error, the 16 KB custom status limit, retries exhausted); where an activity's failure is in
 *   the output, the reason is compared and the serialized .NET exception after it is not (the
 *   development host writes a reduced one, devhost/README.md);
 * - the history has the same events: in order where the orchestration makes the order
 *   deterministic, as a multiset where completions race (fan-out, retries in parallel);
 * - the known difference stays known: an orchestrator calling an activity that does not exist fails
 *   on the development host, while on the extension the instance stays Running (the out-of-proc shim
 *   swallows the extension's "doesn't exist" error, exthost/README.md). If the extension changes,
 *   this test says so.
 * Field-level differences of historyEvents (null fields the extension writes, TaskCompleted.Input,
 * timestamps' precision) are reported with t.diagnostic, not judged.
 *
 * Without a .NET SDK it fails with ExtHostUnavailable saying so: never skipped.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { eventually, type HostProcess, startHostProcess } from 'devhost/testing';

import { buildExtHost, startExtHostProcess } from '../../scripts/extHostProcess';
import { azuriteConnectionString } from '../support/env';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

interface Status {
  runtimeStatus?: string;
  output?: Json;
  customStatus?: Json;
  historyEvents?: Array<Record<string, Json>>;
}

interface Case {
  readonly name: string;
  readonly orchestrator: string;
  readonly input?: Json;
  /** Raise this event once the custom status's `stage` is `whenStage`. */
  readonly event?: { name: string; data: Json; whenStage: string };
  /** The history's order depends on which completion came first. */
  readonly racing?: boolean;
  /** The output carries an activity failure: compare its text up to the serialized exception. */
  readonly activityFailure?: boolean;
}

const CASES: readonly Case[] = [
  { name: 'function chaining', orchestrator: 'HelloSequence' },
  { name: 'fan-out/fan-in', orchestrator: 'FanOutFanIn', input: 5, racing: true },
  // 20 s: the activity (50 ms) wins unless its dispatch takes longer (5 s was lost once in a loaded CI run).
  { name: 'Task.any won by the activity', orchestrator: 'TimerRace', input: { activityDelayMs: 50, timeoutMs: 20_000 } },
  { name: 'Task.any won by the timer', orchestrator: 'TimerRace', input: { activityDelayMs: 3_000, timeoutMs: 300 } },
  { name: 'external event or timeout (timeout)', orchestrator: 'ApprovalWithTimeout', input: 300 },
  { name: 'retry until success', orchestrator: 'RetryFlaky', input: { key: 'flaky-1', failures: 2 } },
  { name: 'retries exhausted, caught', orchestrator: 'RetryExhausted', input: { key: 'flaky-2', failures: 5 }, activityFailure: true },
  { name: 'retries in parallel', orchestrator: 'RetryFanOut', input: 'flaky-3', racing: true },
  { name: 'continue-as-new', orchestrator: 'Counter', input: 0 },
  { name: 'activity failure caught', orchestrator: 'CatchActivityError', activityFailure: true },
  { name: 'orchestrator throws', orchestrator: 'Throws' },
  { name: 'sub-orchestration', orchestrator: 'SubOrchestrationParent' },
  { name: 'custom status within 16 KB', orchestrator: 'BigStatus', input: 4_000 },
  { name: 'custom status over 16 KB', orchestrator: 'BigStatus', input: 9_000 },
  { name: 'custom status and an external event', orchestrator: 'CustomStatus', event: { name: 'Continue', data: { go: true }, whenStage: 'waiting' } },
];

const MISSING_ACTIVITY: Case = { name: 'an activity that does not exist', orchestrator: 'CallsMissingActivity' };
/** How long the missing-activity instance is watched on the extension: it must still be Running then. */
const STUCK_WATCH_MS = 8_000;

/** The reference app (compiled with the devhost package) as an app folder of its own. */
function referenceAppRoot(): { dir: string; remove(): void } {
  const devhostOut = join(dirname(require.resolve('devhost/package.json')), 'dist');
  const dir = mkdtempSync(join(tmpdir(), 'durable-diff-'));
  symlinkSync(devhostOut, join(dir, 'app'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'durable-differential', main: 'app/test/fixtures/referenceApp.js' }));
  writeFileSync(
    join(dir, 'host.json'),
    JSON.stringify({ version: '2.0', extensions: { durableTask: { hubName: '%TASK_HUB_NAME%', storageProvider: { maxQueuePollingInterval: '00:00:00.250' } } } }),
  );
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

async function runCase(host: HostProcess, c: Case, id: string, finishMs: number): Promise<Status> {
  const api = `${host.baseUrl}/runtime/webhooks/durabletask`;
  const started = await fetch(`${api}/orchestrators/${c.orchestrator}/${id}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: c.input === undefined ? '' : JSON.stringify(c.input),
  });
  assert.equal(started.status, 202, `${c.orchestrator}: ${await started.text()}`);
  const read = async (): Promise<Status> => (await (await fetch(`${api}/instances/${id}?showHistory=true&showHistoryOutput=true`)).json()) as Status;
  if (c.event !== undefined) {
    const event = c.event;
    await eventually(async () => ((await read()).customStatus as { stage?: string } | null)?.stage === event.whenStage || undefined, 30_000, `${id} at stage ${event.whenStage}`);
    const raised = await fetch(`${api}/instances/${id}/raiseEvent/${event.name}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(event.data) });
    assert.equal(raised.status, 202);
  }
  const deadline = Date.now() + finishMs;
  for (;;) {
    const status = await read();
    if (!['Pending', 'Running'].includes(status.runtimeStatus ?? '') || Date.now() > deadline) return status;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** An output with an activity failure: the text before the serialized .NET exception (" \n {"). */
function reasonOnly(value: Json | undefined): Json | undefined {
  if (value !== null && typeof value === 'object' && !Array.isArray(value) && typeof value.caught === 'string') {
    return { ...value, caught: value.caught.split(' \n ')[0] ?? value.caught };
  }
  return value;
}

const eventTypes = (s: Status): string[] => (s.historyEvents ?? []).map((e) => JSON.stringify(e.EventType ?? null));

/** Fields of the same-position events that differ (timestamps aside), for the report. */
function fieldDifferences(a: Status, b: Status): string[] {
  const ignored = new Set(['Timestamp', 'ScheduledTime', 'FireAt']);
  const out = new Set<string>();
  (a.historyEvents ?? []).forEach((ea, i) => {
    const eb = b.historyEvents?.[i];
    if (eb === undefined || ea.EventType !== eb.EventType) return;
    for (const key of new Set([...Object.keys(ea), ...Object.keys(eb)])) {
      if (ignored.has(key)) continue;
      const va = JSON.stringify(ea[key] ?? null);
      const vb = JSON.stringify(eb[key] ?? null);
      const type = typeof ea.EventType === 'string' ? ea.EventType : JSON.stringify(ea.EventType ?? null);
      if (va !== vb) out.add(`${type}.${key}${key in ea ? '' : ' (devhost: absent)'}${key in eb ? '' : ' (extension: absent)'}`);
      else if (key in ea !== key in eb) out.add(`${type}.${key} null/absent`);
    }
  });
  return [...out];
}

describe('the reference orchestrations on the development host and on the real extension', () => {
  const conn = azuriteConnectionString();
  let app: { dir: string; remove(): void } | undefined;
  const hosts: { devhost?: HostProcess; extensions?: HostProcess } = {};
  const results = new Map<string, { devhost: Status; extensions: Status }>();

  before(
    async () => {
      buildExtHost();
      app = referenceAppRoot();
      const dir = app.dir;
      const env = (): Record<string, string> => ({ FUNCTIONS_WORKER_RUNTIME: 'node', AzureWebJobsStorage: conn, TASK_HUB_NAME: `Diff${randomBytes(6).toString('hex')}` });
      [hosts.devhost, hosts.extensions] = await Promise.all([
        startHostProcess({ appRoot: dir, hostId: 'durable-diff-dev', instanceId: 'diff-devhost', env: env(), timeoutMs: 30_000 }),
        startExtHostProcess({ appRoot: dir, hostId: 'durable-diff-ext', instanceId: 'diff-extensions', env: env(), timeoutMs: 120_000 }),
      ]);
      const { devhost, extensions } = hosts;
      assert.ok(devhost !== undefined && extensions !== undefined);
      await Promise.all(
        [...CASES, MISSING_ACTIVITY].map(async (c, i) => {
          const id = `diff-${i}-${c.orchestrator}`;
          const finishMs = c === MISSING_ACTIVITY ? STUCK_WATCH_MS : 60_000;
          const [onDevhost, onExtensions] = await Promise.all([runCase(devhost, c, id, finishMs), runCase(extensions, c, id, finishMs)]);
          results.set(c.name, { devhost: onDevhost, extensions: onExtensions });
        }),
      );
    },
    { timeout: 600_000 },
  );

  after(async () => {
    await Promise.all([hosts.devhost?.stop(), hosts.extensions?.stop()]);
    app?.remove();
  });

  for (const c of CASES) {
    it(`${c.name} (${c.orchestrator}): same status, output, custom status and history events`, (t) => {
      const r = results.get(c.name);
      assert.ok(r !== undefined, 'the case ran');
      const { devhost, extensions } = r;
      assert.notEqual(devhost.runtimeStatus, 'Running', 'finished on the development host');
      assert.equal(extensions.runtimeStatus, devhost.runtimeStatus, JSON.stringify(extensions.output));
      const output = (s: Status): Json | undefined => (c.activityFailure === true ? reasonOnly(s.output) : s.output);
      assert.deepEqual(output(extensions), output(devhost));
      assert.deepEqual(extensions.customStatus, devhost.customStatus);
      if (c.racing === true) assert.deepEqual([...eventTypes(extensions)].sort(), [...eventTypes(devhost)].sort());
      else assert.deepEqual(eventTypes(extensions), eventTypes(devhost));
      const fields = fieldDifferences(devhost, extensions);
      if (fields.length > 0 && c.racing !== true) t.diagnostic(`historyEvents fields that differ: ${fields.join(', ')}`);
    });
  }

  it('an activity that does not exist: Failed on the development host, Running for ever on the extension (known difference)', () => {
    const r = results.get(MISSING_ACTIVITY.name);
    assert.ok(r !== undefined, 'the case ran');
    assert.equal(r.devhost.runtimeStatus, 'Failed');
    assert.match(JSON.stringify(r.devhost.output), /The function 'NoSuchActivity' doesn't exist/);
    assert.equal(r.extensions.runtimeStatus, 'Running', `after ${STUCK_WATCH_MS} ms: ${JSON.stringify(r.extensions)}`);
    assert.deepEqual(eventTypes(r.extensions), ['"ExecutionStarted"'], 'nothing scheduled');
  });
});
