/**
 * Runs test files a few at a time, each in its own `node --test` (scripts/runTests), so that a file
 * that uses storage can have an Azurite of its own. Azurite keeps an account's metadata in one
 * in-memory database whose queries filter all of it (bench `azurite-size`: a listing 0.15x, a write
 * 0.42x with 10,000 blobs stored elsewhere): with one Azurite for the whole run, the files that run
 * late paid for every earlier file's blobs and messages (the command-line and live-page files took
 * 44 s and 34 s alone, 167 s and 168 s at the end of the suite, near the runner's 180 s per file).
 *
 * Each file's output is held until it ends and then printed whole (concurrent files do not
 * interleave), or passed through as it comes when the pool runs one file at a time. Node's summary
 * (`ℹ tests N`, `ℹ pass N`, ...) and its failure report are read from each file's output and printed
 * once for the phase, in the same form.
 */
import { spawn } from 'node:child_process';

import { nodeTestArgs } from './nodeTestArgs';

/** The counters of Node's spec reporter summary, in its order. */
export const SUMMARY_KEYS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;
export type SummaryKey = (typeof SUMMARY_KEYS)[number];
export type Summary = Record<SummaryKey, number>;

export interface FileOutcome {
  readonly file: string;
  readonly code: number;
  readonly ms: number;
  readonly summary: Summary | undefined;
  /** Node's failure report of the file ("✖ failing tests:" onwards), if it printed one. */
  readonly failures: string;
}

const FAILURE_MARKER = '✖ failing tests:';

/** The last summary Node's spec reporter printed in `output`, or undefined without one. */
export function parseSummary(output: string): Summary | undefined {
  const summary: Partial<Summary> = {};
  for (const key of SUMMARY_KEYS) {
    const matches = [...output.matchAll(new RegExp(`^ℹ ${key} (\\d+)\\s*$`, 'gm'))];
    const last = matches.at(-1);
    if (last === undefined) return undefined;
    summary[key] = Number(last[1]);
  }
  return summary as Summary;
}

/** Node's failure report in `output`, without its own heading (empty without one). */
export function failureReport(output: string): string {
  const at = output.lastIndexOf(FAILURE_MARKER);
  return at < 0 ? '' : output.slice(at + FAILURE_MARKER.length).trim();
}

/**
 * The phase's summary: the files' counters added up; a file that exited non-zero without a failing
 * test in its summary (it crashed, or its process outlived its tests) counts as one failure.
 */
export function combine(outcomes: readonly FileOutcome[]): Summary {
  const total: Summary = { tests: 0, suites: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
  for (const o of outcomes) {
    for (const key of SUMMARY_KEYS) total[key] += o.summary?.[key] ?? 0;
    if (o.code !== 0 && (o.summary === undefined || o.summary.fail + o.summary.cancelled === 0)) total.fail += 1;
  }
  return total;
}

/** The phase's summary and failure report, in the form Node's spec reporter prints them. */
export function phaseReport(outcomes: readonly FileOutcome[], wallMs: number, label: (file: string) => string): string {
  const total = combine(outcomes);
  const lines = SUMMARY_KEYS.map((key) => `ℹ ${key} ${total[key]}`);
  lines.push(`ℹ duration_ms ${wallMs.toFixed(3)}`);
  const failed = outcomes.filter((o) => o.code !== 0);
  if (failed.length > 0) {
    lines.push('', FAILURE_MARKER, '');
    for (const o of failed) {
      lines.push(`${label(o.file)} (exit ${o.code}, ${(o.ms / 1000).toFixed(1)} s)`);
      lines.push(o.failures === '' ? '  (no failure report: the file ended before its summary)' : o.failures, '');
    }
  }
  return lines.join('\n');
}

/** `output` without the lines of Node's summary, ending with a newline (empty stays empty). */
export function withoutSummary(output: string): string {
  const kept = output.replace(/^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) [\d.]+\s*$\n?/gm, '');
  return kept === '' || kept.endsWith('\n') ? kept : `${kept}\n`;
}

export interface PoolOptions {
  readonly files: readonly string[];
  readonly concurrency: number;
  readonly timeoutMs: number;
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Extra environment of one file (its own Azurite), and what to do once it has ended. */
  readonly prepare: (file: string) => Promise<{ env: NodeJS.ProcessEnv; done: () => Promise<void> }>;
  readonly label: (file: string) => string;
  /** Where output goes (process.stdout). */
  readonly write: (text: string) => void;
}

/**
 * Runs every file, at most `concurrency` at a time, and resolves with the outcome of each file that
 * ran, in the order given (all of them unless a signal interrupted the run).
 */
export async function runPool(options: PoolOptions): Promise<{ outcomes: FileOutcome[]; interrupted: boolean }> {
  const outcomes: Array<FileOutcome | undefined> = options.files.map(() => undefined);
  const live = options.concurrency <= 1;
  let next = 0;
  let interrupted = false;
  const children = new Set<ReturnType<typeof spawn>>();
  // Interrupted (Ctrl+C, or CI's end): the running files get the signal, and no other file starts.
  const forward = (signal: NodeJS.Signals): void => {
    interrupted = true;
    for (const child of children) child.kill(signal);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const runOne = async (index: number): Promise<void> => {
    const file = options.files[index] ?? '';
    const began = Date.now();
    const { env, done } = await options.prepare(file);
    try {
      let output = '';
      const code = await new Promise<number>((resolve) => {
        const args = nodeTestArgs({ files: [file], concurrency: 1, timeoutMs: options.timeoutMs });
        const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], cwd: options.cwd, env: { ...options.env, ...env } });
        children.add(child);
        const take = (text: string): void => {
          output += text;
          if (live) options.write(text);
        };
        // Decoded as UTF-8 by the streams: a character split between two chunks stays whole.
        child.stdout.setEncoding('utf8').on('data', take);
        child.stderr.setEncoding('utf8').on('data', take);
        child.once('close', (exitCode, signal) => {
          children.delete(child);
          resolve(exitCode ?? (signal === null ? 1 : 128));
        });
      });
      const ms = Date.now() - began;
      // The file's own summary lines are left out (the phase prints one for all its files).
      if (!live) options.write(withoutSummary(output));
      options.write(`▷ ${options.label(file)}: exit ${code}, ${(ms / 1000).toFixed(1)} s\n`);
      outcomes[index] = { file, code, ms, summary: parseSummary(output), failures: failureReport(output) };
    } finally {
      await done();
    }
  };
  const worker = async (): Promise<void> => {
    while (next < options.files.length && !interrupted) {
      const index = next++;
      await runOne(index);
    }
  };
  try {
    await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency, options.files.length)) }, () => worker()));
  } finally {
    process.removeListener('SIGINT', forward);
    process.removeListener('SIGTERM', forward);
  }
  return { outcomes: outcomes.filter((o): o is FileOutcome => o !== undefined), interrupted };
}
