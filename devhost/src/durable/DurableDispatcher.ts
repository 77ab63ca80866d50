/**
 * Dispatches orchestration episodes and activities from the task hub's queues, with the Azure
 * Storage provider's concurrency, polling, visibility and discard rules (host.json durableTask,
 * see DurableTaskOptions).
 *
 * Per batch of control messages for one instance: read the instance (with its etag), drop what
 * DurableTask.AzureStorage drops (a start message that does not match the instance's record is
 * deferred, then discarded; events for an instance that has not started or has finished are
 * discarded), keep only the events not applied yet (duplicates are recognized by message id,
 * completions by task id, fired timers by timer id), run one episode, write the new state
 * conditionally (a lost race re-reads and redoes the episode), then send the work it produced, then
 * delete the consumed messages. A crash between any two steps loses nothing: unsent work is re-sent
 * when a consumed message comes back after its visibility timeout (its id is then already recorded
 * as applied, which is exactly the sign that the previous attempt may have stopped before sending),
 * and every receiver is idempotent. Activities run at least once: a work message stays hidden
 * while its activity runs (visibility renewed) and reappears for another host if this one dies.
 *
 * Not guaranteed: exactly-once activity execution (the real extension does not promise it either);
 * message ids are remembered for the last `appliedMessageIdsKept` messages of an instance. Not
 * reproduced: partition leases (every process polls every control queue; the etag on the instance
 * keeps two processes from applying one episode twice).
 */
import { type FunctionInvoker } from '../contracts';
import { FunctionTimeoutError } from '../functionTimeout';
import { type Logger } from '../log';
import { type DispatcherTuning } from './DispatcherTuning';
import { EventType, fromJsonText, type HistoryEvent, historyEvent, isTerminal, type ParentInstanceRef } from './HistoryEvent';
import { indexHistory, isNewEvent, recordEvent } from './historyIndex';
import { type InstanceState, type InstanceStore, newInstanceState } from './InstanceStore';
import { pollLoop } from './pollLoop';
import { QueuePoller } from './QueuePoller';
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
/** TaskHubQueue.AbandonMessageAsync: 2^dequeueCount seconds, at most 10 minutes. */
const MAX_ABANDON_SECONDS = 600;

function startEventOf(message: ReceivedMessage<ControlMessage>): HistoryEvent | undefined {
  return message.body.events.find((e) => e.EventType === EventType.ExecutionStarted);
}

