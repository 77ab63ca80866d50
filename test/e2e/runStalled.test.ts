/**
 * A job's run whose control message is held by a SIGKILLed instance, on real host
 * processes (the extensions host unless E2E_HOST=devhost) with the real app and the project's host.json, against Azurite. The victim (not the
 * leader) received the run's message (an activity's answer) and dies while its episode's commit is
 * held by the storage proxy: the message stays invisible for the control queue's 1 minute, and
 * nothing else would wake the run. The leader's stall check (15 s without an update) raises
 * `resume`, the run calls its activity again, and the job completes exactly.
 *
 * On the real extension (E2E_HOST=extensions) the victim owns the run's control queue (a partition lease)
 * and its episode's commit is held at its first write; the run can move only once that lease has expired
 * (MOVED_WITHIN_MS_EXTENSION).
 *
 * Asserted: the run moves again within 40 s of the kill (45 s on the extension; before, only once the held
 * message came back, about 60 s after the victim received it), the leader logged `job.resume_requested` with the
 * event's fields, and the job completes exactly. On the development host every process polls every
 * control queue, so the survivor's receives there are refused until the kill: the run's episodes are
 * the victim's (with 3,000 chunks, and once with 6,000, a CI run saw the victim take none of them
 * and the hold never matched); its remaining work after the resume depends on the machine's load, so
 * completion is bounded loosely (the time from the kill to `completed` is printed).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventShapeProblems } from '../../shared/observability/events';
import { azuriteConnectionString } from '../support/env';
import { type ProxiedRequest, startStorageProxy } from '../support/storageProxy';
import { e2eHost } from './support/appHost';
import { durableRequests } from './support/durableRequests';
import { killWorkerAt, timeline } from './support/killWorker';
import { proxiedScenarios, type Scenario } from './support/realApp';

/**
 * The stall check's 15 s (and its 5 s cadence), then the survivor's next poll of the control queue: its
 * receives there were refused until the kill (below), so its poller has backed off like an idle one, up
 * to host.json's 10 s, then the episode. 18.4 s measured with the refusal (12.5-12.9 s in CI runs
 * without it); 40 s still tells the resume from the held message's return, 60 s after its receive.
 */
const MOVED_WITHIN_MS = 40_000;
/**
 * On the real extension the run cannot move before the dead victim's partition lease on the run's control
 * queue expires: the Azure Storage provider's table partition manager renews a lease every 10 s for 30 s
 * (AzureStorageOrchestrationServiceSettings.cs lines 134 and 147, LeaseRenewInterval and LeaseInterval;
 * TablePartitionManager.cs line 736, RenewLease) and another worker claims it only once expired (line 468),
 * at its next read of the partition table, up to 10 s later (Azure/durabletask at 5217032). So 20-40 s
 * after the kill, plus the episode: measured 31.8 s (resume requested 4.5 s after the kill). 45 s still tells
 * the resume from the held message's return (60 s after the victim received it).
 */
const MOVED_WITHIN_MS_EXTENSION = 45_000;

