/**
 * Dispatches orchestration episodes and activities from the task hub's queues.
 *
 * Per batch of control messages for one instance: read the instance (with its etag), keep only the
 * events not applied yet (duplicates are recognized by message id, completions by task id, fired
 * timers by timer id), run one episode, write the new state conditionally (a lost race re-reads and
 * redoes the episode), then send the work it produced, then delete the consumed messages. A crash
 * between any two steps loses nothing: unsent work is re-sent when a consumed message comes back
 * after its visibility timeout (its id is then already recorded as applied, which is exactly the
 * sign that the previous attempt may have stopped before sending), and every receiver is
 * idempotent. Activities run at least once: a work message stays hidden while its activities run
 * (visibility renewed) and reappears for another host if this one dies.
 *
 * Not guaranteed: exactly-once activity execution (the real extension does not promise it either);
 * message ids are remembered for the last `appliedMessageIdsKept` messages of an instance.
 */
import { randomUUID } from 'node:crypto';

import { type FunctionInvoker } from '../contracts';
import { type Logger } from '../log';
import { EventType, fromJsonText, type HistoryEvent, historyEvent, isTerminal, type ParentInstanceRef } from './HistoryEvent';
import { type InstanceState, type InstanceStore, newInstanceState } from './InstanceStore';
import { type ScheduledSubOrchestration } from './replayActions';
import { type EpisodeResult, runEpisode } from './runEpisode';
import {
  type ActivityTask,
  type ActivityWorkMessage,
  type ControlMessage,
  newMessageId,
  type ReceivedMessage,
  type TaskHubQueues,
} from './TaskHubQueues';

export interface DispatcherTuning {
  /** How long received control messages stay hidden; also how soon a crashed host's episode is redone. */
  readonly controlVisibilitySeconds: number;
  /** How long an activity work message stays hidden between renewals; a crashed host's activities come back after it. */
  readonly workVisibilitySeconds: number;
  readonly minPollIntervalMs: number;
  /** Idle polling backs off up to this (the extension's maxQueuePollingInterval plays the same role). */
  readonly maxPollIntervalMs: number;
  readonly maxConcurrentEpisodes: number;
  readonly maxConcurrentActivities: number;
  /** Activities of one episode travel together, this many per work message. */
  readonly activitiesPerMessage: number;
  readonly appliedMessageIdsKept: number;
  /** Graceful stop waits this long for running work, then leaves it to the queues. */
  readonly drainTimeoutMs: number;
}

export const DEFAULT_TUNING: DispatcherTuning = {
  controlVisibilitySeconds: 30,
  workVisibilitySeconds: 30,
  minPollIntervalMs: 20,
  maxPollIntervalMs: 1000,
  maxConcurrentEpisodes: 8,
  maxConcurrentActivities: 8,
  activitiesPerMessage: 16,
  appliedMessageIdsKept: 512,
  drainTimeoutMs: 10_000,
};

export interface DispatcherDeps {
  readonly invoker: FunctionInvoker;
  readonly store: InstanceStore;
  readonly queues: TaskHubQueues;
  readonly logger: Logger;
  readonly tuning: DispatcherTuning;
  readonly clock?: () => Date;
}

/** Saves conflicting with concurrent writers are retried this often before the batch is left to redelivery. */
const MAX_SAVE_ATTEMPTS = 20;
/** A control message that keeps failing is dropped (loudly) after this many deliveries. */
const MAX_CONTROL_DEQUEUES = 50;
/** Events that arrive before their instance's start are re-sent with this delay. */
const EARLY_EVENT_RETRY_SECONDS = 1;

/** A wake-able sleep: `wake()` ends the current wait at once. */
class Idler {
  #wake: (() => void) | undefined;
  #pending = false;

