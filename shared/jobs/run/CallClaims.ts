/**
 * One running call per job: a job activity (plan, step, aggregate) that runs for more than a moment
 * holds the job's call lease (a blob lease on `jobs/<jobId>/call.lease`, 15 s, renewed every 5 s
 * while it runs), and that lease is how the rest of the app tells a slow live call from a lost one.
 *
 * Why: the leader's stall check (StalledJobs.ts) asks a run that has not moved for 15 s to call its
 * current activity again, because the answer of a call may be held by an instance that died. A call
 * that is merely slow (staging a 64 MiB input beside seven others) looks the same from outside, and
 * each resume of it would start one more copy of the slowest work on the machine (22 plan calls of
 * one job when nothing told the two apart). So the stall check reads the lease first and asks again
 * only when no call holds it (the call ended, or its instance died and the lease ran out, at most
 * `leaseSeconds` later).
 *
 * Rules (`CallClaims.run`):
 * - A call the orchestration made again (after a resume) takes the lease before any work, waiting
 *   while another call holds it: at most one call of a job runs at a time, however many resumes came.
 * - Any other call takes the lease once it has run `claimAfterMs` (most calls end sooner and cost
 *   nothing); a resume comes no sooner than 15 s after the call was asked for, so a live call holds
 *   the lease before anyone may ask again. A redelivered call (its instance died; Durable renews a
 *   live call's message) does not wait for the dead call's lease to run out: that would add up to
 *   15 s to every recovery of a killed instance's step.
 * - Renewals stop after `maxHoldMs` (the host's function timeout): a call stuck for good cannot hold
 *   its job forever.
 * Not guaranteed: a call whose process is frozen longer than the lease loses it and may overlap a
 * call made after (every job activity is idempotent, so this costs work, never a wrong result).
 */
import { randomUUID } from 'node:crypto';

import { type ContainerClient } from '@azure/storage-blob';

import { type Logger } from '../../observability/log';
import { checkJobId, isStatus } from '../store/JobStore';

export const CALL_CLAIM = {
  /** The lease's duration (Azure's least): a dead instance's call is known dead this long after its last renewal. */
  leaseSeconds: 15,
  renewEveryMs: 5_000,
  /** A first call on time takes the lease once it has run this long. */
  claimAfterMs: 3_000,
  /** A call that must wait for the lease asks again after this, doubling up to `waitMaxMs`. */
  waitFirstMs: 250,
  waitMaxMs: 2_000,
  /** Renewals stop after this (host.json functionTimeout). */
  maxHoldMs: 600_000,
} as const;

/** Where the job's call lease lives; `BlobCallClaimStore` on Azure Storage, `MemoryCallClaimStore` in tests. */
export interface CallClaimStore {
  /** Takes the job's lease under `leaseId` (or renews it when already this id's); false while another holds it. */
  acquire(jobId: string, leaseId: string, seconds: number): Promise<boolean>;
  /** False when the lease is no longer `leaseId`'s (it lapsed and another took it). */
  renew(jobId: string, leaseId: string): Promise<boolean>;
  release(jobId: string, leaseId: string): Promise<void>;
  /** Whether a call holds the job's lease now. */
  held(jobId: string): Promise<boolean>;
}

export interface CallClaimsDeps {
  readonly store: CallClaimStore;
  readonly logger: Logger;
  readonly sleep?: (ms: number) => Promise<void>;
  /** Timers for the renewals (tests pass virtual ones). */
  readonly schedule?: (ms: number, fn: () => void) => { cancel(): void };
  readonly claimAfterMs?: number;
}

export interface CallContext {
  readonly jobId: string;
  /** The activity, for the log. */
  readonly call: string;
  /** Takes the lease before any work: the orchestration's repeat of a call. */
  readonly claimFirst: boolean;
}

const defaultSleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const defaultSchedule = (ms: number, fn: () => void): { cancel(): void } => {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return { cancel: () => clearTimeout(timer) };
};

export class CallClaims {
  constructor(private readonly deps: CallClaimsDeps) {}

  /** Runs `work` under the job's call lease as the module comment says. */
  async run<T>(ctx: CallContext, work: () => Promise<T>): Promise<T> {
    const { store, logger } = this.deps;
    const leaseId = randomUUID();
    const started = performance.now();
    let holding = false;
    if (ctx.claimFirst) {
      const waitedMs = await this.waitFor(ctx.jobId, leaseId);
      holding = true;
      if (waitedMs > 0) logger.info('job.call_waited', { jobId: ctx.jobId, call: ctx.call, waitedMs: Math.round(waitedMs) });
    }
    let done = false;
    let overlapLogged = false;
    let timer: { cancel(): void } | undefined;
    const tick = async (): Promise<void> => {
      try {
        if (holding) {
          holding = await store.renew(ctx.jobId, leaseId);
          if (!holding) logger.warn('job.call_claim_lost', { jobId: ctx.jobId, call: ctx.call });
        } else {
          holding = await store.acquire(ctx.jobId, leaseId, CALL_CLAIM.leaseSeconds);
          if (holding && done) {
            // The work ended while the lease was being taken: give it back at once.
            holding = false;
            await store.release(ctx.jobId, leaseId);
          }
          if (!holding && !done && !overlapLogged) {
            overlapLogged = true;
            logger.warn('job.call_overlap', { jobId: ctx.jobId, call: ctx.call, hint: 'another call of this job holds its lease' });
          }
        }
      } catch (err) {
        // Storage trouble: the next tick tries again (the lease outlives two missed renewals).
        logger.warn('job.call_claim_failed', { jobId: ctx.jobId, call: ctx.call, error: err });
      }
      if (!done && performance.now() - started < CALL_CLAIM.maxHoldMs) arm(CALL_CLAIM.renewEveryMs);
    };
    const arm = (ms: number): void => {
      timer = (this.deps.schedule ?? defaultSchedule)(ms, () => void tick());
    };
    arm(holding ? CALL_CLAIM.renewEveryMs : (this.deps.claimAfterMs ?? CALL_CLAIM.claimAfterMs));
    try {
      return await work();
    } finally {
      done = true;
      timer?.cancel();
      if (holding) {
        // A release that fails leaves the lease to run out (15 s): the stall check waits that long at most.
        await store
          .release(ctx.jobId, leaseId)
          .catch((err: unknown) => logger.warn('job.call_claim_failed', { jobId: ctx.jobId, call: ctx.call, error: err }));
      }
    }
  }

