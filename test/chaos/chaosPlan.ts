/**
 * What a chaos run will do, decided up front from its seed: the jobs it submits (with their exact
 * expected results) and the faults it injects, each at a fixed offset from the start of the fault
 * phase. The same seed and mode give the same plan; which process a fault lands on is decided when
 * it fires (the leader of that moment, a follower picked with the plan's own random stream).
 *
 * The short mode (CI) has a fixed shape: leader kills and a pause while the leader starts a job, in
 * the windows of the defects the first chaos runs found, plus one fault of every other kind. The long mode draws
 * faults at random and cycles its step faults through every step and action, the defect windows
 * (a kill between the instance write and the start message, a pause inside the start) included.
 */
import { type FaultKind, type JobExpectation, type JobSource, type JobVia, type PlannedFault, START_STEPS, type StartStep, type SumResult } from './ChaosRecord';
import { SeededRandom } from './SeededRandom';

export interface JobPlan {
  readonly label: string;
  /** Absent for a queue submission that lets the app name the job (`q-<message id>`). */
  readonly jobId?: string;
  /** Milliseconds after the fault phase began; step faults submit their own job when they are armed. */
  readonly at: number;
  readonly via: JobVia;
  readonly source: JobSource;
  readonly items: ReadonlyArray<number | string>;
  readonly chunkSize: number;
  readonly expect: JobExpectation;
}

export interface ChaosPlan {
  readonly faultPhaseMs: number;
  /** How long jobs may take to finish once every fault has ended before a job counts as lost. */
  readonly settleMs: number;
  /** How long a step fault waits for its job's start before it counts as not fired. */
  readonly stepWindowMs: number;
  readonly faults: readonly PlannedFault[];
  readonly jobs: readonly JobPlan[];
  /** The job each step fault submits (by queue, named) when it is armed. */
  readonly triggerJobs: Readonly<Record<string, JobPlan>>;
}

export interface PlanOptions {
  readonly mode: 'short' | 'long';
  readonly seed: number;
  /** Length of the fault phase (long mode). */
  readonly faultPhaseMs?: number;
  /**
   * The step faults to use instead of the mode's own: the short mode's three step faults take these
   * in order (repeating the list), the long mode cycles through them.
   */
  readonly stepFaults?: ReadonlyArray<StepFault>;
}

export interface StepFault {
  readonly kind: 'kill' | 'pause' | 'blackhole';
  readonly step: StartStep;
}

/** `kill@start-message,pause@start-read` -> step faults; undefined with a reason when malformed. */
export function parseStepFaults(text: string): StepFault[] | string {
  const faults: StepFault[] = [];
  for (const part of text.split(',').map((p) => p.trim()).filter((p) => p !== '')) {
    const [kind, step] = part.split('@');
    if (kind !== 'kill' && kind !== 'pause' && kind !== 'blackhole') return `"${part}": the action must be kill, pause or blackhole`;
    if (!START_STEPS.includes(step as StartStep)) return `"${part}": the step must be one of ${START_STEPS.join(', ')}`;
    faults.push({ kind, step: step as StartStep });
  }
  return faults.length === 0 ? 'no step faults given' : faults;
}

/** Chunks of deadlineSeconds 15: a chunk whose worker died is sent again 15 s after its claim, not 5 minutes. */
export const JOB_OPTIONS = { deadlineSeconds: 15, attempts: 5 } as const;

const seconds = (s: number): number => Math.round(s * 1000);

export function exactSum(items: ReadonlyArray<number | string>): SumResult {
  let sum = 0n;
  let min: bigint | undefined;
  let max: bigint | undefined;
  for (const item of items) {
    const value = BigInt(item);
    sum += value;
    if (min === undefined || value < min) min = value;
    if (max === undefined || value > max) max = value;
  }
  const exact = (v: bigint): number | string => (v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString());
  return { count: items.length, sum: exact(sum), min: min === undefined ? null : exact(min), max: max === undefined ? null : exact(max) };
}

/** Distinct integers (so a lost or doubled item changes the sum), now and then one beyond 2^53 as a decimal string. */
function sumItems(random: SeededRandom, count: number): Array<number | string> {
  const items: Array<number | string> = [];
  for (let i = 0; i < count; i++) {
    if (random.chance(0.01)) items.push(`${random.int(1, 9)}${String(random.int(0, 999_999_999)).padStart(9, '0')}${String(i).padStart(9, '0')}`);
    else items.push((i + 1) * 7919 * (random.chance(0.5) ? 1 : -1) + random.int(0, 7918));
  }
  return items;
}

