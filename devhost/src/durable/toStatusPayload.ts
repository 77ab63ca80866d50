/**
 * The status document the extension's HTTP API returns (StatusResponsePayload), including the
 * `historyEvents` summary of `showHistory=true` as DurableClient.GetDurableOrchestrationStatusAsync
 * builds it: OrchestratorStarted/Completed dropped, each TaskScheduled folded into its completion
 * (`FunctionName`, `ScheduledTime`, and `Input` when shown), event types and the completion status
 * as names, results only with `showHistoryOutput=true` (parsed as JSON), no EventId/IsPlayed.
 */
import { eventTypeName, fromJsonText, type HistoryEvent, ORCHESTRATION_STATUS_NUMBER, type RuntimeStatus } from './HistoryEvent';
import { type InstanceState, type InstanceSummary } from './InstanceStore';

export interface StatusPayload {
  readonly name: string;
  readonly instanceId: string;
  readonly runtimeStatus: RuntimeStatus;
  readonly input: unknown;
  readonly customStatus: unknown;
  readonly output: unknown;
  readonly createdTime: string;
  readonly lastUpdatedTime: string;
  readonly historyEvents?: Array<Record<string, unknown>>;
}

export interface StatusOptions {
  readonly showHistory?: boolean;
  readonly showHistoryOutput?: boolean;
  readonly showInput?: boolean;
}

const STATUS_NAMES = new Map<number, string>(Object.entries(ORCHESTRATION_STATUS_NUMBER).map(([name, value]) => [value, name]));

/** DateTime.ToString("s") + "Z": whole seconds. */
function toSecondsIso(iso: string): string {
  return `${iso.slice(0, 19)}Z`;
}

function withoutNulls(record: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).filter(([, value]) => value !== null && value !== undefined));
}

export function summarizeHistory(history: readonly HistoryEvent[], showHistoryOutput: boolean, showInput: boolean): Array<Record<string, unknown>> {
  const items: Array<Record<string, unknown>> = history.map((e) => ({ ...e }));
  const scheduled = new Map<string, { index: number; name: unknown; time: unknown; input: unknown }>();
  const drop = new Set<number>();
  items.forEach((item, i) => {
    const type = eventTypeName(Number(item.EventType));
    if (type === undefined) return;
    item.EventType = type;
    switch (type) {
      case 'TaskScheduled':
      case 'SubOrchestrationInstanceCreated':
        scheduled.set(`${type}_${String(item.EventId)}`, { index: i, name: item.Name, time: item.Timestamp, input: item.Input });
        delete item.Version;
        break;
      case 'TaskCompleted':
      case 'TaskFailed':
      case 'SubOrchestrationInstanceCompleted':
      case 'SubOrchestrationInstanceFailed': {
        const prefix = type.startsWith('Task') ? 'TaskScheduled' : 'SubOrchestrationInstanceCreated';
        const origin = scheduled.get(`${prefix}_${String(item.TaskScheduledId)}`);
        if (origin !== undefined) {
          item.ScheduledTime = origin.time;
          item.FunctionName = origin.name;
          if (showInput) item.Input = origin.input;
          drop.add(origin.index);
        }
        delete item.TaskScheduledId;
        const hasOutput = type === 'TaskCompleted' || type === 'SubOrchestrationInstanceCompleted';
        if (hasOutput && !showHistoryOutput) delete item.Result;
        if (hasOutput && showHistoryOutput) item.Result = fromJsonText(item.Result as string | null);
        break;
      }
      case 'ExecutionStarted':
        item.FunctionName = item.Name;
        delete item.Name;
        delete item.OrchestrationInstance;
        delete item.ParentInstance;
        delete item.Version;
        delete item.Tags;
        break;
      case 'ExecutionCompleted':
        item.OrchestrationStatus = STATUS_NAMES.get(Number(item.OrchestrationStatus)) ?? item.OrchestrationStatus;
        if (!showHistoryOutput) delete item.Result;
        else item.Result = fromJsonText(item.Result as string | null);
        break;
      case 'TimerFired':
        delete item.TimerId;
        break;
      case 'OrchestratorStarted':
      case 'OrchestratorCompleted':
        drop.add(i);
        break;
      default:
        break;
    }
    if (!showInput) delete item.Input;
    delete item.EventId;
    delete item.IsPlayed;
  });
  return items.filter((_, i) => !drop.has(i)).map(withoutNulls);
}

/** A list's items are summaries (no history); a single instance's status may show its history. */
export function toStatusPayload(state: InstanceSummary & Partial<Pick<InstanceState, 'history'>>, options: StatusOptions = {}): StatusPayload {
  const showInput = options.showInput ?? true;
  const payload: StatusPayload = {
    name: state.name,
    instanceId: state.instanceId,
    runtimeStatus: state.runtimeStatus,
    input: showInput ? fromJsonText(state.input) : null,
    customStatus: fromJsonText(state.customStatus),
    output: fromJsonText(state.output),
    createdTime: toSecondsIso(state.createdTime),
    lastUpdatedTime: toSecondsIso(state.lastUpdatedTime),
  };
  if (options.showHistory === true && state.runtimeStatus !== 'Pending' && state.history !== undefined) {
    return { ...payload, historyEvents: summarizeHistory(state.history, options.showHistoryOutput === true, showInput) };
  }
  return payload;
}
