/**
 * The dispatcher's orchestration side: polls the control queues and runs orchestration episodes,
 * with the Azure Storage provider's rules for what to drop, defer or discard.
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
 * and every receiver is idempotent. Message ids are remembered for the last `appliedMessageIdsKept`
 * messages of an instance.
 */
import { type DispatchContext, type DispatcherDeps } from './DispatchContext';
import { EpisodeWork } from './EpisodeWork';
import { EventType, type HistoryEvent, isTerminal } from './HistoryEvent';
import { indexHistory, isNewEvent, recordEvent } from './historyIndex';
import { type InstanceState } from './InstanceStore';
import { pollLoop } from './pollLoop';
import { type QueuePoller } from './QueuePoller';
import { runEpisode } from './runEpisode';
import { type ControlMessage, newMessageId, type ReceivedMessage } from './TaskHubQueues';

/** Saves conflicting with concurrent writers are retried this often before the batch is left to redelivery. */
const MAX_SAVE_ATTEMPTS = 20;
/** A control message that keeps failing is dropped (loudly) after this many deliveries. */
const MAX_CONTROL_DEQUEUES = 50;
/** TaskHubQueue.AbandonMessageAsync: 2^dequeueCount seconds, at most 10 minutes. */
const MAX_ABANDON_SECONDS = 600;

function startEventOf(message: ReceivedMessage<ControlMessage>): HistoryEvent | undefined {
  return message.body.events.find((e) => e.EventType === EventType.ExecutionStarted);
}

export class EpisodeDispatcher {
  readonly #ctx: DispatchContext;
  readonly #deps: DispatcherDeps;
  readonly #clock: () => Date;
  readonly #work: EpisodeWork;
  readonly #instanceLocks = new Map<string, Promise<void>>();
  /** Timer messages held until due; on stop they are released (and reappear on the queue later). */
  readonly #heldTimers = new Map<NodeJS.Timeout, () => void>();
  #episodeSlots = 0;
  /** Control messages received and not yet finished with (ControlQueue's PendingOrchestratorMessages). */
  #bufferedControlMessages = 0;

  constructor(ctx: DispatchContext) {
    this.#ctx = ctx;
    this.#deps = ctx.deps;
    this.#clock = ctx.clock;
    this.#work = new EpisodeWork(ctx);
  }

  /** Receives from one control queue until the dispatcher stops, pausing while too many messages are buffered. */
  pollControlQueue(partition: number, poller: QueuePoller): Promise<void> {
    const { tuning, logger, queues } = this.#deps;
    return pollLoop<ReceivedMessage<ControlMessage>>({
      poller,
      logger,
      receiveFailed: { event: 'durable.control.receive_failed', fields: { partition } },
      isStopping: () => this.#ctx.isStopping(),
      room: () => tuning.controlQueueBufferThreshold - this.#bufferedControlMessages,
      waitForRoom: () => new Promise<void>((resolve) => setTimeout(resolve, 1000)),
      receive: () => queues.receiveControl(partition, tuning.controlQueueBatchSize, tuning.controlVisibilitySeconds),
      take: (batch) => {
        this.#bufferedControlMessages += batch.length;
        this.#ctx.track(this.#processControlBatch(batch).finally(() => (this.#bufferedControlMessages -= batch.length)));
      },
    });
  }

  /** Stop: held timer messages are let go (they reappear on the queue after their visibility timeout). */
  releaseHeldTimers(): void {
    for (const [timer, release] of this.#heldTimers) {
      clearTimeout(timer);
      release();
    }
    this.#heldTimers.clear();
  }

