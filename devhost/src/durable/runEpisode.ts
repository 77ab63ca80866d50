/**
 * One orchestration episode, as the Durable extension runs it: append OrchestratorStarted and the
 * new events to the history, invoke the orchestrator function with the extension's trigger payload
 * (the SDK's own executor replays the history), play its result against the history
 * (replayActions), and close the episode with the completion event, if any, and
 * OrchestratorCompleted (Azure/durabletask src/DurableTask.Core/TaskOrchestrationDispatcher.cs,
 * OnProcessWorkItemAsync). Continue-as-new starts the next generation inside the same episode, as
 * that dispatcher does: its history begins OrchestratorStarted, ExecutionStarted, the raised events
 * carried over, OrchestratorCompleted; its `createdTime` is that ExecutionStarted's time
 * (DurableTask.AzureStorage AzureTableTrackingStore.UpdateStateAsync writes CreatedTime from each
 * ExecutionStarted).
 *
 * Custom status follows the dispatcher too: each episode stores what the orchestrator set in it,
 * nothing when it set none (the custom status is cleared), except that within an episode that
 * continued as new, a generation that set none keeps the previous generation's (`carryOverStatus`).
 *
 * Guarantees: pure with respect to storage (returns the new state and the work to send; the caller
 * persists and sends); whatever the orchestrator does fails the instance with the extension's reason
 * instead of throwing; termination completes the instance without running user code.
 */
import { randomUUID } from 'node:crypto';

import { type FunctionInvoker } from '../contracts';
import { type Logger } from '../log';
import { EventType, fromJsonText, type HistoryEvent, historyEvent, type RuntimeStatus } from './HistoryEvent';
import { type InstanceState } from './InstanceStore';
import { type OrchestratorOutcome, replayActions, type ReplayResult, type ScheduledSubOrchestration, type ScheduledTimer } from './replayActions';
import { type ActivityTask } from './TaskHubQueues';

/** What the extension tells out-of-process SDKs about itself (OrchestrationTriggerAttributeBindingProvider). */
export const TRIGGER_PAYLOAD_CONSTANTS = {
  upperSchemaVersion: 1,
  upperSchemaVersionNew: 2,
  // The Azure Storage provider's MaximumDelayTime and LongRunningTimerIntervalLength (TimeSpan text).
  maximumShortTimerDuration: '6.00:00:00',
  longRunningTimerIntervalDuration: '3.00:00:00',
  defaultHttpAsyncRequestSleepTimeMillseconds: 30000,
} as const;

const OUT_OF_PROC_DATA_LABEL = '\n\n$OutOfProcData$:';
/** Generations one episode may run back to back before it fails (an orchestrator that only continues-as-new). */
const MAX_GENERATIONS_PER_EPISODE = 50;

export interface EpisodeDeps {
  readonly invoker: FunctionInvoker;
  readonly clock: () => Date;
  readonly logger: Logger;
  /** host.json durableTask.maxOrchestrationActions (default 100,000). */
  readonly maxOrchestrationActions?: number;
}

export interface EpisodeResult {
  readonly state: InstanceState;
  /** Work of the execution current at the end of the episode. */
  readonly activities: ActivityTask[];
  readonly timers: ScheduledTimer[];
  readonly subOrchestrations: ScheduledSubOrchestration[];
  /** Set when the instance reached a terminal status in this episode. */
  readonly completed?: { readonly status: RuntimeStatus; readonly output: string | null };
}

