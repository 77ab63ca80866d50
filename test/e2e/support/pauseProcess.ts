/**
 * Pauses a host instance as a whole (SIGSTOP) and resumes it (SIGCONT). The extensions host is two
 * processes, the .NET host and the Node.js worker it started (the app's code, its own timers and
 * storage calls): stopping only the host would leave the app running. The tree is read from Linux's
 * /proc (children of each process), deepest last; a process that has exited meanwhile is skipped.
 */
import { readdirSync, readFileSync } from 'node:fs';

import { type HostProcess } from 'devhost/testing';

function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((tid) =>
      readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').split(/\s+/).filter((p) => p !== '').map(Number),
    );
  } catch {
    return [];
  }
}

/** `pid` and its descendants, parents first (the chaos harness signals an extensions host instance this way too). */
export function processTree(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(processTree)];
}

export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // exited meanwhile
    }
  }
}

/** Stops the instance's processes; `resume()` continues the same processes (safe to call more than once). */
export function pauseInstance(host: HostProcess): { readonly pids: readonly number[]; resume(): void } {
  const pid = host.child.pid;
  if (pid === undefined) throw new Error(`${host.instanceId} has no process to pause`);
  const pids = processTree(pid);
  signalAll(pids, 'SIGSTOP');
  return { pids, resume: () => signalAll(pids, 'SIGCONT') };
}
