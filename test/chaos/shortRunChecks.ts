/**
 * What a short chaos run must show, whichever shape it ran in (chaosShort.test.ts, chaosShortFlex.test.ts):
 * no violation, each step fault fired on a leader mid-start, most planned faults injected, the leader
 * changed at least three times, every job ended, and both submission paths were used. `more` adds a
 * shape's own checks. The run's folder is kept (and named) on failure, removed otherwise.
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';

import { type runChaos } from './runChaos';

type Report = Awaited<ReturnType<typeof runChaos>>;

export function checkShortRun(report: Report, more: (explain: string) => void = () => undefined): void {
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
    more(explain);
  } catch (err) {
    console.error(`chaos run kept in ${report.runDir}`);
    throw err;
  }
  rmSync(report.runDir, { recursive: true, force: true });
}
