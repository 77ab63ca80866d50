/**
 * Kills a worker of a running job at an exact step of its storage traffic (the e2e fault tests of
 * recovery): two instances of the real app with the project's host.json, the victim reaching
 * storage through a proxy that holds the request `holdAt` picks, SIGKILLed while it is held. Checks
 * the job completes exactly within `boundMs` of the kill and answers what the caller checks further.
 */
import assert from 'node:assert/strict';

import { TableClient } from '@azure/data-tables';
import { eventually, type HostProcess } from 'devhost/testing';

import { type ProxiedRequest, type StorageProxy } from '../../support/storageProxy';
import { e2eHost } from './appHost';
import { controlQueueIndex } from './durableRequests';
import { type Scenario, sumOf } from './realApp';

/** L + 30 s: the lease (15 s) and the recovery bound. */
export const BOUND_MS = 15_000 + 30_000;

/**
 * The job id of a worker-kill case: `devhostId`, or on the extensions host `exthostId`, checked to
 * land on a control queue the survivor holds. There a run moves only on the process that holds its
 * control queue's partition lease: the instance started first keeps control-02 and -03 and the one
 * started second takes -00 and -01 (every run so far), and a dead owner's lease frees its queue only
 * 20-40 s after the kill, which runStalled.test.ts covers with its own bound. A worker-kill case whose
 * job sat on the victim's queue measured that wait too: 'wk-batch32' (control-01, the victim started
 * second) completed 45.7 s after the kill against 45 s, its step called again only once the lease moved.
 */
export function survivorsJobId(devhostId: string, exthostId: string, victimStartsFirst: boolean): string {
  if (e2eHost() !== 'extensions') return devhostId;
  const survivorHolds = victimStartsFirst ? [0, 1] : [2, 3];
  const queue = controlQueueIndex(`job-${exthostId}`);
  assert.ok(survivorHolds.includes(queue), `job-${exthostId} is on control-0${queue}, not on the survivor's ${survivorHolds.join(' or ')}`);
  return exthostId;
}

/**
 * On the extensions host, waits (up to 60 s) until `owner` owns the control queue of the job's run
 * in the provider's partition table, with no hand-over pending; elsewhere returns at once. The
 * process started first takes every partition and the second one takes its share over the next
 * seconds, so a job submitted at once may sit on a queue that is still moving: a stepHolderKilled run
 * whose survivor did not own control-00 yet at the kill saw its job move 31.4 s after the kill (the
 * dead owner's lease), against 11.5 s when it did.
 */
export async function ownsRunOf(s: Scenario, owner: HostProcess, jobId: string): Promise<void> {
  if (e2eHost() !== 'extensions') return;
  const partitions = TableClient.fromConnectionString(s.conn, `${s.taskHub}Partitions`, { allowInsecureConnection: true });
  const queue = `-control-${String(controlQueueIndex(`job-${jobId}`)).padStart(2, '0')}`;
  await eventually(
    async () => {
      for await (const row of partitions.listEntities<{ CurrentOwner?: string; NextOwner?: string; IsDraining?: boolean }>()) {
        if (!String(row.rowKey).endsWith(queue)) continue;
        const owned = (row.CurrentOwner ?? '').includes(owner.instanceId) && (row.NextOwner ?? '') === '' && row.IsDraining !== true;
        return owned ? true : undefined;
      }
      return undefined;
    },
    60_000,
    `${owner.instanceId} to own ${queue}`,
  );
}

/** The job's story in both processes' logs, around the kill: printed when a run misses its bound. */
export function timeline(s: Scenario, victim: HostProcess, killedAt: number, jobId: string): string[] {
  const lines: Array<{ at: number; text: string }> = [];
  for (const h of s.hosts) {
    for (const line of h.lines()) {
      if (!line.includes(jobId) && !/leader\.acquired|durable\.(message|episode\.failed|activity)/.test(line)) continue;
      if (/workitem\.done|duplicate_(skipped|discarded)/.test(line)) continue;
      const at = Date.parse(/"ts":"([^"]+)"/.exec(line)?.[1] ?? '');
      lines.push({ at, text: `${h === victim ? 'victim  ' : 'survivor'} ${((at - killedAt) / 1000).toFixed(1).padStart(6)} s ${line.slice(0, 240)}` });
    }
  }
  return [`[timeline] ${jobId}, seconds from the kill:`, ...lines.sort((a, b) => a.at - b.at).map((l) => l.text)];
}

export interface KillOptions {
  readonly victimLeads?: boolean;
  /** The victim dies only once it has claimed the held chunk (a worker claims a chunk it has been on for 2 s). */
  readonly claimed?: boolean;
  /** The held request is not a chunk's result write. */
  readonly notAChunk?: boolean;
  readonly chunks?: number;
  readonly chunkSize?: number;
  readonly boundMs?: number;
  /** Storage for the instance that survives, when the test steers its traffic too (by default it reaches Azurite directly). */
  readonly survivorConnection?: string;
  /**
   * On the extensions host, the process whose control queue the job's run must be on before it is
   * submitted (`ownsRunOf`): a worker-kill case measures the survivor's recovery, not the move of
   * the dead owner's partition lease (runStalled's case, which wants the victim).
   */
  readonly runOwnedBy?: 'victim' | 'survivor';
  /** Awaited once both instances are up, before the job is submitted (to wait for a state of theirs). */
  readonly beforeSubmit?: (s: Scenario, leader: HostProcess, victim: HostProcess) => Promise<void>;
  /** Called the moment the victim is dead, before the wait for completion (to watch the job recover). */
  readonly onKilled?: (s: Scenario, leader: HostProcess, killedAt: number) => void;
}

