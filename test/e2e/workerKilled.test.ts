/**
 * A worker SIGKILLed while it holds chunks, on real development host processes with the real app and
 * the project's own host.json (batchSize 8, the host's 10-minute receive visibility), against Azurite.
 * The victim reaches storage through a proxy that holds its request at the chosen step, and dies
 * while it is held:
 * - after claiming, before writing a result: its claims go silent and the chunks are sent again (the
 *   victim's result write is held until it has claimed the chunk: a worker claims after 2 s on it);
 * - after receiving a batch, before claiming any of it: nobody claimed those chunks, later sends
 *   were claimed or finished by the other instance, and they are sent again in the same round.
 * - the same with the leader as the victim. When the leader dies during the job's plan (it waits a few
 *   seconds for the first results), the plan's activity comes back 20 s later on the survivor, now
 *   under a newer lease epoch: the start already staged its input, so the plan goes on rather than
 *   standing the run down for a restart (which used to cost a whole new plan: 52 s in a loaded run).
 * Either way the job completes exactly (every item counted once) within L + 30 s of the kill
 * (L = 15 s, the lease), where before it waited for the queue's 10 minutes or the 300 s deadline.
 * The tests print the time from the kill to completion (diagnostics, for the figures in docs/).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventually, type HostProcess } from 'devhost/testing';

import { type ProxiedRequest } from '../support/storageProxy';
import { proxiedScenarios, type Scenario, sumOf } from './support/realApp';

const BOUND_MS = 15_000 + 30_000;

/** The job's story in both processes' logs, around the kill: printed when a run misses its bound. */
function timeline(s: Scenario, victim: HostProcess, killedAt: number, jobId: string): string[] {
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

describe('a worker killed while it holds chunks (shipped host.json)', () => {
  const scenarios = proxiedScenarios();

  /**
   * `holdAt` picks the victim's request to die on; with `claimed`, the victim dies only once it has
   * claimed the held chunk (a worker claims a chunk it has been on for 2 s, the result's write included).
   */
  async function killWorkerAt(
    jobId: string,
    holdAt: (s: Scenario, r: ProxiedRequest) => boolean,
    options: { victimLeads?: boolean; claimed?: boolean } = {},
  ): Promise<void> {
    const victimLeads = options.victimLeads ?? false;
    const { s, proxy } = await scenarios.start();
    // The Durable backend's episode lines too: a run that misses its bound prints where the time went.
    s.extraEnv.DEVHOST_LOG_LEVEL = 'debug';
    // Names unique per scenario: a host id shares its timer lock with any other process using it.
    let victim = victimLeads ? await s.start(`${jobId}-victim`, proxy.connectionString) : undefined;
    const first = victim ?? (await s.start(`${jobId}-lead`));
    await s.leading(first);
    const leader = victim === undefined ? first : await s.start(`${jobId}-survivor`);
    victim ??= await s.start(`${jobId}-victim`, proxy.connectionString);
    const hold = proxy.hold((r) => holdAt(s, r));
    // 4,000 items in 400 chunks: the window (64) keeps both instances busy for several seconds.
    const items = Array.from({ length: 4_000 }, (_, i) => i * 3 + 1);
    await s.submitByHttp(leader, { jobId, workType: 'sum', items, options: { chunkSize: 10 } });
    const held = await hold.within(60_000, 'the victim never reached the step');
    const heldChunk = /\/results\/(\d{5})/.exec(held.request.path)?.[1];
    assert.ok(heldChunk !== undefined, held.request.path);
    if (options.claimed === true) {
      const claimOf = (r: ProxiedRequest & { status: number | undefined }): boolean =>
        r.method === 'PUT' && r.path.includes(`/jobs/${jobId}/claims/${heldChunk}-`) && r.status === 201;
      await eventually(() => Promise.resolve(proxy.requests().some(claimOf) ? true : undefined), 15_000, `the victim's claim on chunk ${heldChunk}`);
    }
    const killedAt = Date.now();
    await victim.kill();
    assert.ok(held.clientGone || victim.child.signalCode === 'SIGKILL');
    const view = await s.finished(leader, jobId, BOUND_MS + 15_000).catch((err: unknown) => {
      console.log(timeline(s, victim, killedAt, jobId).join('\n'));
      throw err;
    });
    const after = Date.now() - killedAt;
    console.log(`[diagnostic] ${jobId}: completed ${(after / 1000).toFixed(1)} s after the victim was killed`);
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, sumOf(items));
    assert.deepEqual(view.progress?.chunks, { total: 400, done: 400, failed: 0 });
    if (after > BOUND_MS) console.log(timeline(s, victim, killedAt, jobId).join('\n'));
    assert.ok(after <= BOUND_MS, `completed ${after} ms after the kill; the bound is ${BOUND_MS} ms`);
    // The chunk the victim died on was done again by the survivor (storage says who wrote its result).
    const chunk = heldChunk;
    const written = await s.resultsBlob(`jobs/${jobId}/results/${chunk}.json`);
    const writer = (JSON.parse(written?.text ?? '{}') as { writtenBy?: string }).writtenBy;
    assert.ok(writer !== undefined && writer !== victim.instanceId, `chunk ${chunk} was written by ${String(writer)}, not the dead ${victim.instanceId}`);
  }

  const resultPut = (jobId: string) => (s: Scenario, r: ProxiedRequest): boolean =>
    r.method === 'PUT' && r.path.includes(`/${s.names.results}/jobs/${jobId}/results/`);

  it('after it claimed chunks: their heartbeats stop and they are sent again in about 20 s', async () => {
    await killWorkerAt('wk-claimed', resultPut('wk-claimed'), { claimed: true });
  });

  it('after it received a batch, before claiming: the chunks nobody claimed are sent again in the same round', async () => {
    await killWorkerAt('wk-unclaimed', resultPut('wk-unclaimed'));
  });

  it('the leader, killed while it holds claimed chunks: the other instance leads and the job completes', async () => {
    await killWorkerAt('wk-leader', resultPut('wk-leader'), { victimLeads: true, claimed: true });
  });
});
