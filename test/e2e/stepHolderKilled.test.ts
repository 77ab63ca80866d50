/**
 * End-to-end, two instances of the real app with the project's host.json: the leader, while it runs a
 * job's dispatch step (the activity whose passes top the window up), is SIGKILLed in the middle of one.
 * No chunk is sent until the step runs again, so the whole job waits for the step's activity message to
 * come back (host.json's `workItemQueueVisibilityTimeout`) or for the next leader's stall check, which
 * asks a run idle for 15 s to resume, once it leads (L = 15 s after the kill at the earliest). Which
 * instance runs an activity is Durable's choice (the one that ran the last tends to poll first for the
 * next), so the survivor is kept off the activity queue until the kill: the victim runs the plan and
 * the steps. The test holds one of the victim's step passes, kills it, and times how long until the
 * job's progress moves again (a step answered on the survivor): 16.6-16.7 s with the timeout at 20 s,
 * 10.6-12.5 s at 10 s.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type ProxiedRequest, startStorageProxy } from '../support/storageProxy';
import { killWorkerAt, survivorsJobId } from './support/killWorker';
import { proxiedScenarios, type Scenario } from './support/realApp';

/**
 * The step's message comes back within 10 s of the kill and the redone step answers within 2 s; 3 s more
 * for polling and load (12.5 s seen in a clean-clone CI run). At 20 s it comes back 15 s or more after the kill.
 */
const MOVES_WITHIN_MS = 15_000;

describe("the leader is killed while it runs a job's step (shipped host.json)", () => {
  const scenarios = proxiedScenarios();

  it('another instance runs the step again within the activity visibility timeout and the job moves on', async () => {
    // On the real extension a run moves only on the process that holds its control queue's partition
    // lease; the victim starts first and keeps control-02 and -03 (the survivor takes -00 and -01), and
    // a dead owner's lease frees its queue only 20-40 s after the kill (runStalled covers that case).
    // So there the job's instance is on control-00, which the survivor holds: the step's activity
    // message comes back after the visibility timeout, and its answer is taken at once.
    const jobId = survivorsJobId('sk-step', 'sk-step-a', true);
    const started = await scenarios.start();
    const survivorProxy = await startStorageProxy(started.s.conn);
    // The survivor's receives on the task hub's activity queue are refused (it logs and polls again) until the kill.
    const activityQueue = `/${started.s.taskHub.toLowerCase()}-workitems/messages`;
    const offActivities = survivorProxy.refuse((r) => r.service === 'queue' && r.method === 'GET' && r.path.endsWith(activityQueue));
    // A step's pass lists one group of 100 chunk numbers (`jobs/<id>/results/NNN`, NNN = chunk / 100), the
    // aggregation the whole job. The plan refills the window too until it answers, about a second after the
    // first results (a few hundred chunks): group 10 and later (chunk 1,000 and later in flight) is a step.
    const stepListing = (_s: Scenario, r: ProxiedRequest): boolean => {
      const group = r.method === 'GET' && r.query.get('comp') === 'list' ? new RegExp(`^jobs/${jobId}/results/(\\d+)$`).exec(r.query.get('prefix') ?? '')?.[1] : undefined;
      return group !== undefined && Number(group) >= 10;
    };
    let moved: Promise<{ afterMs: number; from: number; to: number } | undefined> | undefined;
    // Set once the test is over either way, so the watcher never outlives it (nor polls stopped hosts).
    let ended = false;
    let seen: Awaited<typeof moved>;
    try {
      await killWorkerAt(() => Promise.resolve(started), jobId, stepListing, {
        notAChunk: true,
        victimLeads: true,
        runOwnedBy: 'survivor',
        chunks: 3_000,
        chunkSize: 1,
        // The job's completion is not this test's bound (its progress after the kill is): 3,000 one-item
        // chunks take 33 s after the kill on a quiet machine, 45.7 s with a CPU hog beside the e2e files.
        boundMs: 120_000,
        survivorConnection: survivorProxy.connectionString,
        onKilled: (s, leader, killedAt) => {
          offActivities.remove();
          moved = (async () => {
            const from = (await s.job(leader, jobId))?.progress?.chunks.done ?? 0;
            while (!ended) {
              const view = await s.job(leader, jobId);
              const to = view?.progress?.chunks.done ?? 0;
              if (to > from || (view !== undefined && view.status !== 'running')) return { afterMs: Date.now() - killedAt, from, to };
              await new Promise((r) => setTimeout(r, 200));
            }
            return undefined;
          })();
        },
      });
      // The job completed (killWorkerAt checked it), so the watcher returns; read it while the survivor still reaches storage.
      seen = await moved;
    } finally {
      ended = true;
      offActivities.remove();
      await survivorProxy.close();
    }
    assert.ok(seen !== undefined, 'the watcher never saw the job after the kill');
    const { afterMs, from, to } = seen;
    console.log(`[diagnostic] ${jobId}: progress moved ${(afterMs / 1000).toFixed(1)} s after the step's instance was killed (${from} -> ${to} chunks)`);
    assert.ok(from > 0, 'the held pass was a step after some results, not the plan');
    assert.ok(afterMs <= MOVES_WITHIN_MS, `the job's progress moved ${afterMs} ms after the kill; expected within ${MOVES_WITHIN_MS} ms`);
  });
});
