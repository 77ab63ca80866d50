/**
 * The job pipeline's coordination pass, which the leader runs (on acquiring, on each of its timer
 * ticks, and on the runtime's own interval while it leads): first it completes or repairs the starts
 * still in progress, then reads the jobs queue in batches and starts one orchestration per valid
 * submission (instance id `job-<jobId>`, stamped with the epoch), records invalid ones as rejected
 * jobs with their original message in `<jobsQueue>-poison`, and deletes a message only after that
 * (JobIntake has the guarantees). Idempotent (an extra pass costs a read, never a duplicate); honours
 * `ctx.signal` between messages and reports `ctx.progress()` for the leader's watchdog. Followers never run it.
 *
 * The Durable client is the latest one a function handed over (shared/app/DurableClientHolder); a
 * pass before any handover logs `intake.no_durable_client` and does nothing.
 *
 * After the intake, every few seconds, it asks job runs that stopped moving to resume (StalledJobs:
 * a run whose control message is held by a dead instance would otherwise wait a minute); a failed
 * check is logged (`job.stall_check_failed`) and does not fail the pass.
 *
 * Then, at most once an hour, the retention sweep purges finished jobs older than
 * JOB_RETENTION_DAYS (JobService.purgeExpired; 100 per sweep, oldest first).
 */
import { type DurableClient } from 'durable-functions';

import { type CoordinationContext } from '../leader/CoordinatorRuntime';
import { type JobComponents } from './jobComponents';
import { type IntakeReport } from './JobIntake';
import { durableOrchestrationClient } from './OrchestrationClient';
import { StalledJobs } from './StalledJobs';

export const RETENTION_SWEEP_INTERVAL_MS = 3_600_000;

export type JobCoordinationPass = (ctx: CoordinationContext) => Promise<IntakeReport | undefined>;

export function jobCoordinationPass(
  components: Pick<JobComponents, 'intake' | 'service' | 'logger' | 'settings' | 'calls'>,
  durableClient: () => DurableClient | undefined,
): JobCoordinationPass {
  let lastSweep = 0;
  const stalls = new StalledJobs({ logger: components.logger, callHeld: (jobId) => components.calls.held(jobId) });
  return async (ctx) => {
    const client = durableClient();
    if (client === undefined) {
      components.logger.warn('intake.no_durable_client', {
        epoch: ctx.epoch,
        hint: 'the pass runs again on the next timer firing, which brings a client',
      });
      return undefined;
    }
    const orchestrations = durableOrchestrationClient(client);
    const report = await components.intake.runPass(ctx, orchestrations);
    if (!ctx.signal.aborted) {
      try {
        await stalls.check(orchestrations, ctx.epoch, ctx.signal);
      } catch (err) {
        components.logger.warn('job.stall_check_failed', { epoch: ctx.epoch, error: err });
      }
      ctx.progress();
    }
    const retentionDays = components.settings.jobs.retentionDays;
    if (retentionDays > 0 && !ctx.signal.aborted && Date.now() - lastSweep >= RETENTION_SWEEP_INTERVAL_MS) {
      lastSweep = Date.now();
      const purged = await components.service.purgeExpired(orchestrations, retentionDays);
      if (purged.length > 0) components.logger.info('job.retention_sweep', { purged: purged.length, retentionDays, epoch: ctx.epoch });
      ctx.progress();
    }
    return report;
  };
}
