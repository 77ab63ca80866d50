/**
 * The end of a finished job: its purge, one job on request (`DELETE /api/jobs/{jobId}?purge=true`)
 * or the leader's hourly retention sweep (jobCoordinationPass) of the jobs whose last change is
 * older than JOB_RETENTION_DAYS. A purge removes the job's Durable history (every instance
 * generation a repair used), its records and blobs, results included; the job id is free afterwards.
 *
 * Guarantees: a pending or running job is never purged (on request: JOB_NOT_FINISHED, cancel it
 * first); a purge on request waits up to 5 s for an ended job's run to finish in Durable, else
 * refuses the same way. A sweep purges at most `max` jobs, oldest change first, and a job it fails
 * to purge is logged (`job.purge_failed`) and left for the next sweep. An instance generation that
 * cannot be purged is logged (`job.purge_instance_failed`); the rest of the job still goes.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 2.
 */
import { type Logger } from '../../observability/log';
import { JobError } from '../JobError';
import { instanceIdFor, isBatchInstanceId } from '../jobIds';
import { isSuperseded } from '../JobSummary';
import { mapLimit } from '../pool';
import { isFinished, jobsShownBy, type OrchestrationClient, type OrchestrationSnapshot } from '../run/OrchestrationClient';
import { type Now, nowOf } from '../wallClock';
import { type JobStatusDeps, JobStatusReader } from './JobStatusReader';
import { compareEntries, entryOf, type JobListEntry } from './jobViews';

/** Recorded outcomes of running jobs a sweep's listing reads at once. */
const SETTLED_READS = 16;
/** How long a purge waits for the run of a job that has ended to finish in Durable (normally one Durable hop). */
const PURGE_WAIT = { pollMs: 250, maxMs: 5_000 } as const;

export interface RetentionDeps extends JobStatusDeps {
  readonly logger: Logger;
  readonly now?: Now;
}

export class Retention {
  private readonly now: Now;
  private readonly reader: JobStatusReader;

  constructor(private readonly deps: RetentionDeps) {
    this.now = nowOf(deps);
    this.reader = new JobStatusReader(deps);
  }

  /**
   * Purges a finished job now: its Durable history (every instance generation a repair used), its
   * records and its blobs, results included. The job id is free afterwards. A pending or running
   * job is refused (cancel it first); an instance a repair left Pending stays, as Durable purges
   * only finished instances.
   */
  async purge(jobId: string, orchestrations: OrchestrationClient): Promise<{ jobId: string; instances: number; blobs: number }> {
    const view = await this.reader.get(jobId, orchestrations);
    if (view.status === 'pending' || view.status === 'running') {
      throw new JobError(
        'JOB_NOT_FINISHED',
        `Job "${jobId}" is ${view.status}: cancel it first (DELETE /api/jobs/${jobId}), then purge it once it has ended.`,
      );
    }
    // Ended (its outcome recorded) while its run may still be finishing in Durable, which purges only finished instances.
    for (let waited = 0; ; waited += PURGE_WAIT.pollMs) {
      // The run itself, not the outcome its start record carries: Durable purges only finished instances.
      const snapshot = await this.reader.run(jobId, orchestrations);
      // A shared run may run on for its other jobs: it is purged only with the last of them (`purgeShared`).
      if (snapshot === undefined || isFinished(snapshot.runtimeStatus) || isBatchInstanceId(snapshot.instanceId)) break;
      if (waited >= PURGE_WAIT.maxMs) {
        throw new JobError(
          'JOB_NOT_FINISHED',
          `Job "${jobId}" has ended, but its run is still winding down in Durable (at most a minute); purge it once that is over.`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, PURGE_WAIT.pollMs));
    }
    return this.purgeFinished(jobId, orchestrations);
  }

