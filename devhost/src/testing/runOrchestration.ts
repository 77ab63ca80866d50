/**
 * `runOrchestration(handler, { input, activities })`: runs one orchestration to its end in memory,
 * on a virtual clock, through the same episode logic as the development host's Durable backend
 * (runEpisode and replayActions: the extension's history format, custom status and continue-as-new
 * rules, non-determinism and action-cap refusals) with the orchestrator replayed by the
 * durable-functions SDK's own executor (the handler `df.app.orchestration` registers), its trigger
 * and result passed through JSON as between host and worker. So an app's orchestrator unit tests
 * and its runs on the development host share one Durable replay.
 *
 * Scheduling, one episode at a time: every activity the episode scheduled runs at once (scripted
 * by `activities`, in call order, at the episode's time), and its results form the next episode;
 * a script that answers `completesAfter(ms, value)` finishes `ms` later instead, so a long activity
 * can race a raised event. With no result due now, the earliest activity result, due timer or raised
 * event happens next and the clock jumps to it. Not supported (fails with DEVHOST_TESTING_UNSUPPORTED): sub-orchestrations.
 */
import type * as AzureFunctions from '@azure/functions';
import { type InvocationContext } from '@azure/functions';
import { type OrchestrationHandler } from 'durable-functions';

import { type FunctionInvoker, type HostedFunction, type InvocationRequest, type InvocationResult } from '../contracts';
import { activityFailure } from '../durable/ActivityDispatcher';
import { parseDurableTaskOptions } from '../durable/DurableTaskOptions';
import { EventType, fromJsonText, type HistoryEvent, historyEvent, isTerminal, type RuntimeStatus } from '../durable/HistoryEvent';
import { type InstanceState, newInstanceState } from '../durable/InstanceStore';
import { runEpisode } from '../durable/runEpisode';
import { DevHostError } from '../errors';
import { createLogger, type Logger } from '../log';

export interface ActivityCall {
  readonly name: string;
  readonly input: unknown;
  /** The virtual time the activity ran at (its episode's time). */
  readonly at: Date;
  /** Which execution scheduled it, counting from 1. */
  readonly generation: number;
}

/** An activity's stand-in: returns its result or throws (the orchestrator then sees the extension's failure text). */
export type ActivityScript = (input: unknown, call: ActivityCall) => unknown;

const DELAYED = Symbol('completesAfter');

interface Delayed {
  readonly [DELAYED]: true;
  readonly ms: number;
  readonly value: unknown;
}

/** An activity script's answer for an activity that runs `ms` (virtual) before it answers `value`. */
export function completesAfter(ms: number, value: unknown): unknown {
  return { [DELAYED]: true, ms, value } satisfies Delayed;
}

function isDelayed(value: unknown): value is Delayed {
  return typeof value === 'object' && value !== null && DELAYED in value;
}

export interface RaisedEvent {
  readonly at: Date;
  readonly name: string;
  readonly input?: unknown;
}

export interface RunOrchestrationOptions {
  readonly input?: unknown;
  readonly activities?: Readonly<Record<string, ActivityScript>>;
  /** Events raised on the instance at these (virtual) times. */
  readonly events?: readonly RaisedEvent[];
  /** The orchestrator's function name (default `orchestrator`). */
  readonly name?: string;
  readonly instanceId?: string;
  /** The virtual clock's start (default 2026-01-01T00:00:00Z). */
  readonly start?: Date;
  /** Fails the run (DEVHOST_TESTING_NO_END) after this many episodes (default 10,000). */
  readonly maxEpisodes?: number;
  /** host.json extensions.durableTask (maxOrchestrationActions is the one that matters here). */
  readonly durableTask?: Record<string, unknown>;
  /** Where the backend's log lines go (default: nowhere). */
  readonly logger?: Logger;
}

export interface EpisodeRecord {
  readonly generation: number;
  readonly at: Date;
  readonly runtimeStatus: RuntimeStatus;
  /** The custom status as the status API shows it after this episode (parsed). */
  readonly customStatus: unknown;
  /** The execution's history length after this episode. */
  readonly historyLength: number;
}

