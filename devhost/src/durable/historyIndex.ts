/**
 * What an instance's history already holds (its start; tasks scheduled and completed; timers created
 * and fired; sub-orchestrations created), so that an episode applies only new events (a second
 * completion of one task or a second firing of one timer is dropped) and a re-send finds the work
 * the instance still waits for.
 */
import { EventType, type HistoryEvent } from './HistoryEvent';

export interface HistoryIndex {
  hasExecutionStarted: boolean;
  readonly scheduled: Set<number>;
  readonly completed: Set<number>;
  readonly timers: Set<number>;
  readonly fired: Set<number>;
  readonly subOrchestrations: Set<number>;
}

export function indexHistory(history: readonly HistoryEvent[]): HistoryIndex {
  const index: HistoryIndex = {
    hasExecutionStarted: false,
    scheduled: new Set(),
    completed: new Set(),
    timers: new Set(),
    fired: new Set(),
    subOrchestrations: new Set(),
  };
  for (const e of history) recordEvent(index, e);
  return index;
}

/** Adds `e` to `index` (an event just accepted into an episode). */
export function recordEvent(index: HistoryIndex, e: HistoryEvent): void {
  switch (e.EventType) {
    case EventType.ExecutionStarted:
      index.hasExecutionStarted = true;
      break;
    case EventType.TaskScheduled:
      index.scheduled.add(e.EventId);
      break;
    case EventType.SubOrchestrationInstanceCreated:
      index.subOrchestrations.add(e.EventId);
      break;
    case EventType.TaskCompleted:
    case EventType.TaskFailed:
    case EventType.SubOrchestrationInstanceCompleted:
    case EventType.SubOrchestrationInstanceFailed:
      if (e.TaskScheduledId !== undefined) index.completed.add(e.TaskScheduledId);
      break;
    case EventType.TimerCreated:
      index.timers.add(e.EventId);
      break;
    case EventType.TimerFired:
      if (e.TimerId !== undefined) index.fired.add(e.TimerId);
      break;
    default:
      break;
  }
}

/** Whether `e` still has to be applied to an instance whose history is indexed by `index`. */
export function isNewEvent(index: HistoryIndex, e: HistoryEvent): boolean {
  switch (e.EventType) {
    case EventType.ExecutionStarted:
      return !index.hasExecutionStarted;
    case EventType.TaskCompleted:
    case EventType.TaskFailed:
      return e.TaskScheduledId !== undefined && index.scheduled.has(e.TaskScheduledId) && !index.completed.has(e.TaskScheduledId);
    case EventType.SubOrchestrationInstanceCompleted:
    case EventType.SubOrchestrationInstanceFailed:
      return e.TaskScheduledId !== undefined && index.subOrchestrations.has(e.TaskScheduledId) && !index.completed.has(e.TaskScheduledId);
    case EventType.TimerFired:
      return e.TimerId !== undefined && index.timers.has(e.TimerId) && !index.fired.has(e.TimerId);
    case EventType.EventRaised:
    case EventType.ExecutionTerminated:
      return true;
    default:
      return false;
  }
}
