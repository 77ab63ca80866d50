#!/usr/bin/env node
/**
 * The coordinator's command line: `npx coordinator <command>` against a running app (local or on
 * Azure). Results go to stdout (a job id, a result, JSON with --json); progress and messages go to
 * stderr, so `id=$(npx coordinator submit job.json)` and `npx coordinator watch $id > result.json`
 * work. The exit code says how it went (EXIT in CoordinatorClient.ts, and `--help`).
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs as parseNodeArgs, type ParseArgsConfig } from 'node:util';

import { JOB_LIMITS } from '../shared/jobs/jobLimits';
import { CliError, CoordinatorClient, EXIT } from './CoordinatorClient';
import { uploadItems } from './itemsUpload';
import { replyTarget, waitForReply } from './replyWait';

const USAGE = `Usage: coordinator <command> [options]

Commands:
  submit <file|->        submit a job: a job JSON file (or - for stdin); with --work-type, the file
                         holds the items instead (a JSON array, or one JSON value per line). Items
                         above the inline limit (48 KiB of JSON) are uploaded to the app's first job
                         input container (Azurite locally; on Azure as you, az login) and submitted
                         as itemsBlob, with upload progress; up to 64 MiB
  watch <jobId>          show a job's progress until it ends, then print its result
  status <jobId>         print a job's status (JSON)
  list                   list jobs, newest first (--status, --work-type to filter), and the
                         jobs per status (on stderr; in the JSON with --json)
  cancel <jobId>         cancel a pending or running job
  resubmit <jobId>       submit a started job's items and options again as a new job
  leader                 who leads, the terms and the instances (a key is needed where keys are on)

Options:
  --url <url>            the app's base URL (env COORDINATOR_URL; default http://localhost:7071)
  --key <key>            a function or host key (env COORDINATOR_KEY)
  --json                 print the API's JSON answer on stdout
  --file <path>          submit: the job or items file (instead of <file|->)
  --work-type <type>     submit: the items file's work type; list: only jobs of this type
  --job-id <id>          submit: the job's id (generated when absent)
  --chunk-size <n>, --attempts <n>, --deadline-seconds <n>   submit: job options
  --watch                submit, resubmit: watch the job after submitting it
  --reply-to <queue>     submit: the job's outcome goes to this reply queue (JOB_REPLY_QUEUES)
  --correlation-id <id>  submit: the correlationId the outcome carries (with --wait: generated)
  --wait                 submit with --reply-to: read the reply queue until the outcome arrives
                         (Azurite locally; on Azure as you, az login), print its result, exit as watch
  --status <status>      list: only jobs with this status
  --interval <seconds>   watch: how often to poll (default: each answer's Retry-After, else 1)
  --timeout <seconds>    watch, --wait: give up after this long (exit 14)

Exit codes:
  0  done (watch: the job completed)      2  usage: bad arguments or input file
  1  unexpected error                     3  refused by the app (invalid job, not found, ...)
  4  app unreachable or unavailable (503) 5  function key missing or wrong (401/403)
  10 watch: completed_with_errors         11 watch: failed
  12 watch: cancelled                     13 watch: rejected
  14 watch: --timeout passed while the job still ran
`;

/** How long `watch` keeps asking while the app cannot be reached or answers 503. */
const WATCH_PATIENCE_MS = 60_000;

/** Inline items up to the app's limit, less room for the id the app adds when the job has none. */
const INLINE_LIMIT_BYTES = JOB_LIMITS.maxMessageJsonBytes - 128;

const BOOLEAN_FLAGS = new Set(['json', 'watch', 'wait', 'help']);
const VALUE_FLAGS = new Set([
  'url', 'key', 'file', 'work-type', 'job-id', 'chunk-size', 'attempts', 'deadline-seconds', 'status', 'interval', 'timeout', 'reply-to', 'correlation-id',
]);

export interface Io {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown; isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
  readStdin(): Promise<string>;
}

interface Args {
  readonly command: string | undefined;
  readonly positional: readonly string[];
  readonly flags: ReadonlyMap<string, string | true>;
}

