/**
 * The coordination pass the leader runs (on acquiring, on each of its timer ticks, and on the
 * runtime's own interval while it leads): the job pipeline's intake. It first completes or repairs
 * the starts still in progress, then reads the jobs queue in batches and starts one orchestration
 * per valid submission (instance id `job-<jobId>`, stamped with the epoch), records invalid ones
 * as rejected jobs with their original message in `<jobsQueue>-poison`, and deletes a message
 * only after that (shared/jobs/JobIntake.ts). It is idempotent (an extra pass costs a read, never
 * a duplicate), honours `ctx.signal` between messages, and reports `ctx.progress()` per batch and
 * per message for the leader's watchdog.
 */
import { type DurableClient } from 'durable-functions';

import { runJobCoordinationPass } from '../shared/jobs/jobCoordinationPass';
import { type CoordinationPass, offerToProcessRuntime } from '../shared/leader/CoordinatorRuntime';

export interface CoordinatorServices {
  durableClient?: DurableClient;
}

export const coordinationPass: CoordinationPass<CoordinatorServices> = async (ctx) => {
  await runJobCoordinationPass(ctx);
};

/**
 * Functions that get a Durable client (the work-items worker on every instance, the jobs API) hand
 * it to the leader runtime, so this instance campaigns even when the host's timer lock sits on
 * another instance and its own timer never fires (CoordinatorRuntime.offer).
 */
export function offerDurableClient(durableClient: DurableClient): DurableClient {
  offerToProcessRuntime<CoordinatorServices>({ durableClient });
  return durableClient;
}
