/**
 * Launches a development host process with the chaos harness's options (its own port, host id and
 * instance id); the entry point is the devhost package's (what `npx devhost` runs).
 */
import { type ChildProcess, spawn, type SpawnOptions } from 'node:child_process';

import { HOST_PROCESS_ENTRY } from 'devhost';

export const DEV_HOST_ENTRY = HOST_PROCESS_ENTRY;

export interface DevHostLaunch {
  /** The app folder (host.json, package.json, local.settings.json). */
  readonly appRoot: string;
  readonly port: number;
  readonly hostId: string;
  readonly instanceId: string;
  /** Entry point glob relative to `appRoot`; package.json `main` when absent. */
  readonly main?: string;
}

/** The host's command-line arguments after the Node.js executable. */
export function devHostArgs(launch: DevHostLaunch): string[] {
  return [
    DEV_HOST_ENTRY,
    launch.appRoot,
    ...(launch.main === undefined ? [] : ['--main', launch.main]),
    '--port',
    String(launch.port),
    '--instance-id',
    launch.instanceId,
    '--host-id',
    launch.hostId,
  ];
}

/** Starts a development host process with this Node.js (the one running the caller). */
export function spawnDevHost(launch: DevHostLaunch, options: SpawnOptions): ChildProcess {
  return spawn(process.execPath, devHostArgs(launch), options);
}
