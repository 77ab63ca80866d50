/** Builds an elector on a MemoryLeaseStore + ManualClock and records each term it leads. */
import { type Leadership, LeaseElector, type LeaseElectorOptions, type StepDownReason } from '../../../shared/leader/LeaseElector';
import { memoryLogger } from '../../../shared/observability/log';
import { type ManualClock } from './ManualClock';
import { type MemoryLeaseStore } from './MemoryLeaseStore';

export const TIMING = {
  leaseSeconds: 15,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
  requestTimeoutMs: 2_000,
  drainTimeoutMs: 3_000,
} as const;

/** The runtime's watchdog timeout in the runtime tests. */
export const STALL_TIMEOUT_MS = 60_000;

export interface TermRecord {
  readonly epoch: number;
  readonly startedAt: number;
  endedAt: number | undefined;
  reason: StepDownReason | undefined;
  readonly leadership: Leadership;
}

export interface Contender {
  readonly elector: LeaseElector;
  readonly terms: TermRecord[];
  readonly logs: Array<Record<string, unknown>>;
  readonly leaseId: string;
}

let counter = 0;

/** A memory logger that keeps every level, whatever COORDINATOR_LOG_LEVEL the test run sets. */
export function debugMemoryLogger(component: string): ReturnType<typeof memoryLogger> {
  const saved = process.env.COORDINATOR_LOG_LEVEL;
  process.env.COORDINATOR_LOG_LEVEL = 'debug';
  try {
    return memoryLogger(component);
  } finally {
    if (saved === undefined) delete process.env.COORDINATOR_LOG_LEVEL;
    else process.env.COORDINATOR_LOG_LEVEL = saved;
  }
}

export function contender(
  store: MemoryLeaseStore,
  clock: ManualClock,
  holder: string,
  overrides: Partial<LeaseElectorOptions> = {},
  work: (leadership: Leadership) => void | Promise<void> = (l) => {
    // Leader work that ends as soon as it is told to stop.
    return new Promise<void>((resolve) => l.signal.addEventListener('abort', () => resolve(), { once: true }));
  },
): Contender {
  const terms: TermRecord[] = [];
  const logger = debugMemoryLogger(holder);
  counter += 1;
  const leaseId = `00000000-0000-4000-8000-${String(counter).padStart(12, '0')}`;
  const elector = new LeaseElector({
    ...TIMING,
    store,
    clock,
    holder,
    leaseId,
    logger,
    random: () => 0,
    ...overrides,
    callbacks: {
      onStartedLeading: (leadership) => {
        terms.push({ epoch: leadership.epoch, startedAt: clock.now(), endedAt: undefined, reason: undefined, leadership });
        return work(leadership);
      },
      onStoppedLeading: ({ epoch, reason }) => {
        const term = terms.find((t) => t.epoch === epoch);
        if (term !== undefined) {
          term.endedAt = clock.now();
          term.reason = reason;
        }
      },
    },
  });
  return { elector, terms, logs: logger.lines, leaseId };
}