/** The options for node:util's parser: the switches and value options above, and -h for --help. */
const PARSE_OPTIONS: NonNullable<ParseArgsConfig['options']> = {
  ...Object.fromEntries([...BOOLEAN_FLAGS].map((name) => [name, { type: 'boolean' as const }])),
  ...Object.fromEntries([...VALUE_FLAGS].map((name) => [name, { type: 'string' as const }])),
  help: { type: 'boolean', short: 'h' },
};

/**
 * node:util's parser reads the arguments (`--name value`, `--name=value`, `-h`, positionals with
 * `-` for stdin, `--` ending the options) into tokens; the checks on them give the command line's
 * own messages (exit 2). Not its strict mode, which refuses any value starting with a dash: a value
 * may start with one (`--key -Ab3...`, a key can; `--chunk-size -5`, which the app refuses), one
 * starting with two is taken for a forgotten value (`--work-type --watch`); `--name=--x` passes one.
 */
export function parseArgs(argv: readonly string[]): Args {
  const { tokens } = parseNodeArgs({ args: [...argv], options: PARSE_OPTIONS, allowPositionals: true, strict: false, tokens: true });
  const flags = new Map<string, string | true>();
  const positional: string[] = [];
  for (const token of tokens) {
    if (token.kind === 'positional') positional.push(token.value);
    if (token.kind !== 'option') continue;
    const type = Object.hasOwn(PARSE_OPTIONS, token.name) ? PARSE_OPTIONS[token.name]?.type : undefined;
    if (type === undefined) throw new CliError(EXIT.usage, `Unknown option ${token.rawName}. See --help.`);
    if (type === 'boolean') {
      if (token.value !== undefined) throw new CliError(EXIT.usage, `--${token.name} takes no value.`);
      flags.set(token.name, true);
    } else {
      const { value } = token;
      if (value === undefined || value === '' || (token.inlineValue !== true && value.startsWith('--'))) throw new CliError(EXIT.usage, `--${token.name} needs a value.`);
      flags.set(token.name, value);
    }
  }
  return { command: positional[0], positional: positional.slice(1), flags };
}

function flag(args: Args, name: string): string | undefined {
  const value = args.flags.get(name);
  return typeof value === 'string' ? value : undefined;
}

function positiveNumber(args: Args, name: string, fallback: number): number {
  const text = flag(args, name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isFinite(value) || value <= 0) throw new CliError(EXIT.usage, `--${name} must be a number greater than 0, not "${text}".`);
  return value;
}

function integerOption(args: Args, name: string): number | undefined {
  const text = flag(args, name);
  if (text === undefined) return undefined;
  const value = Number(text);
  if (!Number.isInteger(value)) throw new CliError(EXIT.usage, `--${name} must be a whole number, not "${text}".`);
  return value;
}

function oneJobId(args: Args, command: string): string {
  const [jobId, extra] = args.positional;
  if (jobId === undefined || extra !== undefined) throw new CliError(EXIT.usage, `Usage: coordinator ${command} <jobId>`);
  return jobId;
}

// --- what the API answers (the parts this command line reads) ---

interface Counts {
  readonly total: number;
  readonly done: number;
  readonly failed: number;
}
interface JobView {
  readonly jobId: string;
  readonly status: string;
  readonly workType: string | null;
  readonly phase: string | null;
  readonly progress: { readonly chunks: Counts; readonly items: Counts } | null;
  readonly result?: unknown;
  readonly resultUrl?: string;
  readonly error: { readonly code: string; readonly message: string } | null;
  readonly errors?: ReadonlyArray<{ readonly code: string; readonly message: string }>;
}
interface ListEntry {
  readonly jobId: string;
  readonly status: string;
  readonly workType: string | null;
  readonly progress: { readonly items: Counts } | null;
  readonly updatedAt: string | null;
  /** Why a failed or rejected job ended so (absent from older apps). */
  readonly errorCode?: string | null;
}

const FINAL_EXIT: Readonly<Record<string, number>> = {
  completed: EXIT.ok,
  completed_with_errors: EXIT.completedWithErrors,
  failed: EXIT.failed,
  cancelled: EXIT.cancelled,
  rejected: EXIT.rejected,
};

