import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { describe, it } from 'node:test';

import { azuriteConnectionString, uniqueName } from '../../support/env';
import { blobClient, realContender, sleep, waitFor } from './harness';

interface ChildEvent {
  readonly event: string;
  readonly at: number;
  readonly epoch?: number;
  readonly beat?: number;
  readonly message?: string;
}

describe('a leader paused past its lease', () => {
  it('cannot write through the lease after the pause and learns it lost', async () => {
    const conn = azuriteConnectionString();
    const container = uniqueName('paused');
    const proc = spawn(process.execPath, [join(__dirname, 'pausedLeaderChild.js')], {
      env: { ...process.env, AZURITE_CONNECTION_STRING: conn, LEADER_TEST_CONTAINER: container, COORDINATOR_LOG_LEVEL: 'error' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const events: ChildEvent[] = [];
    createInterface({ input: proc.stdout }).on('line', (line) => {
      try {
        events.push(JSON.parse(line) as ChildEvent);
      } catch {
        // not one of our lines
      }
    });
    const b = realContender(conn, container, 'b');
    try {
      await waitFor(() => events.filter((e) => e.event === 'wrote').length >= 3, 15_000, 'the child to lead and write');
      b.elector.start();
      proc.kill('SIGSTOP');
      const pausedAt = Date.now();
      // The child's lease lapses unrenewed; b takes over and writes through its own lease.
      await waitFor(() => b.elector.role === 'leader', 25_000, 'b to lead while the child is paused');
      const bTerm = b.terms[0];
      assert.ok(bTerm !== undefined);
      await bTerm.leadership.writeThroughLease({ owner: 'b' });
      const resumedAt = Date.now();
      proc.kill('SIGCONT');
      await waitFor(() => events.some((e) => e.event === 'stopped_leading' && e.at >= resumedAt), 5_000, 'the child to learn it lost');

      const afterResume = events.filter((e) => e.at >= resumedAt);
      assert.deepEqual(
        afterResume.filter((e) => e.event === 'wrote'),
        [],
        'the paused leader wrote after it resumed',
      );
      const learnedAt = afterResume.find((e) => e.event === 'stopped_leading')?.at ?? Infinity;
      assert.ok(learnedAt - resumedAt < 1_000, `learned ${learnedAt - resumedAt} ms after resuming`);
      assert.ok(resumedAt - pausedAt > 10_000, 'the pause outlasted the lease');
      await sleep(500);
      const props = await blobClient(conn, container).getProperties();
      assert.equal(props.metadata?.holder, 'b');
      assert.equal(props.metadata?.epoch, String(b.elector.epoch));
      assert.equal(props.metadata?.owner, 'b');
      assert.equal(props.metadata?.beat, undefined, 'a heartbeat from the paused leader landed');
      assert.equal(b.elector.role, 'leader');
    } finally {
      void b.elector.stop({ release: false });
      proc.kill('SIGKILL');
    }
  });
});
