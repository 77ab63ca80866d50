/**
 * A process's CPU time so far (user + system), read from Linux's /proc/<pid>/stat: a bench reads it
 * before and after a burst for the CPU the burst cost each process (Azurite is one Node.js thread, so
 * its CPU time is the figure a burst on Azurite is bound by). Undefined where /proc is not there, or
 * the process is gone.
 */
import { readFileSync } from 'node:fs';

/** Clock ticks per second of /proc's times (USER_HZ: 100 on every Linux the bench runs on). */
const TICKS_PER_SECOND = 100;

export function processCpuMs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command, which sits in parentheses and may hold spaces: state is the first.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime) && Number.isFinite(stime) ? ((utime + stime) * 1000) / TICKS_PER_SECOND : undefined;
  } catch {
    return undefined;
  }
}