/** `[#########-----------] 47/160 items (29%)`: a bar that fits a terminal line. */
export function progressLine(view: Pick<JobView, 'status' | 'progress' | 'phase'>, width = 30): string {
  const items = view.progress?.items;
  if (items === undefined || items.total === 0) return `${view.status}${view.phase === null ? '' : ` (${view.phase})`}: not planned yet`;
  const done = Math.min(1, items.done / items.total);
  const failed = Math.min(1 - done, items.failed / items.total);
  const doneCells = Math.floor(done * width);
  const failedCells = Math.min(width - doneCells, Math.ceil(failed * width));
  const bar = '#'.repeat(doneCells) + 'x'.repeat(failedCells) + '-'.repeat(width - doneCells - failedCells);
  const chunks = view.progress?.chunks;
  return `[${bar}] ${items.done}/${items.total} items (${Math.floor(done * 100)}%)${items.failed > 0 ? `, ${items.failed} failed` : ''}` + (chunks === undefined ? '' : `, chunks ${chunks.done}/${chunks.total}`) + ` ${view.status}`;
}

async function readInput(source: string, io: Io): Promise<string> {
  if (source === '-') return io.readStdin();
  try {
    return readFileSync(source, 'utf8');
  } catch (err) {
    throw new CliError(EXIT.usage, `Cannot read ${source}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`);
  }
}

function parseJson(text: string, source: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new CliError(EXIT.usage, `${source} is not JSON: ${(err as Error).message}`);
  }
}

/** An items file: a JSON array, or JSON Lines (one value per non-blank line). */
export function parseItems(text: string, source: string): unknown[] {
  const trimmed = text.trim();
  if (trimmed.startsWith('[')) {
    const value = parseJson(trimmed, source);
    if (Array.isArray(value)) return value;
  }
  return trimmed
    .split(/\r?\n/)
    .map((line, index) => ({ line: line.trim(), index }))
    .filter(({ line }) => line !== '')
    .map(({ line, index }) => {
      try {
        return JSON.parse(line) as unknown;
      } catch {
        throw new CliError(EXIT.usage, `${source} line ${index + 1} is not a JSON value (an items file is a JSON array or one JSON value per line).`);
      }
    });
}

async function buildSubmission(args: Args, io: Io): Promise<Record<string, unknown>> {
  const [positional, extra] = args.positional;
  const file = flag(args, 'file');
  const source = positional ?? file;
  if (source === undefined || extra !== undefined || (positional !== undefined && file !== undefined)) {
    throw new CliError(EXIT.usage, 'Usage: coordinator submit <file|-> | --file <path> [--work-type <type>] [options]');
  }
  const text = await readInput(source, io);
  const workType = flag(args, 'work-type');
  let job: Record<string, unknown>;
  if (workType !== undefined) {
    job = { workType, items: parseItems(text, source) };
  } else {
    const value = parseJson(text, source);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      throw new CliError(EXIT.usage, `${source} must hold a job object ({ "workType", "items" | "itemsBlob", "options" }); for a list of items add --work-type <type>.`);
    }
    job = { ...(value as Record<string, unknown>) };
  }
  const jobId = flag(args, 'job-id');
  if (jobId !== undefined) job.jobId = jobId;
  const options: Record<string, unknown> = { ...((job.options as Record<string, unknown> | undefined) ?? {}) };
  for (const [name, key] of [['chunk-size', 'chunkSize'], ['attempts', 'attempts'], ['deadline-seconds', 'deadlineSeconds']] as const) {
    const value = integerOption(args, name);
    if (value !== undefined) options[key] = value;
  }
  if (Object.keys(options).length > 0) job.options = options;
  const replyTo = flag(args, 'reply-to');
  if (replyTo !== undefined) job.replyTo = replyTo;
  const correlationId = flag(args, 'correlation-id') ?? (args.flags.has('wait') ? `cli-${randomBytes(8).toString('hex')}` : undefined);
  if (correlationId !== undefined) job.correlationId = correlationId;
  return job;
}

