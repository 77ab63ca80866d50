/**
 * Drives an orchestrator function through the durable-functions SDK's own replay
 * (`Orchestrator`, the class `df.app.orchestration` wraps), one episode at a time, with history in
 * the Durable extension's JSON format (PascalCase events, JSON-text inputs and results, ISO
 * timestamps; the trigger payload goes through JSON as it does between host and worker).
 *
 * The driver plays the extension's part: it appends TaskScheduled / TimerCreated for each new
 * action the SDK returns, then the next episode's events: every scheduled activity completes (its
 * result comes from a script: these are hand-built histories, not activity runs), or, with no
 * activity pending, the earliest of the next timer and the next scheduled external event happens
 * (the clock jumps to it). Continue-as-new starts a new history with the new input.
 */
import { InvocationContext } from '@azure/functions';
import { TRIGGER_PAYLOAD_CONSTANTS } from 'devhost';
import { type OrchestrationHandler } from 'durable-functions';

// The SDK's executor class has no published types; this is the one method used.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Orchestrator } = require('durable-functions/lib/src/orchestrations/Orchestrator') as {
  Orchestrator: new (fn: OrchestrationHandler) => { listen(): (trigger: unknown, context: InvocationContext) => Promise<OrchestratorStateJson> };
};

export interface OrchestratorStateJson {
  readonly isDone: boolean;
  readonly actions: unknown[][];
  readonly output?: unknown;
  readonly error?: string;
  readonly customStatus?: unknown;
}

interface Action {
  readonly actionType: number;
  readonly functionName?: string;
  readonly input?: unknown;
  readonly fireAt?: string;
  readonly isCanceled?: boolean;
  readonly compoundActions?: Action[];
  readonly retryOptions?: { readonly firstRetryIntervalInMilliseconds: number; readonly maxNumberOfAttempts: number; readonly backoffCoefficient?: number };
}

interface PendingActivity {
  readonly id: number;
  readonly name: string;
  readonly input: unknown;
  readonly attempt: number;
  readonly retry?: Action['retryOptions'];
}

const EVENT = {
  ExecutionStarted: 0,
  TaskScheduled: 4,
  TaskCompleted: 5,
  TaskFailed: 6,
  TimerCreated: 10,
  TimerFired: 11,
  OrchestratorStarted: 12,
  OrchestratorCompleted: 13,
  EventRaised: 15,
} as const;
const ACTION = { CallActivity: 0, CallActivityWithRetry: 1, ContinueAsNew: 4, CreateTimer: 5, WhenAny: 11, WhenAll: 12 } as const;

export type HistoryEventJson = Record<string, unknown> & { EventType: number; EventId: number; Timestamp: string; IsPlayed: boolean };

export type ActivityScript = (input: unknown, call: ActivityCall) => unknown;

export interface ActivityCall {
  readonly name: string;
  readonly input: unknown;
  readonly at: Date;
  readonly generation: number;
}

export interface ExternalEvent {
  readonly at: Date;
  readonly name: string;
  readonly input: unknown;
}

export interface Episode {
  readonly generation: number;
  readonly at: Date;
  readonly state: OrchestratorStateJson;
  readonly historyLength: number;
}

export interface DriverResult {
  readonly output: unknown;
  readonly episodes: Episode[];
  readonly calls: ActivityCall[];
  /** Every timer the orchestration created: when, and for when. */
  readonly timers: Array<{ readonly createdAt: Date; readonly fireAt: Date; readonly generation: number }>;
  /** The input of each generation (index 0: the first). */
  readonly generationInputs: unknown[];
  /** Each generation's final history length. */
  readonly historyLengths: number[];
}

function flatten(actions: readonly Action[]): Action[] {
  return actions.flatMap((a) => (a.actionType === ACTION.WhenAny || a.actionType === ACTION.WhenAll ? flatten(a.compoundActions ?? []) : [a]));
}

