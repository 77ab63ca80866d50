/**
 * The text a chaos run ends with: the run, every fault (when, what, on whom, for how long), every
 * job, every failover with its gap, the process exits, and every violation with its evidence.
 */
import { type ChaosRecord, type FaultRecord } from './ChaosRecord';
import { clock, type Failover, storageFaultStop, type Violation, who } from './checkRun';

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
}

function faultLine(fault: FaultRecord): string {
  const p = fault.planned;
  const what = p.step === undefined ? `${p.kind} ${p.target}` : `${p.kind}@${p.step}`;
  if (fault.outcome !== 'injected') return `  ${p.id.padEnd(4)} ${'-'.padEnd(12)} ${what.padEnd(24)} ${fault.outcome}: ${fault.note ?? ''}`;
  const target = fault.target === undefined ? '?' : who(fault.target);
  const role = `${fault.role ?? '?'}${fault.epoch === undefined ? '' : ` epoch ${fault.epoch}`}`;
  const length = p.kind === 'kill' || p.kind === 'term' ? `down ${secs(p.durationMs)}` : p.kind === 'restart' ? 'restarted' : `for ${secs(p.durationMs)}`;
  const job = fault.jobId === undefined ? '' : ` of ${fault.jobId}`;
  const back = fault.endedAt === undefined ? '' : `, back ${clock(fault.endedAt)}`;
  return `  ${p.id.padEnd(4)} ${clock(fault.at ?? 0)} ${(what + job).padEnd(24)} ${target} (${role}) ${length}${back}`;
}

export function formatSummary(record: ChaosRecord, violations: readonly Violation[], changes: readonly Failover[], runDir: string): string {
  const out: string[] = [];
  const apps =
    record.flex === true
      ? "one app (one host id) in Flex Consumption's shape (an instance per scale group: timer-1, durable-1, http-1, worker-1, worker-2)"
      : record.separateApps
        ? 'separate apps (a host id each)'
        : 'one app (one host id)';
  const host = record.host === 'extensions' ? 'extensions host' : 'development host';
  out.push(`Chaos run: ${record.mode} mode, seed ${record.seed}, ${record.instances} instances, ${apps}, on the ${host}`);
  out.push(
    `  started ${clock(record.startedAt)}, faults ${clock(record.faultPhaseStartedAt)}-${clock(record.faultPhaseEndedAt)} (${secs(record.faultPhaseEndedAt - record.faultPhaseStartedAt)}), ended ${clock(record.endedAt)}, total ${secs(record.endedAt - record.startedAt)}`,
  );
  out.push(`  logs and record: ${runDir} (instance-N.log, record.json, summary.txt)`);
  out.push(`  repeat its plan: npm run chaos -- ${record.repeatArgs}`);

  const injected = record.faults.filter((f) => f.outcome === 'injected');
  const count = (outcome: FaultRecord['outcome']): number => record.faults.filter((f) => f.outcome === outcome).length;
  out.push('', `Faults: ${record.faults.length} planned, ${injected.length} injected, ${count('skipped')} skipped, ${count('not-fired')} step faults not fired`);
  for (const fault of record.faults) out.push(faultLine(fault));

  const finished = record.jobs.filter((j) => j.final !== undefined);
  const byStatus = new Map<string, number>();
  for (const job of finished) byStatus.set(job.final?.status ?? '?', (byStatus.get(job.final?.status ?? '?') ?? 0) + 1);
  const unaccepted = record.jobs.filter((j) => !j.accepted).length;
  out.push(
    '',
    `Jobs: ${record.jobs.length} submitted (${record.jobs.filter((j) => j.via === 'http').length} HTTP, ${record.jobs.filter((j) => j.via === 'queue').length} queue; ${record.jobs.filter((j) => j.source === 'blob').length} with itemsBlob), ` +
      `${[...byStatus].map(([s, n]) => `${n} ${s}`).join(', ') || 'none finished'}` +
      `${finished.length < record.jobs.length ? `, ${record.jobs.length - finished.length} unfinished` : ''}${unaccepted > 0 ? ` (${unaccepted} never accepted by HTTP)` : ''}`,
  );
  for (const job of record.jobs) {
    const status = job.final?.status ?? `UNFINISHED (last ${job.lastSeen?.status ?? 'never seen'})`;
    const took = job.finishedAt === undefined ? '' : ` after ${secs(job.finishedAt - job.submittedAt)}`;
    const epoch = (job.final ?? job.lastSeen)?.epoch;
    out.push(
      `  ${job.jobId.padEnd(22)} ${job.via.padEnd(5)} ${job.source.padEnd(6)} ${String(job.itemCount).padStart(5)} items/${String(job.chunkSize).padEnd(3)} ${status}${took}` +
        `${epoch === undefined || epoch === null ? '' : `, epoch ${epoch}`}${job.faultId === undefined ? '' : `, trigger of ${job.faultId}`}${job.accepted ? '' : ' (not accepted)'}`,
    );
  }

  out.push('', `Failovers: ${changes.length}`);
  for (const change of changes) {
    out.push(
      `  ${clock(change.endedAt)} -> ${clock(change.acquiredAt)}  epoch ${change.fromEpoch} ${change.fromHolder} -> epoch ${change.toEpoch} ${change.toHolder}: ${secs(change.gapMs)} (${change.cause}${change.faultId === undefined ? '' : `, ${change.faultId}`})`,
    );
  }
  const byCause = new Map<string, number[]>();
  for (const change of changes) byCause.set(change.cause.split('@')[0] as string, [...(byCause.get(change.cause.split('@')[0] as string) ?? []), change.gapMs]);
  for (const [cause, gaps] of byCause) out.push(`  after ${cause}: n=${gaps.length}, p50 ${secs(percentile(gaps, 50))}, max ${secs(Math.max(...gaps))}`);

  const byFault = record.exits.filter((e) => e.expected && e.cause !== 'shutdown').length;
  const atShutdown = record.exits.filter((e) => e.cause === 'shutdown').length;
  const ownStops = record.exits.filter((e) => !e.expected);
  const storageStops = ownStops.filter((e) => storageFaultStop(record, e) !== undefined);
  const stopped = storageStops.length === 0 ? '' : `, ${storageStops.length} of their host on a storage fault (${storageStops.map((e) => `${e.holder}: ${(e.hostError ?? '').slice(0, 80)}`).join('; ')})`;
  out.push('', `Process exits: ${byFault} by injected faults${stopped}, ${atShutdown} at the final shutdown, ${ownStops.length - storageStops.length} on their own`);

  out.push('', violations.length === 0 ? 'Violations: none' : `Violations: ${violations.length}`);
  for (const violation of violations) {
    out.push(`  [${violation.kind}] ${violation.summary}`);
    for (const line of violation.evidence) out.push(`      ${line}`);
  }
  out.push('', violations.length === 0 ? 'RESULT: PASS' : `RESULT: FAIL (${[...new Set(violations.map((v) => v.kind))].join(', ')})`);
  return `${out.join('\n')}\n`;
}
