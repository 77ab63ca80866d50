/**
 * The log events operators query (docs/operations.md, "Observability": the Kusto queries read these names and
 * fields): leader changes, passes, the job lifecycle and chunk outcomes. Each is one JSON line
 * `{ ts, level, component, event, ...fields }` (log.ts). The fields listed here are the ones every
 * line of the event carries; some carry more (`optional`). Tests hold the app's real output and the
 * docs' queries to this list, so a renamed field breaks a test, not a dashboard.
 */
import { type LogLevel } from './log';

export type FieldType = 'string' | 'number' | 'boolean' | 'object';

export interface EventSpec {
  readonly level: LogLevel;
  readonly what: string;
  readonly fields: Readonly<Record<string, FieldType>>;
  readonly optional?: Readonly<Record<string, FieldType>>;
}

export const OPERATOR_EVENTS: Readonly<Record<string, EventSpec>> = {
  'leader.acquired': {
    level: 'info',
    what: 'an instance became leader (a new term and epoch)',
    fields: { holder: 'string', epoch: 'number', blob: 'string', leaseSeconds: 'number' },
    optional: { previousHolder: 'string', previousEpoch: 'number', takeoverWaitMs: 'number' },
  },
  'leader.released': {
    level: 'info',
    what: 'a leader gave its lease back (graceful stop, stall)',
    fields: { holder: 'string', epoch: 'number' },
  },
  'leader.lost': {
    level: 'warn',
    what: 'a term ended without a release: lease lost, or renew deadline passed',
    fields: { holder: 'string', epoch: 'number', reason: 'string', heldMs: 'number' },
    optional: { error: 'object' },
  },
  'leader.stalled': {
    level: 'warn',
    what: 'the watchdog stepped a leader down',
    fields: { holder: 'string', epoch: 'number', heldMs: 'number', sinceProgressMs: 'number' },
  },
  'leader.passes': {
    level: 'info',
    what: 'coordination passes of the last minute (a metric)',
    fields: { epoch: 'number', passes: 'number', failed: 'number', meanMs: 'number', maxMs: 'number', windowSeconds: 'number' },
  },
  'leader.pass_failed': {
    level: 'error',
    what: 'a coordination pass threw',
    fields: { epoch: 'number', code: 'string' },
    optional: { error: 'object' },
  },
  'leader.pass_slow': {
    level: 'warn',
    what: 'a coordination pass took 5 s or more (SLOW_PASS_MS), with the time of each of its parts',
    fields: { totalMs: 'number', ms: 'object', epoch: 'number' },
    optional: { received: 'number', checked: 'number' },
  },
  'job.submitted': {
    level: 'info',
    what: 'an HTTP submission was queued, with the time (ms) of its reads with its record, and of its index row with its send',
    fields: { jobId: 'string', workType: 'string', via: 'string' },
    optional: { ms: 'object' },
  },
  'intake.started': {
    level: 'info',
    what: "the leader started a job's orchestration",
    fields: { jobId: 'string', workType: 'string', epoch: 'number' },
    optional: { firstWindow: 'boolean', ms: 'object' },
  },
  'intake.start_repaired': {
    level: 'warn',
    what: 'the start checks started a recorded start again under the next instance id',
    fields: { jobId: 'string', reason: 'string', instanceId: 'string', startId: 'string', previousEpoch: 'number', epoch: 'number' },
    optional: { previousStartId: 'string' },
  },
  'intake.first_window_failed': {
    level: 'warn',
    what:
      "staging a small job at intake, or sending its first window, failed: the plan stages it, or sends the window's " +
      'chunks again once they are unclaimed (15 s)',
    fields: { jobId: 'string', stage: 'string', error: 'object', epoch: 'number' },
  },
  'intake.rejected': {
    level: 'warn',
    what: 'the leader refused a submission (recorded, original in the poison queue)',
    fields: { jobId: 'string', code: 'string', reason: 'string', epoch: 'number' },
    optional: { submittedJobId: 'string', messageId: 'string' },
  },
  'intake.queue_unreadable': {
    level: 'error',
    what:
      'the jobs queue holds messages no receive returns (on Azurite: a message with a raw control character); ' +
      'the action says what to do',
    fields: { code: 'string', queue: 'string', messages: 'number', since: 'string', action: 'string' },
  },
  'job.planned': {
    level: 'info',
    what: 'a job was cut into chunks and dispatched',
    fields: { jobId: 'string', items: 'number', chunks: 'number', epoch: 'number' },
  },
  'job.cancel_requested': { level: 'info', what: 'a cancel arrived through the API', fields: { jobId: 'string', started: 'boolean' } },
  'workitem.done': {
    level: 'info',
    what: 'a worker wrote a chunk result',
    fields: {
      jobId: 'string',
      workType: 'string',
      chunk: 'number',
      items: 'number',
      itemsFailed: 'number',
      durationMs: 'number',
      dequeueCount: 'number',
      epoch: 'number',
    },
  },
  'workitem.chunk_failed': {
    level: 'error',
    what: 'a chunk was recorded failed on its last attempt',
    fields: { jobId: 'string', workType: 'string', chunk: 'number', durationMs: 'number', dequeueCount: 'number', error: 'object' },
  },
  'job.resume_requested': {
    level: 'warn',
    what:
      'the leader asked a job run that had not moved for 15 s (or twice the start -> plan lag), and whose call holds no lease, ' +
      'to call its current activity again',
    fields: {
      jobId: 'string',
      instanceId: 'string',
      idleMs: 'number',
      stalledAfterMs: 'number',
      generation: 'number',
      wait: 'number',
      phase: 'string',
      epoch: 'number',
    },
    optional: { hint: 'string' },
  },
  'job.aggregated': {
    level: 'info',
    what: 'a job finished (its final status)',
    fields: { jobId: 'string', status: 'string', chunks: 'object', items: 'object', epoch: 'number' },
  },
};

/** What is wrong with one parsed log line against the catalogue (empty when nothing). */
export function eventShapeProblems(line: Readonly<Record<string, unknown>>): string[] {
  const problems: string[] = [];
  for (const key of ['ts', 'level', 'component', 'event']) {
    if (typeof line[key] !== 'string') problems.push(`${key} is not a string`);
  }
  const spec = OPERATOR_EVENTS[String(line.event)];
  if (spec === undefined) return problems;
  if (line.level !== spec.level) problems.push(`${String(line.event)}: level ${String(line.level)}, expected ${spec.level}`);
  const typeOf = (v: unknown): string => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
  for (const [field, type] of Object.entries(spec.fields)) {
    if (typeOf(line[field]) !== type) problems.push(`${String(line.event)}.${field}: ${typeOf(line[field])}, expected ${type}`);
  }
  for (const [field, type] of Object.entries(spec.optional ?? {})) {
    if (field in line && typeOf(line[field]) !== type) {
      problems.push(`${String(line.event)}.${field}: ${typeOf(line[field])}, expected ${type}`);
    }
  }
  return problems;
}
