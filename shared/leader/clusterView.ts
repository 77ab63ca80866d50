/**
 * GET /api/cluster (function key): everything an operator's page needs about leadership in one
 * answer: the lease record, the answering instance's role, passes and counters, the recent terms,
 * the instances seen recently with their roles, the lease timings, and who leads now or what a
 * takeover under way is waiting for (leadershipView.ts). Three storage reads (lease properties, the
 * history blob, one listing of heartbeats); the lease read is the shared cached one.
 */
import { type InstanceSeen } from './InstanceHeartbeats';
import { type LeadershipView, leadershipView, type LeaseTimingView, leaseTimingView } from './leadershipView';
import { type LeaderView, leaderView, type RuntimeStatusSource, StorageUnavailableError } from './leaderStatus';
import { type ElectorTiming } from './leaderTiming';
import { type TermEntry } from './TermHistory';

export interface ClusterRecordsSource {
  terms(): Promise<TermEntry[]>;
  instances(): Promise<InstanceSeen[]>;
}

export interface ClusterView extends LeaderView {
  readonly terms: readonly TermEntry[];
  readonly instances: readonly InstanceSeen[];
  readonly timing: LeaseTimingView;
  readonly leadership: LeadershipView;
  /** When this answer was put together (the answering instance's clock). */
  readonly readAt: string;
}

export async function clusterView(
  runtime: RuntimeStatusSource,
  records: ClusterRecordsSource,
  elector: ElectorTiming,
  now: () => Date = () => new Date(),
): Promise<ClusterView> {
  const [leader, terms, instances] = await Promise.all([
    leaderView(runtime),
    records.terms().catch((err: unknown) => {
      throw new StorageUnavailableError({ cause: err });
    }),
    records.instances().catch((err: unknown) => {
      throw new StorageUnavailableError({ cause: err });
    }),
  ]);
  const at = now();
  const timing = leaseTimingView(elector);
  return { ...leader, terms, instances, timing, leadership: leadershipView(leader, instances, timing, at), readAt: at.toISOString() };
}
