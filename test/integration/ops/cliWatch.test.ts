/**
 * The command line's watch, cancel and resubmit against a running job: `bin/coordinator.js` spawned
 * as its own process against the whole app on the development host and Azurite (cli.test.ts has the
 * rest; a file of its own, with its own host, since the two took the runner's 180 s per file under
 * CI load). Checked: one stderr line per change of progress, the documented exit codes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { EXIT } from '../../../cli/CoordinatorClient';
import { eventually } from '../jobs/support/jobsHost';
import { cliHarness } from './support/cliHarness';

describe('the command line watching a running job (development host, Azurite)', () => {
  const { start, run, file } = cliHarness('cliwatch');

  it('watches a running job move, cancels it (watch exits 12), refuses a second cancel, resubmits it', async () => {
    // 480 chunks of 1.6 s, 48 at a time (12 messages of 4 chunks): about 16 s if not cancelled. The
    // status moves when the plan or a step answers: about every 2 s while chunks remain to send, but a
    // call that has sent every chunk waits up to 5 s for the last results. The first window (128
    // chunks, sent by the leader's intake) runs while the run's start message may be deferred (the
    // start race, docs/deploy.md: 2-4 s), so with 200 chunks the plan could send all the rest at once
    // and the status went from planning to done with one partial line at most (about one run in
    // five). With 480 the plan sends at most a window more, and the next step still has chunks to send.
    const items = Array.from({ length: 480 }, () => 1_600);
    const submitted = await run(['submit', file('slow.json', JSON.stringify(items)), '--work-type', 'slow', '--chunk-size', '1', '--job-id', 'cli-slow']);
    assert.equal(submitted.code, EXIT.ok, submitted.stderr);
    assert.equal(submitted.stdout.trim(), 'cli-slow');

    const watcher = start(['watch', 'cli-slow', '--interval', '0.2']);
    // Not a terminal: one line per change of progress.
    const moving = await eventually(
      () => {
        const partial = watcher.stderr().split('\n').filter((l) => /\] [1-9]\d*\/480 items/.test(l) && !l.includes('480/480'));
        return Promise.resolve(partial.length >= 2 ? partial : undefined);
      },
      90_000,
      'two different partial progress lines',
    );
    assert.notEqual(moving[0], moving[1]);

    const cancelled = await run(['cancel', 'cli-slow']);
    assert.equal(cancelled.code, EXIT.ok, cancelled.stderr);
    assert.equal(cancelled.stdout.trim(), 'cli-slow cancelling');
    const watched = await watcher.done;
    assert.equal(watched.code, EXIT.cancelled, watched.stderr);
    assert.match(watched.stderr, /cli-slow: cancelled/);

    const again = await run(['cancel', 'cli-slow']);
    assert.equal(again.code, EXIT.refused);
    assert.match(again.stderr, /JOB_ALREADY_FINISHED/);

    const resubmitted = await run(['resubmit', 'cli-slow']);
    assert.equal(resubmitted.code, EXIT.ok, resubmitted.stderr);
    const newId = resubmitted.stdout.trim();
    assert.match(newId, /^j-/);
    const timedOut = await run(['watch', newId, '--timeout', '1', '--interval', '0.2']);
    assert.equal(timedOut.code, EXIT.timedOut, timedOut.stderr);
    assert.match(timedOut.stderr, new RegExp(`${newId} is still (pending|running) after 1 s`));
    assert.equal((await run(['cancel', newId])).code, EXIT.ok);
  });
});