export interface Killed {
  readonly s: Scenario;
  readonly leader: HostProcess;
  readonly victim: HostProcess;
  readonly killedAt: number;
  /** Milliseconds from the kill to the job's completion. */
  readonly after: number;
}

/** A result write of the job's chunks (the victim is held there, and dies). */
export const resultPut =
  (jobId: string) =>
  (s: Scenario, r: ProxiedRequest): boolean =>
    r.method === 'PUT' && r.path.includes(`/${s.names.results}/jobs/${jobId}/results/`);

export async function killWorkerAt(
  start: () => Promise<{ s: Scenario; proxy: StorageProxy }>,
  jobId: string,
  holdAt: (s: Scenario, r: ProxiedRequest) => boolean,
  options: KillOptions = {},
): Promise<Killed> {
  const victimLeads = options.victimLeads ?? false;
  const boundMs = options.boundMs ?? BOUND_MS;
  const { s, proxy } = await start();
  // The Durable backend's episode lines too: a run that misses its bound prints where the time went.
  s.extraEnv.DEVHOST_LOG_LEVEL = 'debug';
  // Names unique per scenario: a host id shares its timer lock with any other process using it.
  let victim = victimLeads ? await s.start(`${jobId}-victim`, proxy.connectionString) : undefined;
  const first = victim ?? (await s.start(`${jobId}-lead`, options.survivorConnection));
  await s.leading(first);
  const leader = victim === undefined ? first : await s.start(`${jobId}-survivor`, options.survivorConnection);
  victim ??= await s.start(`${jobId}-victim`, proxy.connectionString);
  await options.beforeSubmit?.(s, leader, victim);
  if (options.runOwnedBy !== undefined) await ownsRunOf(s, options.runOwnedBy === 'victim' ? victim : leader, jobId);
  const hold = proxy.hold((r) => holdAt(s, r));
  // By default 4,000 items in 400 chunks: more than a window (256), both instances busy for a few seconds.
  const chunks = options.chunks ?? 400;
  const chunkSize = options.chunkSize ?? 10;
  const items = Array.from({ length: chunks * chunkSize }, (_, i) => i * 3 + 1);
  await s.submitByHttp(leader, { jobId, workType: 'sum', items, options: { chunkSize } });
  const held = await hold.within(60_000, 'the victim never reached the step');
  const heldChunk = /\/results\/(\d{5})/.exec(held.request.path)?.[1];
  assert.ok(heldChunk !== undefined || options.notAChunk === true, held.request.path);
  if (options.claimed === true) {
    const claimOf = (r: ProxiedRequest & { status: number | undefined }): boolean =>
      r.method === 'PUT' && r.path.includes(`/jobs/${jobId}/claims/${heldChunk}-`) && r.status === 201;
    await eventually(() => Promise.resolve(proxy.requests().some(claimOf) ? true : undefined), 15_000, `the victim's claim on chunk ${heldChunk}`);
  }
  const killedAt = Date.now();
  await victim.kill();
  assert.ok(held.clientGone || victim.child.signalCode === 'SIGKILL');
  options.onKilled?.(s, leader, killedAt);
  const view = await s.finished(leader, jobId, boundMs + 15_000).catch((err: unknown) => {
    console.log(timeline(s, victim, killedAt, jobId).join('\n'));
    throw err;
  });
  const after = Date.now() - killedAt;
  console.log(`[diagnostic] ${jobId}: completed ${(after / 1000).toFixed(1)} s after the victim was killed`);
  assert.equal(view.status, 'completed', JSON.stringify(view));
  assert.deepEqual(view.result, sumOf(items));
  assert.deepEqual(view.progress?.chunks, { total: chunks, done: chunks, failed: 0 });
  if (after > boundMs) console.log(timeline(s, victim, killedAt, jobId).join('\n'));
  assert.ok(after <= boundMs, `completed ${after} ms after the kill; the bound is ${boundMs} ms`);
  // The chunk the victim died on was done again by the survivor.
  if (heldChunk !== undefined) await assertRedoneBySurvivor({ s, victim }, jobId, heldChunk);
  return { s, leader, victim, killedAt, after };
}

/** A chunk (its five digits) has a result, written by another instance than the dead victim (storage says who wrote it). */
export async function assertRedoneBySurvivor(killed: Pick<Killed, 's' | 'victim'>, jobId: string, chunk: string): Promise<void> {
  const written = await killed.s.resultsBlob(`jobs/${jobId}/results/${chunk}.json`);
  const writer = (JSON.parse(written?.text ?? '{}') as { writtenBy?: string }).writtenBy;
  assert.ok(writer !== undefined && writer !== killed.victim.instanceId, `chunk ${chunk} was written by ${String(writer)}, not the dead ${killed.victim.instanceId}`);
}