describe('a job run whose control message an instance took to its death (shipped host.json)', () => {
  const scenarios = proxiedScenarios();

  it('is asked to resume by the leader and moves again within 30 s, not after the queue\'s minute', async () => {
    const host = e2eHost();
    // On the extension its instance's control queue is control-00 (controlQueueIndex), one of the two the
    // victim, started second, takes from the leader (the provider's balancing steals the first ones;
    // 'stalled-run' would be on control-02, which the leader keeps).
    const jobId = host === 'extensions' ? 'stalled-run-a' : 'stalled-run';
    const movedWithinMs = host === 'extensions' ? MOVED_WITHIN_MS_EXTENSION : MOVED_WITHIN_MS;
    const instanceId = `job-${jobId}`;
    // The victim's commit of an episode of the run, once the run is past its plan. On the development
    // host the episode's one write (the instance blob, its custom status in it); on the extension the
    // first write of an episode after the victim wrote a running status.
    let pastPlan = false;
    const episodeCommit = (s: Scenario, r: ProxiedRequest): boolean => {
      const durable = durableRequests(s, host);
      const text = r.body.toString('utf8');
      if (host === 'devhost') return durable.episodeWrite(r, instanceId) && text.includes('\\"phase\\":\\"running\\"');
      if (durable.statusWrite(r, instanceId) && text.includes('\\u0022phase\\u0022:\\u0022running\\u0022')) pastPlan = true;
      return pastPlan && durable.episodeWrite(r, instanceId);
    };
    // Every development-host process polls every control queue, and a process's own send wakes its poller
    // first, so a run would stay on the process that started it; on Azure the victim would own some
    // partitions outright. Without the wake, the two processes compete for the run's messages.
    let hub = '';
    const started = async (): Promise<Awaited<ReturnType<typeof scenarios.start>>> => {
      const run = await scenarios.start();
      run.s.extraEnv.DEVHOST_DURABLE_WAKE_ON_SEND = 'false';
      hub = run.s.taskHub.toLowerCase();
      return run;
    };
    // The survivor's storage through a proxy of its own. On the extension, to see when it moves the run
    // (the development host logs its episodes), with the victim owning the run's control queue first
    // (`runOwnedBy`). On the development host, which has no partitions, its receives on the control
    // queues are refused until the kill, so the run's episodes are the victim's: the hold needs one,
    // and a CI run once saw none of them on the victim within 60 s (the survivor, polling busily,
    // took every message).
    const survivorProxy = await startStorageProxy(azuriteConnectionString());
    const offControl =
      host === 'devhost'
        ? survivorProxy.refuse((r) => hub !== '' && r.service === 'queue' && r.method === 'GET' && r.path.includes(`/${hub}-control-`))
        : undefined;
    try {
      const { s, leader, victim, killedAt, after } = await killWorkerAt(started, jobId, episodeCommit, {
        notAChunk: true,
        // The extension's victim owns the run's control queue, so it takes every message of the run, not
        // some: 2,000 chunks suffice, and 6,000 took 109 s after the kill there (the file 174 s of its 180 s).
        chunks: host === 'extensions' ? 2_000 : 6_000,
        chunkSize: 1,
        boundMs: 120_000,
        survivorConnection: survivorProxy.connectionString,
        runOwnedBy: 'victim',
        onKilled: () => offControl?.remove(),
      });
      // The survivor's first episode of the run after the kill (the development host's debug lines; the
      // extension's first episode write through the survivor's proxy).
      const episodes =
        host === 'devhost'
          ? leader
              .lines()
              .filter((line) => line.includes('"durable.episode.saved"') && line.includes(`"instanceId":"${instanceId}"`))
              .map((line) => Date.parse(/"ts":"([^"]+)"/.exec(line)?.[1] ?? ''))
          : survivorProxy
              .requests()
              .filter((r) => durableRequests(s, host).episodeWrite(r, instanceId))
              .map((r) => r.at);
      const moved = (episodes.filter((at) => at > killedAt)[0] ?? Infinity) - killedAt;
      console.log(`[diagnostic] ${jobId}: the run moved again ${(moved / 1000).toFixed(1)} s after the kill`);
      if (moved > movedWithinMs) console.log(timeline(s, victim, killedAt, jobId).join('\n'));
      assert.ok(moved <= movedWithinMs, `the run moved again ${moved} ms after the kill`);
      const resumes = s.events('job.resume_requested', jobId);
      assert.ok(resumes.length >= 1, 'the leader asked the stalled run to resume');
      for (const line of resumes) assert.deepEqual(eventShapeProblems(line), [], JSON.stringify(line));
      console.log(`[diagnostic] ${jobId}: resume requested after ${String(resumes[0]?.idleMs)} ms without an update`);
      if (after < 50_000) {
        // Durable completes the run only once the held answer is back (it completes an instance only
        // when every task it started has answered): the job showed its recorded outcome before that.
        assert.equal((await s.instance(leader, `job-${jobId}`))?.runtimeStatus, 'Running', 'the held answer is not back yet');
      }
    } finally {
      offControl?.remove();
      await survivorProxy.close();
    }
  });
});
