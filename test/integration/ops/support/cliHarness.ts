/**
 * The command line's test harness: the whole app on the development host (function keys on, the
 * leader passing every second) and `bin/coordinator.js` spawned as its own process against it, as
 * `npx coordinator` runs it. Each test file that uses it gets its own host (cli.test.ts, cliWatch.test.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';

import { registerTestWorkTypes } from '../../../fixtures/ops/testWorkTypes';
import { type JobsHost, MASTER_KEY, startJobsHost } from '../../jobs/support/jobsHost';

// The command as npx runs it: the tracked bin file package.json names, which loads the build.
const CLI = join(__dirname, '..', '..', '..', '..', '..', 'bin', 'coordinator.js');

export interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface Running {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  done: Promise<Run>;
}

export interface CliHarness {
  /** The running app (set once `before` ran). */
  host(): JobsHost;
  /** The CLI's environment: the app's URL and the master key. */
  env(): Record<string, string>;
  readonly start: (args: readonly string[], options?: { env?: Record<string, string>; stdin?: string }) => Running;
  readonly run: (args: readonly string[], options?: { env?: Record<string, string>; stdin?: string }) => Promise<Run>;
  /** The test's own folder. */
  dir(): string;
  /** Writes a file in the test's own folder; answers its path. */
  readonly file: (name: string, text: string) => string;
}

/** Registers the suite's `before` (host, folder) and `after` (stop, remove) hooks; call inside a `describe`. */
export function cliHarness(prefix: string): CliHarness {
  let h: JobsHost | undefined;
  let dir = '';
  let env: Record<string, string> = {};
  before(async () => {
    registerTestWorkTypes();
    h = await startJobsHost(prefix, ['*'], { LEADER_TIMER_SCHEDULE: '*/1 * * * * *', LEADER_PASS_INTERVAL_SECONDS: '1' });
    dir = mkdtempSync(join(tmpdir(), `${prefix}-test-`));
    env = { PATH: process.env.PATH ?? '', COORDINATOR_URL: h.baseUrl, COORDINATOR_KEY: MASTER_KEY };
  });
  after(async () => {
    await h?.stop();
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
  });
  const start = (args: readonly string[], options: { env?: Record<string, string>; stdin?: string } = {}): Running => {
    const child = spawn(process.execPath, [CLI, ...args], { env: options.env ?? env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr?.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.stdin?.end(options.stdin ?? '');
    const done = new Promise<Run>((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
    return { child, stdout: () => stdout, stderr: () => stderr, done };
  };
  return {
    host: () => {
      if (h === undefined) throw new Error('the CLI harness host is not started (before has not run)');
      return h;
    },
    env: () => env,
    dir: () => dir,
    start,
    run: (args, options) => start(args, options).done,
    file: (name, text) => {
      const path = join(dir, name);
      writeFileSync(path, text);
      return path;
    },
  };
}