export interface OrchestrationRun {
  readonly runtimeStatus: RuntimeStatus;
  /** The output (parsed); for Failed, the extension's reason text. */
  readonly output: unknown;
  readonly customStatus: unknown;
  /** The last execution's start (it restarts at continue-as-new, as on Azure Storage). */
  readonly createdTime: Date;
  readonly episodes: readonly EpisodeRecord[];
  readonly calls: readonly ActivityCall[];
  readonly timers: ReadonlyArray<{ readonly createdAt: Date; readonly fireAt: Date; readonly generation: number }>;
  /** Each execution's input and final history length (index 0: the first). */
  readonly generations: ReadonlyArray<{ readonly input: unknown; readonly historyLength: number }>;
  /** The last execution's history, as the extension stores it. */
  readonly history: readonly HistoryEvent[];
}

type Listener = (trigger: unknown, context: InvocationContext) => Promise<unknown>;

// Loaded on first use, from the app's own copies (peer dependencies): importing devhost/testing for
// Azurite or host processes needs neither.
/* eslint-disable @typescript-eslint/no-require-imports */
/** The handler `df.app.orchestration` registers for an orchestrator function (the SDK keeps the wrapper internal). */
function sdkOrchestrator(handler: OrchestrationHandler): Listener {
  const sdk = require('durable-functions/lib/src/util/testingUtils') as { createOrchestrator(fn: OrchestrationHandler): Listener };
  return sdk.createOrchestrator(handler);
}

function invocationContext(functionName: string, invocationId: string): InvocationContext {
  const functions = require('@azure/functions') as typeof AzureFunctions;
  return new functions.InvocationContext({ functionName, invocationId });
}
/* eslint-enable @typescript-eslint/no-require-imports */

const silent = createLogger('testing', () => undefined);

