/**
 * The race: on every firing (NCRONTAB from LEADER_TIMER_SCHEDULE, every 5 s by default) this
 * instance campaigns for the lease and, while it leads, runs a coordination pass with this
 * invocation's Durable client. The logic is in shared/leader/CoordinatorRuntime.ts.
 *
 * This module also owns the process's runtime, shared with GET /api/leader, /api/cluster and
 * /api/health (through `status`, whose lease reads are cached for LEADER_READ_TTL_MS).
 * Settings are read when the app loads, so a bad setting stops the app at start with a message
 * naming it. On host shutdown the runtime stops gracefully: the pass drains, the lease is released.
 */
import { app, type InvocationContext, type Timer } from '@azure/functions';
import * as df from 'durable-functions';

import { loadSettings, type Settings } from '../shared/config/settings';
import { toCoordinatorError } from '../shared/errors';
import { ClusterRecords } from '../shared/leader/ClusterRecords';
import { type CoordinatorRuntime, processCoordinatorRuntime } from '../shared/leader/CoordinatorRuntime';
import { cachedStatusSource } from '../shared/leader/leaderStatus';
import { coordinationPass, type CoordinatorServices } from './coordinationPass';

export const settings: Settings = loadSettings();
export const runtime: CoordinatorRuntime<CoordinatorServices> = processCoordinatorRuntime(settings, coordinationPass);
/** Anonymous probes of the leader and health share one lease read per 2 s per instance. */
export const LEADER_READ_TTL_MS = 2_000;
export const status = cachedStatusSource(runtime, LEADER_READ_TTL_MS);
export const clusterRecords = ClusterRecords.fromSettings(settings);

export async function leaderTimer(_timer: Timer, context: InvocationContext): Promise<void> {
  try {
    const state = await runtime.tick({ durableClient: df.getClient(context) });
    context.trace(`role=${state.role} epoch=${state.epoch ?? '-'} passes=${state.passes}`);
  } catch (err) {
    // The runtime handles storage faults itself; anything here is a bug worth a log line.
    const error = toCoordinatorError(err);
    context.error(JSON.stringify({ event: 'leader.tick_failed', code: error.code, message: error.message }));
  }
}

app.timer('leaderTimer', { schedule: settings.leader.timerSchedule, extraInputs: [df.input.durableClient()], handler: leaderTimer });
app.hook.appTerminate(() => runtime.stop());