  sleep(ms: number): Promise<void> {
    if (this.#pending) {
      this.#pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }

  wake(): void {
    if (this.#wake !== undefined) this.#wake();
    else this.#pending = true;
  }
}

interface HistoryIndex {
  hasExecutionStarted: boolean;
  readonly scheduled: Set<number>;
  readonly completed: Set<number>;
  readonly timers: Set<number>;
  readonly fired: Set<number>;
  readonly subOrchestrations: Set<number>;
}

function indexHistory(history: readonly HistoryEvent[]): HistoryIndex {
  const index: HistoryIndex = { hasExecutionStarted: false, scheduled: new Set(), completed: new Set(), timers: new Set(), fired: new Set(), subOrchestrations: new Set() };
  for (const e of history) record(index, e);
  return index;
}

function record(index: HistoryIndex, e: HistoryEvent): void {
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
function isNew(index: HistoryIndex, e: HistoryEvent): boolean {
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

/** The extension's wording for a failed out-of-process activity (TaskActivityShim + OutOfProcExceptionHelpers). */
export function activityFailure(name: string, err: unknown): { reason: string; details: string } {
  const message = err instanceof Error ? err.message : String(err);
  const stack = err instanceof Error ? (err.stack ?? '') : '';
  // The host wraps the worker's error as "Result: Failure\nException: <message>\nStack: <stack>" and the
  // extension keeps the text between "\nException:" and "\nStack:", leading space included.
  const friendly = ` ${message}`;
  const details = JSON.stringify({
    $type: 'System.Exception, System.Private.CoreLib',
    ClassName: 'System.Exception',
    Message: friendly,
    InnerException: {
      ClassName: 'Microsoft.Azure.WebJobs.Script.Workers.Rpc.RpcException',
      Message: `Result: Failure\nException: ${message}\nStack: ${stack}`,
      RemoteMessage: message,
      RemoteStackTrace: stack,
    },
  });
  return { reason: `Activity function '${name}' failed: ${friendly}`, details };
}

export class DurableDispatcher {
  readonly #deps: DispatcherDeps;
  readonly #clock: () => Date;
  readonly #controlIdler = new Idler();
  readonly #workIdler = new Idler();
  readonly #instanceLocks = new Map<string, Promise<void>>();
  readonly #runningWork = new Set<Promise<void>>();
  /** Timer messages held until due; on stop they are released (and reappear on the queue later). */
  readonly #heldTimers = new Map<NodeJS.Timeout, () => void>();
  #activitySlots = 0;
  #episodeSlots = 0;
  #slotWaiters: Array<() => void> = [];
  #loops: Array<Promise<void>> = [];
  #stopping = false;
  #abandon = new AbortController();

  constructor(deps: DispatcherDeps) {
    this.#deps = deps;
    this.#clock = deps.clock ?? (() => new Date());
  }

  start(): void {
    if (this.#loops.length > 0) return;
    this.#stopping = false;
    this.#abandon = new AbortController();
    this.#loops = [this.#controlLoop(), this.#workLoop()];
  }

  /** Stops receiving; waits (bounded) for running work; whatever is left reappears on the queues for another host. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#controlIdler.wake();
    this.#workIdler.wake();
    this.#wakeSlots();
    for (const [timer, release] of this.#heldTimers) {
      clearTimeout(timer);
      release();
    }
    this.#heldTimers.clear();
    const drained = Promise.all([...this.#loops, ...this.#runningWork]).then(() => true);
    const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), this.#deps.tuning.drainTimeoutMs).unref());
    if (!(await Promise.race([drained, timeout]))) {
      this.#deps.logger.warn('durable.stop.abandoned', { running: this.#runningWork.size });
      this.#abandon.abort();
    }
    this.#loops = [];
  }

  /** Polls the control queues now (something was just sent to them). */
  wakeControl(): void {
    this.#controlIdler.wake();
  }

  // ---- control messages: orchestration episodes -------------------------------------------------

  async #controlLoop(): Promise<void> {
    const { tuning, logger, queues } = this.#deps;
    let idleMs = tuning.minPollIntervalMs;
    while (!this.#stopping) {
      let batch: Array<ReceivedMessage<ControlMessage>>;
      try {
        batch = await queues.receiveControl(32, tuning.controlVisibilitySeconds);
      } catch (err) {
        logger.warn('durable.control.receive_failed', { error: err instanceof Error ? err.message : String(err) });
        await this.#controlIdler.sleep(tuning.maxPollIntervalMs);
        continue;
      }
      if (batch.length === 0) {
        await this.#controlIdler.sleep(idleMs);
        idleMs = Math.min(tuning.maxPollIntervalMs, idleMs * 2);
        continue;
      }
      idleMs = tuning.minPollIntervalMs;
      await this.#processControlBatch(batch);
    }
  }

  /** Never rejects: what fails is logged, and unconsumed messages come back after their visibility timeout. */
  async #processControlBatch(batch: Array<ReceivedMessage<ControlMessage>>): Promise<void> {
    try {
      await this.#processControlMessages(batch);
    } catch (err) {
      this.#deps.logger.error('durable.control.batch_failed', { messages: batch.length, error: err instanceof Error ? err.message : String(err) });
    }
  }

  async #processControlMessages(batch: Array<ReceivedMessage<ControlMessage>>): Promise<void> {
    const now = this.#clock().getTime();
    const groups = new Map<string, Array<ReceivedMessage<ControlMessage>>>();
    for (const message of batch) {
      if (await this.#deferIfEarly(message, now)) continue;
      const list = groups.get(message.body.instanceId) ?? [];
      list.push(message);
      groups.set(message.body.instanceId, list);
    }
    await Promise.all(
      [...groups].map(([instanceId, messages]) =>
        this.#withEpisodeSlot(() =>
          this.#withInstanceLock(instanceId, () =>
            this.#processInstance(instanceId, messages).catch((err: unknown) => {
              this.#deps.logger.error('durable.episode.failed', { instanceId, error: err instanceof Error ? err.message : String(err) });
              return this.#dropPoison(messages);
            }),
          ),
        ),
      ),
    );
  }

