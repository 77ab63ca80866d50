/**
 * Killing a host process mid-orchestration loses nothing: process A (a separate OS process running
 * the Durable backend and the reference app) picks up an orchestration, runs its first activity
 * and starts the second; A is killed with SIGKILL while that activity runs; process B (this test
 * process), started only afterwards against the same Azurite and task hub, finds the activity's
 * work message again once its visibility timeout lapses, runs it, and the orchestration completes
 * with the right output and the history of an uninterrupted run.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { test } from 'node:test';

import { eventNames, startDurableTestHost, uniqueTaskHub, waitForFinish } from '../../support/durableTestHost';

const VISIBILITY_SECONDS = 3;

function waitForLine(child: ChildProcess, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    if (child.stdout === null) {
      reject(new Error('child has no stdout'));
      return;
    }
    const lines = createInterface({ input: child.stdout });
    const timer = setTimeout(() => {
      lines.close();
      reject(new Error(`no line matching ${String(pattern)} within ${timeoutMs} ms`));
    }, timeoutMs);
    lines.on('line', (line) => {
      const match = pattern.exec(line);
      if (match === null) return;
      clearTimeout(timer);
      lines.close();
      resolve(match);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`child exited with ${String(code)} before printing ${String(pattern)}`));
    });
  });
}

test('an orchestration survives SIGKILL of the host running its activity and completes on another host', async () => {
  const taskHub = uniqueTaskHub('Crash');
  const processA = spawn(process.execPath, [join(__dirname, '..', '..', 'support', 'backendProcess.js')], {
    env: { ...process.env, DURABLE_TASK_HUB: taskHub, DURABLE_WORK_VISIBILITY_SECONDS: String(VISIBILITY_SECONDS) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  // B serves the client API from the start but dispatches nothing until A is dead.
  const hostB = await startDurableTestHost({ taskHub, tuning: { workVisibilitySeconds: VISIBILITY_SECONDS }, start: false });
  try {
    await waitForLine(processA, /^READY /, 30_000);
    const slowStarted = waitForLine(processA, /^FIXTURE_SLOW_STEP_STARTED (\d+) crash$/, 30_000);
    const id = await hostB.client.startNew('SlowSequence', { input: { value: 'crash', delayMs: 1500 } });
    const [, pidA] = await slowStarted;
    assert.equal(Number(pidA), processA.pid, 'process A runs the activity');

    processA.kill('SIGKILL');
    await new Promise((resolve) => processA.once('exit', resolve));
    assert.equal((await hostB.client.getStatus(id)).runtimeStatus, 'Running', 'nothing completed it meanwhile');

    await hostB.backend.start();
    const status = await waitForFinish(hostB.client, id, 60_000);
    assert.equal(status.runtimeStatus, 'Completed');
    assert.deepEqual(status.output, { first: 'Hello crash!', slow: 'crash done', by: String(process.pid) });
    assert.deepEqual(eventNames(await hostB.rawHistory(id)), [
      'OrchestratorStarted', 'ExecutionStarted', 'TaskScheduled', 'OrchestratorCompleted',
      'OrchestratorStarted', 'TaskCompleted', 'TaskScheduled', 'OrchestratorCompleted',
      'OrchestratorStarted', 'TaskCompleted', 'ExecutionCompleted', 'OrchestratorCompleted',
    ]); // prettier-ignore
  } finally {
    if (processA.exitCode === null && processA.signalCode === null) processA.kill('SIGKILL');
    await hostB.stop();
  }
});
