/**
 * Real contenders for the integration tests: a LeaseElector on a BlobLeaseStore against Azurite,
 * recording each term it believed in (start = onStartedLeading, end = the moment its signal
 * aborted) on this process's monotonic clock, and the send time of every successful acquire and
 * renewal (the instant the lease's lifetime can start from, at the earliest).
 */
import { BlobServiceClient } from '@azure/storage-blob';

import { BlobLeaseStore } from '../../../shared/leader/BlobLeaseStore';
import { type Leadership, LeaseElector, type LeaseElectorOptions, type StepDownReason } from '../../../shared/leader/LeaseElector';
import { type LeaseSnapshot, type LeaseStore } from '../../../shared/leader/LeaseStore';
import { memoryLogger } from '../../../shared/observability/log';

/** Shortest legal lease, fast campaigns: keeps the tests quick without changing the rules. */
export const FAST = {
  leaseSeconds: 15,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 500,
  requestTimeoutMs: 1_000,
  drainTimeoutMs: 3_000,
} as const;

export interface RealTerm {
  readonly holder: string;
  readonly epoch: number;
  readonly startedAt: number;
  endedAt: number | undefined;
  reason: StepDownReason | undefined;
  readonly leadership: Leadership;
}

/** Wraps a store to note when each successful acquire/renew was sent and when releases finished. */
export class RecordingStore implements LeaseStore {
  readonly description: string;
  lastGrantSentAt: number | undefined;
  releasedAt: number | undefined;
  /** Optional extra latency or fault before each call (random pauses); honours the signal. */
  before: ((op: string, signal: AbortSignal) => Promise<void>) | undefined;

  constructor(private readonly inner: LeaseStore) {
    this.description = inner.description;
  }

  async acquire(leaseId: string, leaseSeconds: number, signal: AbortSignal): Promise<boolean> {
    await this.before?.('acquire', signal);
    const sentAt = performance.now();
    const ok = await this.inner.acquire(leaseId, leaseSeconds, signal);
    if (ok) this.lastGrantSentAt = sentAt;
    return ok;
  }

  async renew(leaseId: string, signal: AbortSignal): Promise<{ etag: string }> {
    await this.before?.('renew', signal);
    const sentAt = performance.now();
    const res = await this.inner.renew(leaseId, signal);
    this.lastGrantSentAt = sentAt;
    return res;
  }

  async release(leaseId: string, signal: AbortSignal): Promise<void> {
    await this.before?.('release', signal);
    await this.inner.release(leaseId, signal);
    this.releasedAt = performance.now();
  }

  async read(signal: AbortSignal): Promise<LeaseSnapshot> {
    await this.before?.('read', signal);
    return this.inner.read(signal);
  }

  async write(leaseId: string, metadata: Readonly<Record<string, string>>, ifMatch: string, signal: AbortSignal): Promise<{ etag: string }> {
    await this.before?.('write', signal);
    return this.inner.write(leaseId, metadata, ifMatch, signal);
  }
}

export interface RealContender {
  readonly elector: LeaseElector;
  readonly store: RecordingStore;
  readonly terms: RealTerm[];
  readonly logs: Array<Record<string, unknown>>;
}

export function connection(connectionString: string): { kind: 'connectionString'; settingName: string; connectionString: string } {
  return { kind: 'connectionString', settingName: 'test', connectionString };
}

export function realContender(
  connectionString: string,
  container: string,
  holder: string,
  options: Partial<LeaseElectorOptions> & { onTerm?: (term: RealTerm) => void | Promise<void> } = {},
  blob = 'coordinator',
): RealContender {
  const terms: RealTerm[] = [];
  const saved = process.env.COORDINATOR_LOG_LEVEL;
  process.env.COORDINATOR_LOG_LEVEL = 'debug';
  const logger = memoryLogger(holder);
  if (saved === undefined) delete process.env.COORDINATOR_LOG_LEVEL;
  else process.env.COORDINATOR_LOG_LEVEL = saved;
  const timeout = options.requestTimeoutMs ?? FAST.requestTimeoutMs;
  const store = new RecordingStore(BlobLeaseStore.fromConnection(connection(connectionString), container, blob, timeout));
  const { onTerm, ...rest } = options;
  const elector = new LeaseElector({
    ...FAST,
    store,
    holder,
    logger,
    ...rest,
    callbacks: {
      onStartedLeading: async (leadership) => {
        const term: RealTerm = { holder, epoch: leadership.epoch, startedAt: performance.now(), endedAt: undefined, reason: undefined, leadership };
        terms.push(term);
        leadership.signal.addEventListener('abort', () => (term.endedAt = performance.now()), { once: true });
        await onTerm?.(term);
        // Leader work that ends as soon as it is told to stop.
        await new Promise<void>((resolve) => leadership.signal.addEventListener('abort', () => resolve(), { once: true }));
      },
      onStoppedLeading: ({ epoch, reason }) => {
        const term = terms.find((t) => t.epoch === epoch);
        if (term !== undefined) term.reason = reason;
      },
    },
  });
  return { elector, store, terms, logs: logger.lines };
}

/** A plain SDK client on the same blob, for reading what every instance can see and for tampering. */
export function blobClient(connectionString: string, container: string, blob = 'coordinator') {
  return BlobServiceClient.fromConnectionString(connectionString).getContainerClient(container).getBlockBlobClient(blob);
}

export async function waitFor(predicate: () => boolean, timeoutMs: number, what: string, stepMs = 20): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, stepMs));
  }
  return performance.now();
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
