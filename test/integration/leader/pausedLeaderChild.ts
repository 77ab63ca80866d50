/**
 * A leader in its own process, for the pause test (not a test file itself): it campaigns on the
 * container named in LEADER_TEST_CONTAINER and, while leading, writes a heartbeat through the
 * lease every 200 ms. It reports what it does as JSON lines on stdout so the parent can SIGSTOP
 * and SIGCONT it and judge what happened after the pause.
 */
import { NotLeaderError } from '../../../shared/leader/errors';
import { realContender, sleep } from './harness';

const connectionString = process.env.AZURITE_CONNECTION_STRING ?? '';
const container = process.env.LEADER_TEST_CONTAINER ?? '';
const report = (event: string, fields: Record<string, unknown> = {}): void => {
  process.stdout.write(`${JSON.stringify({ event, at: Date.now(), ...fields })}\n`);
};

const child = realContender(connectionString, container, 'paused', {
  onTerm: async (term) => {
    report('leading', { epoch: term.epoch });
    term.leadership.signal.addEventListener('abort', () => report('stopped_leading', { epoch: term.epoch }), { once: true });
    let beat = 0;
    while (!term.leadership.signal.aborted) {
      beat += 1;
      try {
        await term.leadership.writeThroughLease({ beat: String(beat) });
        report('wrote', { epoch: term.epoch, beat });
      } catch (err) {
        report(err instanceof NotLeaderError ? 'write_refused' : 'write_failed', { epoch: term.epoch, beat, message: err instanceof Error ? err.message : String(err) });
      }
      await sleep(200);
    }
  },
});
child.elector.start();
process.on('SIGTERM', () => {
  void child.elector.stop({ release: false });
  process.exit(0);
});