export class ReplayDriver {
  private readonly handler: (trigger: unknown, context: InvocationContext) => Promise<OrchestratorStateJson>;
  private readonly events: ExternalEvent[] = [];
  clock: Date;

  constructor(
    orchestrator: OrchestrationHandler,
    private readonly activities: Readonly<Record<string, ActivityScript>>,
    start = new Date('2026-01-01T00:00:00.000Z'),
    private readonly name = 'jobOrchestrator',
  ) {
    this.handler = new Orchestrator(orchestrator).listen();
    this.clock = start;
  }

  raiseEventAt(at: Date, name: string, input: unknown): void {
    this.events.push({ at, name, input });
    this.events.sort((a, b) => a.at.getTime() - b.at.getTime());
  }

  async run(input: unknown, maxEpisodes = 2_000): Promise<DriverResult> {
    const episodes: Episode[] = [];
    const calls: ActivityCall[] = [];
    const timers: DriverResult['timers'] = [];
    const generationInputs: unknown[] = [];
    const historyLengths: number[] = [];
    let generation = 0;
    let currentInput = input;

    newGeneration: for (;;) {
      generation += 1;
      generationInputs.push(currentInput);
      const history: HistoryEventJson[] = [];
      let nextEventId = 0;
      const event = (type: number, fields: Record<string, unknown> = {}, eventId = -1): HistoryEventJson => ({
        EventType: type,
        EventId: eventId,
        IsPlayed: false,
        Timestamp: this.clock.toISOString(),
        ...fields,
      });
      history.push(event(EVENT.OrchestratorStarted), event(EVENT.ExecutionStarted, { Name: this.name, Input: JSON.stringify(currentInput) }));
      const pendingActivities: PendingActivity[] = [];
      // A retry timer reschedules its activity when it fires, as the extension does for CallActivityWithRetry.
      const pendingTimers: Array<{ id: number; fireAt: Date; retry?: Omit<PendingActivity, 'id'> }> = [];
      let scheduled = 0;

      for (;;) {
        if (episodes.length >= maxEpisodes) throw new Error(`No result after ${maxEpisodes} episodes`);
        // Between host and worker everything is JSON; so it is here.
        const trigger = JSON.parse(
          JSON.stringify({
            history: history.map((e, i) => ({ ...e, IsPlayed: i < history.length - 1 && e.IsPlayed })),
            input: currentInput,
            instanceId: 'job-test',
            isReplaying: false,
            parentInstanceId: null,
            // The same extension fields the development host's Durable backend sends (pinned by its payload test).
            ...TRIGGER_PAYLOAD_CONSTANTS,
          }),
        ) as unknown;
        const context = new InvocationContext({ functionName: this.name, invocationId: `inv-${episodes.length}` });
        let state: OrchestratorStateJson;
        try {
          state = JSON.parse(JSON.stringify(await this.handler(trigger, context))) as OrchestratorStateJson;
        } catch (err) {
          // The SDK throws OrchestrationFailureError for an orchestrator that threw; its state is in the message.
          throw new Error(`Orchestrator failed: ${err instanceof Error ? err.message : String(err)}`);
        }
        episodes.push({ generation, at: this.clock, state, historyLength: history.length });
        for (const e of history) e.IsPlayed = true;

        const leaves = flatten((state.actions[0] ?? []) as Action[]);
        const schedulable = leaves.filter((a) => a.actionType === ACTION.CallActivity || a.actionType === ACTION.CallActivityWithRetry || a.actionType === ACTION.CreateTimer);
        for (const action of schedulable.slice(scheduled)) {
          const id = nextEventId++;
          if (action.actionType === ACTION.CreateTimer) {
            const fireAt = new Date(String(action.fireAt));
            history.push(event(EVENT.TimerCreated, { FireAt: fireAt.toISOString() }, id));
            pendingTimers.push({ id, fireAt });
            timers.push({ createdAt: this.clock, fireAt, generation });
          } else {
            history.push(event(EVENT.TaskScheduled, { Name: action.functionName, Input: JSON.stringify(action.input) }, id));
            pendingActivities.push({
              id,
              name: String(action.functionName),
              input: JSON.parse(JSON.stringify(action.input ?? null)) as unknown,
              attempt: 1,
              ...(action.actionType === ACTION.CallActivityWithRetry ? { retry: action.retryOptions } : {}),
            });
          }
        }
        scheduled = schedulable.length;
        history.push(event(EVENT.OrchestratorCompleted));

        const continueAsNew = leaves.find((a) => a.actionType === ACTION.ContinueAsNew);
        if (continueAsNew !== undefined) {
          historyLengths.push(history.length);
          currentInput = continueAsNew.input;
          continue newGeneration;
        }
        if (state.isDone || state.error !== undefined) {
          historyLengths.push(history.length);
          if (state.error !== undefined) throw new Error(`Orchestration failed: ${state.error}`);
          return { output: state.output, episodes, calls, timers, generationInputs, historyLengths };
        }

        // The next episode: its OrchestratorStarted carries the time it runs at, then what happened.
        const next: HistoryEventJson[] = [];
        if (pendingActivities.length > 0) {
          for (const task of pendingActivities.splice(0)) {
            const call: ActivityCall = { name: task.name, input: task.input, at: this.clock, generation };
            calls.push(call);
            const script = this.activities[task.name];
            if (script === undefined) throw new Error(`No script for activity ${task.name}`);
            try {
              const result = script(task.input, call);
              next.push(event(EVENT.TaskCompleted, { TaskScheduledId: task.id, Result: JSON.stringify(result ?? null) }));
            } catch (err) {
              next.push(event(EVENT.TaskFailed, { TaskScheduledId: task.id, Reason: err instanceof Error ? err.message : String(err), Details: '' }));
              if (task.retry !== undefined) {
                // DurableTask.Core's RetryInterceptor: a timer after every failed attempt, an immediate one after the last.
                const last = task.attempt >= task.retry.maxNumberOfAttempts;
                const delay = last ? 0 : task.retry.firstRetryIntervalInMilliseconds * (task.retry.backoffCoefficient ?? 1) ** (task.attempt - 1);
                const id = nextEventId++;
                const fireAt = new Date(this.clock.getTime() + delay);
                next.push(event(EVENT.TimerCreated, { FireAt: fireAt.toISOString() }, id));
                pendingTimers.push({ id, fireAt, ...(last ? {} : { retry: { name: task.name, input: task.input, attempt: task.attempt + 1, retry: task.retry } }) });
              }
            }
          }
          history.push(event(EVENT.OrchestratorStarted), ...next);
          continue;
        }
        pendingTimers.sort((a, b) => a.fireAt.getTime() - b.fireAt.getTime());
        const timer = pendingTimers[0];
        const raised = this.events[0];
        if (raised !== undefined && (timer === undefined || raised.at.getTime() <= timer.fireAt.getTime())) {
          this.events.shift();
          if (raised.at > this.clock) this.clock = raised.at;
          history.push(event(EVENT.OrchestratorStarted), event(EVENT.EventRaised, { Name: raised.name, Input: JSON.stringify(raised.input) }));
          continue;
        }
        if (timer === undefined) throw new Error('The orchestration waits for nothing the driver can deliver');
        pendingTimers.shift();
        this.clock = timer.fireAt;
        history.push(event(EVENT.OrchestratorStarted), event(EVENT.TimerFired, { TimerId: timer.id, FireAt: timer.fireAt.toISOString() }));
        if (timer.retry !== undefined) {
          const id = nextEventId++;
          history.push(event(EVENT.TaskScheduled, { Name: timer.retry.name, Input: JSON.stringify(timer.retry.input) }, id));
          pendingActivities.push({ ...timer.retry, id });
        }
      }
    }
  }
}
