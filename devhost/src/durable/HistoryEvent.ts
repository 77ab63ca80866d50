/**
 * Orchestration history events in the shape the Durable Functions extension hands to an
 * out-of-process orchestrator (DurableTask.Core's `HistoryEvent` classes serialized by Newtonsoft:
 * PascalCase fields, `EventType` as a number, `Timestamp` as an ISO-8601 UTC string, `EventId` -1
 * for events that are not decisions). The durable-functions SDK's executor reads exactly these
 * fields (`EventType`, `EventId`, `IsPlayed`, `Timestamp`, `TaskScheduledId`, `TimerId`, `Name`,
 * `Input`, `Result`, `Reason`, `Details`).
 *
 * Not modelled: entity events, suspend/resume, `Correlation`/`ParentTraceContext` (always null).
 */

/** DurableTask.Core `EventType` numbers (History/EventType.cs). */
export const EventType = {
  ExecutionStarted: 0,
  ExecutionCompleted: 1,
  ExecutionFailed: 2,
  ExecutionTerminated: 3,
  TaskScheduled: 4,
  TaskCompleted: 5,
  TaskFailed: 6,
  SubOrchestrationInstanceCreated: 7,
  SubOrchestrationInstanceCompleted: 8,
  SubOrchestrationInstanceFailed: 9,
  TimerCreated: 10,
  TimerFired: 11,
  OrchestratorStarted: 12,
  OrchestratorCompleted: 13,
  EventSent: 14,
  EventRaised: 15,
  ContinueAsNew: 16,
  GenericEvent: 17,
  HistoryState: 18,
  ExecutionSuspended: 19,
  ExecutionResumed: 20,
} as const;

export type EventTypeName = keyof typeof EventType;
export type EventTypeValue = (typeof EventType)[EventTypeName];

const EVENT_TYPE_NAMES = new Map<number, EventTypeName>(Object.entries(EventType).map(([name, value]) => [value, name as EventTypeName]));

export function eventTypeName(value: number): EventTypeName | undefined {
  return EVENT_TYPE_NAMES.get(value);
}

/** The runtime statuses the HTTP API reports (DurableTask.Core `OrchestrationStatus` names). */
export const RUNTIME_STATUSES = ['Running', 'Completed', 'ContinuedAsNew', 'Failed', 'Canceled', 'Terminated', 'Pending', 'Suspended'] as const;
export type RuntimeStatus = (typeof RUNTIME_STATUSES)[number];

/** DurableTask.Core `OrchestrationStatus` numbers, as `ExecutionCompleted.OrchestrationStatus` carries them. */
export const ORCHESTRATION_STATUS_NUMBER: Readonly<Record<RuntimeStatus, number>> = {
  Running: 0,
  Completed: 1,
  ContinuedAsNew: 2,
  Failed: 3,
  Canceled: 4,
  Terminated: 5,
  Pending: 6,
  Suspended: 7,
};

export function isTerminal(status: RuntimeStatus): boolean {
  return status === 'Completed' || status === 'Failed' || status === 'Terminated' || status === 'Canceled';
}

export function isRuntimeStatus(value: string): value is RuntimeStatus {
  return (RUNTIME_STATUSES as readonly string[]).includes(value);
}

export interface OrchestrationInstanceRef {
  readonly InstanceId: string;
  readonly ExecutionId: string;
}

export interface ParentInstanceRef {
  readonly Name: string;
  readonly OrchestrationInstance: OrchestrationInstanceRef;
  readonly TaskScheduleId: number;
  readonly Version: string;
}

/** One history event; the type-specific fields are present only on the event types that have them. */
export interface HistoryEvent {
  EventType: EventTypeValue;
  EventId: number;
  IsPlayed: boolean;
  Timestamp: string;
  Name?: string;
  Version?: string;
  Input?: string | null;
  Result?: string | null;
  TaskScheduledId?: number;
  TimerId?: number;
  FireAt?: string;
  Reason?: string | null;
  Details?: string | null;
  FailureDetails?: null;
  OrchestrationStatus?: number;
  OrchestrationInstance?: OrchestrationInstanceRef;
  ParentInstance?: ParentInstanceRef | null;
  InstanceId?: string;
  Tags?: null;
  Correlation?: null;
  ScheduledStartTime?: null;
  Generation?: number;
}

function base(type: EventTypeValue, eventId: number, timestamp: Date): HistoryEvent {
  return { EventType: type, EventId: eventId, IsPlayed: false, Timestamp: timestamp.toISOString() };
}

