/**
 * The job pipeline's coordination pass, run by the leader (functions/coordinationPass.ts exports
 * it to the leader runtime): take job submissions off the jobs queue and start their
 * orchestrations (see JobIntake for the guarantees). Followers never run it.
 *
 * The Durable client comes from the timer invocation that runs the pass (`df.getClient`); a pass
 * without one (the runtime's own interval between timer firings has no invocation) reuses the last
 * client this process saw, since the client is only a set of URLs into this host's extension.
 *
 * After the intake, at most once an hour, the retention sweep purges finished jobs older than
 * JOB_RETENTION_DAYS (JobService.purgeExpired; 100 per sweep, oldest first).
 */
import { type DurableClient } from 'durable-functions';

import { type CoordinationContext } from '../leader/CoordinatorRuntime';
import { jobComponents } from './jobComponents';
import { type IntakeReport } from './JobIntake';
import { durableJobOrchestrations } from './JobOrchestrations';

export interface JobPassServices {
  durableClient?: DurableClient;
}

let lastClient: DurableClient | undefined;
let lastSweep = 0;
export const RETENTION_SWEEP_INTERVAL_MS = 3_600_000;

export async function runJobCoordinationPass(ctx: CoordinationContext<JobPassServices>): Promise<IntakeReport | undefined> {
  const client = ctx.services.durableClient ?? lastClient;
  if (client === undefined) {
    jobComponents().logger.warn('intake.no_durable_client', { epoch: ctx.epoch, hint: 'the pass runs again on the next timer firing, which brings a client' });
    return undefined;
  }
  lastClient = client;
  const components = jobComponents();
  const orchestrations = durableJobOrchestrations(client);
  const report = await components.intake.runPass(ctx, orchestrations);
  const retentionDays = components.settings.jobs.retentionDays;
  if (retentionDays > 0 && !ctx.signal.aborted && Date.now() - lastSweep >= RETENTION_SWEEP_INTERVAL_MS) {
    lastSweep = Date.now();
    const purged = await components.service.purgeExpired(orchestrations, retentionDays);
    if (purged.length > 0) components.logger.info('job.retention_sweep', { purged: purged.length, retentionDays, epoch: ctx.epoch });
    ctx.progress();
  }
  return report;
}
