/**
 * Turns the actions an out-of-process orchestrator returned into the history the extension would
 * write, by replaying them the way the extension does: its OutOfProcOrchestrationShim invokes each
 * action through DurableTask.Core's orchestration context, in order, awaiting each one, while
 * DurableTask.Core plays the history events one by one and completes the matching tasks. Sequence
 * numbers (`EventId` of TaskScheduled/TimerCreated/SubOrchestrationInstanceCreated) come from that
 * context's counter, so they are assigned in the same event-driven order the SDK's own executor
 * assigns task ids in. Retries follow DurableTask.Core's RetryInterceptor: a failed attempt is
 * followed by a timer (FirstRetryInterval x BackoffCoefficient^attempt, capped by MaxRetryInterval)
 * and a new TaskScheduled; the last failed attempt is followed by an immediate "back-compat" timer,
 * then the failure.
 *
 * Guarantees: actions whose sequence number already has its event in history produce nothing;
 * new ones come back sorted by sequence number with the events and the work to send; an action
 * whose history event disagrees (another name or type) is reported as non-determinism.
 * Not supported (reported with a stable code): Durable HTTP, entities, the V1 action schema.
 */
import { DevHostError } from '../errors';
import { EventType, type HistoryEvent, historyEvent } from './HistoryEvent';
import { validateInstanceId } from './taskHubNames';

/** durable-functions ActionType numbers (actions/ActionType.js), as they arrive in the orchestrator's JSON. */
const ActionType = {
  CallActivity: 0,
  CallActivityWithRetry: 1,
  CallSubOrchestrator: 2,
  CallSubOrchestratorWithRetry: 3,
  ContinueAsNew: 4,
  CreateTimer: 5,
  WaitForExternalEvent: 6,
  CallEntity: 7,
  CallHttp: 8,
  SignalEntity: 9,
  WhenAny: 11,
  WhenAll: 12,
  LockEntities: 13,
  ReleaseEntities: 14,
} as const;

const UNSUPPORTED_ACTIONS: Readonly<Record<number, string>> = {
  [ActionType.CallEntity]: 'callEntity',
  [ActionType.CallHttp]: 'callHttp',
  [ActionType.SignalEntity]: 'signalEntity',
  [ActionType.LockEntities]: 'lock',
  [ActionType.ReleaseEntities]: 'lock release',
};

export interface ScheduledActivity {
  readonly id: number;
  readonly name: string;
  readonly input: unknown;
}

export interface ScheduledTimer {
  readonly id: number;
  readonly fireAt: Date;
}

export interface ScheduledSubOrchestration {
  readonly id: number;
  readonly name: string;
  readonly instanceId: string;
  /** JSON text of the input (null for none). */
  readonly input: string | null;
}

export interface ReplayResult {
  /** New decision events, sorted by `EventId`. */
  readonly decisions: HistoryEvent[];
  readonly activities: ScheduledActivity[];
  readonly timers: ScheduledTimer[];
  readonly subOrchestrations: ScheduledSubOrchestration[];
  /** Set when the orchestrator called continueAsNew: the next generation's input as JSON text. */
  readonly continueAsNew?: { readonly input: string | null };
  /** The next sequence number (what an ExecutionCompleted/ContinueAsNew event takes as `EventId`). */
  readonly nextEventId: number;
}

export interface ReplayInput {
  readonly history: readonly HistoryEvent[];
  readonly actions: unknown;
  readonly schemaVersion: unknown;
  /** The current execution's id (default sub-orchestration instance ids derive from it). */
  readonly executionId: string;
  /** When decisions are recorded (their `Timestamp`). */
  readonly decidedAt: Date;
  /** The app's Durable functions; when given, calling one that is not registered fails like the extension. */
  readonly functions?: { readonly activities: readonly string[]; readonly orchestrators: readonly string[] };
}

