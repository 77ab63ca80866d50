/**
 * The chaos checker: reads a run's record and lists every violation of what the app promises,
 * each with the lines that prove it. It reports only what the record proves, never a suspicion:
 * an act counts as "after a newer epoch" only when the earliest instant it can have happened (the
 * moment its storage write left the proxy) is later than the latest instant by which the newer
 * epoch is known to have existed (the acquirer's own log line, or a read of the lease blob).
 *
 * Violations:
 * - `lost-job`: an accepted job that never reached a final status.
 * - `wrong-result`: a final status or result other than the known exact one (an item lost or
 *   counted twice shows in `count`/`sum`).
 * - `stale-epoch-act`: an orchestration created, or a submission rejected, by epoch E after an
 *   epoch above E existed.
 * - `job-started-twice`: two create-once writes of one job's orchestration both succeeded.
 * - `history-replaced`: a finished job whose start record names a start whose instance does not
 *   hold that start's run (a late start of another replaced its history), or holds a run that stood
 *   down: the history shown is not the run that did the work.
 * - `decreasing-epoch`: a read of the lease blob showed a lower epoch than a read that finished
 *   before it began.
 * - `duplicate-epoch`: one epoch acquired by two processes.
 * - `two-leaders`: a process answered "leader" for epoch E to a request sent after an epoch above E
 *   existed (so at that moment two processes believed they led).
 * - `unexpected-exit`: a process ended without the harness sending the signal, except an extensions
 *   host that stopped itself on a bare SocketException while the harness had its storage reset or
 *   cut (`storageFaultStop`: the fault's doing, through .NET and the WebJobs SDK, not the app's).
 * - `slow-failover`: after the leader was killed (SIGKILL, at a step or not), the next leader
 *   acquired more than L + 5 s later (FAILOVER_BOUNDS); after its graceful stop (SIGTERM: `term`,
 *   `restart`), more than 3 s later.
 */
import {
  type ChaosRecord,
  type FaultRecord,
  type JobOutcome,
  type LogEntry,
  type ProcessExit,
  type ProcessRef,
  type StorageWrite,
} from './ChaosRecord';

export type ViolationKind =
  | 'lost-job'
  | 'wrong-result'
  | 'stale-epoch-act'
  | 'job-started-twice'
  | 'history-replaced'
  | 'missing-reply'
  | 'decreasing-epoch'
  | 'duplicate-epoch'
  | 'two-leaders'
  | 'unexpected-exit'
  | 'slow-failover';

export interface Violation {
  readonly kind: ViolationKind;
  readonly at: number;
  readonly summary: string;
  readonly evidence: readonly string[];
}

export interface Failover {
  readonly fromEpoch: number;
  readonly fromHolder: string;
  readonly toEpoch: number;
  readonly toHolder: string;
  /** What ended the old term: a fault's kind, or the elector's own `lost`/`released`/`stalled`. */
  readonly cause: string;
  readonly faultId?: string;
  readonly endedAt: number;
  readonly acquiredAt: number;
  readonly gapMs: number;
}

