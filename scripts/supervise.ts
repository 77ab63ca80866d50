/**
 * How `npm start` looks after its host processes, apart from how it starts them:
 * - An instance that is killed (`kill -9 <pid>`, `kill <pid>`) or exits cleanly is one instance
 *   gone, as when Azure recycles one: the others keep running, so the README's failover demo works.
 *   An instance that fails (a non-zero exit code: a bad setting, a crash) fails the same way on every
 *   instance, so the others are stopped and `npm start` exits with that code.
 * - `npm start` stops everything when whoever started it goes away: npm does not pass SIGTERM on to
 *   the script it runs, and a closed terminal sends SIGHUP. The script watches its parent and its
 *   parent's parent (the shell npm runs scripts in, and npm), read from /proc on Linux.
 * - What it runs is written down (`.azurite/npm-start.json`: its own pid, each host's and Azurite's),
 *   so the next `npm start` names the leftovers of one that was killed outright instead of failing
 *   on a port in use.
 * Not guaranteed: ancestors are watched only where /proc exists (Linux); elsewhere SIGINT, SIGTERM
 * and SIGHUP to this script still stop everything.
 */
import { type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export type ExitVerdict = 'keep-others' | 'stop-all';

/** A signal or a clean exit takes one instance away; a failure (non-zero code) would take them all. */
export function exitVerdict(code: number | null, signal: NodeJS.Signals | null): ExitVerdict {
  if (signal !== null) return 'keep-others';
  return code === 0 ? 'keep-others' : 'stop-all';
}

export interface Supervised {
  readonly child: ChildProcess;
  readonly label: string;
}

export interface Supervision {
  /** Stops every instance still running (SIGTERM, SIGKILL after the timeout; a second call kills at once). */
  stopAll(reason: string): void;
  /** Settles once every instance has exited: their exit codes, and whether one failed on its own. */
  readonly done: Promise<{ readonly codes: readonly number[]; readonly failed: boolean }>;
}

export function superviseInstances(
  children: readonly Supervised[],
  options: { readonly stopTimeoutMs: number; readonly log: (line: string) => void; readonly error: (line: string) => void },
): Supervision {
  let stopping = false;
  let failed = false;
  const running = (c: ChildProcess): boolean => c.exitCode === null && c.signalCode === null;
  const stopAll = (reason: string): void => {
    if (stopping) {
      for (const { child } of children) if (running(child)) child.kill('SIGKILL');
      return;
    }
    stopping = true;
    const left = children.filter(({ child }) => running(child));
    options.log(`${reason}: stopping ${left.length} instance(s)...`);
    for (const { child } of left) child.kill('SIGTERM');
    setTimeout(() => {
      for (const { child } of children) if (running(child)) child.kill('SIGKILL');
    }, options.stopTimeoutMs).unref();
  };
  const exits = children.map(
    ({ child, label }) =>
      new Promise<number>((resolve) => {
        const settle = (code: number | null, signal: NodeJS.Signals | null): void => {
          if (!stopping) {
            const how = signal ?? `code ${String(code)}`;
            const others = children.filter((c) => c.child !== child && running(c.child)).length;
            if (exitVerdict(code, signal) === 'stop-all') {
              failed = true;
              options.error(`${label} exited (${how}); stopping the others.`);
              stopAll('instance failed');
            } else if (others > 0) {
              options.error(`${label} exited (${how}); the other ${others} instance(s) keep running. Ctrl-C stops everything.`);
            } else {
              options.error(`${label} exited (${how}); no instance is left.`);
            }
          }
          resolve(code ?? (signal === null ? 1 : 128));
        };
        if (!running(child)) settle(child.exitCode, child.signalCode);
        else child.once('exit', settle);
      }),
  );
  return { stopAll, done: Promise.all(exits).then((codes) => ({ codes, failed })) };
}

/** This process's parent and the parent's parent (pids above 1), from /proc; empty where there is none. */
export function ancestorPids(pid: number = process.pid, depth = 2): number[] {
  const found: number[] = [];
  let current = pid;
  for (let i = 0; i < depth; i += 1) {
    const parent = parentOf(current);
    if (parent === undefined || parent <= 1) break;
    found.push(parent);
    current = parent;
  }
  return found;
}

function parentOf(pid: number): number | undefined {
  try {
    // /proc/<pid>/stat: "pid (comm) state ppid ..."; comm may hold spaces and parentheses, so parse after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ppid = Number(fields[1]);
    return Number.isInteger(ppid) ? ppid : undefined;
  } catch {
    return undefined;
  }
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by someone else.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Calls `onGone` once, with the first of `pids` found gone; checks every `intervalMs`. */
export function watchProcesses(pids: readonly number[], onGone: (pid: number) => void, intervalMs = 1_000): { stop(): void } {
  if (pids.length === 0) return { stop: () => undefined };
  const timer = setInterval(() => {
    const gone = pids.find((pid) => !isAlive(pid));
    if (gone === undefined) return;
    clearInterval(timer);
    onGone(gone);
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

export interface RunRecord {
  readonly startedAt: string;
  readonly startPid: number;
  readonly hosts: ReadonlyArray<{ readonly label: string; readonly pid: number; readonly port: number }>;
  readonly azuritePid?: number;
}

export const RUN_RECORD = join('.azurite', 'npm-start.json');

export function writeRunRecord(root: string, record: RunRecord): void {
  const file = join(root, RUN_RECORD);
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(record, null, 2)}\n`);
}

export function clearRunRecord(root: string): void {
  rmSync(join(root, RUN_RECORD), { force: true });
}

/**
 * The processes a previous `npm start` left running (its record, the pids still alive), or
 * undefined when there is no record or nothing of it runs. A record whose processes are all gone
 * is removed.
 */
export function findLeftovers(root: string, alive: (pid: number) => boolean = isAlive): { record: RunRecord; alive: string[] } | undefined {
  const file = join(root, RUN_RECORD);
  if (!existsSync(file)) return undefined;
  let record: RunRecord;
  try {
    record = JSON.parse(readFileSync(file, 'utf8')) as RunRecord;
  } catch {
    rmSync(file, { force: true });
    return undefined;
  }
  const named = [
    { what: 'npm start', pid: record.startPid },
    ...(record.hosts ?? []).map((h) => ({ what: `${h.label} (port ${h.port})`, pid: h.pid })),
    ...(record.azuritePid === undefined ? [] : [{ what: 'Azurite', pid: record.azuritePid }]),
  ].filter((p) => Number.isInteger(p.pid) && p.pid > 1 && p.pid !== process.pid && alive(p.pid));
  if (named.length === 0) {
    rmSync(file, { force: true });
    return undefined;
  }
  return { record, alive: named.map((p) => `${p.what}: pid ${p.pid}`) };
}

/** The error `npm start` answers when a previous run is still there. */
export function leftoverMessage(leftovers: { record: RunRecord; alive: string[] }, alive: (pid: number) => boolean = isAlive): string {
  const how = alive(leftovers.record.startPid)
    ? `Stop it with Ctrl-C in its terminal, or \`kill ${leftovers.record.startPid}\` (it stops its instances and Azurite)`
    : `Its npm start is gone; stop what it left with \`kill ${leftovers.alive.map((a) => a.slice(a.lastIndexOf(' ') + 1)).join(' ')}\``;
  return `a previous npm start (${leftovers.record.startedAt}) is still running: ${leftovers.alive.join(', ')}. ${how}, then run npm start again.`;
}