/** DurableTaskExtension.GetInvalidActivityFunctionMessage / GetInvalidOrchestratorFunctionMessage. */
export function unknownFunctionMessage(kind: 'activity' | 'orchestrator', name: string, known: readonly string[]): string {
  const info = known.length > 0 ? `The following are the known ${kind} functions: '${known.join("', '")}'.` : `No ${kind} functions are currently registered!`;
  return `The function '${name}' doesn't exist, is disabled, or is not an ${kind} function. Additional info: ${info}`;
}

interface RawAction {
  readonly actionType?: unknown;
  readonly functionName?: unknown;
  readonly input?: unknown;
  readonly fireAt?: unknown;
  readonly isCanceled?: unknown;
  readonly externalEventName?: unknown;
  readonly retryOptions?: unknown;
  readonly instanceId?: unknown;
  readonly compoundActions?: unknown;
}

interface RetryPolicy {
  readonly firstRetryIntervalMs: number;
  readonly maxNumberOfAttempts: number;
  readonly backoffCoefficient: number;
  readonly maxRetryIntervalMs: number;
  readonly retryTimeoutMs: number;
}

/** A task of the simulated .NET orchestration context: settles once, then runs its continuations in order. */
class SimTask {
  state: 'pending' | 'succeeded' | 'failed' = 'pending';
  #continuations: Array<() => void> = [];

  get done(): boolean {
    return this.state !== 'pending';
  }

  settle(succeeded: boolean): void {
    if (this.done) return;
    this.state = succeeded ? 'succeeded' : 'failed';
    const continuations = this.#continuations;
    this.#continuations = [];
    for (const next of continuations) next();
  }

  then(next: () => void): void {
    if (this.done) next();
    else this.#continuations.push(next);
  }
}

function settled(succeeded: boolean): SimTask {
  const task = new SimTask();
  task.settle(succeeded);
  return task;
}

function replayError(code: string, message: string): DevHostError {
  return new DevHostError(code, message, true);
}