export function jobPlan(random: SeededRandom, label: string, at: number, sizes: { maxItems: number }, forced?: Partial<Pick<JobPlan, 'via' | 'source'>>): JobPlan {
  const via: JobVia = forced?.via ?? (random.chance(0.5) ? 'http' : 'queue');
  const source: JobSource = forced?.source ?? (random.chance(0.4) ? 'blob' : 'inline');
  const items = sumItems(random, random.int(100, sizes.maxItems));
  const chunkSize = random.pick([25, 50, 100, 200]);
  // A queue submission without a job id is named by the app after its message.
  const named = via === 'http' || forced !== undefined || random.chance(0.7);
  return { label, ...(named ? { jobId: label } : {}), at, via, source, items, chunkSize, expect: { status: 'completed', result: exactSum(items) } };
}

/**
 * Small inline jobs submitted at the same moment, by HTTP and by queue: the intake starts them
 * together in shared runs (intake/StartBatches.ts, run/batchOrchestration.ts), whose starts the
 * faults then hit like any other.
 */
function burstPlan(random: SeededRandom, label: string, at: number): JobPlan[] {
  return Array.from({ length: 6 }, (_, i) =>
    jobPlan(random, `${label}${i + 1}`, at, { maxItems: 300 }, { via: i % 2 === 0 ? 'queue' : 'http', source: 'inline' }),
  );
}

/** A submission the leader must reject (an item `sum` refuses), recorded with the rejecting epoch. */
function invalidJobPlan(random: SeededRandom, label: string, at: number): JobPlan {
  const items: Array<number | string> = sumItems(random, random.int(5, 50));
  items.splice(random.int(0, items.length), 0, 'not-a-number');
  return { label, jobId: label, at, via: 'queue', source: 'inline', items, chunkSize: 50, expect: { status: 'rejected', code: 'ITEM_REJECTED' } };
}

function triggerJobsFor(random: SeededRandom, seed: number, faults: readonly PlannedFault[], maxItems: number): Record<string, JobPlan> {
  const jobs: Record<string, JobPlan> = {};
  for (const fault of faults) {
    // An items blob: such a job always starts alone (shared runs take inline jobs only:
    // intake/StartBatches.ts), so its start's steps are the `job-<id>` writes and messages the watcher matches.
    if (fault.step !== undefined) jobs[fault.id] = jobPlan(random, `c${seed}-${fault.id.toLowerCase()}`, fault.at, { maxItems }, { via: 'queue', source: 'blob' });
  }
  return jobs;
}

/**
 * The short mode's step faults, the windows of the two defects the first chaos runs found: a kill
 * between the start message and the instance write (the start's message exists, its instance does
 * not), a pause (past the lease) between the leader's last check and its start (the stale start),
 * and a kill before the start message (nothing of the start exists yet). The long mode cycles
 * through every step and action; `--step-faults` puts any of them here.
 */
export const SHORT_STEP_FAULTS: readonly StepFault[] = [
  { kind: 'kill', step: 'instance-write' },
  { kind: 'pause', step: 'start-read' },
  { kind: 'kill', step: 'start-message' },
];

function shortPlan(random: SeededRandom, seed: number, steps: readonly StepFault[]): ChaosPlan {
  const pick = (): number => random.between(0.8, 1.2);
  const step = (n: number, id: string, at: number): PlannedFault => {
    const { kind, step } = steps[n % steps.length] as StepFault;
    return { id, at, kind, target: 'leader', step, durationMs: kind === 'kill' ? seconds(3) : seconds(20) };
  };
  const faults: PlannedFault[] = [
    step(0, 'F1', seconds(3)),
    { id: 'F2', at: seconds(10), kind: 'pause', target: 'follower', durationMs: seconds(8 * pick()) },
    step(1, 'F3', seconds(24)),
    { id: 'F4', at: seconds(30), kind: 'blackhole', target: 'follower', durationMs: seconds(10 * pick()) },
    step(2, 'F5', seconds(50)),
    { id: 'F6', at: seconds(56), kind: 'reset', target: 'follower', durationMs: seconds(6 * pick()) },
    { id: 'F7', at: seconds(68), kind: 'term', target: 'leader', durationMs: seconds(3) },
    { id: 'F8', at: seconds(74), kind: 'kill', target: 'follower', durationMs: seconds(4 * pick()) },
    { id: 'F9', at: seconds(80), kind: 'restart', target: 'any', durationMs: 0 },
  ];
  const jobs: JobPlan[] = [];
  const kinds: Array<Pick<JobPlan, 'via' | 'source'>> = [
    { via: 'http', source: 'inline' },
    { via: 'queue', source: 'inline' },
    { via: 'http', source: 'blob' },
    { via: 'queue', source: 'blob' },
  ];
  for (let i = 0; i < 12; i++) {
    // The first four cover every way in; the rest are drawn.
    jobs.push(jobPlan(random, `c${seed}-j${i + 1}`, seconds(i * 5), { maxItems: 1_200 }, i < 4 ? kinds[i] : undefined));
  }
  jobs.push(invalidJobPlan(random, `c${seed}-bad1`, seconds(27)));
  jobs.push(...burstPlan(random, `c${seed}-b`, seconds(17)));
  return { faultPhaseMs: seconds(86), settleMs: seconds(120), stepWindowMs: seconds(45), faults, jobs, triggerJobs: triggerJobsFor(random, seed, faults, 1_200) };
}

