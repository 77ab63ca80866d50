/**
 * The chaos checker on made-up records: each kind of violation is found with its evidence, and
 * what the record cannot prove (an act that may have landed before the newer epoch, reads whose
 * windows overlap) is not reported.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { exactSum } from '../../chaos/chaosPlan';
import { type ChaosRecord, type FaultRecord, type JobOutcome, type LogEntry, type ProcessRef } from '../../chaos/ChaosRecord';
import { checkRun, failovers } from '../../chaos/checkRun';

const T0 = Date.parse('2026-11-22T10:00:00.000Z');
const A: ProcessRef = { instance: 'instance-1', gen: 1, pid: 101, holder: 'instance-1.g1' };
const B: ProcessRef = { instance: 'instance-2', gen: 1, pid: 102, holder: 'instance-2.g1' };

const acquired = (who: ProcessRef, epoch: number, at: number): LogEntry => ({ ...who, at: T0 + at, event: 'leader.acquired', fields: { holder: who.holder, epoch } });
const lost = (who: ProcessRef, epoch: number, at: number): LogEntry => ({ ...who, at: T0 + at, event: 'leader.lost', fields: { holder: who.holder, epoch, reason: 'deadline' } });

const items = [1, 2, 3, '90071992547409930'];

function job(overrides: Partial<JobOutcome> = {}): JobOutcome {
  const result = exactSum(items);
  const status = overrides.final?.status ?? 'completed';
  return {
    replies: [{ jobId: overrides.final?.jobId ?? 'j1', status, correlationId: overrides.label ?? 'j1' }],
    label: 'j1',
    jobId: 'j1',
    via: 'queue',
    source: 'inline',
    itemCount: items.length,
    chunkSize: 2,
    expect: { status: 'completed', result },
    submittedAt: T0,
    accepted: true,
    final: { jobId: 'j1', status: 'completed', result, progress: { items: { total: 4, done: 4, failed: 0 } }, epoch: 1, createdAt: '2026-11-22T10:00:01Z' },
    finishedAt: T0 + 5_000,
    ...overrides,
  };
}

function record(overrides: Partial<ChaosRecord> = {}): ChaosRecord {
  return {
    seed: 1,
    mode: 'short',
    separateApps: false,
    instances: 2,
    repeatArgs: '--short --seed 1',
    startedAt: T0,
    faultPhaseStartedAt: T0,
    faultPhaseEndedAt: T0 + 60_000,
    endedAt: T0 + 90_000,
    logs: [acquired(A, 1, 500)],
    leaderPolls: [],
    leaseReads: [],
    writes: [{ ...A, kind: 'instance-create', jobId: 'j1', forwardedAt: T0 + 1_200, status: 201, answeredAt: T0 + 1_250 }],
    exits: [],
    faults: [],
    jobs: [job()],
    ...overrides,
  };
}

const kinds = (r: ChaosRecord): string[] => checkRun(r).map((v) => v.kind);

describe('chaos checker', () => {
  it('finds nothing in a run where everything held', () => {
    assert.deepEqual(checkRun(record()), []);
  });

  it('reports a job that never finished, with its Durable status and the fault that hit its start', () => {
    const fault: FaultRecord = {
      planned: { id: 'F1', at: 0, kind: 'kill', target: 'leader', durationMs: 3_000, step: 'start-message' },
      outcome: 'injected',
      at: T0 + 1_300,
      target: A,
      role: 'leader',
      epoch: 1,
      jobId: 'j1',
    };
    const stuck = job({ final: undefined, lastSeen: { jobId: 'j1', status: 'pending', epoch: 1 }, durableStatus: { runtimeStatus: 'Pending' } });
    const violations = checkRun(record({ jobs: [stuck], faults: [fault] }));
    assert.deepEqual(
      violations.map((v) => v.kind),
      ['lost-job'],
    );
    const evidence = violations[0]?.evidence.join('\n') ?? '';
    assert.match(evidence, /"runtimeStatus":"Pending"/);
    assert.match(evidence, /kill at step start-message of j1/);
    assert.match(evidence, /instance-create of j1 .* answered 201/);
  });

  it('reports a wrong sum, a wrong count, and a rejection with the wrong code', () => {
    const expected = exactSum(items);
    const wrongSum = job({ final: { jobId: 'j1', status: 'completed', result: { ...expected, sum: '1' }, epoch: 1 } });
    assert.deepEqual(kinds(record({ jobs: [wrongSum] })), ['wrong-result']);
    const doubled = job({ final: { jobId: 'j1', status: 'completed', result: expected, progress: { items: { total: 4, done: 5, failed: 0 } }, epoch: 1 } });
    assert.deepEqual(kinds(record({ jobs: [doubled] })), ['wrong-result']);
    const failed = job({ final: { jobId: 'j1', status: 'failed', error: { code: 'INTERNAL' }, epoch: 1 } });
    assert.match(checkRun(record({ jobs: [failed] }))[0]?.summary ?? '', /ended failed \(INTERNAL/);
    const rejection = job({ expect: { status: 'rejected', code: 'ITEM_REJECTED' }, final: { jobId: 'j1', status: 'rejected', error: { code: 'SCHEMA_VIOLATION' }, epoch: 1 } });
    assert.deepEqual(kinds(record({ jobs: [rejection], writes: [] })), ['wrong-result']);
  });

  it('does not check a submission that was never accepted', () => {
    assert.deepEqual(kinds(record({ jobs: [job({ accepted: false, final: undefined })] })), []);
  });

  it('reports an orchestration created by epoch E after epoch E+1 was acquired, and only when that is certain', () => {
    // B acquired epoch 2 at +1.0 s; A's create of j1 (epoch 1) left the proxy at +1.2 s.
    const stale = record({ logs: [acquired(A, 1, 500), acquired(B, 2, 1_000), lost(A, 1, 1_150)] });
    const violations = checkRun(stale);
    assert.deepEqual(
      violations.map((v) => v.kind),
      ['stale-epoch-act'],
    );
    assert.match(violations[0]?.summary ?? '', /instance-1\.g1 \(pid 101\) created the orchestration with epoch 1 .* 0\.2 s after epoch 2 existed/);
    assert.match(violations[0]?.evidence.join('\n') ?? '', /leader\.lost/);
    // Epoch 2 known only at +1.3 s, after the write left: it may have landed first. Not reported.
    assert.deepEqual(kinds(record({ logs: [acquired(A, 1, 500), acquired(B, 2, 1_300)] })), []);
    // A lease read proves the newer epoch as well as the acquirer's log line does.
    assert.deepEqual(kinds(record({ leaseReads: [{ sentAt: T0 + 900, receivedAt: T0 + 950, epoch: 2, holder: 'instance-2.g1' }] })), ['stale-epoch-act']);
    // A create that failed is no act; the one that succeeded is timed.
    const failedFirst = record({
      logs: [acquired(A, 1, 500), acquired(B, 2, 1_000)],
      writes: [
        { ...A, kind: 'instance-create', jobId: 'j1', forwardedAt: T0 + 800, status: 201 },
        { ...B, kind: 'instance-create', jobId: 'j1', forwardedAt: T0 + 1_100, status: 409 },
      ],
    });
    assert.deepEqual(kinds(failedFirst), []);
  });

  it('reports a rejection recorded by an epoch that had been superseded', () => {
    const rejected = job({
      expect: { status: 'rejected', code: 'ITEM_REJECTED' },
      final: { jobId: 'j1', status: 'rejected', error: { code: 'ITEM_REJECTED' }, epoch: 1, createdAt: new Date(T0 + 2_000).toISOString() },
    });
    const r = record({ jobs: [rejected], writes: [{ ...A, kind: 'record-create', jobId: 'j1', forwardedAt: T0 + 2_050, status: 201 }], logs: [acquired(A, 1, 500), acquired(B, 2, 1_000)] });
    assert.deepEqual(kinds(r), ['stale-epoch-act']);
    assert.match(checkRun(r)[0]?.summary ?? '', /rejected the submission with epoch 1/);
  });

  it('reports a job whose orchestration was created twice', () => {
    const twice = record({
      writes: [
        { ...A, kind: 'instance-create', jobId: 'j1', forwardedAt: T0 + 800, status: 201 },
        { ...B, kind: 'instance-create', jobId: 'j1', forwardedAt: T0 + 9_000, status: 201 },
      ],
    });
    assert.ok(kinds(twice).includes('job-started-twice'));
  });

  it('reports a finished job whose history is not the run that did its work: replaced by a late start, missing, or a stand-down', () => {
    const named = { startId: 's-22', generation: 1, instanceId: 'job-j1' };
    const ok = record({ jobs: [job({ workingRun: { ...named, instanceStartId: 's-22', runtimeStatus: 'Completed', stoodDown: false } })] });
    assert.deepEqual(kinds(ok), []);
    // The case: the epoch-20 leader's held start landed on the finished instance and replaced it.
    const replaced = record({ jobs: [job({ workingRun: { ...named, instanceStartId: 's-20', runtimeStatus: 'Completed', stoodDown: false } })] });
    assert.deepEqual(kinds(replaced), ['history-replaced']);
    assert.match(checkRun(replaced)[0]?.summary ?? '', /holds start s-20, not s-22/);
    assert.deepEqual(kinds(record({ jobs: [job({ workingRun: named })] })), ['history-replaced'], 'no such instance');
    const stoodDown = record({ jobs: [job({ workingRun: { ...named, instanceStartId: 's-22', runtimeStatus: 'Completed', stoodDown: true } })] });
    assert.deepEqual(kinds(stoodDown), ['history-replaced']);
    // Not known (the instance could not be read): nothing is claimed.
    assert.deepEqual(kinds(record({ jobs: [job({ workingRun: { ...named, unreadable: 'HTTP 500' } })] })), []);
  });

  it('reports a lease blob that showed a lower epoch after a higher one, but not across overlapping reads', () => {
    const reads = [
      { sentAt: T0, receivedAt: T0 + 10, epoch: 3, holder: 'instance-1.g1' },
      { sentAt: T0 + 20, receivedAt: T0 + 30, epoch: 2, holder: 'instance-2.g1' },
    ];
    assert.ok(kinds(record({ leaseReads: reads })).includes('decreasing-epoch'));
    const overlapping = [reads[0] as (typeof reads)[number], { ...(reads[1] as (typeof reads)[number]), sentAt: T0 + 5 }];
    assert.ok(!kinds(record({ leaseReads: overlapping })).includes('decreasing-epoch'));
  });

  it('reports one epoch with two holders', () => {
    assert.deepEqual(kinds(record({ logs: [acquired(A, 1, 500), acquired(B, 1, 900)], writes: [] })), ['duplicate-epoch']);
  });

  it('reports an instance that answered "leader" for an epoch after a newer one existed', () => {
    const poll = (sentAt: number) => ({ ...A, sentAt: T0 + sentAt, receivedAt: T0 + sentAt + 30, httpStatus: 200, role: 'leader', epoch: 1, leaseEpoch: 1 });
    const logs = [acquired(A, 1, 500), acquired(B, 2, 2_000)];
    const found = checkRun(record({ logs, writes: [], leaderPolls: [poll(2_500)] }));
    assert.deepEqual(
      found.map((v) => v.kind),
      ['two-leaders'],
    );
    assert.match(found[0]?.summary ?? '', /answered "leader" for epoch 1 .* 0\.5 s after epoch 2 existed/);
    // Sent before epoch 2 is known to exist: it may have been the truth at the time.
    assert.deepEqual(kinds(record({ logs, writes: [], leaderPolls: [poll(1_990)] })), []);
  });

  it('reports a process that exited without an injected fault, with its last output', () => {
    const exits = [
      { ...A, at: T0 + 5_000, code: 1, signal: null, expected: false, lastLines: ['RangeError: boom'] },
      { ...B, at: T0 + 6_000, code: null, signal: 'SIGKILL', expected: true, cause: 'F1', lastLines: [] },
    ];
    const found = checkRun(record({ exits }));
    assert.deepEqual(
      found.map((v) => v.kind),
      ['unexpected-exit'],
    );
    assert.match(found[0]?.evidence.join('\n') ?? '', /RangeError: boom/);
  });

  it("does not count an extensions host's own stop on a bare SocketException while its storage was reset, and counts any other", () => {
    const reset: FaultRecord = { planned: { id: 'F6', at: 0, kind: 'reset', target: 'follower', durationMs: 6_000 }, outcome: 'injected', at: T0 + 10_000, endedAt: T0 + 16_000, target: A, role: 'follower' };
    const socket = 'System.Net.Sockets.SocketException (107): Transport endpoint is not connected';
    const stop = (at: number, hostError?: string) => ({ ...A, at: T0 + at, code: 1, signal: null, expected: false, ...(hostError === undefined ? {} : { hostError }), lastLines: [] });
    // The flex-shape short run's case: 3.1 s into the reset.
    assert.deepEqual(kinds(record({ exits: [stop(13_100, socket)], faults: [reset] })), []);
    assert.deepEqual(kinds(record({ exits: [stop(17_900, socket)], faults: [reset] })), [], 'within 2 s of its end');
    // Not owed to the fault: too late, another error, no host error, or another process's reset.
    assert.deepEqual(kinds(record({ exits: [stop(18_100, socket)], faults: [reset] })), ['unexpected-exit']);
    assert.deepEqual(kinds(record({ exits: [stop(13_100, 'System.InvalidOperationException: boom')], faults: [reset] })), ['unexpected-exit']);
    assert.deepEqual(kinds(record({ exits: [stop(13_100)], faults: [reset] })), ['unexpected-exit']);
    assert.deepEqual(kinds(record({ exits: [stop(13_100, socket)], faults: [{ ...reset, target: B }] })), ['unexpected-exit']);
    assert.deepEqual(kinds(record({ exits: [stop(13_100, socket)], faults: [{ ...reset, planned: { ...reset.planned, kind: 'pause' } }] })), ['unexpected-exit']);
  });

  it('lists failovers with their cause and gap', () => {
    const kill: FaultRecord = { planned: { id: 'F1', at: 0, kind: 'kill', target: 'leader', durationMs: 1_000 }, outcome: 'injected', at: T0 + 10_000, target: A, role: 'leader', epoch: 1 };
    const r = record({ logs: [acquired(A, 1, 500), acquired(B, 2, 24_000), { ...B, at: T0 + 30_000, event: 'leader.released', fields: { epoch: 2 } }, acquired({ ...A, gen: 2, pid: 103, holder: 'instance-1.g2' }, 3, 30_400)], faults: [kill] });
    assert.deepEqual(
      failovers(r).map((f) => [f.fromEpoch, f.toEpoch, f.cause, f.gapMs]),
      [
        [1, 2, 'kill', 14_000],
        [2, 3, 'released', 400],
      ],
    );
  });
  it('flags a failover slower than L + 5 s after a kill, or 3 s after a graceful stop', () => {
    const fault = (kind: FaultRecord['planned']['kind'], at: number): FaultRecord => ({
      planned: { id: 'F1', at: 0, kind, target: 'leader', durationMs: 1_000 },
      outcome: 'injected',
      at: T0 + at,
      target: A,
      role: 'leader',
      epoch: 1,
    });
    const run = (kind: FaultRecord['planned']['kind'], gapMs: number): string[] =>
      kinds(record({ logs: [acquired(A, 1, 500), acquired(B, 2, 10_000 + gapMs)], faults: [fault(kind, 10_000)] }));
    assert.deepEqual(run('kill', 19_900), []);
    assert.deepEqual(run('kill', 20_100), ['slow-failover']);
    assert.deepEqual(run('term', 2_900), []);
    assert.deepEqual(run('term', 3_100), ['slow-failover']);
    assert.deepEqual(run('restart', 56_600), ['slow-failover']);
    // A pause or a cut of storage has no bound here (the leader steps down at its renew deadline, D).
    assert.deepEqual(run('pause', 40_000), []);
    const found = checkRun(record({ logs: [acquired(A, 1, 500), acquired(B, 2, 40_000)], faults: [fault('kill', 10_000)] }));
    assert.match(found[0]?.summary ?? '', /after kill of instance-1\.g1 \(epoch 1\) the next leader, instance-2\.g1, acquired 30\.0 s later \(bound 20 s\)/);
  });

  it('flags a finished job whose reply queue never got its outcome (missing, or another status)', () => {
    assert.deepEqual(kinds(record({ jobs: [job({ replies: [] })] })), ['missing-reply']);
    assert.deepEqual(kinds(record({ jobs: [job({ replies: [{ jobId: 'j1', status: 'failed', correlationId: 'j1' }] })] })), ['missing-reply']);
    // Twice is fine: delivery is at least once.
    const twice = [{ jobId: 'j1', status: 'completed', correlationId: 'j1' }, { jobId: 'j1', status: 'completed', correlationId: 'j1' }];
    assert.deepEqual(kinds(record({ jobs: [job({ replies: twice })] })), []);
  });
});