function parseOutOfProcState(text: string): Record<string, unknown> | undefined {
  try {
    const parsed = JSON.parse(text) as unknown;
    return typeof parsed === 'object' && parsed !== null ? (parsed as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

async function invokeOrchestrator(deps: EpisodeDeps, state: InstanceState, history: HistoryEvent[], isReplaying: boolean): Promise<OrchestratorOutcome> {
  const trigger = {
    // A copy: the episode goes on appending to its own list after the call.
    history: history.map((e) => ({ ...e })),
    input: fromJsonText(state.input),
    instanceId: state.instanceId,
    isReplaying,
    parentInstanceId: state.parent?.OrchestrationInstance.InstanceId ?? null,
    ...TRIGGER_PAYLOAD_CONSTANTS,
  };
  try {
    const result = await deps.invoker.invoke(state.name, { trigger });
    const value = result.returnValue;
    if (typeof value !== 'object' || value === null || !('actions' in value)) {
      return { error: `the orchestrator returned no orchestration state (is "${state.name}" registered with df.app.orchestration?)` };
    }
    return { state: value };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    // The SDK throws OrchestrationFailureError: the message, then the label, then the state as JSON.
    const at = message.indexOf(OUT_OF_PROC_DATA_LABEL);
    if (at >= 0) {
      const outOfProc = parseOutOfProcState(message.slice(at + OUT_OF_PROC_DATA_LABEL.length));
      const error = typeof outOfProc?.error === 'string' ? outOfProc.error : message.slice(0, at);
      return outOfProc === undefined ? { error } : { state: outOfProc, error };
    }
    return { error: message };
  }
}

/** The app's activity and orchestrator function names, as the extension knows them. */
export function durableFunctions(invoker: FunctionInvoker): { activities: string[]; orchestrators: string[] } {
  const all = invoker.list();
  return {
    activities: all.filter((f) => f.triggerType === 'activityTrigger').map((f) => f.name),
    orchestrators: all.filter((f) => f.triggerType === 'orchestrationTrigger').map((f) => f.name),
  };
}

function lastDecisionId(history: readonly HistoryEvent[]): number {
  let max = -1;
  for (const event of history) {
    if (event.EventType === EventType.TaskScheduled || event.EventType === EventType.TimerCreated || event.EventType === EventType.SubOrchestrationInstanceCreated) {
      max = Math.max(max, event.EventId);
    }
  }
  return max;
}

function closeEpisode(history: HistoryEvent[], at: Date): void {
  if (history[history.length - 1]?.EventType !== EventType.OrchestratorCompleted) history.push(historyEvent.orchestratorCompleted(at));
}

/** Runs one episode for `state` with the newly arrived `events` (already deduplicated). */
export async function runEpisode(state: InstanceState, events: readonly HistoryEvent[], deps: EpisodeDeps): Promise<EpisodeResult> {
  const next: InstanceState = { ...state, history: state.history.map((e) => ({ ...e, IsPlayed: true })) };
  const startedAt = deps.clock();
  let history: HistoryEvent[] = [...next.history, historyEvent.orchestratorStarted(startedAt)];

  const terminateAt = events.findIndex((e) => e.EventType === EventType.ExecutionTerminated);
  if (terminateAt >= 0) {
    // DurableTask.Core completes a terminated instance with the reason as its result, without user code.
    const terminated = events[terminateAt];
    const reason = terminated?.Input ?? null;
    history.push(...events.slice(0, terminateAt + 1).map((e) => ({ ...e })));
    const at = deps.clock();
    history.push(historyEvent.executionCompleted(at, lastDecisionId(history) + 1, 'Terminated', reason));
    closeEpisode(history, at);
    Object.assign(next, { history, runtimeStatus: 'Terminated', output: reason, lastUpdatedTime: at.toISOString() });
    return { state: next, activities: [], timers: [], subOrchestrations: [], completed: { status: 'Terminated', output: reason } };
  }

  history.push(...events.map((e) => ({ ...e, IsPlayed: false })));
  // The previous generation's custom status within this episode (TaskOrchestrationDispatcher's carryOverStatus).
  let carryOverStatus: string | null | undefined;
  for (let generation = 0; ; generation += 1) {
    const isReplaying = next.history.some((e) => e.EventType === EventType.ExecutionStarted);
    const outcome = await invokeOrchestrator(deps, next, history, isReplaying);
    const replay: ReplayResult = replayActions({
      history,
      outcome,
      name: next.name,
      instanceId: next.instanceId,
      parentInstanceId: next.parent?.OrchestrationInstance.InstanceId ?? null,
      executionId: next.executionId,
      decidedAt: deps.clock(),
      functions: durableFunctions(deps.invoker),
      ...(deps.maxOrchestrationActions === undefined ? {} : { maxOrchestrationActions: deps.maxOrchestrationActions }),
    });
    next.customStatus = replay.customStatus ?? carryOverStatus ?? null;
    history.push(...replay.decisions);
    const finishedAt = deps.clock();
    next.lastUpdatedTime = finishedAt.toISOString();
    const work = { activities: replay.activities.map((a) => ({ id: a.id, name: a.name, input: a.input })), timers: replay.timers, subOrchestrations: replay.subOrchestrations };

    const finish = (status: RuntimeStatus, output: string | null): EpisodeResult => {
      history.push(historyEvent.executionCompleted(finishedAt, replay.nextEventId, status, output));
      closeEpisode(history, finishedAt);
      Object.assign(next, { history, runtimeStatus: status, output });
      if (status === 'Failed') deps.logger.warn('durable.orchestration.failed', { instanceId: next.instanceId, name: next.name, reason: output });
      return { state: next, ...work, completed: { status, output } };
    };
    const end = replay.end;
    if (end.kind === 'failed') return finish('Failed', end.reason);
    if (end.kind === 'completed') return finish('Completed', end.output);
    if (end.kind === 'continuedAsNew') {
      if (generation + 1 >= MAX_GENERATIONS_PER_EPISODE) {
        // DurableTask.Core would loop forever; a readable failure is more useful on a development host.
        return finish(
          'Failed',
          `Orchestrator function '${next.name}' failed: continued as new ${MAX_GENERATIONS_PER_EPISODE} times in one episode without waiting for anything (code DURABLE_CONTINUE_AS_NEW_LOOP)`,
        );
      }
      // The old generation ends; only the new generation's history is kept, and its creation time restarts.
      carryOverStatus = replay.customStatus;
      const executionId = randomUUID().replace(/-/g, '');
      const at = deps.clock();
      history = [
        historyEvent.orchestratorStarted(at),
        historyEvent.executionStarted(at, { name: next.name, instanceId: next.instanceId, executionId, input: end.input, parent: next.parent, generation: next.generation + 1, version: next.version ?? '' }),
        ...end.carryOver,
        historyEvent.orchestratorCompleted(at),
      ];
      Object.assign(next, { history: [], executionId, input: end.input, generation: next.generation + 1, runtimeStatus: 'Running', createdTime: at.toISOString() });
      continue;
    }
    closeEpisode(history, finishedAt);
    Object.assign(next, { history, runtimeStatus: 'Running' });
    return { state: next, ...work };
  }
}
