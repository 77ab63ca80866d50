/**
 * The race: on every firing (NCRONTAB from LEADER_TIMER_SCHEDULE, every 5 s by default) this
 * instance campaigns for the lease and, while it leads, runs a coordination pass with this
 * invocation's Durable client. The logic is in shared/leader/CoordinatorRuntime.ts, the wiring in
 * shared/app/appRoot.ts. On host shutdown the runtime stops gracefully: the pass drains, the lease
 * is released.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 2; "The lease epoch from the elector to the fence", step 1.
 */
import '../shared/app/stopHook';

import { app, type InvocationContext, type Timer } from '@azure/functions';
import * as df from 'durable-functions';

import { appRoot } from '../shared/app/appRoot';
import { toCoordinatorError } from '../shared/errors';

const root = appRoot();

export async function leaderTimer(_timer: Timer, context: InvocationContext): Promise<void> {
  try {
    const state = await root.tick(df.getClient(context));
    context.trace(`role=${state.role} epoch=${state.epoch ?? '-'} passes=${state.passes}`);
  } catch (err) {
    // The runtime handles storage faults itself; anything here is a bug worth a log line.
    const error = toCoordinatorError(err);
    context.error(JSON.stringify({ event: 'leader.tick_failed', code: error.code, message: error.message }));
  }
}

app.timer('leaderTimer', {
  schedule: root.settings.leader.timerSchedule,
  extraInputs: [df.input.durableClient()],
  handler: leaderTimer,
});
