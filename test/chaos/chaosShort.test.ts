/**
 * The chaos harness's short mode, as CI runs it (`npm run chaos -- --short --seed 1`): three
 * instances of the app as one scaled-out app, each behind its own storage proxy, while the leader
 * is killed and paused in the middle of starting a job, followers are paused, cut off and reset,
 * the leader is stopped gracefully and instances are killed and restarted. Every job must end with
 * its exact result, no epoch may act after a newer one, and no process may die on its own.
 * The run's summary (and its folder of logs, kept on failure) is in the failure message.
 */
import { describe, it } from 'node:test';

import { runChaos } from './runChaos';
import { checkShortRun } from './shortRunChecks';

describe('chaos, short mode', () => {
  it('keeps every job exact and every epoch fenced while leaders are killed and paused mid-start', async () => {
    checkShortRun(await runChaos({ mode: 'short', seed: 1, instances: 3, separateApps: false }));
  });
});