  /** Whether a live call of the job holds its lease (the stall check's question). */
  held(jobId: string): Promise<boolean> {
    return this.deps.store.held(jobId);
  }

  /** Takes the lease, waiting while another call holds it; answers how long it waited. */
  private async waitFor(jobId: string, leaseId: string): Promise<number> {
    const started = performance.now();
    let pause: number = CALL_CLAIM.waitFirstMs;
    while (!(await this.deps.store.acquire(jobId, leaseId, CALL_CLAIM.leaseSeconds))) {
      await (this.deps.sleep ?? defaultSleep)(pause);
      pause = Math.min(CALL_CLAIM.waitMaxMs, pause * 2);
    }
    return performance.now() - started;
  }
}

export function callLeaseBlob(jobId: string): string {
  return `jobs/${checkJobId(jobId)}/call.lease`;
}

/** The call lease as a blob lease in the jobs container (the blob is created empty on first use). */
export class BlobCallClaimStore implements CallClaimStore {
  constructor(private readonly container: ContainerClient) {}

  async acquire(jobId: string, leaseId: string, seconds: number): Promise<boolean> {
    const blob = this.container.getBlockBlobClient(callLeaseBlob(jobId));
    for (let attempt = 0; ; attempt++) {
      try {
        await blob.getBlobLeaseClient(leaseId).acquireLease(seconds);
        return true;
      } catch (err) {
        if (isStatus(err, 409)) return false;
        if (!isStatus(err, 404) || attempt > 0) throw err;
      }
      try {
        await blob.upload('', 0, { conditions: { ifNoneMatch: '*' } });
      } catch (err) {
        // Created by another call first (409/412): fine.
        if (!isStatus(err, 409, 412)) throw err;
      }
    }
  }

  async renew(jobId: string, leaseId: string): Promise<boolean> {
    try {
      await this.container.getBlockBlobClient(callLeaseBlob(jobId)).getBlobLeaseClient(leaseId).renewLease();
      return true;
    } catch (err) {
      if (isStatus(err, 404, 409)) return false;
      throw err;
    }
  }

  async release(jobId: string, leaseId: string): Promise<void> {
    try {
      await this.container.getBlockBlobClient(callLeaseBlob(jobId)).getBlobLeaseClient(leaseId).releaseLease();
    } catch (err) {
      // Not ours any more (lapsed and taken), or gone: nothing to release.
      if (!isStatus(err, 404, 409)) throw err;
    }
  }

  async held(jobId: string): Promise<boolean> {
    try {
      const props = await this.container.getBlockBlobClient(callLeaseBlob(jobId)).getProperties();
      return props.leaseState === 'leased';
    } catch (err) {
      if (isStatus(err, 404)) return false;
      throw err;
    }
  }
}

/** The call lease in memory, on a clock the test holds. */
export class MemoryCallClaimStore implements CallClaimStore {
  readonly #leases = new Map<string, { leaseId: string; until: number }>();
  /** Leases taken (a test's count of claimed calls). */
  acquired = 0;

  constructor(private readonly now: () => number = Date.now) {}

  acquire(jobId: string, leaseId: string, seconds: number): Promise<boolean> {
    const lease = this.#leases.get(jobId);
    if (lease !== undefined && lease.leaseId !== leaseId && lease.until > this.now()) return Promise.resolve(false);
    this.#leases.set(jobId, { leaseId, until: this.now() + seconds * 1000 });
    this.acquired += 1;
    return Promise.resolve(true);
  }

  renew(jobId: string, leaseId: string): Promise<boolean> {
    const lease = this.#leases.get(jobId);
    if (lease?.leaseId !== leaseId) return Promise.resolve(false);
    this.#leases.set(jobId, { leaseId, until: this.now() + CALL_CLAIM.leaseSeconds * 1000 });
    return Promise.resolve(true);
  }

  release(jobId: string, leaseId: string): Promise<void> {
    if (this.#leases.get(jobId)?.leaseId === leaseId) this.#leases.delete(jobId);
    return Promise.resolve();
  }

  held(jobId: string): Promise<boolean> {
    const lease = this.#leases.get(jobId);
    return Promise.resolve(lease !== undefined && lease.until > this.now());
  }
}