  /** Never rejects: what fails is logged, and unconsumed messages come back after their visibility timeout. */
  async #processControlBatch(batch: Array<ReceivedMessage<ControlMessage>>): Promise<void> {
    try {
      await this.#processControlMessages(batch);
    } catch (err) {
      this.#deps.logger.error('durable.control.batch_failed', {
        messages: batch.length,
        error: err instanceof Error ? err.message : String(err),
      });
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
      this.#ctx.track(
        new Promise<void>((resolve) => {
          const timer = setTimeout(() => {
            this.#heldTimers.delete(timer);
            resolve(this.#ctx.isStopping() ? undefined : this.#processControlBatch([message]));
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
      this.#deps.logger.error('durable.message.poison', {
        code: 'DURABLE_POISON_MESSAGE',
        instanceId: message.body.instanceId,
        mid: message.body.mid,
        dequeueCount: message.dequeueCount,
      });
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
  async #dedupeStarts(
    state: InstanceState | undefined,
    messages: Array<ReceivedMessage<ControlMessage>>,
  ): Promise<Array<ReceivedMessage<ControlMessage>>> {
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
        state !== undefined &&
        state.runtimeStatus === 'Pending' &&
        (start.Generation ?? 0) === state.generation &&
        Date.parse(state.createdTime) < Date.parse(start.Timestamp);
      if (duplicate || message.dequeueCount >= tuning.startMessageMaxDequeues) {
        logger.warn('durable.message.duplicate_start', {
          instanceId: message.body.instanceId,
          executionId,
          dequeueCount: message.dequeueCount,
          reason: duplicate ? 'newer than the Pending record' : 'no matching instance record',
        });
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
          const terminated: InstanceState = { ...state, runtimeStatus: 'Terminated', output: terminate.Input ?? null, lastUpdatedTime: at };
          const saved = await store.save(terminated, etag);
          if (saved === 'conflict') continue;
        }
        const reason =
          terminate !== undefined
            ? 'Instance is Terminated'
            : isTerminal(state.runtimeStatus)
              ? `Instance is ${state.runtimeStatus}`
              : 'No such instance';
        await this.#discard(instanceId, messages, reason);
        return;
      }
      if (isTerminal(state.runtimeStatus)) {
        const applied = new Set(state.appliedMessageIds);
        // A redelivered message of the episode that finished the instance may still owe its parent a notification.
        if (messages.some((m) => applied.has(m.body.mid))) await this.#work.resendPending(state);
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
      const isStart = (e: HistoryEvent): number => Number(e.EventType === EventType.ExecutionStarted);
      const events = accepted.sort((a, b) => isStart(b) - isStart(a));
      if (events.length === 0) {
        if (redelivered) await this.#work.resendPending(state);
        await Promise.all(messages.map((m) => queues.delete(m)));
        return;
      }
      const result = await runEpisode(state, events, {
        invoker: this.#deps.invoker,
        clock: this.#clock,
        logger,
        maxOrchestrationActions: tuning.maxOrchestrationActions,
      });
      const appliedMessageIds = [...state.appliedMessageIds, ...acceptedMids].slice(-tuning.appliedMessageIdsKept);
      const next: InstanceState = { ...result.state, appliedMessageIds };
      const saved = await store.save(next, etag);
      if (saved === 'conflict') {
        logger.debug('durable.episode.conflict', { instanceId, attempt });
        continue;
      }
      logger.debug('durable.episode.saved', {
        instanceId,
        status: next.runtimeStatus,
        events: events.length,
        activities: result.activities.length,
        timers: result.timers.length,
      });
      await this.#work.send(next, result);
      if (redelivered) await this.#work.resendPending(state);
      await Promise.all(messages.map((m) => queues.delete(m)));
      return;
    }
    logger.warn('durable.episode.contended', { instanceId, attempts: MAX_SAVE_ATTEMPTS });
  }

  async #withEpisodeSlot<T>(run: () => Promise<T>): Promise<T> {
    while (this.#episodeSlots >= this.#deps.tuning.maxConcurrentEpisodes) await this.#ctx.waitForSlot();
    this.#episodeSlots += 1;
    try {
      return await run();
    } finally {
      this.#episodeSlots -= 1;
      this.#ctx.wakeSlots();
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
}
