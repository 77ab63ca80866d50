/**
 * A stand-in for Durable in the intake's and the service's unit tests (the Durable client itself is
 * exercised by the integration tests on the development host): instances by id, started Pending with
 * their input, a start over an instance that has not finished refused as Durable refuses it, events
 * and purges recorded. `onStart` runs before an instance exists, where a test checks what must
 * already be stored, or makes the start fail.
 */
import { type OrchestrationState, type ResumeRequest } from '../../../../shared/jobs/run/jobOrchestration';
import { isFinished, type OrchestrationClient, type OrchestrationSnapshot } from '../../../../shared/jobs/run/OrchestrationClient';

export class MemoryOrchestrations implements OrchestrationClient {
  readonly instances = new Map<string, OrchestrationSnapshot>();
  readonly started: string[] = [];
  readonly events: Array<{ readonly instanceId: string; readonly name: 'cancel' | 'resume'; readonly body: unknown }> = [];
  onStart: (instanceId: string, input: OrchestrationState) => Promise<void> | void = () => undefined;

  constructor(private readonly now: () => number = Date.now) {}

  getStatus(instanceId: string): Promise<OrchestrationSnapshot | undefined> {
    return Promise.resolve(this.instances.get(instanceId));
  }

  async start(instanceId: string, input: OrchestrationState): Promise<void> {
    await this.onStart(instanceId, input);
    const current = this.instances.get(instanceId);
    if (current !== undefined && !isFinished(current.runtimeStatus)) {
      throw new Error(`An instance with ID '${instanceId}' already exists.`);
    }
    const at = new Date(this.now());
    this.instances.set(instanceId, { instanceId, runtimeStatus: 'Pending', input, output: null, customStatus: null, createdTime: at, lastUpdatedTime: at });
    this.started.push(instanceId);
  }

  raiseCancel(instanceId: string, reason: string): Promise<void> {
    this.events.push({ instanceId, name: 'cancel', body: { reason } });
    return Promise.resolve();
  }

  raiseResume(instanceId: string, request: ResumeRequest): Promise<void> {
    this.events.push({ instanceId, name: 'resume', body: request });
    return Promise.resolve();
  }

  list(): Promise<OrchestrationSnapshot[]> {
    return Promise.resolve([...this.instances.values()]);
  }

  listActive(): Promise<OrchestrationSnapshot[]> {
    return Promise.resolve([...this.instances.values()].filter((s) => ['Pending', 'Running', 'ContinuedAsNew'].includes(s.runtimeStatus)));
  }

  purge(instanceId: string): Promise<boolean> {
    return Promise.resolve(this.instances.delete(instanceId));
  }
}