/** `submit --reply-to <queue> --wait`: the outcome read from the reply queue, printed like `watch` prints it. */
async function waitOnReply(client: CoordinatorClient, job: Record<string, unknown>, jobId: string, args: Args, io: Io): Promise<number> {
  const queue = job.replyTo as string;
  const timeoutSeconds = flag(args, 'timeout') === undefined ? 24 * 3600 : positiveNumber(args, 'timeout', 1);
  io.stderr.write(`waiting for the outcome of ${jobId} on queue ${queue}...\n`);
  const target = await replyTarget(client, queue);
  const outcome = await waitForReply(target, queue, jobId, job.correlationId as string, timeoutSeconds * 1000, positiveNumber(args, 'interval', 1) * 1000);
  if (outcome === undefined) {
    io.stderr.write(`no outcome for ${jobId} on ${queue} after ${timeoutSeconds} s.\n`);
    return EXIT.timedOut;
  }
  io.stderr.write(`${outcome.jobId}: ${outcome.status} (correlationId ${outcome.correlationId ?? 'none'})\n`);
  if (outcome.error !== null) io.stderr.write(`error ${outcome.error.code}: ${outcome.error.message}\n`);
  for (const e of outcome.errors ?? []) io.stderr.write(`  ${e.code}: ${e.message}\n`);
  if (args.flags.has('json')) io.stdout.write(`${JSON.stringify(outcome, null, 2)}\n`);
  else if (outcome.result !== undefined) io.stdout.write(`${JSON.stringify(outcome.result, null, 2)}\n`);
  else if (outcome.resultUrl !== undefined) {
    const full = await client.request<{ result?: unknown }>('GET', `/jobs/${encodeURIComponent(outcome.jobId)}/result`);
    io.stdout.write(`${JSON.stringify(full?.result ?? full, null, 2)}\n`);
  }
  return FINAL_EXIT[outcome.status] ?? EXIT.internal;
}

async function watch(client: CoordinatorClient, jobId: string, args: Args, io: Io): Promise<number> {
  // --interval, when given; else each answer's Retry-After (when to ask again), else 1 s.
  const fixedMs = flag(args, 'interval') === undefined ? undefined : positiveNumber(args, 'interval', 1) * 1000;
  const nextMs = (): number => fixedMs ?? (client.lastRetryAfterSeconds ?? 1) * 1000;
  const intervalMs = fixedMs ?? 1000;
  const timeoutSeconds = flag(args, 'timeout') === undefined ? undefined : positiveNumber(args, 'timeout', 1);
  const deadline = timeoutSeconds === undefined ? Infinity : Date.now() + timeoutSeconds * 1000;
  const tty = io.stderr.isTTY === true;
  let lastLine = '';
  let unreachableSince: number | undefined;
  for (;;) {
    let view: JobView;
    try {
      view = await client.request<JobView>('GET', `/jobs/${encodeURIComponent(jobId)}`);
      unreachableSince = undefined;
    } catch (err) {
      // A dropped connection or a 503 while watching (an instance restarting, storage busy) is asked
      // again for up to WATCH_PATIENCE_MS; a refusal (404, 401) ends the watch at once.
      if (!(err instanceof CliError && err.exitCode === EXIT.unavailable)) throw err;
      unreachableSince ??= Date.now();
      if (Date.now() - unreachableSince > WATCH_PATIENCE_MS || Date.now() + intervalMs > deadline) throw err;
      io.stderr.write(`${tty ? '\r\x1b[K' : ''}${err.message} Asking again.\n`);
      await new Promise((resolve) => setTimeout(resolve, Math.max(intervalMs, 1_000)));
      continue;
    }
    const line = progressLine(view);
    if (tty) io.stderr.write(`\r${line}\x1b[K`);
    else if (line !== lastLine) io.stderr.write(`${line}\n`);
    lastLine = line;
    const exit = FINAL_EXIT[view.status];
    if (exit !== undefined) {
      if (tty) io.stderr.write('\n');
      await printOutcome(client, view, args, io);
      return exit;
    }
    const waitMs = nextMs();
    if (Date.now() + waitMs > deadline) {
      if (tty) io.stderr.write('\n');
      io.stderr.write(`${jobId} is still ${view.status} after ${timeoutSeconds} s.\n`);
      return EXIT.timedOut;
    }
    await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
}

async function printOutcome(client: CoordinatorClient, view: JobView, args: Args, io: Io): Promise<void> {
  io.stderr.write(`${view.jobId}: ${view.status}\n`);
  if (view.error !== null) io.stderr.write(`error ${view.error.code}: ${view.error.message}\n`);
  for (const e of view.errors ?? []) io.stderr.write(`  ${e.code}: ${e.message}\n`);
  if (args.flags.has('json')) {
    io.stdout.write(`${JSON.stringify(view, null, 2)}\n`);
    return;
  }
  if (view.result !== undefined) io.stdout.write(`${JSON.stringify(view.result, null, 2)}\n`);
  else if (view.resultUrl !== undefined) {
    const full = await client.request<{ result?: unknown }>('GET', `/jobs/${encodeURIComponent(view.jobId)}/result`);
    io.stdout.write(`${JSON.stringify(full?.result ?? full, null, 2)}\n`);
  }
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, col) => Math.max(...rows.map((r) => (r[col] ?? '').length))) ?? [];
  return rows.map((r) => r.map((cell, col) => cell.padEnd(widths[col] ?? 0)).join('  ').trimEnd()).join('\n') + '\n';
}

