import { join } from 'node:path';

/** The module scripts/runTests loads into every test file's process (see testChildGuard.ts). */
export const TEST_CHILD_GUARD = join(__dirname, 'testChildGuard.js');

export interface NodeTestRun {
  readonly files: readonly string[];
  readonly concurrency: number;
  readonly timeoutMs: number;
}

/**
 * The `node` arguments of one test run: Node's runner, one process per file, the spec reporter
 * (whose summary CI reads). No --test-force-exit: it loses verdicts (testChildGuard.ts says why);
 * the guard ends a file whose process outlives its tests instead.
 */
export function nodeTestArgs(run: NodeTestRun): string[] {
  return [
    '--require',
    TEST_CHILD_GUARD,
    '--test',
    `--test-concurrency=${run.concurrency}`,
    `--test-timeout=${run.timeoutMs}`,
    '--test-reporter=spec',
    ...run.files,
  ];
}
