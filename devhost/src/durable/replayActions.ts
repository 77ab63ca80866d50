/**
 * Plays one orchestrator invocation's result against its history the way the Durable extension
 * does for out-of-process SDKs, and decides what the episode produces.
 *
 * Sources (read, not copied): Azure/azure-functions-durable-extension
 * Listener/OutOfProcOrchestrationShim.cs (custom status first, then each top-level action invoked
 * and awaited in turn, errors of awaited tasks ignored, the SDK's `error` thrown only after the
 * replay, output set only after it), ContextImplementations/DurableOrchestrationContext.cs (16 KB
 * UTF-16 custom status limit, MaxOrchestrationActions counted per call, timer and sub-orchestration
 * checks); Azure/durabletask src/DurableTask.Core/TaskOrchestrationExecutor.cs (history played in
 * order; the orchestration completes only once no task is open) and TaskOrchestrationContext.cs (one
 * sequence counter; each TaskScheduled / TimerCreated / SubOrchestrationInstanceCreated of history
 * must match the action the replay created under that number, names compared case-insensitively,
 * else NonDeterministicOrchestrationException; raised events after continue-as-new carried over);
 * RetryInterceptor.cs (retry timers).
 *
 * Guarantees: pure; never throws for anything an orchestrator can do: refusals come back as
 * `end: failed` with the extension's reason. Not supported, failing the orchestration loudly with
 * code DURABLE_UNSUPPORTED_ACTION in the reason: Durable HTTP, entities, the V1 action schema.
 */
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

/** DurableOrchestrationContext.SetCustomStatus: MaxCustomStatusPayloadSizeInKB. */
export const MAX_CUSTOM_STATUS_KB = 16;
/** DurableTaskOptions.MaxOrchestrationActions' default. */
export const DEFAULT_MAX_ORCHESTRATION_ACTIONS = 100_000;
const NONDETERMINISM_PREFIX = 'Non-Deterministic workflow detected: ';
const CHANGED = 'Was a change made to the orchestrator code after this instance had already started running?';

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

/** What the SDK returned: its orchestrator state, or the error of an invocation that returned none. */
export interface OrchestratorOutcome {
  readonly state?: Readonly<Record<string, unknown>>;
  /** The SDK's `error` (the orchestrator threw), or the invocation's own failure when there is no state. */
  readonly error?: string;
}

export type EpisodeEnd =
  | { readonly kind: 'running' }
  | { readonly kind: 'completed'; readonly output: string | null }
  | { readonly kind: 'continuedAsNew'; readonly input: string | null; readonly carryOver: HistoryEvent[] }
  | { readonly kind: 'failed'; readonly reason: string };

export interface ReplayResult {
  /** New decision events, sorted by `EventId` (none when the orchestration failed). */
  readonly decisions: HistoryEvent[];
  readonly activities: ScheduledActivity[];
  readonly timers: ScheduledTimer[];
  readonly subOrchestrations: ScheduledSubOrchestration[];
  /** The next sequence number (what ExecutionCompleted takes as `EventId`). */
  readonly nextEventId: number;
  /** JSON text of the custom status this invocation set; null when it set none (which clears it). */
  readonly customStatus: string | null;
  readonly end: EpisodeEnd;
}

export interface ReplayInput {
  /** The execution's history as the orchestrator received it (past events, then this episode's). */
  readonly history: readonly HistoryEvent[];
  readonly outcome: OrchestratorOutcome;
  /** Orchestrator function name (for the extension's failure reasons). */
  readonly name: string;
  readonly instanceId: string;
  readonly parentInstanceId?: string | null;
  /** The current execution's id (default sub-orchestration instance ids derive from it). */
  readonly executionId: string;
  /** When decisions are recorded (their `Timestamp`). */
  readonly decidedAt: Date;
  /** The app's Durable functions; calling one that is not registered fails like the extension. */
  readonly functions?: { readonly activities: readonly string[]; readonly orchestrators: readonly string[] };
  /** host.json durableTask.maxOrchestrationActions. */
  readonly maxOrchestrationActions?: number;
}

/** DurableTaskExtension.GetInvalidActivityFunctionMessage / GetInvalidOrchestratorFunctionMessage. */
export function unknownFunctionMessage(kind: 'activity' | 'orchestrator', name: string, known: readonly string[]): string {
  const info = known.length > 0 ? `The following are the known ${kind} functions: '${known.join("', '")}'.` : `No ${kind} functions are currently registered!`;
  return `The function '${name}' doesn't exist, is disabled, or is not an ${kind} function. Additional info: ${info}`;
}

