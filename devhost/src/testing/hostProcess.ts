/**
 * Runs real development host processes (`node <devhost>/dist/src/main.js`) for tests: one process per
 * instance on a free port, its output collected, ready once it printed its listening line, and a
 * graceful (SIGTERM) or hard (SIGKILL) stop.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';

import { READY_LINE_PREFIX } from '../main';

/** The host process's entry point (what `npx devhost` runs). */
export const HOST_PROCESS_ENTRY = join(__dirname, '..', 'main.js');
/** The Node.js worker another host (the extensions host, exthost/) runs to load and invoke the app (src/worker/workerMain.ts). */
export const WORKER_ENTRY = join(__dirname, '..', 'worker', 'workerMain.js');

export interface HostProcess {
  readonly baseUrl: string;
  readonly instanceId: string;
  readonly child: ChildProcess;
  /** Everything the process printed so far, as lines. */
  lines(): string[];
  /** Parsed JSON log lines with this `event`. */
  events(event: string): Array<Record<string, unknown>>;
  /** SIGTERM and wait for exit; resolves with the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL and wait for exit. */
  kill(): Promise<void>;
}

export async function startHostProcess(options: {
  appRoot: string;
  hostId: string;
  instanceId: string;
  env?: Record<string, string>;
  /** More command-line options, e.g. `--main`. */
  extraArgs?: readonly string[];
  timeoutMs?: number;
}): Promise<HostProcess> {
  const args = [HOST_PROCESS_ENTRY, options.appRoot, '--port', '0', '--host-id', options.hostId, '--instance-id', options.instanceId, ...(options.extraArgs ?? [])];
  return startReadyProcess({
    command: process.execPath,
    args,
    // Only what the host needs: local.settings.json must fill the rest, as it does for `npm start`.
    env: { PATH: process.env.PATH ?? '', DEVHOST_LOG_LEVEL: 'warn', ...options.env },
    readyPrefix: READY_LINE_PREFIX,
    instanceId: options.instanceId,
    ...(options.timeoutMs === undefined ? {} : { timeoutMs: options.timeoutMs }),
  });
}

/**
 * Any host process that prints `<readyPrefix>... http://...` once it serves (the development host,
 * or another host with the same contract, e.g. the extensions host): its output collected, its
 * JSON log lines parsed by `events`, stopped by SIGTERM or SIGKILL.
 */
export async function startReadyProcess(options: {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  readyPrefix: string;
  instanceId: string;
  timeoutMs?: number;
}): Promise<HostProcess> {
  const child = spawn(options.command, options.args, { env: options.env, stdio: ['ignore', 'pipe', 'pipe'] });
  const output: string[] = [];
  // One partial line per stream: a stderr line must not be glued to the unfinished stdout line.
  const partials = { stdout: '', stderr: '' };
  const collect = (stream: 'stdout' | 'stderr') => (chunk: Buffer): void => {
    const parts = (partials[stream] + chunk.toString('utf8')).split('\n');
    partials[stream] = parts.pop() ?? '';
    output.push(...parts);
  };
  child.stdout?.on('data', collect('stdout'));
  child.stderr?.on('data', collect('stderr'));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));

  const baseUrl = await new Promise<string>((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`host did not start in time:\n${output.join('\n')}`)), options.timeoutMs ?? 20_000);
    const check = (): void => {
      const line = output.find((l) => l.startsWith(options.readyPrefix));
      if (line !== undefined) {
        clearTimeout(deadline);
        resolve(/(http:\/\/[^ ]+)/.exec(line.slice(options.readyPrefix.length))?.[1] ?? '');
      }
    };
    child.stdout?.on('data', check);
    void exited.then((code) => {
      clearTimeout(deadline);
      reject(new Error(`host exited with ${String(code)} before it was ready:\n${output.join('\n')}${partials.stdout}${partials.stderr}`));
    });
  });

  return {
    baseUrl,
    instanceId: options.instanceId,
    child,
    lines: () => [...output, ...[partials.stdout, partials.stderr].filter((p) => p !== '')],
    events: (event) =>
      output.flatMap((line) => {
        if (!line.startsWith('{')) return [];
        try {
          const parsed = JSON.parse(line) as Record<string, unknown>;
          return parsed.event === event ? [parsed] : [];
        } catch {
          return [];
        }
      }),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return exited;
    },
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Polls `probe` until it returns a value (not undefined) or the time is up. */
export async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}
