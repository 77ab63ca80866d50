/**
 * The chaos harness's short mode, as CI runs it (`npm run chaos -- --short --seed 1`): three
 * instances of the app as one scaled-out app, each behind its own storage proxy, while the leader
 * is killed and paused in the middle of starting a job, followers are paused, cut off and reset,
 * the leader is stopped gracefully and instances are killed and restarted. Every job must end with
 * its exact result, no epoch may act after a newer one, and no process may die on its own.
 * The run's summary (and its folder of logs, kept on failure) is in the failure message.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { describe, it } from 'node:test';

import { runChaos } from './runChaos';

describe('chaos, short mode', () => {
  it('keeps every job exact and every epoch fenced while leaders are killed and paused mid-start', async () => {
    const report = await runChaos({ mode: 'short', seed: 1, instances: 3, separateApps: false });
    const explain = `\n${report.summary}`;
    try {
      assert.deepEqual(
        report.violations.map((v) => `${v.kind}: ${v.summary}`),
        [],
        explain,
      );
      // The faults that matter hit what they were meant to: each step fault stopped a leader mid-start.
      const stepFaults = report.record.faults.filter((f) => f.planned.step !== undefined);
      assert.equal(stepFaults.length, 3, explain);
      for (const fault of stepFaults) {
        assert.equal(fault.outcome, 'injected', `${fault.planned.id} ${fault.planned.kind}@${fault.planned.step} did not fire${explain}`);
        assert.equal(fault.role, 'leader', `${fault.planned.id} hit a ${fault.role ?? '?'}${explain}`);
      }
      assert.ok(report.record.faults.filter((f) => f.outcome === 'injected').length >= 8, `most planned faults were injected${explain}`);
      assert.ok(report.failovers.length >= 3, `the leader changed at least three times${explain}`);
      const finished = report.record.jobs.filter((j) => j.final !== undefined);
      assert.equal(finished.length, report.record.jobs.length, explain);
      assert.ok(report.record.jobs.some((j) => j.via === 'http' && j.source === 'blob') && report.record.jobs.some((j) => j.via === 'queue' && j.source === 'inline'), explain);
    } catch (err) {
      console.error(`chaos run kept in ${report.runDir}`);
      throw err;
    }
    rmSync(report.runDir, { recursive: true, force: true });
  });
});
