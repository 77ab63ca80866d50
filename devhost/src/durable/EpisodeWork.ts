/**
 * Sends the work an orchestration episode produced: activity work messages, timer messages, the
 * start of each sub-orchestration and, when the instance finished, its parent's notification. Also
 * re-sends what an instance's history still waits for, after a redelivery shows that an earlier
 * attempt may have stopped before sending. Every receiver is idempotent, so sending twice is safe.
 */
import { type DispatchContext, type DispatcherDeps } from './DispatchContext';
import { EventType, fromJsonText, historyEvent, isTerminal, type ParentInstanceRef } from './HistoryEvent';
import { indexHistory } from './historyIndex';
import { type InstanceState, newInstanceState } from './InstanceStore';
import { type ScheduledSubOrchestration } from './replayActions';
import { type EpisodeResult } from './runEpisode';
import { type ActivityTask, newMessageId } from './TaskHubQueues';

export class EpisodeWork {
  readonly #deps: DispatcherDeps;
  readonly #clock: () => Date;

  constructor(ctx: DispatchContext) {
    this.#deps = ctx.deps;
    this.#clock = ctx.clock;
  }

  /** Sends an episode's work; `state` is the instance as saved after the episode. */
  async send(
    state: InstanceState,
    result: Pick<EpisodeResult, 'activities' | 'timers' | 'subOrchestrations' | 'completed'>,
  ): Promise<void> {
    const { queues } = this.#deps;
    const sends: Array<Promise<void>> = [];
    for (const task of result.activities) {
      sends.push(queues.sendWork({ mid: newMessageId(), instanceId: state.instanceId, executionId: state.executionId, task }));
    }
    const now = this.#clock().getTime();
    for (const timer of result.timers) {
      const fired = historyEvent.timerFired(timer.fireAt, timer.id, timer.fireAt.toISOString());
      sends.push(
        queues.sendControl(
          { mid: newMessageId(), instanceId: state.instanceId, executionId: state.executionId, events: [fired] },
          (timer.fireAt.getTime() - now) / 1000,
        ),
      );
    }
    for (const child of result.subOrchestrations) sends.push(this.#startSubOrchestration(state, child));
    if (result.completed !== undefined && state.parent !== null) {
      sends.push(this.#notifyParent(state.parent, state, result.completed.status, result.completed.output));
    }
    await Promise.all(sends);
  }

  /** Re-sends everything `state` still waits for (idempotent at every receiver). */
  async resendPending(state: InstanceState): Promise<void> {
    const index = indexHistory(state.history);
    const activities: ActivityTask[] = [];
    const timers: Array<{ id: number; fireAt: Date }> = [];
    const subOrchestrations: ScheduledSubOrchestration[] = [];
    for (const e of state.history) {
      if (e.EventType === EventType.TaskScheduled && !index.completed.has(e.EventId)) {
        const parameters = fromJsonText(e.Input ?? null);
        activities.push({ id: e.EventId, name: e.Name ?? '', input: Array.isArray(parameters) ? (parameters[0] as unknown) : parameters });
      } else if (e.EventType === EventType.TimerCreated && !index.fired.has(e.EventId)) {
        timers.push({ id: e.EventId, fireAt: new Date(e.FireAt ?? 0) });
      } else if (e.EventType === EventType.SubOrchestrationInstanceCreated && !index.completed.has(e.EventId)) {
        subOrchestrations.push({ id: e.EventId, name: e.Name ?? '', instanceId: e.InstanceId ?? '', input: e.Input ?? null });
      }
    }
    const completed = isTerminal(state.runtimeStatus) ? { status: state.runtimeStatus, output: state.output } : undefined;
    if (isTerminal(state.runtimeStatus)) activities.length = timers.length = subOrchestrations.length = 0;
    this.#deps.logger.warn('durable.work.resent', {
      instanceId: state.instanceId,
      activities: activities.length,
      timers: timers.length,
      subOrchestrations: subOrchestrations.length,
    });
    await this.send(state, { activities, timers, subOrchestrations, ...(completed === undefined ? {} : { completed }) });
  }

  async #startSubOrchestration(parent: InstanceState, child: ScheduledSubOrchestration): Promise<void> {
    const { store, queues } = this.#deps;
    const now = this.#clock();
    const parentRef: ParentInstanceRef = {
      Name: parent.name,
      OrchestrationInstance: { InstanceId: parent.instanceId, ExecutionId: parent.executionId },
      TaskScheduleId: child.id,
      Version: '',
    };
    const existing = await store.read(child.instanceId);
    let executionId: string;
    if (
      existing !== undefined &&
      existing.state.parent?.OrchestrationInstance.ExecutionId === parent.executionId &&
      existing.state.parent.TaskScheduleId === child.id
    ) {
      // Already created by an earlier attempt: only the start message may be missing.
      executionId = existing.state.executionId;
      if (isTerminal(existing.state.runtimeStatus)) {
        await this.#notifyParent(parentRef, existing.state, existing.state.runtimeStatus, existing.state.output);
        return;
      }
    } else if (existing !== undefined && !isTerminal(existing.state.runtimeStatus)) {
      // Another live instance owns the id: the parent's call fails instead of hijacking it.
      const reason = `An Orchestration instance with the status ${existing.state.runtimeStatus} already exists.`;
      await queues.sendControl({
        mid: newMessageId(),
        instanceId: parent.instanceId,
        executionId: parent.executionId,
        events: [
          historyEvent.subOrchestrationFailed(
            now,
            child.id,
            reason,
            JSON.stringify({ code: 'DURABLE_INSTANCE_EXISTS', instanceId: child.instanceId }),
          ),
        ],
      });
      return;
    } else {
      executionId = newMessageId() + newMessageId().slice(0, 12);
      const state = newInstanceState({
        instanceId: child.instanceId,
        name: child.name,
        executionId,
        input: child.input,
        parent: parentRef,
        now,
      });
      const created = await store.create(state, existing?.etag);
      if (created === 'conflict') return;
    }
    const started = historyEvent.executionStarted(now, {
      name: child.name,
      instanceId: child.instanceId,
      executionId,
      input: child.input,
      parent: parentRef,
    });
    await queues.sendControl({ mid: newMessageId(), instanceId: child.instanceId, executionId, events: [started] });
  }

  async #notifyParent(parent: ParentInstanceRef, child: InstanceState, status: string, output: string | null): Promise<void> {
    const at = this.#clock();
    const event =
      status === 'Completed'
        ? historyEvent.subOrchestrationCompleted(at, parent.TaskScheduleId, output)
        : historyEvent.subOrchestrationFailed(
            at,
            parent.TaskScheduleId,
            output ?? `Sub-orchestration '${child.name}' ended as ${status}.`,
            JSON.stringify({ instanceId: child.instanceId, runtimeStatus: status }),
          );
    await this.#deps.queues.sendControl({
      mid: newMessageId(),
      instanceId: parent.OrchestrationInstance.InstanceId,
      executionId: parent.OrchestrationInstance.ExecutionId,
      events: [event],
    });
  }
}
