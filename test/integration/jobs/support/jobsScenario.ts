/**
 * What the in-process end-to-end job tests share (endToEnd.test.ts, jobLifecycle.test.ts): the
 * leader's pass run by hand until the jobs queue is empty, waiting for a job to finish through the
 * status API, a run held mid-step, and the exact `sum` of a list of items.
 */
import assert from 'node:assert/strict';

import { appRoot } from '../../../../shared/app/appRoot';
import { type JobView } from '../../../../shared/jobs/api/jobViews';
import { jobCoordinationPass } from '../../../../shared/jobs/intake/jobCoordinationPass';
import { instanceIdFor } from '../../../../shared/jobs/jobIds';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { initialState } from '../../../../shared/jobs/run/jobOrchestration';
import { workTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { eventually, type JobsHost } from './jobsHost';

export function expectedSum(items: ReadonlyArray<number | string>): { count: number; sum: number | string; min: number | string; max: number | string } {
  const values = items.map((v) => BigInt(v));
  const total = values.reduce((a, b) => a + b, 0n);
  const min = values.reduce((a, b) => (b < a ? b : a));
  const max = values.reduce((a, b) => (b > a ? b : a));
  const exact = (v: bigint): number | string => (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString());
  return { count: values.length, sum: exact(total), min: exact(min), max: exact(max) };
}

/**
 * Registers a work type whose items each wait until the returned `release()` is called, then count
 * as their value (`{ n }`: the sum of the items).
 */
export function registerHeldWorkType(name: string): () => void {
  let release: () => void = () => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  workTypes.register({
    name,
    description: 'each item waits until the test lets it go',
    validateItem: () => undefined,
    process: async (item) => {
      await released;
      return { n: Number(item) };
    },
    empty: () => ({ n: 0 }),
    combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
    finish: (total) => total,
  });
  return release;
}

export interface JobsScenario {
  /** Runs the leader's pass under a new epoch (as a newly elected leader would) until the jobs queue is empty. */
  readonly passUntilQueueEmpty: () => Promise<void>;
  /** The epoch of the last `passUntilQueueEmpty`. */
  readonly epoch: () => number;
  readonly finished: (jobId: string, timeoutMs?: number) => Promise<JobView>;
  readonly startHeldRun: (
    workType: string,
    job: Pick<JobRun, 'jobId' | 'epoch'> & { readonly items: number[]; readonly chunkSize: number },
  ) => Promise<{ run: JobRun; instanceId: string; release: () => void }>;
}

/** The helpers over the test file's host (`host()` answers it once `before` started it). */
export function jobsScenario(host: () => JobsHost): JobsScenario {
  let epoch = 0;

  /** Runs the leader's pass (as a newly elected leader would) until the jobs queue is empty. */
  async function passUntilQueueEmpty(): Promise<void> {
    epoch += 1;
    const controller = new AbortController();
    for (let i = 0; i < 20; i++) {
      // Each pass waits for its stall check and upkeep (no work left running beside the scenario).
      await jobCoordinationPass(appRoot().jobs, () => host().client, Date.now, Number.POSITIVE_INFINITY)({ epoch, holder: 'e2e-leader', signal: controller.signal, progress: () => undefined });
      const props = await host().jobsQueue.getProperties();
      if ((props.approximateMessagesCount ?? 0) === 0) return;
    }
    assert.fail('the jobs queue did not drain');
  }

  async function finished(jobId: string, timeoutMs = 90_000): Promise<JobView> {
    return eventually(
      async () => {
        const res = await host().request('GET', `/api/jobs/${jobId}`);
        const view = res.json as JobView;
        return res.status === 200 && !['pending', 'running'].includes(view.status) ? view : undefined;
      },
      timeoutMs,
      `job ${jobId} to finish`,
    );
  }

  /**
   * Starts a run (as the pass starts a job) whose items each wait until `release()`, and waits until
   * it is past its plan: the run is then mid-step, and stays there until released.
   */
  async function startHeldRun(
    workType: string,
    job: Pick<JobRun, 'jobId' | 'epoch'> & { readonly items: number[]; readonly chunkSize: number },
  ): Promise<{ run: JobRun; instanceId: string; release: () => void }> {
    const release = registerHeldWorkType(workType);
    const run: JobRun = {
      jobId: job.jobId,
      workType,
      fingerprint: workType.slice(-1).repeat(64),
      options: { chunkSize: job.chunkSize, attempts: 3, deadlineSeconds: 300 },
      source: { kind: 'inline', items: job.items },
      epoch: job.epoch,
      holder: 'e2e',
      submittedAt: new Date().toISOString(),
      via: 'queue',
      startId: 'start-1',
    };
    const instanceId = instanceIdFor(run.jobId);
    await host().client.startNew('jobOrchestrator', { instanceId, input: initialState(run) });
    const phase = async (): Promise<string | undefined> => ((await host().client.getStatus(instanceId)).customStatus as { phase?: string } | null)?.phase;
    await eventually(async () => ((await phase()) === 'running' ? true : undefined), 30_000, 'the run to be past its plan');
    return { run, instanceId, release };
  }

  return { passUntilQueueEmpty, finished, startHeldRun, epoch: () => epoch };
}