/** MessagePayloadDataConverter.Serialize with a size limit: the UTF-16 byte count, in whole KB, truncated. */
export function customStatusSizeError(json: string): string | undefined {
  const sizeKb = Math.floor((json.length * 2) / 1024);
  if (sizeKb <= MAX_CUSTOM_STATUS_KB) return undefined;
  return `The UTF-16 size of the JSON-serialized payload must not exceed ${MAX_CUSTOM_STATUS_KB} KB. The current payload size is ${sizeKb.toLocaleString('en-US')} KB.`;
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

/** An action DurableTask.Core keeps under its sequence number until the history event for it is played. */
type PendingAction =
  | { readonly kind: 'ScheduleTaskOrchestratorAction'; readonly name: string; readonly event: HistoryEvent; readonly work: ScheduledActivity }
  | { readonly kind: 'CreateTimerOrchestratorAction'; readonly event: HistoryEvent; readonly work: ScheduledTimer | undefined }
  | { readonly kind: 'CreateSubOrchestrationAction'; readonly name: string; readonly event: HistoryEvent; readonly work: ScheduledSubOrchestration };

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

/** What the extension throws inside the shim: it fails the orchestration with this message. */
class ShimFault extends Error {}

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
  if (typeof raw !== 'object' || raw === null) throw new ShimFault(`The retry call of "${functionName}" has no retryOptions (code DURABLE_BAD_ACTION).`);
  const options = raw as Record<string, unknown>;
  const firstRetryIntervalMs = numberOr(options.firstRetryIntervalInMilliseconds, NaN);
  const maxNumberOfAttempts = numberOr(options.maxNumberOfAttempts, NaN);
  if (!(firstRetryIntervalMs > 0) || !(maxNumberOfAttempts >= 1)) {
    throw new ShimFault(`The retryOptions of "${functionName}" need firstRetryIntervalInMilliseconds > 0 and maxNumberOfAttempts >= 1 (code DURABLE_BAD_ACTION).`);
  }
  return {
    firstRetryIntervalMs,
    maxNumberOfAttempts: Math.floor(maxNumberOfAttempts),
    backoffCoefficient: numberOr(options.backoffCoefficient, 1),
    maxRetryIntervalMs: numberOr(options.maxRetryIntervalInMilliseconds, Number.POSITIVE_INFINITY),
    retryTimeoutMs: numberOr(options.retryTimeoutInMilliseconds, Number.POSITIVE_INFINITY),
  };
}

function sameName(a: string | undefined, b: string): boolean {
  return (a ?? '').toLowerCase() === b.toLowerCase();
}

class Replayer {
  #nextId = 0;
  #now = new Date(0);
  #actionCount = 0;
  /** DurableTask.Core's orchestratorActionsMap: created, not yet matched by a history event. */
  readonly #actions = new Map<number, PendingAction>();
  /** DurableTask.Core's openTasks. */
  readonly #open = new Map<number, SimTask>();
  readonly #waiters = new Map<string, SimTask[]>();
  readonly #bufferedEvents = new Map<string, number>();
  #customStatus: string | null = null;
  #fault: string | undefined;
  #shimDone = false;
  #nondeterminism: string | undefined;
  #continueAsNew: { input: string | null; carryOver: HistoryEvent[] } | undefined;
  readonly #maxActions: number;

  constructor(private readonly input: ReplayInput) {
    this.#maxActions = input.maxOrchestrationActions ?? DEFAULT_MAX_ORCHESTRATION_ACTIONS;
  }