interface Leader {
  readonly holder: string | null;
  readonly epoch: number | null;
  readonly acquiredAt: string | null;
  readonly leaseState: string;
}
interface Cluster extends Leader {
  readonly instance: { readonly id: string; readonly role: string; readonly passes: number };
  readonly terms: ReadonlyArray<{ readonly epoch: number; readonly holder: string; readonly acquiredAt: string; readonly endedAt?: string; readonly endReason?: string }>;
  readonly instances: ReadonlyArray<{ readonly id: string; readonly role: string; readonly state: string; readonly ageSeconds: number }>;
}

export async function main(argv: readonly string[], io: Io): Promise<number> {
  const args = parseArgs(argv);
  if (args.flags.has('help') || args.command === undefined || args.command === 'help') {
    (args.command === undefined && !args.flags.has('help') ? io.stderr : io.stdout).write(USAGE);
    return args.command === undefined && !args.flags.has('help') ? EXIT.usage : EXIT.ok;
  }
  const key = flag(args, 'key') ?? io.env.COORDINATOR_KEY;
  const client = new CoordinatorClient({ baseUrl: flag(args, 'url') ?? io.env.COORDINATOR_URL ?? 'http://localhost:7071', ...(key === undefined ? {} : { key }) });
  const json = args.flags.has('json');
  const print = (value: unknown): void => {
    io.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
  };

  switch (args.command) {
    case 'submit':
    case 'resubmit': {
      let job = args.command === 'submit' ? await buildSubmission(args, io) : await client.request<Record<string, unknown>>('GET', `/jobs/${encodeURIComponent(oneJobId(args, 'resubmit'))}/submission`);
      if (Array.isArray(job.items) && Buffer.byteLength(JSON.stringify(job), 'utf8') > INLINE_LIMIT_BYTES) {
        const { items, ...rest } = job;
        job = { ...rest, itemsBlob: await uploadItems(client, items as unknown[], typeof job.jobId === 'string' ? job.jobId : undefined, io) };
      }
      if (args.flags.has('wait')) {
        if (typeof job.replyTo !== 'string') throw new CliError(EXIT.usage, '--wait needs --reply-to <queue> (or a replyTo in the job file).');
        // Refused before anything is submitted when the queue is not one the app may write.
        await replyTarget(client, job.replyTo);
      }
      const accepted = await client.request<{ jobId: string; statusUrl: string; enqueued: boolean }>('POST', '/jobs', job);
      io.stderr.write(`accepted ${accepted.jobId}${accepted.enqueued ? '' : ' (already started earlier)'}: ${accepted.statusUrl}\n`);
      if (args.flags.has('wait')) return waitOnReply(client, job, accepted.jobId, args, io);
      if (args.flags.has('watch')) return watch(client, accepted.jobId, args, io);
      if (json) print(accepted);
      else io.stdout.write(`${accepted.jobId}\n`);
      return EXIT.ok;
    }
    case 'watch':
      return watch(client, oneJobId(args, 'watch'), args, io);
    case 'status':
      print(await client.request<JobView>('GET', `/jobs/${encodeURIComponent(oneJobId(args, 'status'))}`));
      return EXIT.ok;
    case 'list': {
      const query = new URLSearchParams({ counts: 'true' });
      const status = flag(args, 'status');
      const workType = flag(args, 'work-type');
      if (status !== undefined) query.set('status', status);
      if (workType !== undefined) query.set('workType', workType);
      const { jobs, counts } = await client.request<{ jobs: ListEntry[]; counts?: Record<string, number | string> }>('GET', `/jobs?${query.toString()}`);
      if (json) {
        print({ jobs, ...(counts === undefined ? {} : { counts }) });
        return EXIT.ok;
      }
      if (counts !== undefined) {
        const shown = Object.entries(counts).filter(([k, v]) => k !== 'at' && k !== 'total' && v !== 0);
        io.stderr.write(`${String(counts.total)} jobs${shown.length === 0 ? '' : `: ${shown.map(([k, v]) => `${String(v)} ${k}`).join(', ')}`}\n`);
      }
      if (jobs.length === 0) io.stderr.write('no jobs\n');
      else {
        const rows = jobs.map((j) => [
          j.jobId,
          j.status,
          j.workType ?? '-',
          j.progress === null ? '-' : `${j.progress.items.done}/${j.progress.items.total}`,
          j.updatedAt ?? '-',
          j.errorCode ?? '',
        ]);
        io.stdout.write(table([['JOB', 'STATUS', 'TYPE', 'ITEMS', 'UPDATED', 'ERROR'], ...rows]));
      }
      return EXIT.ok;
    }
    case 'cancel': {
      const jobId = oneJobId(args, 'cancel');
      const answer = await client.request<{ jobId: string; status: string }>('DELETE', `/jobs/${encodeURIComponent(jobId)}`);
      if (json) print(answer);
      else io.stdout.write(`${answer.jobId} ${answer.status}\n`);
      return EXIT.ok;
    }
    case 'leader': {
      // The keyed view has the history and the instances. Where keys are off (locally), it opens
      // without one; where they are on and none was given, the public record, and what is missing.
      let cluster: Cluster | undefined;
      try {
        cluster = await client.request<Cluster>('GET', '/cluster');
      } catch (err) {
        if (!(err instanceof CliError && err.exitCode === EXIT.unauthorized && !client.hasKey)) throw err;
        io.stderr.write('terms and instances need a function key: pass --key or set COORDINATOR_KEY\n');
      }
      const view: Leader = cluster ?? (await client.request<Leader>('GET', '/leader'));
      if (json) {
        print(view);
        return EXIT.ok;
      }
      io.stdout.write(`leader ${view.holder ?? '(none yet)'}  epoch ${view.epoch ?? '-'}  since ${view.acquiredAt ?? '-'}  lease ${view.leaseState}\n`);
      if (cluster !== undefined) {
        const terms = cluster.terms.slice(0, 10).map((t) => [String(t.epoch), t.holder, t.acquiredAt, t.endedAt === undefined ? '-' : `${t.endedAt} (${t.endReason ?? ''})`]);
        io.stdout.write(`\nterms\n${table([['EPOCH', 'HOLDER', 'FROM', 'ENDED'], ...terms])}`);
        const instances = cluster.instances.map((i) => [i.id, i.role, i.state, `${i.ageSeconds} s ago`]);
        io.stdout.write(`\ninstances\n${table([['INSTANCE', 'ROLE', 'STATE', 'SEEN'], ...instances])}`);
      }
      return EXIT.ok;
    }
    default:
      throw new CliError(EXIT.usage, `Unknown command "${args.command}". See --help.`);
  }
}

function readStdin(): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    process.stdin.on('data', (chunk: Buffer) => chunks.push(chunk));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

/** The `coordinator` command (bin/coordinator.js): runs main on this process's arguments and sets the exit code. */
export function runCli(): void {
  main(process.argv.slice(2), { stdout: process.stdout, stderr: process.stderr, env: process.env, readStdin }).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      if (err instanceof CliError) {
        process.stderr.write(`coordinator: ${err.message}\n`);
        process.exitCode = err.exitCode;
      } else {
        process.stderr.write(`coordinator: unexpected error: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exitCode = EXIT.internal;
      }
    },
  );
}

if (require.main === module) runCli();
