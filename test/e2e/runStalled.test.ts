/**
 * A job's run whose control message is held by a SIGKILLed instance, on real development host
 * processes with the real app and the project's host.json, against Azurite. The victim (not the
 * leader) received the run's message (an activity's answer) and dies while its episode's commit is
 * held by the storage proxy: the message stays invisible for the control queue's 1 minute, and
 * nothing else would wake the run. The leader's stall check (15 s without an update) raises
 * `resume`, the run calls its activity again, and the job completes exactly.
 *
 * Asserted: the run moves again within 30 s of the kill (before, only once the held message came
 * back, about 60 s after the victim received it), the leader logged `job.resume_requested` with the
 * event's fields, and the job completes exactly. The job has 6,000 chunks so that the victim gets
 * some of the run's messages (at 3,000, with four chunks to a message, the job ran in so few episodes
 * that a CI run saw the victim take none of them); its remaining work after the resume depends on the machine's load, so
 * completion is bounded loosely (the time from the kill to `completed` is printed).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { eventShapeProblems } from '../../shared/observability/events';
import { type ProxiedRequest } from '../support/storageProxy';
import { killWorkerAt, timeline } from './support/killWorker';
import { proxiedScenarios, type Scenario } from './support/realApp';

const MOVED_WITHIN_MS = 30_000;

describe('a job run whose control message an instance took to its death (shipped host.json)', () => {
  const scenarios = proxiedScenarios();

  it('is asked to resume by the leader and moves again within 30 s, not after the queue\'s minute', async () => {
    const jobId = 'stalled-run';
    // The victim's commit of an episode of the run, once the run is past its plan.
    const episodeCommit = (s: Scenario, r: ProxiedRequest): boolean =>
      r.method === 'PUT' && r.path === s.instancePath(jobId) && r.body.toString('utf8').includes('\\"phase\\":\\"running\\"');
    // Every development-host process polls every control queue, and a process's own send wakes its poller
    // first, so a run would stay on the process that started it; on Azure the victim would own some
    // partitions outright. Without the wake, the two processes compete for the run's messages.
    const started = async (): Promise<Awaited<ReturnType<typeof scenarios.start>>> => {
      const run = await scenarios.start();
      run.s.extraEnv.DEVHOST_DURABLE_WAKE_ON_SEND = 'false';
      return run;
    };
    const { s, leader, victim, killedAt, after } = await killWorkerAt(started, jobId, episodeCommit, {
      notAChunk: true,
      chunks: 6_000,
      chunkSize: 1,
      boundMs: 120_000,
    });
    // The survivor's first episode of the run after the kill (the Durable backend's debug lines).
    const episodes = leader
      .lines()
      .filter((line) => line.includes('"durable.episode.saved"') && line.includes(`"instanceId":"job-${jobId}"`))
      .map((line) => Date.parse(/"ts":"([^"]+)"/.exec(line)?.[1] ?? ''))
      .filter((at) => at > killedAt);
    const moved = (episodes[0] ?? Infinity) - killedAt;
    console.log(`[diagnostic] ${jobId}: the run moved again ${(moved / 1000).toFixed(1)} s after the kill`);
    if (moved > MOVED_WITHIN_MS) console.log(timeline(s, victim, killedAt, jobId).join('\n'));
    assert.ok(moved <= MOVED_WITHIN_MS, `the run moved again ${moved} ms after the kill`);
    const resumes = s.events('job.resume_requested', jobId);
    assert.ok(resumes.length >= 1, 'the leader asked the stalled run to resume');
    for (const line of resumes) assert.deepEqual(eventShapeProblems(line), [], JSON.stringify(line));
    console.log(`[diagnostic] ${jobId}: resume requested after ${String(resumes[0]?.idleMs)} ms without an update`);
    if (after < 50_000) {
      // Durable completes the run only once the held answer is back (it completes an instance only
      // when every task it started has answered): the job showed its recorded outcome before that.
      assert.equal((await s.instance(leader, `job-${jobId}`))?.runtimeStatus, 'Running', 'the held answer is not back yet');
    }
  });
});
