/**
 * GET /api/cluster (function key): everything an operator's page needs about leadership in one
 * answer: the lease record, the answering instance's role, passes and counters, the recent terms,
 * and the instances seen recently with their roles. Three storage reads (lease properties, the
 * history blob, one listing of heartbeats); the lease read is the shared cached one.
 */
import { type InstanceSeen } from './InstanceHeartbeats';
import { type LeaderView, leaderView, type RuntimeStatusSource, StorageUnavailableError } from './leaderStatus';
import { type TermEntry } from './TermHistory';

export interface ClusterRecordsSource {
  terms(): Promise<TermEntry[]>;
  instances(): Promise<InstanceSeen[]>;
}

export interface ClusterView extends LeaderView {
  readonly terms: readonly TermEntry[];
  readonly instances: readonly InstanceSeen[];
  /** When this answer was put together (the answering instance's clock). */
  readonly readAt: string;
}

export async function clusterView(
  runtime: RuntimeStatusSource,
  records: ClusterRecordsSource,
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
  return { ...leader, terms, instances, readAt: now().toISOString() };
}
