/** A small inline `sum` job's run, as the tests of shared runs use it (what a test needs otherwise: `extra`). */
import { type JobRun } from '../../../../shared/jobs/JobRun';

export function smallRun(jobId: string, extra: Partial<JobRun> = {}): JobRun {
  return {
    jobId,
    workType: 'sum',
    fingerprint: 'f'.repeat(64),
    options: { chunkSize: 100, attempts: 3, deadlineSeconds: 300 },
    source: { kind: 'inline', items: [1, 2, 3] },
    epoch: 4,
    holder: 'leader',
    submittedAt: '2026-01-01T00:00:00.000Z',
    via: 'queue',
    startId: `start-${jobId}`,
    ...extra,
  };
}
