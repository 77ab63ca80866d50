/**
 * The chaos harness's short mode in Flex Consumption's shape (`npm run chaos -- --short --seed 1
 * --flex`): the app as the platform scales it, one instance per scale group (`timer-1`, `durable-1`,
 * `http-1`) and two of the worker's (scripts/flexShape.ts), each loading only its group's functions,
 * one app, each behind its own storage proxy, under the short plan's faults (chaosShort.test.ts):
 * leaders killed and paused in the middle of starting a job, other instances paused, cut off, reset,
 * killed and restarted, the leader stopped gracefully. Any instance may be hit, whichever group it
 * serves, so the Durable group's only instance and the API's only instance go down too (submissions
 * and status reads wait for the API, as a client would). Every job must end with its exact result,
 * no epoch may act after a newer one, and no process may die on its own.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { runChaos } from './runChaos';
import { checkShortRun } from './shortRunChecks';

describe("chaos, short mode, in Flex Consumption's shape", () => {
  it('keeps every job exact and every epoch fenced with one instance per scale group', async () => {
    const report = await runChaos({ mode: 'short', seed: 1, instances: 5, separateApps: false, flex: true });
    checkShortRun(report, (explain) => {
      // The leaders came from more than one scale group (the shape's point: any group's instance may lead).
      const groups = new Set(report.record.logs.filter((e) => e.event === 'leader.acquired').map((e) => e.instance.replace(/-\d+$/, '')));
      assert.ok(groups.size >= 2, `leaders from ${[...groups].join(', ')}${explain}`);
    });
  });
});
