/**
 * The extensions host (exthost/, see exthost/README.md): a .NET WebJobs host whose triggers and
 * bindings are the real Durable, queue and timer extensions, running this app in a Node.js worker
 * (the development host's loader, devhost/src/worker/workerMain.ts). What `npm start -- --host
 * extensions` and the tests that run the app on it share: finding dotnet, building the project
 * once, its command line, and a test process with the development host's HostProcess contract.
 *
 * Without a .NET SDK (`dotnet --version` fails) every entry point here throws ExtHostUnavailable,
 * saying so: nothing is skipped.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { WORKER_ENTRY } from 'devhost';
import { freePort, type HostProcess, startReadyProcess } from 'devhost/testing';

/** The first line the host prints once it serves HTTP: this prefix, then its base URL. */
export const EXTHOST_READY_PREFIX = 'Extensions host listening on ';
/** Compiled layout: <outDir>/scripts/extHostProcess.js, the repository one level above <outDir>. */
export const REPO_ROOT = resolve(__dirname, '..', '..');
export const EXTHOST_PROJECT = join(REPO_ROOT, 'exthost', 'ExtHost.csproj');
const CONFIGURATION = 'Release';

export class ExtHostUnavailable extends Error {
  override readonly name = 'ExtHostUnavailable';
}

export interface ExtHostLaunch {
  readonly appRoot: string;
  readonly port: number;
  readonly hostId: string;
  readonly instanceId: string;
  /** Entry point glob relative to `appRoot`; package.json `main` when absent. */
  readonly main?: string;
}

/** `dotnet --version`, or why it is not usable. */
export function dotnetVersion(env: NodeJS.ProcessEnv = process.env): { version?: string; reason: string } {
  const result = spawnSync('dotnet', ['--version'], { encoding: 'utf8', timeout: 60_000, env });
  if (result.error !== undefined) return { reason: `\`dotnet --version\` could not run (${(result.error as NodeJS.ErrnoException).code ?? result.error.message})` };
  const version = result.stdout.trim();
  if (result.status !== 0 || !/^\d+\.\d+/.test(version)) return { reason: `\`dotnet --version\` failed (exit ${String(result.status)}): ${result.stderr.trim()}` };
  return { version, reason: `.NET SDK ${version}` };
}

let built: string | undefined;
/** The ExtHost.dll a caller already built (scripts/runTests sets it for the test files it starts). */
export const PREBUILT_SETTING = 'EXTHOST_DLL';

/**
 * Builds exthost/ (NuGet restore the first time) and returns its ExtHost.dll; once per process, or
 * not at all when EXTHOST_DLL names one already built.
 * With `progress`, the build's own lines go to it as they come (`npm start`: a first build restores
 * about 60 packages and takes a minute or more), then one line with its time; and a build newer than
 * every source of exthost/ is not run again (an up-to-date `dotnet build` still takes 5-20 s).
 * Throws ExtHostUnavailable without a .NET SDK, or with the build's errors.
 */
export function buildExtHost(options: { progress?: (line: string) => void } = {}): string {
  if (built !== undefined) return built;
  // Built once for a whole test run by scripts/runTests (each test file is a process of its own).
  const prebuilt = process.env[PREBUILT_SETTING];
  if (prebuilt !== undefined && prebuilt !== '' && existsSync(prebuilt)) {
    built = prebuilt;
    return built;
  }
  const dll = join(REPO_ROOT, 'exthost', 'bin', CONFIGURATION, 'net8.0', 'ExtHost.dll');
  const { progress } = options;
  if (progress !== undefined && builtAfterSources(dll)) {
    progress(`up to date: ${dll} is newer than every file of exthost/ (delete exthost/bin to build again)`);
    built = dll;
    return dll;
  }
  const dotnet = dotnetVersion();
  if (dotnet.version === undefined) {
    throw new ExtHostUnavailable(
      `the extensions host needs the .NET SDK 8 or later (exthost/README.md): ${dotnet.reason}. Install it (https://dot.net), or run on the development host instead.`,
    );
  }
  const began = Date.now();
  progress?.(`dotnet build exthost -c ${CONFIGURATION} (.NET SDK ${dotnet.version}; the first build restores its NuGet packages)`);
  const result = spawnSync(
    'dotnet',
    ['build', EXTHOST_PROJECT, '-c', CONFIGURATION, '--nologo', ...(progress === undefined ? ['-v', 'q', '-clp:ErrorsOnly'] : ['-v', 'minimal', '-clp:NoSummary'])],
    {
      encoding: 'utf8',
      timeout: 600_000,
      env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' },
      // Its lines as they come when someone watches; captured otherwise, for the error.
      stdio: progress === undefined ? 'pipe' : ['ignore', 'inherit', 'inherit'],
    },
  );
  if (result.status !== 0) {
    throw new ExtHostUnavailable(`building ${EXTHOST_PROJECT} failed (exit ${String(result.status)}):\n${result.stdout ?? ''}${result.stderr ?? ''}`);
  }
  if (!existsSync(dll)) throw new ExtHostUnavailable(`the build said nothing, but ${dll} is missing`);
  progress?.(`built in ${((Date.now() - began) / 1000).toFixed(1)} s`);
  built = dll;
  return dll;
}

/** Whether `dll` exists and is newer than every source file of exthost/ (its .cs files and its project). */
function builtAfterSources(dll: string): boolean {
  if (!existsSync(dll)) return false;
  const builtAt = statSync(dll).mtimeMs;
  const dir = join(REPO_ROOT, 'exthost');
  return readdirSync(dir)
    .filter((name) => name.endsWith('.cs') || name.endsWith('.csproj'))
    .every((name) => statSync(join(dir, name)).mtimeMs < builtAt);
}

/** `dotnet` and its arguments for one instance. */
export function extHostCommand(launch: ExtHostLaunch, dll = buildExtHost()): { command: string; args: string[] } {
  return {
    command: 'dotnet',
    args: [
      dll,
      '--app-root',
      launch.appRoot,
      '--port',
      String(launch.port),
      '--host-id',
      launch.hostId,
      '--instance-id',
      launch.instanceId,
      '--worker',
      WORKER_ENTRY,
      '--node',
      process.execPath,
      ...(launch.main === undefined ? [] : ['--main', launch.main]),
    ],
  };
}

/** An extensions host process for tests, on a free port, with the same contract as devhost's startHostProcess. */
export async function startExtHostProcess(options: {
  appRoot: string;
  hostId: string;
  instanceId: string;
  env?: Record<string, string>;
  main?: string;
  timeoutMs?: number;
}): Promise<HostProcess> {
  const { command, args } = extHostCommand({
    appRoot: options.appRoot,
    port: await freePort(),
    hostId: options.hostId,
    instanceId: options.instanceId,
    ...(options.main === undefined ? {} : { main: options.main }),
  });
  return startReadyProcess({
    command,
    args,
    env: {
      PATH: process.env.PATH ?? '',
      ...(process.env.HOME === undefined ? {} : { HOME: process.env.HOME }),
      DOTNET_CLI_TELEMETRY_OPTOUT: '1',
      DEVHOST_LOG_LEVEL: 'warn',
      ...options.env,
    },
    readyPrefix: EXTHOST_READY_PREFIX,
    instanceId: options.instanceId,
    timeoutMs: options.timeoutMs ?? 90_000,
  });
}