  private async purgeFinished(
    jobId: string,
    orchestrations: OrchestrationClient,
  ): Promise<{ jobId: string; instances: number; blobs: number }> {
    const start = (await this.deps.store.readStart(jobId))?.value;
    const generations = start?.generation ?? 1;
    const ids = Array.from({ length: generations }, (_, g) => instanceIdFor(jobId, g + 1));
    let instances = 0;
    for (const instanceId of ids) {
      try {
        if (await orchestrations.purge(instanceId)) instances += 1;
      } catch (err) {
        // A generation a repair left Pending cannot be purged; the rest of the job still goes.
        this.deps.logger.warn('job.purge_instance_failed', { jobId, instanceId, error: err });
      }
    }
    const blobs = await this.deps.store.purgeJob(jobId);
    if (start?.instance !== undefined) instances += await this.purgeShared(start.instance, jobId, orchestrations);
    this.deps.logger.info('job.purged', { jobId, instances, blobs });
    return { jobId, instances, blobs };
  }

  /**
   * A shared run's history goes with the last of its jobs (their start records gone): until then it
   * is what shows the others (the retention sweep and the index walk list jobs from instances).
   * Answers how many instances it purged (0 or 1).
   */
  private async purgeShared(instanceId: string, purgedJobId: string, orchestrations: OrchestrationClient): Promise<number> {
    try {
      const snapshot = await orchestrations.getStatus(instanceId);
      if (snapshot === undefined) return 0;
      const others = jobsShownBy(snapshot).map((j) => j.jobId).filter((id) => id !== purgedJobId);
      const starts = await Promise.all(others.map((id) => this.deps.store.readStart(id)));
      if (starts.some((s) => s?.value.instance === instanceId)) return 0;
      return (await orchestrations.purge(instanceId)) ? 1 : 0;
    } catch (err) {
      this.deps.logger.warn('job.purge_instance_failed', { jobId: purgedJobId, instanceId, error: err });
      return 0;
    }
  }

  /**
   * The retention sweep the leader runs (at most once an hour): purges up to `max` finished jobs
   * whose last change is older than `retentionDays`, oldest first. Answers the job ids purged.
   */
  async purgeExpired(orchestrations: OrchestrationClient, retentionDays: number, max = 100): Promise<string[]> {
    if (retentionDays <= 0) return [];
    const cutoff = this.now().getTime() - retentionDays * 86_400_000;
    const expired = (await this.listAll(orchestrations))
      .filter((e) => e.status !== 'pending' && e.status !== 'running' && e.updatedAt !== null && Date.parse(e.updatedAt) < cutoff)
      .sort((a, b) => (a.updatedAt ?? '').localeCompare(b.updatedAt ?? ''))
      .slice(0, max);
    const purged: string[] = [];
    for (const entry of expired) {
      try {
        await this.purgeFinished(entry.jobId, orchestrations);
        purged.push(entry.jobId);
      } catch (err) {
        this.deps.logger.warn('job.purge_failed', { jobId: entry.jobId, error: err });
      }
    }
    return purged;
  }

  /** Every job, from every record and orchestration (the retention sweep's hourly view; the list reads the index). */
  private async listAll(orchestrations: OrchestrationClient): Promise<JobListEntry[]> {
    const byId = new Map<string, JobListEntry>();
    // A record listing carries no error code; the retention sweep needs none.
    for (const r of await this.deps.store.listRecords()) {
      byId.set(r.jobId, { ...r, workType: r.workType ?? null, progress: null, errorCode: null });
    }
    // A repaired job has several instances: its newest generation that did not stand down shows it.
    const shown = new Map<string, { generation: number; superseded: boolean; snapshot: OrchestrationSnapshot }>();
    for (const id of (await orchestrations.list()).flatMap(jobsShownBy)) {
      const s = id.snapshot;
      const superseded = isSuperseded(s.output);
      const before = shown.get(id.jobId);
      const older = before !== undefined && superseded === before.superseded && id.generation < before.generation;
      if (before !== undefined && ((superseded && !before.superseded) || older)) continue;
      shown.set(id.jobId, { generation: id.generation, superseded, snapshot: s });
    }
    // A running job's recorded outcome is one read each (JobStatusReader.settled), several at once.
    const views = await mapLimit([...shown], SETTLED_READS, async ([jobId, { snapshot }]) =>
      this.reader.fromSnapshot(jobId, await this.reader.settled(jobId, snapshot)),
    );
    for (const view of views) byId.set(view.jobId, entryOf(view));
    return [...byId.values()].sort(compareEntries);
  }
}