/** `12:03:04.567` in local time: the runs are read by people on this machine. */
export function clock(at: number): string {
  const d = new Date(at);
  const pad = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function who(ref: ProcessRef): string {
  return `${ref.holder} (pid ${ref.pid})`;
}

function logLine(entry: LogEntry): string {
  return `${clock(entry.at)} ${who(entry)} ${entry.event} ${JSON.stringify(entry.fields)}`;
}

function epochOf(entry: LogEntry): number | undefined {
  const epoch = entry.fields.epoch;
  return typeof epoch === 'number' ? epoch : undefined;
}

/** For each epoch, the earliest instant by which the record proves it existed, with the proof. */
export class EpochTimeline {
  readonly #known = new Map<number, { at: number; proof: string }>();

  constructor(record: ChaosRecord) {
    for (const entry of record.logs) {
      const epoch = epochOf(entry);
      if (entry.event === 'leader.acquired' && epoch !== undefined) this.#note(epoch, entry.at, `log ${logLine(entry)}`);
    }
    for (const read of record.leaseReads) {
      if (read.epoch !== undefined) this.#note(read.epoch, read.receivedAt, `lease blob read at ${clock(read.receivedAt)}: epoch ${read.epoch}, holder ${read.holder ?? '?'}`);
    }
    for (const poll of record.leaderPolls) {
      if (typeof poll.leaseEpoch === 'number') {
        this.#note(poll.leaseEpoch, poll.receivedAt, `GET /api/leader of ${who(poll)} answered at ${clock(poll.receivedAt)}: lease epoch ${poll.leaseEpoch}, holder ${poll.leaseHolder ?? '?'}`);
      }
    }
  }

  #note(epoch: number, at: number, proof: string): void {
    const known = this.#known.get(epoch);
    if (known === undefined || at < known.at) this.#known.set(epoch, { at, proof });
  }

  /** The earliest proof that an epoch above `epoch` existed, if any. */
  newerThan(epoch: number): { epoch: number; at: number; proof: string } | undefined {
    let best: { epoch: number; at: number; proof: string } | undefined;
    for (const [e, known] of this.#known) {
      if (e > epoch && (best === undefined || known.at < best.at)) best = { epoch: e, ...known };
    }
    return best;
  }

  epochs(): number[] {
    return [...this.#known.keys()].sort((a, b) => a - b);
  }
}

export function checkRun(record: ChaosRecord, bounds: FailoverBounds = FAILOVER_BOUNDS): Violation[] {
  const timeline = new EpochTimeline(record);
  const violations = [
    ...checkJobs(record, timeline),
    ...checkEpochs(record),
    ...checkLeaderAnswers(record, timeline),
    ...checkExits(record),
    ...checkFailovers(record, bounds),
  ];
  return violations.sort((a, b) => a.at - b.at);
}

/** How soon a new leader must act after the leader's end (docs/leader-election.md's goals, at L = 15 s). */
export interface FailoverBounds {
  /** After a kill: the dead leader's lease (L) plus 5 s. */
  readonly afterKillMs: number;
  /** After a graceful stop, which releases the lease. */
  readonly afterStopMs: number;
}

export const FAILOVER_BOUNDS: FailoverBounds = { afterKillMs: 15_000 + 5_000, afterStopMs: 3_000 };

function checkFailovers(record: ChaosRecord, bounds: FailoverBounds): Violation[] {
  return failovers(record).flatMap((f) => {
    const kind = f.cause.split('@')[0];
    const bound = kind === 'kill' ? bounds.afterKillMs : kind === 'term' || kind === 'restart' ? bounds.afterStopMs : undefined;
    if (bound === undefined || f.gapMs <= bound) return [];
    return [
      {
        kind: 'slow-failover' as const,
        at: f.acquiredAt,
        summary: `after ${f.cause} of ${f.fromHolder} (epoch ${f.fromEpoch}) the next leader, ${f.toHolder}, acquired ${(f.gapMs / 1000).toFixed(1)} s later (bound ${(bound / 1000).toFixed(0)} s)`,
        evidence: [`ended ${clock(f.endedAt)}, acquired ${clock(f.acquiredAt)} (epoch ${f.toEpoch})`],
      },
    ];
  });
}

function sameProcess(a: ProcessRef, b: ProcessRef): boolean {
  return a.instance === b.instance && a.gen === b.gen;
}

function faultsOn(record: ChaosRecord, ref: ProcessRef): FaultRecord[] {
  return record.faults.filter((f) => f.outcome === 'injected' && f.target !== undefined && sameProcess(f.target, ref));
}

function describeFault(fault: FaultRecord): string {
  const p = fault.planned;
  const span = fault.endedAt === undefined ? '' : ` until ${clock(fault.endedAt)}`;
  const step = p.step === undefined ? '' : ` at step ${p.step}${fault.jobId === undefined ? '' : ` of ${fault.jobId}`}`;
  const role = fault.role === undefined ? '' : ` (${fault.role}${fault.epoch === undefined ? '' : `, epoch ${fault.epoch}`})`;
  return `fault ${p.id}: ${p.kind}${step} of ${fault.target === undefined ? '?' : who(fault.target)}${role} at ${clock(fault.at ?? 0)}${span}`;
}

function jobLogLines(record: ChaosRecord, jobId: string, limit = 12): string[] {
  const instanceId = `job-${jobId}`;
  return record.logs
    .filter((e) => e.fields.jobId === jobId || e.fields.instanceId === instanceId)
    .slice(-limit)
    .map((e) => `log ${logLine(e)}`);
}

function writeLine(write: StorageWrite): string {
  const answer = write.status === undefined ? 'no answer seen' : `answered ${write.status} at ${clock(write.answeredAt ?? 0)}`;
  return `${write.kind} of ${write.jobId} by ${who(write)}: left the proxy at ${clock(write.forwardedAt)}, ${answer}`;
}

function deepEqual(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function checkJobs(record: ChaosRecord, timeline: EpochTimeline): Violation[] {
  const violations: Violation[] = [];
  for (const job of record.jobs) {
    if (!job.accepted) continue;
    const writes = record.writes.filter((w) => w.jobId === job.jobId);
    if (job.final === undefined) {
      violations.push({
        kind: 'lost-job',
        at: record.endedAt,
        summary: `job ${job.jobId} (${job.via}, ${job.source}, ${job.itemCount} items) never finished: last seen ${job.lastSeen?.status ?? 'never'}, ${Math.round((record.endedAt - record.faultPhaseEndedAt) / 1000)} s after the last fault ended`,
        evidence: [
          `submitted at ${clock(job.submittedAt)}${job.faultId === undefined ? '' : `, carrying the trigger of fault ${job.faultId}`}`,
          ...(job.lastSeen === undefined ? [] : [`last GET /api/jobs/${job.jobId}: ${JSON.stringify(job.lastSeen)}`]),
          ...(job.durableStatus === undefined ? [] : [`Durable status: ${JSON.stringify(job.durableStatus)}`]),
          ...record.faults.filter((f) => f.jobId === job.jobId).map(describeFault),
          ...writes.map(writeLine),
          ...jobLogLines(record, job.jobId),
        ],
      });
      continue;
    }
    const wrong = wrongness(job);
    if (wrong !== undefined) {
      violations.push({
        kind: 'wrong-result',
        at: job.finishedAt ?? record.endedAt,
        summary: `job ${job.jobId} (${job.via}, ${job.source}, ${job.itemCount} items): ${wrong}`,
        evidence: [`final GET /api/jobs/${job.jobId}: ${JSON.stringify(job.final)}`, `expected: ${JSON.stringify(job.expect)}`, ...jobLogLines(record, job.jobId)],
      });
    }
    const started = writes.filter((w) => w.kind === 'instance-create' && w.status !== undefined && w.status >= 200 && w.status < 300);
    if (started.length > 1) {
      violations.push({
        kind: 'job-started-twice',
        at: started[1]?.forwardedAt ?? record.endedAt,
        summary: `job ${job.jobId}: its orchestration was created ${started.length} times`,
        evidence: [...started.map(writeLine), ...jobLogLines(record, job.jobId)],
      });
    }
    const replaced = historyReplaced(job);
    if (replaced !== undefined) {
      violations.push({
        kind: 'history-replaced',
        at: job.finishedAt ?? record.endedAt,
        summary: `job ${job.jobId}: ${replaced}`,
        evidence: [`start record and its instance: ${JSON.stringify(job.workingRun)}`, ...jobLogLines(record, job.jobId)],
      });
    }
    // Every job names a reply queue: its outcome, whatever it is, must have arrived there (at least once).
    const replies = job.replies ?? [];
    if (!replies.some((r) => r.status === job.final?.status && r.jobId === job.final?.jobId)) {
      violations.push({
        kind: 'missing-reply',
        at: job.finishedAt ?? record.endedAt,
        summary: `job ${job.jobId} (${job.via}, ${job.source}) ended ${job.final.status} but its reply queue never got that outcome`,
        evidence: [`replies seen with correlationId ${job.label}: ${JSON.stringify(replies)}`, ...jobLogLines(record, job.jobId)],
      });
    }
    const stale = staleAct(record, job, writes, timeline);
    if (stale !== undefined) violations.push(stale);
  }
  return violations;
}

/** Why the job's named instance is not the run that did its work, or undefined when it is (or unknown). */
function historyReplaced(job: JobOutcome): string | undefined {
  const run = job.workingRun;
  if (run === undefined || run.unreadable !== undefined || job.final === undefined) return undefined;
  if (run.runtimeStatus === undefined) return `the instance ${run.instanceId} its start record names does not exist`;
  if (run.instanceStartId !== run.startId) {
    return `the instance ${run.instanceId} holds start ${String(run.instanceStartId)}, not ${run.startId} that its start record names (a late start replaced its history)`;
  }
  if (run.stoodDown === true) return `the instance ${run.instanceId} of the named start ${run.startId} stood down: no history shows the run that did the work`;
  return undefined;
}

function wrongness(job: JobOutcome): string | undefined {
  const final = job.final;
  if (final === undefined) return undefined;
  if (final.status !== job.expect.status) {
    const error = final.error === null || final.error === undefined ? '' : ` (${final.error.code ?? ''}: ${final.error.message ?? ''})`;
    return `ended ${final.status}${error}, expected ${job.expect.status}`;
  }
  if (job.expect.status === 'rejected') {
    return final.error?.code === job.expect.code ? undefined : `rejected with ${final.error?.code ?? 'no code'}, expected ${job.expect.code}`;
  }
  if (!deepEqual(final.result, job.expect.result)) return `result ${JSON.stringify(final.result)}, expected ${JSON.stringify(job.expect.result)}`;
  const items = final.progress?.items;
  const n = job.expect.result.count;
  if (items !== undefined && (items.total !== n || items.done !== n || items.failed !== 0)) {
    return `progress ${JSON.stringify(items)}, expected ${n} items done and none failed`;
  }
  return undefined;
}

/** The act of the job's leader (start or rejection) and the earliest instant it can have landed. */
function staleAct(record: ChaosRecord, job: JobOutcome, writes: readonly StorageWrite[], timeline: EpochTimeline): Violation | undefined {
  const final = job.final ?? job.lastSeen;
  const epoch = final?.epoch;
  if (final === undefined || typeof epoch !== 'number') return undefined;
  const rejected = final.status === 'rejected';
  const kind = rejected ? 'record-create' : 'instance-create';
  // The write that landed is one of those not known to have failed; none of them left before the earliest.
  const candidates = writes.filter((w) => w.kind === kind && (w.status === undefined || (w.status >= 200 && w.status < 300)));
  if (candidates.length === 0) return undefined;
  const earliest = candidates.reduce((a, b) => (b.forwardedAt < a.forwardedAt ? b : a));
  const createdAt = final.createdAt === null || final.createdAt === undefined ? Number.NaN : Date.parse(final.createdAt);
  const landedNoEarlierThan = Number.isFinite(createdAt) ? Math.max(earliest.forwardedAt, createdAt) : earliest.forwardedAt;
  const newer = timeline.newerThan(epoch);
  if (newer === undefined || !(newer.at < landedNoEarlierThan)) return undefined;
  const actor = earliest;
  const act = rejected ? 'rejected the submission' : 'created the orchestration';
  const lost = record.logs.filter((e) => sameProcess(e, actor) && ['leader.lost', 'leader.released', 'leader.stalled'].includes(e.event) && epochOf(e) === epoch);
  return {
    kind: 'stale-epoch-act',
    at: landedNoEarlierThan,
    summary: `job ${job.jobId}: ${who(actor)} ${act} with epoch ${epoch} no earlier than ${clock(landedNoEarlierThan)}, ${((landedNoEarlierThan - newer.at) / 1000).toFixed(1)} s after epoch ${newer.epoch} existed`,
    evidence: [
      ...candidates.map(writeLine),
      `the job's ${rejected ? 'record' : 'orchestration'} carries epoch ${epoch} (GET /api/jobs/${job.jobId}: status ${final.status}, createdAt ${final.createdAt ?? '?'})`,
      `epoch ${newer.epoch} existed by ${clock(newer.at)}: ${newer.proof}`,
      ...lost.map((e) => `log ${logLine(e)}`),
      // The faults that held the actor while the newer epoch began.
      ...faultsOn(record, actor)
        .filter((f) => (f.at ?? 0) <= landedNoEarlierThan && (f.endedAt ?? Number.POSITIVE_INFINITY) >= newer.at)
        .map(describeFault),
      ...jobLogLines(record, job.jobId),
    ],
  };
}

function checkEpochs(record: ChaosRecord): Violation[] {
  const violations: Violation[] = [];
  // One holder per epoch: the acquirers' own log lines, the harness's lease reads, the instances' reads.
  const holders = new Map<number, Map<string, string>>();
  const note = (epoch: number, holder: string, proof: string): void => {
    const byHolder = holders.get(epoch) ?? new Map<string, string>();
    if (!byHolder.has(holder)) byHolder.set(holder, proof);
    holders.set(epoch, byHolder);
  };
  for (const entry of record.logs) {
    const epoch = epochOf(entry);
    if (entry.event === 'leader.acquired' && epoch !== undefined) note(epoch, entry.holder, `log ${logLine(entry)}`);
  }
  for (const read of record.leaseReads) {
    if (read.epoch !== undefined && read.holder !== undefined) note(read.epoch, read.holder, `lease blob read at ${clock(read.receivedAt)}: epoch ${read.epoch}, holder ${read.holder}`);
  }
  for (const [epoch, byHolder] of holders) {
    if (byHolder.size > 1) {
      violations.push({
        kind: 'duplicate-epoch',
        at: record.startedAt,
        summary: `epoch ${epoch} has ${byHolder.size} holders: ${[...byHolder.keys()].join(', ')}`,
        evidence: [...byHolder.values()],
      });
    }
  }

  // The harness's reads of the lease blob in time order: one that began after another ended must not
  // see less. (The instances' own answers are not used here: they may serve a cached read.)
  const reads = record.leaseReads.flatMap((r) =>
    r.epoch === undefined ? [] : [{ sentAt: r.sentAt, receivedAt: r.receivedAt, epoch: r.epoch, proof: `lease blob read ${clock(r.sentAt)}-${clock(r.receivedAt)}: epoch ${r.epoch}, holder ${r.holder ?? '?'}` }],
  );
  const byEnd = [...reads].sort((a, b) => a.receivedAt - b.receivedAt);
  const bySend = [...reads].sort((a, b) => a.sentAt - b.sentAt);
  let i = 0;
  let highest: (typeof reads)[number] | undefined;
  for (const read of bySend) {
    while (i < byEnd.length && (byEnd[i] as (typeof reads)[number]).receivedAt < read.sentAt) {
      const done = byEnd[i] as (typeof reads)[number];
      if (highest === undefined || done.epoch > highest.epoch) highest = done;
      i += 1;
    }
    if (highest !== undefined && read.epoch < highest.epoch) {
      violations.push({
        kind: 'decreasing-epoch',
        at: read.sentAt,
        summary: `the lease blob showed epoch ${read.epoch} after it had shown ${highest.epoch}`,
        evidence: [highest.proof, read.proof],
      });
      highest = undefined;
    }
  }
  return violations;
}

function checkLeaderAnswers(record: ChaosRecord, timeline: EpochTimeline): Violation[] {
  const violations: Violation[] = [];
  const reported = new Set<string>();
  for (const poll of record.leaderPolls) {
    if (poll.role !== 'leader' || typeof poll.epoch !== 'number') continue;
    const newer = timeline.newerThan(poll.epoch);
    if (newer === undefined || !(newer.at < poll.sentAt)) continue;
    const key = `${poll.instance}#${poll.gen}#${poll.epoch}`;
    if (reported.has(key)) continue;
    reported.add(key);
    violations.push({
      kind: 'two-leaders',
      at: poll.sentAt,
      summary: `${who(poll)} answered "leader" for epoch ${poll.epoch} to a request sent at ${clock(poll.sentAt)}, ${((poll.sentAt - newer.at) / 1000).toFixed(1)} s after epoch ${newer.epoch} existed`,
      evidence: [
        `GET /api/leader of ${who(poll)} sent ${clock(poll.sentAt)}, answered ${clock(poll.receivedAt)}: role leader, epoch ${poll.epoch}`,
        `epoch ${newer.epoch} existed by ${clock(newer.at)}: ${newer.proof}`,
        ...faultsOn(record, poll)
          .filter((f) => (f.at ?? 0) <= poll.sentAt)
          .map(describeFault),
      ],
    });
  }
  return violations;
}

/**
 * The storage fault an extensions host's own stop is owed to, if it is one. The host stops itself
 * (exit code 1) on an error that escapes the WebJobs SDK, as the Functions host does (it logs "Host
 * is shutting down" and the platform starts the instance again; exthost/TimeoutHandler.cs); a
 * connection the harness resets can end that way: .NET's HTTP stack threw a reset met while it read
 * the new connection's remote end point as a bare SocketException (107, "Transport endpoint is not
 * connected"), which neither Azure.Core nor the queue extension's listener catches (the flex-shape
 * short run, a worker instance 3.1 s into a `reset` of its storage). Owed to the fault when the
 * host's error is a SocketException and a reset or blackhole of that process's storage was on at
 * its exit (or ended at most 2 s before it).
 */
export function storageFaultStop(record: ChaosRecord, exit: ProcessExit): FaultRecord | undefined {
  if (exit.hostError === undefined || !exit.hostError.startsWith('System.Net.Sockets.SocketException')) return undefined;
  return faultsOn(record, exit).find(
    (f) => (f.planned.kind === 'reset' || f.planned.kind === 'blackhole') && f.at !== undefined && f.at <= exit.at && exit.at <= (f.endedAt ?? exit.at) + 2_000,
  );
}

function checkExits(record: ChaosRecord): Violation[] {
  return record.exits
    .filter((exit) => !exit.expected && storageFaultStop(record, exit) === undefined)
    .map((exit) => ({
      kind: 'unexpected-exit' as const,
      at: exit.at,
      summary: `${who(exit)} of ${exit.instance} exited on its own at ${clock(exit.at)} (${exit.signal ?? `code ${String(exit.code)}`})`,
      evidence: [...faultsOn(record, exit).map(describeFault), ...exit.lastLines.map((l) => `output: ${l}`)],
    }));
}

/** Every change of leader, with what ended the old term and how long the cluster went without one. */
export function failovers(record: ChaosRecord): Failover[] {
  const acquired = record.logs
    .filter((e) => e.event === 'leader.acquired' && epochOf(e) !== undefined)
    .sort((a, b) => (epochOf(a) ?? 0) - (epochOf(b) ?? 0));
  const result: Failover[] = [];
  for (let i = 1; i < acquired.length; i++) {
    const prev = acquired[i - 1] as LogEntry;
    const next = acquired[i] as LogEntry;
    const fromEpoch = epochOf(prev) ?? 0;
    const fault = record.faults
      .filter((f) => f.outcome === 'injected' && f.target !== undefined && sameProcess(f.target, prev) && (f.at ?? 0) >= prev.at && (f.at ?? 0) <= next.at)
      .sort((a, b) => (a.at ?? 0) - (b.at ?? 0))[0];
    const own = record.logs
      .filter((e) => sameProcess(e, prev) && ['leader.lost', 'leader.released', 'leader.stalled'].includes(e.event) && epochOf(e) === fromEpoch)
      .sort((a, b) => a.at - b.at)[0];
    let endedAt: number;
    let cause: string;
    if (fault?.at !== undefined && (own === undefined || fault.at <= own.at)) {
      endedAt = fault.at;
      cause = fault.planned.step === undefined ? fault.planned.kind : `${fault.planned.kind}@${fault.planned.step}`;
    } else if (own !== undefined) {
      endedAt = own.at;
      cause = own.event.replace('leader.', '');
    } else {
      continue;
    }
    result.push({
      fromEpoch,
      fromHolder: prev.holder,
      toEpoch: epochOf(next) ?? 0,
      toHolder: next.holder,
      cause,
      ...(fault?.at === endedAt ? { faultId: fault.planned.id } : {}),
      endedAt,
      acquiredAt: next.at,
      gapMs: next.at - endedAt,
    });
  }
  return result;
}