/** durable-functions JSON-encodes string inputs of actions (Utils.processInput); the extension sees the decoded value. */
export function decodeActionInput(input: unknown): unknown {
  if (typeof input !== 'string') return input ?? null;
  try {
    return JSON.parse(input) as unknown;
  } catch {
    return input;
  }
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

function toRetryPolicy(raw: unknown, functionName: string): RetryPolicy {
  if (typeof raw !== 'object' || raw === null) {
    throw replayError('DURABLE_BAD_ACTION', `The retry call of "${functionName}" has no retryOptions.`);
  }
  const options = raw as Record<string, unknown>;
  const firstRetryIntervalMs = numberOr(options.firstRetryIntervalInMilliseconds, NaN);
  const maxNumberOfAttempts = numberOr(options.maxNumberOfAttempts, NaN);
  if (!(firstRetryIntervalMs > 0) || !(maxNumberOfAttempts >= 1)) {
    throw replayError('DURABLE_BAD_ACTION', `The retryOptions of "${functionName}" need firstRetryIntervalInMilliseconds > 0 and maxNumberOfAttempts >= 1.`);
  }
  return {
    firstRetryIntervalMs,
    maxNumberOfAttempts: Math.floor(maxNumberOfAttempts),
    backoffCoefficient: numberOr(options.backoffCoefficient, 1),
    maxRetryIntervalMs: numberOr(options.maxRetryIntervalInMilliseconds, Number.POSITIVE_INFINITY),
    retryTimeoutMs: numberOr(options.retryTimeoutInMilliseconds, Number.POSITIVE_INFINITY),
  };
}

class Replayer {
  #nextId = 0;
  #now = new Date(0);
  readonly #open = new Map<number, SimTask>();
  readonly #historyDecisions = new Map<number, HistoryEvent>();
  readonly #waiters = new Map<string, SimTask[]>();
  readonly #bufferedEvents = new Map<string, number>();
  readonly #newDecisions: Array<{ id: number; event: HistoryEvent }> = [];
  readonly activities: ScheduledActivity[] = [];
  readonly timers: ScheduledTimer[] = [];
  readonly subOrchestrations: ScheduledSubOrchestration[] = [];
  continueAsNew: { input: string | null } | undefined;

  constructor(
    private readonly input: ReplayInput,
    private readonly topLevel: readonly RawAction[],
  ) {
    for (const event of input.history) {
      if (event.EventType === EventType.TaskScheduled || event.EventType === EventType.TimerCreated || event.EventType === EventType.SubOrchestrationInstanceCreated) {
        this.#historyDecisions.set(event.EventId, event);
      }
    }
  }

  run(): ReplayResult {
    for (const event of this.input.history) {
      switch (event.EventType) {
        case EventType.OrchestratorStarted:
          this.#now = new Date(event.Timestamp);
          break;
        case EventType.ExecutionStarted:
          this.#startShim();
          break;
        case EventType.TaskCompleted:
        case EventType.SubOrchestrationInstanceCompleted:
          this.#complete(event.TaskScheduledId, true);
          break;
        case EventType.TaskFailed:
        case EventType.SubOrchestrationInstanceFailed:
          this.#complete(event.TaskScheduledId, false);
          break;
        case EventType.TimerFired:
          this.#complete(event.TimerId, true);
          break;
        case EventType.EventRaised:
          this.#deliver(event.Name ?? '');
          break;
        default:
          break;
      }
    }
    const decisions = this.#newDecisions.sort((a, b) => a.id - b.id).map((d) => d.event);
    return {
      decisions,
      activities: this.activities,
      timers: this.timers,
      subOrchestrations: this.subOrchestrations,
      ...(this.continueAsNew === undefined ? {} : { continueAsNew: this.continueAsNew }),
      nextEventId: this.#nextId,
    };
  }

  // The shim awaits each top-level action in turn (ProcessAsyncActionsV2), ignoring failures.
  #startShim(): void {
    let index = 0;
    const advance = (): void => {
      while (index < this.topLevel.length) {
        const action = this.topLevel[index];
        index += 1;
        if (action === undefined) continue;
        const task = this.#invoke(action);
        if (!task.done) {
          task.then(advance);
          return;
        }
      }
    };
    advance();
  }

  #complete(id: number | undefined, succeeded: boolean): void {
    if (id === undefined) return;
    const task = this.#open.get(id);
    // Unknown ids are duplicates or completions of cancelled timers; DurableTask.Core drops them too.
    if (task === undefined) return;
    this.#open.delete(id);
    task.settle(succeeded);
  }

  // The extension keeps waiters of one name on a stack, so the newest wait gets the event (a
  // Task.any in a loop abandons the older ones); names match case-insensitively
  // (DurableOrchestrationContext.WaitForExternalEvent / RaiseEvent).
  #deliver(name: string): void {
    const key = name.toLowerCase();
    const newest = this.#waiters.get(key)?.pop();
    if (newest !== undefined) {
      newest.settle(true);
      return;
    }
    this.#bufferedEvents.set(key, (this.#bufferedEvents.get(key) ?? 0) + 1);
  }

  #claim(kind: number, name: string | undefined): { id: number; existing: boolean } {
    const id = this.#nextId;
    this.#nextId += 1;
    const existing = this.#historyDecisions.get(id);
    if (existing === undefined) return { id, existing: false };
    if (existing.EventType !== kind || (name !== undefined && existing.Name !== name)) {
      const found = `${String(existing.EventType)}${existing.Name === undefined ? '' : ` "${existing.Name}"`}`;
      throw replayError(
        'DURABLE_NONDETERMINISM',
        `Non-deterministic workflow detected: sequence number ${id} was event type ${found} in history, but the orchestrator now schedules type ${kind}${name === undefined ? '' : ` "${name}"`}.`,
      );
    }
    return { id, existing: true };
  }

  #assertExists(kind: 'activity' | 'orchestrator', name: string): void {
    const known = kind === 'activity' ? this.input.functions?.activities : this.input.functions?.orchestrators;
    // Function names are case-insensitive in the Functions host.
    if (known === undefined || known.some((k) => k.toLowerCase() === name.toLowerCase())) return;
    throw replayError('DURABLE_UNKNOWN_FUNCTION', unknownFunctionMessage(kind, name, known));
  }

  #scheduleActivity(name: string, input: unknown): SimTask {
    this.#assertExists('activity', name);
    const { id, existing } = this.#claim(EventType.TaskScheduled, name);
    const task = new SimTask();
    this.#open.set(id, task);
    if (!existing) {
      this.#newDecisions.push({ id, event: historyEvent.taskScheduled(this.input.decidedAt, id, name, input) });
      this.activities.push({ id, name, input });
    }
    return task;
  }

  #createTimer(fireAt: Date, canceled: boolean): SimTask {
    const { id, existing } = this.#claim(EventType.TimerCreated, undefined);
    const task = new SimTask();
    if (!existing) {
      this.#newDecisions.push({ id, event: historyEvent.timerCreated(this.input.decidedAt, id, fireAt) });
      this.timers.push({ id, fireAt });
    }
    // A cancelled timer is still created (its TimerCreated is written) but nobody waits for it.
    if (canceled) task.settle(false);
    else this.#open.set(id, task);
    return task;
  }

  #scheduleSubOrchestration(name: string, instanceId: string | undefined, input: unknown): SimTask {
    this.#assertExists('orchestrator', name);
    const { id, existing } = this.#claim(EventType.SubOrchestrationInstanceCreated, name);
    const task = new SimTask();
    this.#open.set(id, task);
    if (!existing) {
      const childId = instanceId !== undefined && instanceId !== '' ? instanceId : `${this.input.executionId}:${id}`;
      const invalid = validateInstanceId(childId);
      if (invalid !== undefined) throw replayError('DURABLE_BAD_INSTANCE_ID', `Sub-orchestration instance id "${childId}" is invalid: ${invalid}`);
      const inputText = input === undefined || input === null ? null : JSON.stringify(input);
      this.#newDecisions.push({ id, event: historyEvent.subOrchestrationCreated(this.input.decidedAt, id, name, childId, inputText) });
      this.subOrchestrations.push({ id, name, instanceId: childId, input: inputText });
    }
    return task;
  }

  #waitForEvent(name: string): SimTask {
    const key = name.toLowerCase();
    const buffered = this.#bufferedEvents.get(key) ?? 0;
    if (buffered > 0) {
      this.#bufferedEvents.set(key, buffered - 1);
      return settled(true);
    }
    const task = new SimTask();
    const stack = this.#waiters.get(key) ?? [];
    stack.push(task);
    this.#waiters.set(key, stack);
    return task;
  }

  // DurableTask.Core RetryInterceptor.Invoke, step for step.
  #withRetry(policy: RetryPolicy, attempt: () => SimTask): SimTask {
    const outer = new SimTask();
    const firstAttempt = this.#now.getTime();
    const run = (retryCount: number): void => {
      const task = attempt();
      task.then(() => {
        if (task.state === 'succeeded') {
          outer.settle(true);
          return;
        }
        if (retryCount + 1 === policy.maxNumberOfAttempts) {
          this.#createTimer(this.#now, false).then(() => outer.settle(false));
          return;
        }
        const delayMs = this.#nextDelay(policy, retryCount, firstAttempt);
        if (delayMs <= 0) {
          outer.settle(false);
          return;
        }
        this.#createTimer(new Date(this.#now.getTime() + delayMs), false).then(() => run(retryCount + 1));
      });
    };
    run(0);
    return outer;
  }

  #nextDelay(policy: RetryPolicy, attempt: number, firstAttempt: number): number {
    if (this.#now.getTime() >= firstAttempt + policy.retryTimeoutMs) return 0;
    const delay = policy.firstRetryIntervalMs * Math.pow(policy.backoffCoefficient, attempt);
    return delay < policy.maxRetryIntervalMs ? delay : policy.maxRetryIntervalMs;
  }

  #invoke(action: RawAction): SimTask {
    const type = typeof action.actionType === 'number' ? action.actionType : Number(action.actionType);
    const functionName = typeof action.functionName === 'string' ? action.functionName : '';
    switch (type) {
      case ActionType.CallActivity:
        return this.#scheduleActivity(functionName, decodeActionInput(action.input));
      case ActionType.CallActivityWithRetry: {
        const policy = toRetryPolicy(action.retryOptions, functionName);
        return this.#withRetry(policy, () => this.#scheduleActivity(functionName, decodeActionInput(action.input)));
      }
      case ActionType.CallSubOrchestrator:
        return this.#scheduleSubOrchestration(functionName, typeof action.instanceId === 'string' ? action.instanceId : undefined, decodeActionInput(action.input));
      case ActionType.CallSubOrchestratorWithRetry: {
        const policy = toRetryPolicy(action.retryOptions, functionName);
        const instanceId = typeof action.instanceId === 'string' ? action.instanceId : undefined;
        return this.#withRetry(policy, () => this.#scheduleSubOrchestration(functionName, instanceId, decodeActionInput(action.input)));
      }
      case ActionType.ContinueAsNew: {
        const input = decodeActionInput(action.input);
        this.continueAsNew = { input: input === undefined || input === null ? null : JSON.stringify(input) };
        return settled(true);
      }
      case ActionType.CreateTimer: {
        const fireAt = new Date(typeof action.fireAt === 'string' || typeof action.fireAt === 'number' ? action.fireAt : NaN);
        if (Number.isNaN(fireAt.getTime())) throw replayError('DURABLE_BAD_ACTION', 'A CreateTimer action has no valid fireAt.');
        return this.#createTimer(fireAt, action.isCanceled === true);
      }
      case ActionType.WaitForExternalEvent:
        return this.#waitForEvent(typeof action.externalEventName === 'string' ? action.externalEventName : '');
      case ActionType.WhenAll:
      case ActionType.WhenAny: {
        const children = Array.isArray(action.compoundActions) ? (action.compoundActions as RawAction[]).map((child) => this.#invoke(child)) : [];
        const outer = new SimTask();
        if (type === ActionType.WhenAny) {
          for (const child of children) child.then(() => outer.settle(true));
        } else {
          let remaining = children.length;
          if (remaining === 0) outer.settle(true);
          for (const child of children) {
            child.then(() => {
              remaining -= 1;
              if (remaining === 0) outer.settle(true);
            });
          }
        }
        return outer;
      }
      default: {
        const what = UNSUPPORTED_ACTIONS[type] ?? `action type ${String(action.actionType)}`;
        throw replayError('DURABLE_UNSUPPORTED_ACTION', `The development host's Durable backend does not support ${what} (orchestrator action ${String(action.actionType)}).`);
      }
    }
  }
}

/** Replays the orchestrator's actions against its history; see the module comment. */
export function replayActions(input: ReplayInput): ReplayResult {
  const schema = typeof input.schemaVersion === 'number' ? input.schemaVersion : Number(input.schemaVersion);
  if (!(schema >= 1)) {
    throw replayError('DURABLE_UNSUPPORTED_SCHEMA', `Orchestrator replay schema ${String(input.schemaVersion)} is not supported (the host offers V3).`);
  }
  // From schema V2 on, the SDK sends every action of the execution in one list, wrapped in an outer array.
  const outer = Array.isArray(input.actions) ? (input.actions as unknown[]) : [];
  if (outer.length > 1) throw replayError('DURABLE_BAD_ACTION', `Expected one action list for schema V2+, got ${outer.length}.`);
  const list = Array.isArray(outer[0]) ? (outer[0] as RawAction[]) : [];
  return new Replayer(input, list).run();
}
