/**
 * Loaded (`--require`) into every test file's process by scripts/runTests. Once a file's tests have
 * all finished, its process should end by itself; when something it started is still alive (a
 * leaked timer, socket or child process) it would hold the run until CI's limit. This gives it a
 * grace period (TEST_EXIT_GRACE_MS, default 10 s) and then ends it with exit code 1 and a line that
 * names the file, so the leak fails the run instead of hanging it.
 *
 * Why not Node's --test-force-exit: with process isolation and concurrency it exits the file's
 * process the moment its last test ends, before the parent has read the whole report, and the parent
 * then silently counts fewer tests, exit code 0 (nodejs/node#64833; reproduced here, 8 files x 200
 * tests reported as 1,588-1,597). A failure in the lost tail would be hidden. Ending the process
 * seconds later, long after its report was written, loses nothing.
 *
 * It acts only in a test runner child running a test file: the runner's own process and processes
 * the tests spawn or fork are left alone.
 */
import type * as NodeTest from 'node:test';

const isTestFileProcess = process.env.NODE_TEST_CONTEXT !== undefined && /\.test\.[cm]?js$/.test(process.argv[1] ?? '');

if (isTestFileProcess) {
  const graceMs = Number(process.env.TEST_EXIT_GRACE_MS ?? '10000');
  // Required here, not imported at the top: other processes never load the test runner.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { after } = require('node:test') as typeof NodeTest;
  // A root-level after hook runs once every test of the file has finished.
  after(() => {
    setTimeout(() => {
      process.stderr.write(
        `${process.argv[1]}: its tests finished ${graceMs} ms ago but the process is still alive ` +
          '(a leaked timer, socket or child process); ending it with exit code 1.\n',
      );
      process.exit(1);
    }, graceMs).unref();
  });
}