  /**
   * Timer messages arrive up to a second early (queue delays are whole seconds) or, for timers
   * longer than a queue message can wait, much earlier: a short wait is held in memory (the message
   * stays invisible meanwhile; if this process dies it simply reappears), a long one is re-sent for
   * the rest of its wait.
   */
  async #deferIfEarly(message: ReceivedMessage<ControlMessage>, now: number): Promise<boolean> {
    const events = message.body.events;
    if (events.length === 0 || !events.every((e) => e.EventType === EventType.TimerFired)) return false;
    const fireAt = Math.max(...events.map((e) => Date.parse(e.FireAt ?? '')));
    const waitMs = fireAt - now;
    if (!(waitMs > 0)) return false;
    if (waitMs <= (this.#deps.tuning.controlVisibilitySeconds * 1000) / 2) {
      const held = new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.#heldTimers.delete(timer);
          resolve(this.#stopping ? undefined : this.#processControlBatch([message]));
        }, waitMs);
        this.#heldTimers.set(timer, resolve);
      }).finally(() => this.#runningWork.delete(held));
      this.#runningWork.add(held);
      return true;
    }
    await this.#deps.queues.sendControl({ ...message.body, mid: newMessageId() }, waitMs / 1000);
    await this.#deps.queues.delete(message);
    return true;
  }

  async #dropPoison(messages: Array<ReceivedMessage<ControlMessage>>): Promise<void> {
    for (const message of messages) {
      if (message.dequeueCount < MAX_CONTROL_DEQUEUES) continue;
      this.#deps.logger.error('durable.message.poison', { code: 'DURABLE_POISON_MESSAGE', instanceId: message.body.instanceId, mid: message.body.mid, dequeueCount: message.dequeueCount });
      await this.#deps.queues.delete(message).catch(() => undefined);
    }
  }

  async #processInstance(instanceId: string, messages: Array<ReceivedMessage<ControlMessage>>): Promise<void> {
    const { store, queues, logger, tuning } = this.#deps;
    for (let attempt = 1; attempt <= MAX_SAVE_ATTEMPTS; attempt += 1) {
      const stored = await store.read(instanceId);
      if (stored === undefined) {
        logger.info('durable.message.orphaned', { instanceId, messages: messages.length });
        await Promise.all(messages.map((m) => queues.delete(m)));
        return;
      }
      const { state, etag } = stored;
      const applied = new Set(state.appliedMessageIds);
      const index = indexHistory(state.history);
      const accepted: HistoryEvent[] = [];
      const acceptedMids: string[] = [];
      const early: Array<ReceivedMessage<ControlMessage>> = [];
      let redelivered = false;
      for (const message of messages) {
        const body = message.body;
        if (applied.has(body.mid)) {
          redelivered = true;
          continue;
        }
        if (acceptedMids.includes(body.mid)) continue; // the same message twice in one batch
        if (body.executionId !== undefined && body.executionId !== state.executionId) continue;
        const startsOrEnds = body.events.some((e) => e.EventType === EventType.ExecutionStarted || e.EventType === EventType.ExecutionTerminated);
        if (!index.hasExecutionStarted && !startsOrEnds && !isTerminal(state.runtimeStatus)) {
          early.push(message);
          continue;
        }
        for (const e of body.events) {
          if (!isNew(index, e)) continue;
          accepted.push(e);
          record(index, e);
        }
        acceptedMids.push(body.mid);
      }
      // Events for a finished instance are dropped, as DurableTask.Core drops them.
      const events = isTerminal(state.runtimeStatus) ? [] : accepted.sort((a, b) => Number(b.EventType === EventType.ExecutionStarted) - Number(a.EventType === EventType.ExecutionStarted));
      // Sent only once the attempt stands (a lost save race must not duplicate them).
      const requeueEarly = (): Promise<unknown> => Promise.all(early.map((m) => queues.sendControl({ ...m.body, mid: newMessageId() }, EARLY_EVENT_RETRY_SECONDS)));
      if (events.length === 0) {
        if (redelivered) await this.#resendPendingWork(state);
        await requeueEarly();
        await Promise.all(messages.map((m) => queues.delete(m)));
        return;
      }
      const result = await runEpisode(state, events, { invoker: this.#deps.invoker, clock: this.#clock, logger });
      const next: InstanceState = { ...result.state, appliedMessageIds: [...state.appliedMessageIds, ...acceptedMids].slice(-tuning.appliedMessageIdsKept) };
      const saved = await store.save(next, etag);
      if (saved === 'conflict') {
        logger.debug('durable.episode.conflict', { instanceId, attempt });
        continue;
      }
      logger.debug('durable.episode.saved', { instanceId, status: next.runtimeStatus, events: events.length, activities: result.activities.length, timers: result.timers.length });
      await this.#sendEpisodeWork(next, result);
      if (redelivered) await this.#resendPendingWork(state);
      await requeueEarly();
      await Promise.all(messages.map((m) => queues.delete(m)));
      return;
    }
    logger.warn('durable.episode.contended', { instanceId, attempts: MAX_SAVE_ATTEMPTS });
  }

  async #sendEpisodeWork(state: InstanceState, result: Pick<EpisodeResult, 'activities' | 'timers' | 'subOrchestrations' | 'completed'>): Promise<void> {
    const { queues, tuning } = this.#deps;
    const sends: Array<Promise<void>> = [];
    for (let i = 0; i < result.activities.length; i += tuning.activitiesPerMessage) {
      const tasks = result.activities.slice(i, i + tuning.activitiesPerMessage);
      sends.push(queues.sendWork({ mid: newMessageId(), instanceId: state.instanceId, executionId: state.executionId, tasks }));
    }
    const now = this.#clock().getTime();
    for (const timer of result.timers) {
      const fired = historyEvent.timerFired(timer.fireAt, timer.id, timer.fireAt.toISOString());
      sends.push(queues.sendControl({ mid: newMessageId(), instanceId: state.instanceId, executionId: state.executionId, events: [fired] }, (timer.fireAt.getTime() - now) / 1000));
    }
    for (const child of result.subOrchestrations) sends.push(this.#startSubOrchestration(state, child));
    if (result.completed !== undefined && state.parent !== null) sends.push(this.#notifyParent(state.parent, state, result.completed.status, result.completed.output));
    await Promise.all(sends);
    if (result.timers.length > 0 || result.subOrchestrations.length > 0 || (result.completed !== undefined && state.parent !== null)) this.wakeControl();
  }

  /** Re-sends everything `state` still waits for (idempotent at every receiver). */
  async #resendPendingWork(state: InstanceState): Promise<void> {
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
    this.#deps.logger.warn('durable.work.resent', { instanceId: state.instanceId, activities: activities.length, timers: timers.length, subOrchestrations: subOrchestrations.length });
    await this.#sendEpisodeWork(state, { activities, timers, subOrchestrations, ...(completed === undefined ? {} : { completed }) });
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
    if (existing !== undefined && existing.state.parent?.OrchestrationInstance.ExecutionId === parent.executionId && existing.state.parent.TaskScheduleId === child.id) {
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
        events: [historyEvent.subOrchestrationFailed(now, child.id, reason, JSON.stringify({ code: 'DURABLE_INSTANCE_EXISTS', instanceId: child.instanceId }))],
      });
      return;
    } else {
      executionId = randomUUID().replace(/-/g, '');
      const state = newInstanceState({ instanceId: child.instanceId, name: child.name, executionId, input: child.input, parent: parentRef, now });
      const created = await store.create(state, existing?.etag);
      if (created === 'conflict') return;
    }
    const started = historyEvent.executionStarted(now, { name: child.name, instanceId: child.instanceId, executionId, input: child.input, parent: parentRef });
    await queues.sendControl({ mid: newMessageId(), instanceId: child.instanceId, executionId, events: [started] });
  }

  async #notifyParent(parent: ParentInstanceRef, child: InstanceState, status: string, output: string | null): Promise<void> {
    const at = this.#clock();
    const event =
      status === 'Completed'
        ? historyEvent.subOrchestrationCompleted(at, parent.TaskScheduleId, output)
        : historyEvent.subOrchestrationFailed(at, parent.TaskScheduleId, output ?? `Sub-orchestration '${child.name}' ended as ${status}.`, JSON.stringify({ instanceId: child.instanceId, runtimeStatus: status }));
    await this.#deps.queues.sendControl({
      mid: newMessageId(),
      instanceId: parent.OrchestrationInstance.InstanceId,
      executionId: parent.OrchestrationInstance.ExecutionId,
      events: [event],
    });
  }

  // ---- activities -------------------------------------------------------------------------------

  async #workLoop(): Promise<void> {
    const { tuning, logger, queues } = this.#deps;
    let idleMs = tuning.minPollIntervalMs;
    while (!this.#stopping) {
      const free = tuning.maxConcurrentActivities - this.#activitySlots;
      if (free <= 0) {
        await this.#waitForSlot();
        continue;
      }
      let batch: Array<ReceivedMessage<ActivityWorkMessage>>;
      try {
        batch = await queues.receiveWork(Math.max(1, Math.ceil(free / tuning.activitiesPerMessage)), tuning.workVisibilitySeconds);
      } catch (err) {
        logger.warn('durable.work.receive_failed', { error: err instanceof Error ? err.message : String(err) });
        await this.#workIdler.sleep(tuning.maxPollIntervalMs);
        continue;
      }
      if (batch.length === 0) {
        await this.#workIdler.sleep(idleMs);
        idleMs = Math.min(tuning.maxPollIntervalMs, idleMs * 2);
        continue;
      }
      idleMs = tuning.minPollIntervalMs;
      for (const message of batch) {
        this.#activitySlots += message.body.tasks.length;
        const running = this.#runWorkMessage(message)
          .catch((err: unknown) => logger.error('durable.activity.message_failed', { instanceId: message.body.instanceId, error: err instanceof Error ? err.message : String(err) }))
          .finally(() => {
            this.#activitySlots -= message.body.tasks.length;
            this.#runningWork.delete(running);
            this.#wakeSlots();
          });
        this.#runningWork.add(running);
      }
    }
  }

  async #runWorkMessage(message: ReceivedMessage<ActivityWorkMessage>): Promise<void> {
    const { queues, tuning, logger } = this.#deps;
    const renewEveryMs = Math.max(500, (tuning.workVisibilitySeconds * 1000) / 2);
    const renewal = setInterval(() => {
      // Abandoned at stop: let the message reappear for another host.
      if (this.#abandon.signal.aborted) {
        clearInterval(renewal);
        return;
      }
      queues.extendVisibility(message, tuning.workVisibilitySeconds).catch((err: unknown) => logger.warn('durable.activity.renew_failed', { error: err instanceof Error ? err.message : String(err) }));
    }, renewEveryMs);
    let events: HistoryEvent[];
    try {
      events = await Promise.all(message.body.tasks.map((task) => this.#runActivity(message.body, task)));
    } finally {
      clearInterval(renewal);
    }
    if (this.#abandon.signal.aborted) return;
    await queues.sendControl({ mid: newMessageId(), instanceId: message.body.instanceId, executionId: message.body.executionId, events });
    this.wakeControl();
    await queues.delete(message);
  }

  async #runActivity(work: ActivityWorkMessage, task: ActivityTask): Promise<HistoryEvent> {
    try {
      const result = await this.#deps.invoker.invoke(task.name, { trigger: task.input });
      return historyEvent.taskCompleted(this.#clock(), task.id, result.returnValue === undefined ? null : JSON.stringify(result.returnValue));
    } catch (err) {
      const { reason, details } = activityFailure(task.name, err);
      this.#deps.logger.info('durable.activity.failed', { instanceId: work.instanceId, name: task.name, taskId: task.id, reason });
      return historyEvent.taskFailed(this.#clock(), task.id, reason, details);
    }
  }

  // ---- concurrency helpers ----------------------------------------------------------------------

  async #withEpisodeSlot<T>(run: () => Promise<T>): Promise<T> {
    while (this.#episodeSlots >= this.#deps.tuning.maxConcurrentEpisodes) await this.#waitForSlot();
    this.#episodeSlots += 1;
    try {
      return await run();
    } finally {
      this.#episodeSlots -= 1;
      this.#wakeSlots();
    }
  }

  /** Episodes of one instance run one at a time in this process (other processes are kept out by etags). */
  async #withInstanceLock(instanceId: string, run: () => Promise<void>): Promise<void> {
    const previous = this.#instanceLocks.get(instanceId) ?? Promise.resolve();
    const current = previous.then(run, run);
    this.#instanceLocks.set(instanceId, current);
    try {
      await current;
    } finally {
      if (this.#instanceLocks.get(instanceId) === current) this.#instanceLocks.delete(instanceId);
    }
  }

  #waitForSlot(): Promise<void> {
    return new Promise((resolve) => this.#slotWaiters.push(resolve));
  }

  #wakeSlots(): void {
    const waiters = this.#slotWaiters;
    this.#slotWaiters = [];
    for (const wake of waiters) wake();
  }
}