/** Builders, one per event type, with DurableTask.Core's field names and `EventId` conventions. */
export const historyEvent = {
  orchestratorStarted: (at: Date): HistoryEvent => base(EventType.OrchestratorStarted, -1, at),
  orchestratorCompleted: (at: Date): HistoryEvent => base(EventType.OrchestratorCompleted, -1, at),
  executionStarted: (
    at: Date,
    args: { name: string; instanceId: string; executionId: string; input: string | null; parent?: ParentInstanceRef | null; generation?: number; version?: string },
  ): HistoryEvent => ({
    ...base(EventType.ExecutionStarted, -1, at),
    OrchestrationInstance: { InstanceId: args.instanceId, ExecutionId: args.executionId },
    ParentInstance: args.parent ?? null,
    Name: args.name,
    Version: args.version ?? '',
    Input: args.input,
    Tags: null,
    Correlation: null,
    ScheduledStartTime: null,
    Generation: args.generation ?? 0,
  }),
  /** `Input` is the serialized parameter array, as DurableTask.Core's ScheduleTask writes it. */
  taskScheduled: (at: Date, id: number, name: string, input: unknown): HistoryEvent => ({
    ...base(EventType.TaskScheduled, id, at),
    Name: name,
    Version: '',
    Input: JSON.stringify([input ?? null]),
  }),
  taskCompleted: (at: Date, taskScheduledId: number, result: string | null): HistoryEvent => ({
    ...base(EventType.TaskCompleted, -1, at),
    TaskScheduledId: taskScheduledId,
    Result: result,
  }),
  taskFailed: (at: Date, taskScheduledId: number, reason: string, details: string): HistoryEvent => ({
    ...base(EventType.TaskFailed, -1, at),
    TaskScheduledId: taskScheduledId,
    Reason: reason,
    Details: details,
    FailureDetails: null,
  }),
  timerCreated: (at: Date, id: number, fireAt: Date): HistoryEvent => ({ ...base(EventType.TimerCreated, id, at), FireAt: fireAt.toISOString() }),
  timerFired: (at: Date, timerId: number, fireAt: string): HistoryEvent => ({ ...base(EventType.TimerFired, -1, at), TimerId: timerId, FireAt: fireAt }),
  eventRaised: (at: Date, name: string, input: string | null): HistoryEvent => ({ ...base(EventType.EventRaised, -1, at), Name: name, Input: input }),
  executionTerminated: (at: Date, reason: string | null): HistoryEvent => ({ ...base(EventType.ExecutionTerminated, -1, at), Input: reason }),
  executionCompleted: (at: Date, id: number, status: RuntimeStatus, result: string | null): HistoryEvent => ({
    ...base(EventType.ExecutionCompleted, id, at),
    OrchestrationStatus: ORCHESTRATION_STATUS_NUMBER[status],
    Result: result,
    FailureDetails: null,
  }),
  continueAsNew: (at: Date, id: number, input: string | null): HistoryEvent => ({
    ...base(EventType.ContinueAsNew, id, at),
    OrchestrationStatus: ORCHESTRATION_STATUS_NUMBER.ContinuedAsNew,
    Result: input,
    FailureDetails: null,
  }),
  subOrchestrationCreated: (at: Date, id: number, name: string, instanceId: string, input: string | null): HistoryEvent => ({
    ...base(EventType.SubOrchestrationInstanceCreated, id, at),
    Name: name,
    Version: '',
    InstanceId: instanceId,
    Input: input,
  }),
  subOrchestrationCompleted: (at: Date, taskScheduledId: number, result: string | null): HistoryEvent => ({
    ...base(EventType.SubOrchestrationInstanceCompleted, -1, at),
    TaskScheduledId: taskScheduledId,
    Result: result,
  }),
  subOrchestrationFailed: (at: Date, taskScheduledId: number, reason: string, details: string): HistoryEvent => ({
    ...base(EventType.SubOrchestrationInstanceFailed, -1, at),
    TaskScheduledId: taskScheduledId,
    Reason: reason,
    Details: details,
    FailureDetails: null,
  }),
};

/** Serializes a value the way the extension stores inputs, outputs and custom status: JSON text, `null` for nothing. */
export function toJsonText(value: unknown): string | null {
  if (value === undefined) return null;
  return JSON.stringify(value);
}

/** Parses stored JSON text back; text that is not JSON is returned as the string itself (the extension does the same). */
export function fromJsonText(text: string | null | undefined): unknown {
  if (text === null || text === undefined) return null;
  const trimmed = text.trim();
  if (trimmed === '') return '';
  try {
    return JSON.parse(trimmed) as unknown;
  } catch {
    return text;
  }
}
