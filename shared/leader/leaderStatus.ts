/**
 * What GET /api/leader, GET /api/cluster and GET /api/health answer, built from the process's
 * runtime. Reads the lease blob (no lease needed, so any instance can answer); never includes the
 * lease id or anything from the connection. A storage failure is reported as a
 * `StorageUnavailableError` for the HTTP layer to map, never thrown raw.
 *
 * Who sees what: the anonymous leader view is the lease record only (holder, epoch, since when,
 * lease state); this instance's counters, passes and error texts are for callers with a key.
 */
import { CoordinatorError } from '../errors';
import { CachedRead } from './CachedRead';
import { type Clock } from './Clock';
import { type LastPass, type LastPassError, type RuntimeState } from './CoordinatorRuntime';
import { type CurrentLeader, type ElectorCounters, type ElectorRole } from './LeaseElector';

/** The part of a CoordinatorRuntime these views read. */
export interface RuntimeStatusSource {
  state(): RuntimeState;
  counters(): Readonly<ElectorCounters>;
  currentLeader(): Promise<CurrentLeader>;
}

export class StorageUnavailableError extends CoordinatorError {
  override readonly name = 'StorageUnavailableError';
  constructor(options?: { cause?: unknown }) {
    super('STORAGE_UNAVAILABLE', 'The lease blob could not be read; storage is unreachable or slow. See the app log.', false, options);
  }
}

/** What anyone may see: the lease record, nothing about the answering instance. */
export interface PublicLeaderView {
  readonly holder: string | null;
  readonly epoch: number | null;
  readonly acquiredAt: string | null;
  readonly leaseState: string;
  readonly leaseStatus: string;
}

export interface LeaderView extends PublicLeaderView {
  readonly instance: {
    readonly id: string;
    readonly role: ElectorRole;
    /** RuntimeState.campaigning: whether this instance contends for the lease. */
    readonly campaigning: boolean;
    readonly epoch: number | null;
    readonly passes: number;
    readonly lastPass: LastPass | null;
    readonly lastPassError: LastPassError | null;
  };
  readonly counters: Readonly<ElectorCounters>;
}

export interface HealthView {
  readonly status: 'ok' | 'degraded';
  readonly instance: string;
  readonly role: ElectorRole;
  readonly storage: { readonly reachable: boolean };
}

/**
 * A status source whose lease reads are shared for `ttlMs` (CachedRead): anonymous routes cost at
 * most one blob read per ttl per instance, however many requests arrive.
 */
export function cachedStatusSource(
  runtime: RuntimeStatusSource,
  ttlMs: number,
  clock?: Pick<Clock, 'now'>,
): RuntimeStatusSource & { readonly reads: number } {
  const lease = new CachedRead(() => runtime.currentLeader(), ttlMs, clock);
  return {
    state: () => runtime.state(),
    counters: () => runtime.counters(),
    currentLeader: () => lease.get(),
    get reads() {
      return lease.reads;
    },
  };
}

export async function publicLeaderView(runtime: Pick<RuntimeStatusSource, 'currentLeader'>): Promise<PublicLeaderView> {
  let leader;
  try {
    leader = await runtime.currentLeader();
  } catch (err) {
    throw new StorageUnavailableError({ cause: err });
  }
  return {
    holder: leader.holder ?? null,
    epoch: leader.epoch ?? null,
    acquiredAt: leader.acquiredAt ?? null,
    leaseState: leader.leaseState,
    leaseStatus: leader.leaseStatus,
  };
}

export async function leaderView(runtime: RuntimeStatusSource): Promise<LeaderView> {
  const leader = await publicLeaderView(runtime);
  const state = runtime.state();
  return {
    ...leader,
    instance: {
      id: state.holder,
      role: state.role,
      campaigning: state.campaigning,
      epoch: state.epoch ?? null,
      passes: state.passes,
      lastPass: state.lastPass ?? null,
      lastPassError: state.lastPassError ?? null,
    },
    counters: runtime.counters(),
  };
}

/** Health stays 200 while storage is down: restarting instances would not bring storage back. */
export async function healthView(runtime: RuntimeStatusSource): Promise<HealthView> {
  const state = runtime.state();
  const reachable = await runtime.currentLeader().then(
    () => true,
    () => false,
  );
  return { status: reachable ? 'ok' : 'degraded', instance: state.holder, role: state.role, storage: { reachable } };
}