  run(): ReplayResult {
    for (const event of this.input.history) {
      if (this.#nondeterminism !== undefined) break;
      switch (event.EventType) {
        case EventType.OrchestratorStarted:
          this.#now = new Date(event.Timestamp);
          break;
        case EventType.ExecutionStarted:
          this.#startShim();
          break;
        case EventType.TaskScheduled:
        case EventType.TimerCreated:
        case EventType.SubOrchestrationInstanceCreated:
          this.#matchDecision(event);
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
          // After continue-as-new, DurableTask.Core keeps raised events for the next generation (Carryover).
          if (this.#continueAsNew !== undefined) this.#continueAsNew.carryOver.push({ ...event, IsPlayed: false });
          else this.#deliver(event.Name ?? '');
          break;
        default:
          break;
      }
    }
    return this.#result();
  }

  #result(): ReplayResult {
    const base = { nextEventId: this.#nextId, customStatus: this.#customStatus };
    const none = { decisions: [], activities: [], timers: [], subOrchestrations: [] };
    if (this.#nondeterminism !== undefined) return { ...none, ...base, end: { kind: 'failed', reason: this.#nondeterminism } };
    const pending = [...this.#actions.entries()].sort((a, b) => a[0] - b[0]).map(([, action]) => action);
    const work = {
      decisions: pending.map((a) => a.event),
      activities: pending.flatMap((a) => (a.kind === 'ScheduleTaskOrchestratorAction' ? [a.work] : [])),
      timers: pending.flatMap((a) => (a.kind === 'CreateTimerOrchestratorAction' && a.work !== undefined ? [a.work] : [])),
      subOrchestrations: pending.flatMap((a) => (a.kind === 'CreateSubOrchestrationAction' ? [a.work] : [])),
    };
    // TaskOrchestrationExecutor: nothing completes while a task is open, not even a failure.
    if (this.#open.size > 0) return { ...work, ...base, end: { kind: 'running' } };
    if (this.#fault !== undefined) return { ...none, ...base, end: { kind: 'failed', reason: this.#fault } };
    const state = this.input.outcome.state;
    if (!this.#shimDone || state?.isDone !== true) return { ...work, ...base, end: { kind: 'running' } };
    if (this.#continueAsNew !== undefined) return { ...work, ...base, end: { kind: 'continuedAsNew', ...this.#continueAsNew } };
    return { ...work, ...base, end: { kind: 'completed', output: JSON.stringify(state.output ?? null) } };
  }

  #failOrchestrator(message: string): void {
    this.#fault ??= `Orchestrator function '${this.input.name}' failed: ${message}`;
  }

  // TaskOrchestrationShim + OutOfProcOrchestrationShim.ScheduleDurableTaskEvents, run when ExecutionStarted is played.
  #startShim(): void {
    const { state, error } = this.input.outcome;
    if (state === undefined) {
      this.#failOrchestrator(error ?? 'the orchestrator returned no orchestration state');
      return;
    }
    const customStatus = state.customStatus;
    if (customStatus !== undefined && customStatus !== null) {
      const json = JSON.stringify(customStatus);
      const tooLarge = customStatusSizeError(json);
      if (tooLarge !== undefined) {
        // An SDK error path lets the extension's ArgumentException through unwrapped.
        if (error !== undefined) this.#fault ??= tooLarge;
        else this.#failOrchestrator(tooLarge);
        return;
      }
      this.#customStatus = json;
    }
    const schema = typeof state.schemaVersion === 'number' ? state.schemaVersion : Number(state.schemaVersion);
    if (!(schema >= 1)) {
      this.#failOrchestrator(`Orchestrator replay schema ${String(state.schemaVersion)} is not supported by the development host (code DURABLE_UNSUPPORTED_SCHEMA).`);
      return;
    }
    const outer = Array.isArray(state.actions) ? (state.actions as unknown[]) : [];
    if (outer.length !== 1) {
      this.#failOrchestrator(`With OOProc schema V${schema + 1}, expected actions array to be of length 1 in outer layer but got size: ${outer.length}`);
      return;
    }
    const list = Array.isArray(outer[0]) ? (outer[0] as RawAction[]) : [];
    let index = 0;
    // ProcessAsyncActionsV2: each action awaited in turn; a failed task is ignored, a throwing call ends the shim.
    const advance = (): void => {
      while (index < list.length) {
        const action = list[index];
        index += 1;
        if (action === undefined) continue;
        let task: SimTask;
        try {
          task = this.#invoke(action);
        } catch (err) {
          if (!(err instanceof ShimFault)) throw err;
          this.#failOrchestrator(err.message);
          return;
        }
        if (!task.done) {
          task.then(advance);
          return;
        }
      }
      this.#shimDone = true;
      if (error !== undefined) this.#failOrchestrator(error);
    };
    advance();
  }

  #matchDecision(event: HistoryEvent): void {
    const id = event.EventId;
    const action = this.#actions.get(id);
    const version = event.Version ?? '';
    if (event.EventType === EventType.TaskScheduled) {
      const what = `an activity task with sequence number ${id} named '${event.Name ?? ''}'`;
      if (action === undefined) {
        return this.#nondeterministic(
          `A previous execution of this orchestration scheduled an activity task with sequence ID ${id} and name '${event.Name ?? ''}' (version '${version}'), but the current replay execution hasn't (yet?) scheduled this task. ${CHANGED}`,
        );
      }
      if (action.kind !== 'ScheduleTaskOrchestratorAction') {
        return this.#nondeterministic(`A previous execution of this orchestration scheduled ${what}, but the current orchestration replay instead produced a ${action.kind} action with this sequence number. ${CHANGED}`);
      }
      if (!sameName(event.Name, action.name)) {
        return this.#nondeterministic(`A previous execution of this orchestration scheduled ${what}, but the current orchestration replay instead scheduled an activity task named '${action.name}' with this sequence number.  ${CHANGED}`);
      }
    } else if (event.EventType === EventType.TimerCreated) {
      if (action === undefined) {
        return this.#nondeterministic(`A previous execution of this orchestration scheduled a timer task with sequence number ${id} but the current replay execution hasn't (yet?) scheduled this task. ${CHANGED}`);
      }
      if (action.kind !== 'CreateTimerOrchestratorAction') {
        return this.#nondeterministic(
          `A previous execution of this orchestration scheduled a timer task with sequence number ${id} named but the current orchestration replay instead produced a ${action.kind} action with this sequence number. ${CHANGED}`,
        );
      }
    } else {
      const what = `a sub-orchestration task with sequence ID ${id} and name '${event.Name ?? ''}' (version '${version}', instance ID '${event.InstanceId ?? ''}')`;
      if (action === undefined) return this.#nondeterministic(`A previous execution of this orchestration scheduled ${what}, but the current replay execution hasn't (yet?) scheduled this task. ${CHANGED}`);
      if (action.kind !== 'CreateSubOrchestrationAction') {
        return this.#nondeterministic(`A previous execution of this orchestration scheduled ${what}, but the current orchestration replay instead produced a ${action.kind} action at this sequence number. ${CHANGED}`);
      }
      if (!sameName(event.Name, action.name)) {
        return this.#nondeterministic(`A previous execution of this orchestration scheduled ${what}, but the current orchestration replay instead scheduled a sub-orchestration task with name ${action.name} at this sequence number. ${CHANGED}`);
      }
    }
    this.#actions.delete(id);
  }

  #nondeterministic(details: string): void {
    this.#nondeterminism = `${NONDETERMINISM_PREFIX}${details}`;
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

  // DurableOrchestrationContext.IncrementActionsOrThrowException.
  #countAction(): void {
    if (this.#actionCount >= this.#maxActions) {
      throw new ShimFault(`Maximum amount of orchestration actions (${this.#maxActions}) has been reached. This value can be configured in host.json file as MaxOrchestrationActions.`);
    }
    this.#actionCount += 1;
  }

  #assertExists(kind: 'activity' | 'orchestrator', name: string): string {
    const known = kind === 'activity' ? this.input.functions?.activities : this.input.functions?.orchestrators;
    if (known === undefined) return name;
    // Function names are case-insensitive in the Functions host (FunctionName.Equals).
    const registered = known.find((k) => sameName(k, name));
    if (registered === undefined) throw new ShimFault(unknownFunctionMessage(kind, name, known));
    return registered;
  }

  #scheduleActivity(name: string, input: unknown): SimTask {
    const id = this.#nextId++;
    const task = new SimTask();
    this.#open.set(id, task);
    this.#actions.set(id, { kind: 'ScheduleTaskOrchestratorAction', name, event: historyEvent.taskScheduled(this.input.decidedAt, id, name, input), work: { id, name, input } });
    return task;
  }