/** The extension's wording for a failed out-of-process activity (TaskActivityShim + OutOfProcExceptionHelpers). */
export function activityFailure(name: string, err: unknown): { reason: string; details: string } {
  if (err instanceof FunctionTimeoutError) {
    // A FunctionTimeoutException is not a worker (RpcException) error: its message is used as is.
    const details = JSON.stringify({ $type: 'Microsoft.Azure.WebJobs.Host.FunctionTimeoutException, Microsoft.Azure.WebJobs.Host', ClassName: 'Microsoft.Azure.WebJobs.Host.FunctionTimeoutException', Message: err.message });
    return { reason: `Activity function '${name}' failed: ${err.message}`, details };
  }
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
  readonly #pollers: QueuePoller[] = [];
  readonly #instanceLocks = new Map<string, Promise<void>>();
  readonly #runningWork = new Set<Promise<void>>();
  /** Timer messages held until due; on stop they are released (and reappear on the queue later). */
  readonly #heldTimers = new Map<NodeJS.Timeout, () => void>();
  #activitySlots = 0;
  #episodeSlots = 0;
  /** Control messages received and not yet finished with (ControlQueue's PendingOrchestratorMessages). */
  #bufferedControlMessages = 0;
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
    const { tuning, queues } = this.#deps;
    this.#pollers.length = 0;
    const loops: Array<Promise<void>> = [];
    for (let partition = 0; partition < queues.controlQueueCount; partition += 1) {
      const poller = new QueuePoller(tuning.minPollIntervalMs, tuning.maxPollIntervalMs);
      this.#pollers.push(poller);
      loops.push(this.#controlLoop(partition, poller));
    }
    const workPoller = new QueuePoller(tuning.minPollIntervalMs, tuning.maxPollIntervalMs);
    this.#pollers.push(workPoller);
    loops.push(this.#workLoop(workPoller));
    this.#loops = loops;
    // A message this process adds wakes its own poller of that queue (TaskHubQueue.AddMessageAsync
    // resets the queue's BackoffPollingHelper). Every process here polls every control queue (no
    // partition leases); on Azure only the partition's owner polls it, so only a send by the owner wakes it.
    const pollers = this.#pollers;
    if (tuning.wakeOnSend !== false) queues.onSent((to) => (to.kind === 'work' ? workPoller : pollers[to.partition])?.reset());
  }

  /** Stops receiving; waits (bounded) for running work; whatever is left reappears on the queues for another host. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const poller of this.#pollers) poller.interrupt();
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

  #track(work: Promise<void>): void {
    const tracked = work.finally(() => this.#runningWork.delete(tracked));
    this.#runningWork.add(tracked);
  }

  // ---- control messages: orchestration episodes -------------------------------------------------

  #controlLoop(partition: number, poller: QueuePoller): Promise<void> {
    const { tuning, logger, queues } = this.#deps;
    return pollLoop<ReceivedMessage<ControlMessage>>({
      poller,
      logger,
      receiveFailed: { event: 'durable.control.receive_failed', fields: { partition } },
      isStopping: () => this.#stopping,
      room: () => tuning.controlQueueBufferThreshold - this.#bufferedControlMessages,
      waitForRoom: () => new Promise<void>((resolve) => setTimeout(resolve, 1000)),
      receive: () => queues.receiveControl(partition, tuning.controlQueueBatchSize, tuning.controlVisibilitySeconds),
      take: (batch) => {
        this.#bufferedControlMessages += batch.length;
        this.#track(this.#processControlBatch(batch).finally(() => (this.#bufferedControlMessages -= batch.length)));
      },
    });
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
      this.#track(
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            this.#heldTimers.delete(timer);
            resolve(this.#stopping ? undefined : this.#processControlBatch([message]));
          }, waitMs);
          this.#heldTimers.set(timer, resolve);
        }),
      );
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

  #discard(instanceId: string, messages: Array<ReceivedMessage<ControlMessage>>, reason: string): Promise<unknown> {
    if (messages.length === 0) return Promise.resolve();
    // AzureStorageOrchestrationService's DiscardingWorkItem warning.
    this.#deps.logger.warn('durable.message.discarded', {
      instanceId,
      reason,
      events: messages.flatMap((m) => m.body.events.map((e) => e.EventType)),
    });
    return Promise.all(messages.map((m) => this.#deps.queues.delete(m)));
  }

  /**
   * OrchestrationSessionManager.DedupeExecutionStartedMessagesAsync: a top-level start message runs
   * only when the instance record carries its execution id. Otherwise it is a duplicate (the record
   * is Pending and older than the message: discarded), or the record may not be written yet
   * (deferred, with the provider's backoff) until its 10th delivery, when it is discarded.
   */
  async #dedupeStarts(state: InstanceState | undefined, messages: Array<ReceivedMessage<ControlMessage>>): Promise<Array<ReceivedMessage<ControlMessage>>> {
    const { queues, logger, tuning } = this.#deps;
    const kept: Array<ReceivedMessage<ControlMessage>> = [];
    for (const message of messages) {
      const start = startEventOf(message);
      if (start === undefined || start.ParentInstance !== null) {
        kept.push(message);
        continue;
      }
      const executionId = start.OrchestrationInstance?.ExecutionId;
      if (state !== undefined && state.executionId === executionId) {
        kept.push(message);
        continue;
      }
      const duplicate =
        state !== undefined && state.runtimeStatus === 'Pending' && (start.Generation ?? 0) === state.generation && Date.parse(state.createdTime) < Date.parse(start.Timestamp);
      if (duplicate || message.dequeueCount >= tuning.startMessageMaxDequeues) {
        logger.warn('durable.message.duplicate_start', { instanceId: message.body.instanceId, executionId, dequeueCount: message.dequeueCount, reason: duplicate ? 'newer than the Pending record' : 'no matching instance record' });
        await queues.delete(message);
        continue;
      }
      await queues.abandon(message, Math.min(MAX_ABANDON_SECONDS, Math.pow(2, message.dequeueCount)));
    }
    return kept;
  }

  async #processInstance(instanceId: string, received: Array<ReceivedMessage<ControlMessage>>): Promise<void> {
    const { store, queues, logger, tuning } = this.#deps;
    for (let attempt = 1; attempt <= MAX_SAVE_ATTEMPTS; attempt += 1) {
      const stored = await store.read(instanceId);
      const messages = await this.#dedupeStarts(stored?.state, received);
      received = messages;
      if (messages.length === 0) return;
      if (stored === undefined) {
        await this.#discard(instanceId, messages, 'No such instance');
        return;
      }
      const { state, etag } = stored;
      const index = indexHistory(state.history);
      const batchStarts = messages.some((m) => startEventOf(m) !== undefined);
      // AzureStorageOrchestrationService.IsExecutableInstanceAsync.
      if (!index.hasExecutionStarted && !batchStarts) {
        const terminate = messages.flatMap((m) => m.body.events).find((e) => e.EventType === EventType.ExecutionTerminated);
        if (terminate !== undefined && !isTerminal(state.runtimeStatus)) {
          const at = this.#clock().toISOString();
          const saved = await store.save({ ...state, runtimeStatus: 'Terminated', output: terminate.Input ?? null, lastUpdatedTime: at }, etag);
          if (saved === 'conflict') continue;
        }
        await this.#discard(instanceId, messages, terminate !== undefined ? 'Instance is Terminated' : isTerminal(state.runtimeStatus) ? `Instance is ${state.runtimeStatus}` : 'No such instance');
        return;
      }
      if (isTerminal(state.runtimeStatus)) {
        const applied = new Set(state.appliedMessageIds);
        // A redelivered message of the episode that finished the instance may still owe its parent a notification.
        if (messages.some((m) => applied.has(m.body.mid))) await this.#resendPendingWork(state);
        await this.#discard(instanceId, messages.filter((m) => !applied.has(m.body.mid)), `Instance is ${state.runtimeStatus}`);
        await Promise.all(messages.filter((m) => applied.has(m.body.mid)).map((m) => queues.delete(m)));
        return;
      }

      const applied = new Set(state.appliedMessageIds);
      const accepted: HistoryEvent[] = [];
      const acceptedMids: string[] = [];
      let redelivered = false;
      for (const message of messages) {
        const body = message.body;
        if (applied.has(body.mid)) {
          redelivered = true;
          continue;
        }
        if (acceptedMids.includes(body.mid)) continue; // the same message twice in one batch
        // ReconcileMessagesWithState: events for another execution are eaten.
        if (body.executionId !== undefined && body.executionId !== state.executionId) continue;
        for (const e of body.events) {
          if (!isNewEvent(index, e)) continue;
          accepted.push(e);
          recordEvent(index, e);
        }
        acceptedMids.push(body.mid);
      }
      // The start goes first, whatever the order the queue delivered the batch in.
      const events = accepted.sort((a, b) => Number(b.EventType === EventType.ExecutionStarted) - Number(a.EventType === EventType.ExecutionStarted));
      if (events.length === 0) {
        if (redelivered) await this.#resendPendingWork(state);
        await Promise.all(messages.map((m) => queues.delete(m)));
        return;
      }
      const result = await runEpisode(state, events, { invoker: this.#deps.invoker, clock: this.#clock, logger, maxOrchestrationActions: tuning.maxOrchestrationActions });
      const next: InstanceState = { ...result.state, appliedMessageIds: [...state.appliedMessageIds, ...acceptedMids].slice(-tuning.appliedMessageIdsKept) };
      const saved = await store.save(next, etag);
      if (saved === 'conflict') {
        logger.debug('durable.episode.conflict', { instanceId, attempt });
        continue;
      }
      logger.debug('durable.episode.saved', { instanceId, status: next.runtimeStatus, events: events.length, activities: result.activities.length, timers: result.timers.length });
      await this.#sendEpisodeWork(next, result);
      if (redelivered) await this.#resendPendingWork(state);
      await Promise.all(messages.map((m) => queues.delete(m)));
      return;
    }
    logger.warn('durable.episode.contended', { instanceId, attempts: MAX_SAVE_ATTEMPTS });
  }

  async #sendEpisodeWork(state: InstanceState, result: Pick<EpisodeResult, 'activities' | 'timers' | 'subOrchestrations' | 'completed'>): Promise<void> {
    const { queues } = this.#deps;
    const sends: Array<Promise<void>> = [];
    for (const task of result.activities) {
      sends.push(queues.sendWork({ mid: newMessageId(), instanceId: state.instanceId, executionId: state.executionId, task }));
    }
    const now = this.#clock().getTime();
    for (const timer of result.timers) {
      const fired = historyEvent.timerFired(timer.fireAt, timer.id, timer.fireAt.toISOString());
      sends.push(queues.sendControl({ mid: newMessageId(), instanceId: state.instanceId, executionId: state.executionId, events: [fired] }, (timer.fireAt.getTime() - now) / 1000));
    }
    for (const child of result.subOrchestrations) sends.push(this.#startSubOrchestration(state, child));
    if (result.completed !== undefined && state.parent !== null) sends.push(this.#notifyParent(state.parent, state, result.completed.status, result.completed.output));
    await Promise.all(sends);
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
      executionId = newMessageId() + newMessageId().slice(0, 12);
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

  #workLoop(poller: QueuePoller): Promise<void> {
    const { tuning, logger, queues } = this.#deps;
    return pollLoop<ReceivedMessage<ActivityWorkMessage>>({
      poller,
      logger,
      receiveFailed: { event: 'durable.work.receive_failed' },
      isStopping: () => this.#stopping,
      room: () => tuning.maxConcurrentActivities - this.#activitySlots,
      waitForRoom: () => this.#waitForSlot(),
      receive: (free) => queues.receiveWork(Math.min(32, free), tuning.workVisibilitySeconds),
      take: (batch) => {
        for (const message of batch) {
          this.#activitySlots += 1;
          this.#track(
            this.#runWorkMessage(message)
              .catch((err: unknown) =>
                logger.error('durable.activity.message_failed', {
                  instanceId: message.body.instanceId,
                  error: err instanceof Error ? err.message : String(err),
                }),
              )
              .finally(() => {
                this.#activitySlots -= 1;
                this.#wakeSlots();
              }),
          );
        }
      },
    });
  }

  async #runWorkMessage(message: ReceivedMessage<ActivityWorkMessage>): Promise<void> {
    const { queues, tuning, logger } = this.#deps;
    const body = message.body;
    if (body.task === undefined) {
      logger.error('durable.message.unreadable', { code: 'DURABLE_BAD_MESSAGE', queue: message.queueName, messageId: message.messageId });
      await queues.delete(message);
      return;
    }
    // TaskActivityDispatcher.RenewUntil renews 30 s before the lock runs out (at once for short locks).
    const visibilityMs = tuning.workVisibilitySeconds * 1000;
    const renewEveryMs = Math.max(500, visibilityMs > 60_000 ? visibilityMs - 30_000 : visibilityMs / 2);
    const renewal = setInterval(() => {
      // Abandoned at stop: let the message reappear for another host.
      if (this.#abandon.signal.aborted) {
        clearInterval(renewal);
        return;
      }
      queues.extendVisibility(message, tuning.workVisibilitySeconds).catch((err: unknown) => logger.warn('durable.activity.renew_failed', { error: err instanceof Error ? err.message : String(err) }));
    }, renewEveryMs);
    let event: HistoryEvent;
    try {
      event = await this.#runActivity(body, body.task);
    } finally {
      clearInterval(renewal);
    }
    if (this.#abandon.signal.aborted) return;
    await queues.sendControl({ mid: newMessageId(), instanceId: body.instanceId, executionId: body.executionId, events: [event] });
    await queues.delete(message);
  }

  async #runActivity(work: ActivityWorkMessage, task: ActivityTask): Promise<HistoryEvent> {
    // Function names are case-insensitive in the host; the TaskScheduled keeps the name as called.
    const registered = this.#deps.invoker.list().find((f) => f.triggerType === 'activityTrigger' && f.name.toLowerCase() === task.name.toLowerCase())?.name ?? task.name;
    try {
      const result = await this.#deps.invoker.invoke(registered, { trigger: task.input });
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