/** Every step with every action, in a seeded order, so a long run visits the windows that matter. */
function stepFaultCycle(random: SeededRandom): StepFault[] {
  const combos = START_STEPS.flatMap((step) => (['kill', 'pause', 'blackhole'] as const).map((kind) => ({ step, kind })));
  for (let i = combos.length - 1; i > 0; i--) {
    const j = random.int(0, i);
    [combos[i], combos[j]] = [combos[j] as (typeof combos)[number], combos[i] as (typeof combos)[number]];
  }
  return combos;
}

function longPlan(random: SeededRandom, seed: number, faultPhaseMs: number, steps: readonly StepFault[] | undefined): ChaosPlan {
  const faults: PlannedFault[] = [];
  const shuffled = stepFaultCycle(random.fork());
  const cycle = steps ?? shuffled;
  let at = seconds(5);
  let n = 0;
  while (at < faultPhaseMs - seconds(10)) {
    n += 1;
    const id = `F${n}`;
    const kind = random.weighted<FaultKind | 'step'>([
      ['kill', 3],
      ['pause', 3],
      ['term', 1.5],
      ['restart', 1],
      ['blackhole', 3],
      ['reset', 1],
      ['step', 2.5],
    ]);
    if (kind === 'step') {
      const next = cycle[faults.filter((f) => f.step !== undefined).length % cycle.length] as StepFault;
      // Long enough for a failover to happen during the pause or the partition.
      faults.push({ id, at, kind: next.kind, target: 'leader', step: next.step, durationMs: next.kind === 'kill' ? seconds(random.between(1, 8)) : seconds(random.between(18, 40)) });
    } else {
      const target = random.chance(0.5) ? 'leader' : 'follower';
      const durationMs =
        kind === 'pause' || kind === 'blackhole' ? seconds(random.between(5, 40)) : kind === 'reset' ? seconds(random.between(3, 15)) : kind === 'restart' ? 0 : seconds(random.between(1, 10));
      faults.push({ id, at, kind, target, durationMs });
    }
    at += seconds(random.between(6, 16));
  }
  const jobs: JobPlan[] = [];
  let jobAt = 0;
  let j = 0;
  while (jobAt < faultPhaseMs - seconds(5)) {
    j += 1;
    jobs.push(random.chance(0.08) ? invalidJobPlan(random, `c${seed}-bad${j}`, jobAt) : jobPlan(random, `c${seed}-j${j}`, jobAt, { maxItems: 5_000 }));
    jobAt += seconds(random.between(5, 12));
  }
  for (let b = 0, burstAt = seconds(20); burstAt < faultPhaseMs - seconds(5); b++, burstAt += seconds(random.between(40, 70))) {
    jobs.push(...burstPlan(random, `c${seed}-b${b + 1}-`, burstAt));
  }
  return { faultPhaseMs, settleMs: seconds(240), stepWindowMs: seconds(90), faults, jobs, triggerJobs: triggerJobsFor(random, seed, faults, 3_000) };
}

export function buildPlan(options: PlanOptions): ChaosPlan {
  const random = new SeededRandom(options.seed);
  return options.mode === 'short'
    ? shortPlan(random, options.seed, options.stepFaults ?? SHORT_STEP_FAULTS)
    : longPlan(random, options.seed, options.faultPhaseMs ?? seconds(8 * 60), options.stepFaults);
}