  #createTimer(fireAt: Date, canceled: boolean): SimTask {
    const id = this.#nextId++;
    const task = new SimTask();
    // A cancelled timer is still created (its TimerCreated is written) but leaves the open tasks at once.
    this.#actions.set(id, { kind: 'CreateTimerOrchestratorAction', event: historyEvent.timerCreated(this.input.decidedAt, id, fireAt), work: canceled ? undefined : { id, fireAt } });
    if (canceled) task.settle(false);
    else this.#open.set(id, task);
    return task;
  }

  #scheduleSubOrchestration(name: string, instanceId: string | undefined, input: unknown): SimTask {
    const id = this.#nextId++;
    const childId = instanceId !== undefined && instanceId !== '' ? instanceId : `${this.input.executionId}:${id}`;
    const task = new SimTask();
    this.#open.set(id, task);
    const inputText = input === undefined || input === null ? null : JSON.stringify(input);
    this.#actions.set(id, {
      kind: 'CreateSubOrchestrationAction',
      name,
      event: historyEvent.subOrchestrationCreated(this.input.decidedAt, id, name, childId, inputText),
      work: { id, name, instanceId: childId, input: inputText },
    });
    return task;
  }

  #checkSubOrchestrationId(instanceId: string | undefined): void {
    if (instanceId === undefined || instanceId === '') return;
    const same = (other: string | null | undefined): boolean => other !== undefined && other !== null && other.toLowerCase() === instanceId.toLowerCase();
    if (same(this.input.instanceId) || same(this.input.parentInstanceId)) {
      throw new ShimFault('The instance ID of a sub-orchestration must be different than the instance ID of a parent orchestration.');
    }
    const invalid = validateInstanceId(instanceId);
    if (invalid !== undefined) throw new ShimFault(`Sub-orchestration instance id "${instanceId}" is invalid: ${invalid}`);
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

  // OutOfProcOrchestrationShim.InvokeAPIFromAction and the DurableOrchestrationContext calls behind it.
  #invoke(action: RawAction): SimTask {
    const type = typeof action.actionType === 'number' ? action.actionType : Number(action.actionType);
    const functionName = typeof action.functionName === 'string' ? action.functionName : '';
    switch (type) {
      case ActionType.CallActivity: {
        const name = this.#assertExists('activity', functionName);
        this.#countAction();
        return this.#scheduleActivity(name, decodeActionInput(action.input));
      }
      case ActionType.CallActivityWithRetry: {
        const policy = toRetryPolicy(action.retryOptions, functionName);
        const name = this.#assertExists('activity', functionName);
        this.#countAction();
        return this.#withRetry(policy, () => this.#scheduleActivity(name, decodeActionInput(action.input)));
      }
      case ActionType.CallSubOrchestrator:
      case ActionType.CallSubOrchestratorWithRetry: {
        const policy = type === ActionType.CallSubOrchestratorWithRetry ? toRetryPolicy(action.retryOptions, functionName) : undefined;
        const name = this.#assertExists('orchestrator', functionName);
        const instanceId = typeof action.instanceId === 'string' ? action.instanceId : undefined;
        this.#checkSubOrchestrationId(instanceId);
        this.#countAction();
        const schedule = (): SimTask => this.#scheduleSubOrchestration(name, instanceId, decodeActionInput(action.input));
        return policy === undefined ? schedule() : this.#withRetry(policy, schedule);
      }
      case ActionType.ContinueAsNew: {
        const input = decodeActionInput(action.input);
        this.#continueAsNew = { input: input === undefined || input === null ? null : JSON.stringify(input), carryOver: [] };
        return settled(true);
      }
      case ActionType.CreateTimer: {
        const fireAt = new Date(typeof action.fireAt === 'string' || typeof action.fireAt === 'number' ? action.fireAt : NaN);
        if (Number.isNaN(fireAt.getTime())) throw new ShimFault('A CreateTimer action has no valid fireAt (code DURABLE_BAD_ACTION).');
        this.#countAction();
        return this.#createTimer(fireAt, action.isCanceled === true);
      }
      case ActionType.WaitForExternalEvent:
        return this.#waitForEvent(typeof action.externalEventName === 'string' ? action.externalEventName : '');
      case ActionType.WhenAll:
      case ActionType.WhenAny: {
        // Task.WhenAll/WhenAny enumerate their children first: a throwing child stops the rest.
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
        throw new ShimFault(`The development host's Durable backend does not support ${what} (orchestrator action ${String(action.actionType)}; code DURABLE_UNSUPPORTED_ACTION).`);
      }
    }
  }
}

/** Plays the orchestrator's result against its history; see the module comment. */
export function replayActions(input: ReplayInput): ReplayResult {
  return new Replayer(input).run();
}