export async function runOrchestration(handler: OrchestrationHandler, options: RunOrchestrationOptions = {}): Promise<OrchestrationRun> {
  const name = options.name ?? 'orchestrator';
  const scripts = options.activities ?? {};
  const listener = sdkOrchestrator(handler);
  let invocations = 0;
  const functions: HostedFunction[] = [
    { name, triggerType: 'orchestrationTrigger', triggerName: 'context', bindings: {} },
    ...Object.keys(scripts).map((activity) => ({ name: activity, triggerType: 'activityTrigger', triggerName: 'input', bindings: {} })),
  ];
  const invoker: FunctionInvoker = {
    list: () => functions,
    async invoke(functionName: string, request: InvocationRequest): Promise<InvocationResult> {
      invocations += 1;
      // Between host and worker everything is JSON; so it is here.
      const trigger = JSON.parse(JSON.stringify(request.trigger)) as unknown;
      const context = invocationContext(functionName, `invocation-${invocations}`);
      const state = await listener(trigger, context);
      return { returnValue: JSON.parse(JSON.stringify(state)) as unknown, outputs: {} };
    },
  };

  const logger = options.logger ?? silent;
  const maxOrchestrationActions = parseDurableTaskOptions(options.durableTask).maxOrchestrationActions;
  let clock = options.start ?? new Date('2026-01-01T00:00:00.000Z');
  const instanceId = options.instanceId ?? 'test-instance';
  const executionId = 'execution-1';
  const input = options.input === undefined ? null : JSON.stringify(options.input);
  let state: InstanceState = newInstanceState({ instanceId, name, executionId, input, parent: null, now: clock });
  let events: HistoryEvent[] = [historyEvent.executionStarted(clock, { name, instanceId, executionId, input })];
  const raised = [...(options.events ?? [])].sort((a, b) => a.at.getTime() - b.at.getTime());
  let activities: Array<{ id: number; name: string; input: unknown }> = [];
  let timers: Array<{ id: number; fireAt: Date; executionId: string }> = [];
  /** Results of activities still running (completesAfter), by when they land. */
  let running: Array<{ at: Date; id: number; value: unknown }> = [];
  const episodes: EpisodeRecord[] = [];
  const calls: ActivityCall[] = [];
  const timersSeen: Array<{ createdAt: Date; fireAt: Date; generation: number }> = [];
  const generations: Array<{ input: unknown; historyLength: number }> = [{ input: fromJsonText(input), historyLength: 0 }];

  for (let episode = 0; ; episode += 1) {
    if (episode >= (options.maxEpisodes ?? 10_000)) throw new DevHostError('DEVHOST_TESTING_NO_END', `The orchestration did not finish within ${episode} episodes.`);
    const before = state.executionId;
    const result = await runEpisode(state, events, { invoker, clock: () => clock, logger, maxOrchestrationActions });
    state = result.state;
    if (state.executionId !== before) {
      // Continued as new: the old execution's pending work is gone, as its messages would be eaten.
      activities = [];
      timers = [];
      running = [];
      generations.push({ input: fromJsonText(state.input), historyLength: 0 });
    }
    const generation = generations.length;
    (generations[generation - 1] as { historyLength: number }).historyLength = state.history.length;
    episodes.push({ generation, at: clock, runtimeStatus: state.runtimeStatus, customStatus: fromJsonText(state.customStatus), historyLength: state.history.length });
    if (result.subOrchestrations.length > 0) {
      throw new DevHostError('DEVHOST_TESTING_UNSUPPORTED', 'runOrchestration does not run sub-orchestrations; run them on the development host (FunctionHost).');
    }
    activities.push(...result.activities);
    for (const timer of result.timers) {
      timers.push({ ...timer, executionId: state.executionId });
      timersSeen.push({ createdAt: clock, fireAt: timer.fireAt, generation });
    }
    if (isTerminal(state.runtimeStatus)) {
      return {
        runtimeStatus: state.runtimeStatus,
        output: fromJsonText(state.output),
        customStatus: fromJsonText(state.customStatus),
        createdTime: new Date(state.createdTime),
        episodes,
        calls,
        timers: timersSeen,
        generations,
        history: state.history,
      };
    }

    events = [];
    if (activities.length > 0) {
      for (const task of activities.splice(0)) {
        const call: ActivityCall = { name: task.name, input: task.input, at: clock, generation };
        calls.push(call);
        const script = Object.entries(scripts).find(([activity]) => activity.toLowerCase() === task.name.toLowerCase())?.[1];
        try {
          if (script === undefined) throw new Error(`runOrchestration has no script for activity "${task.name}".`);
          const answer = await script(JSON.parse(JSON.stringify(task.input ?? null)) as unknown, call);
          if (isDelayed(answer)) {
            running.push({ at: new Date(clock.getTime() + answer.ms), id: task.id, value: answer.value });
            continue;
          }
          events.push(historyEvent.taskCompleted(clock, task.id, answer === undefined ? null : JSON.stringify(answer)));
        } catch (err) {
          const { reason, details } = activityFailure(task.name, err);
          events.push(historyEvent.taskFailed(clock, task.id, reason, details));
        }
      }
      if (events.length > 0) continue;
    }
    timers.sort((a, b) => a.fireAt.getTime() - b.fireAt.getTime());
    running.sort((a, b) => a.at.getTime() - b.at.getTime());
    const timer = timers[0];
    const event = raised[0];
    const landing = running[0];
    const next = Math.min(timer?.fireAt.getTime() ?? Infinity, event?.at.getTime() ?? Infinity);
    if (landing !== undefined && landing.at.getTime() < next) {
      running.shift();
      if (landing.at > clock) clock = landing.at;
      events.push(historyEvent.taskCompleted(clock, landing.id, landing.value === undefined ? null : JSON.stringify(landing.value)));
      continue;
    }
    if (event !== undefined && (timer === undefined || event.at.getTime() <= timer.fireAt.getTime())) {
      raised.shift();
      if (event.at > clock) clock = event.at;
      events.push(historyEvent.eventRaised(clock, event.name, event.input === undefined ? null : JSON.stringify(event.input)));
      continue;
    }
    if (timer === undefined) {
      throw new DevHostError('DEVHOST_TESTING_NO_END', `The orchestration waits for something runOrchestration cannot deliver (no activity, timer or event is due) after ${episodes.length} episodes.`);
    }
    timers.shift();
    if (timer.fireAt > clock) clock = timer.fireAt;
    events.push(historyEvent.timerFired(clock, timer.id, timer.fireAt.toISOString()));
  }
}

/** The history's event type names, in order (what the docs' history tables list). */
export function historyNames(history: readonly HistoryEvent[]): string[] {
  const names = new Map<number, string>(Object.entries(EventType).map(([key, value]) => [value, key]));
  return history.map((e) => names.get(e.EventType) ?? String(e.EventType));
}
