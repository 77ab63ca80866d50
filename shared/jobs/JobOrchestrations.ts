/**
 * The narrow view of Durable that the job pipeline needs (status of one instance, start, cancel
 * event, list), with `durableJobOrchestrations` adapting the durable-functions client to it.
 *
 * Guarantees: `getStatus` answers undefined for an instance that does not exist (the client's
 * 404), never throws for it; anything else the client throws passes through.
 */
import { type DurableClient, type DurableOrchestrationStatus } from 'durable-functions';

import { CANCEL_EVENT, JOB_ORCHESTRATOR, type OrchestrationState } from './jobOrchestration';

export interface OrchestrationSnapshot {
  readonly instanceId: string;
  /** Durable's runtime status: Pending, Running, Completed, ContinuedAsNew, Failed, Terminated, Suspended. */
  readonly runtimeStatus: string;
  readonly input: unknown;
  readonly output: unknown;
  readonly customStatus: unknown;
  readonly createdTime: Date;
  readonly lastUpdatedTime: Date;
}

export interface JobOrchestrations {
  getStatus(instanceId: string): Promise<OrchestrationSnapshot | undefined>;
  start(instanceId: string, input: OrchestrationState): Promise<void>;
  raiseCancel(instanceId: string, reason: string): Promise<void>;
  list(): Promise<OrchestrationSnapshot[]>;
}

function snapshot(status: DurableOrchestrationStatus): OrchestrationSnapshot {
  return {
    instanceId: status.instanceId,
    runtimeStatus: String(status.runtimeStatus),
    input: status.input,
    output: status.output,
    customStatus: status.customStatus,
    createdTime: new Date(status.createdTime),
    lastUpdatedTime: new Date(status.lastUpdatedTime),
  };
}

export function durableJobOrchestrations(client: DurableClient): JobOrchestrations {
  return {
    async getStatus(instanceId) {
      try {
        return snapshot(await client.getStatus(instanceId, { showInput: true }));
      } catch (err) {
        // The client reports a missing instance only as an Error whose text names the 404.
        if (err instanceof Error && /HTTP 404/.test(err.message)) return undefined;
        throw err;
      }
    },
    async start(instanceId, input) {
      await client.startNew(JOB_ORCHESTRATOR, { instanceId, input });
    },
    async raiseCancel(instanceId, reason) {
      await client.raiseEvent(instanceId, CANCEL_EVENT, { reason });
    },
    async list() {
      return (await client.getStatusAll()).map(snapshot);
    },
  };
}
