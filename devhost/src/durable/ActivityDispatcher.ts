/**
 * The dispatcher's activity side: polls the work-item queue, runs each activity function and sends
 * its completion (or the extension's failure wording) to the instance's control queue. Activities
 * run at least once: a work message stays hidden while its activity runs (visibility renewed) and
 * reappears for another host if this one dies; only after the completion is sent is it deleted.
 */
import { FunctionTimeoutError } from '../functionTimeout';
import { type DispatchContext, type DispatcherDeps } from './DispatchContext';
import { type HistoryEvent, historyEvent } from './HistoryEvent';
import { pollLoop } from './pollLoop';
import { type QueuePoller } from './QueuePoller';
import { type ActivityTask, type ActivityWorkMessage, newMessageId, type ReceivedMessage } from './TaskHubQueues';

/** The extension's wording for a failed out-of-process activity (TaskActivityShim + OutOfProcExceptionHelpers). */
export function activityFailure(name: string, err: unknown): { reason: string; details: string } {
  if (err instanceof FunctionTimeoutError) {
    // A FunctionTimeoutException is not a worker (RpcException) error: its message is used as is.
    const details = JSON.stringify({
      $type: 'Microsoft.Azure.WebJobs.Host.FunctionTimeoutException, Microsoft.Azure.WebJobs.Host',
      ClassName: 'Microsoft.Azure.WebJobs.Host.FunctionTimeoutException',
      Message: err.message,
    });
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

export class ActivityDispatcher {
  readonly #ctx: DispatchContext;
  readonly #deps: DispatcherDeps;
  readonly #clock: () => Date;
  #activitySlots = 0;

  constructor(ctx: DispatchContext) {
    this.#ctx = ctx;
    this.#deps = ctx.deps;
    this.#clock = ctx.clock;
  }

  /** Receives up to maxConcurrentActivities at a time (32 a receive) until the dispatcher stops. */
  pollWorkQueue(poller: QueuePoller): Promise<void> {
    const { tuning, logger, queues } = this.#deps;
    return pollLoop<ReceivedMessage<ActivityWorkMessage>>({
      poller,
      logger,
      receiveFailed: { event: 'durable.work.receive_failed' },
      isStopping: () => this.#ctx.isStopping(),
      room: () => tuning.maxConcurrentActivities - this.#activitySlots,
      waitForRoom: () => this.#ctx.waitForSlot(),
      receive: (free) => queues.receiveWork(Math.min(32, free), tuning.workVisibilitySeconds),
      take: (batch) => {
        for (const message of batch) {
          this.#activitySlots += 1;
          this.#ctx.track(
            this.#runWorkMessage(message)
              .catch((err: unknown) =>
                logger.error('durable.activity.message_failed', {
                  instanceId: message.body.instanceId,
                  error: err instanceof Error ? err.message : String(err),
                }),
              )
              .finally(() => {
                this.#activitySlots -= 1;
                this.#ctx.wakeSlots();
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
    // The moment an activity is taken off its queue (from its ScheduledTime: how long it waited for a poll).
    logger.debug('durable.activity.received', { instanceId: body.instanceId, name: body.task.name, taskId: body.task.id, dequeueCount: message.dequeueCount });
    // TaskActivityDispatcher.RenewUntil renews 30 s before the lock runs out (at once for short locks).
    const visibilityMs = tuning.workVisibilitySeconds * 1000;
    const renewEveryMs = Math.max(500, visibilityMs > 60_000 ? visibilityMs - 30_000 : visibilityMs / 2);
    const renewal = setInterval(() => {
      // Abandoned at stop: let the message reappear for another host.
      if (this.#ctx.isAbandoned()) {
        clearInterval(renewal);
        return;
      }
      queues
        .extendVisibility(message, tuning.workVisibilitySeconds)
        .catch((err: unknown) => logger.warn('durable.activity.renew_failed', { error: err instanceof Error ? err.message : String(err) }));
    }, renewEveryMs);
    let event: HistoryEvent;
    try {
      event = await this.#runActivity(body, body.task);
    } finally {
      clearInterval(renewal);
    }
    if (this.#ctx.isAbandoned()) return;
    await queues.sendControl({ mid: newMessageId(), instanceId: body.instanceId, executionId: body.executionId, events: [event] });
    await queues.delete(message);
  }

  async #runActivity(work: ActivityWorkMessage, task: ActivityTask): Promise<HistoryEvent> {
    // Function names are case-insensitive in the host; the TaskScheduled keeps the name as called.
    const registered =
      this.#deps.invoker
        .list()
        .find((f) => f.triggerType === 'activityTrigger' && f.name.toLowerCase() === task.name.toLowerCase())?.name ?? task.name;
    try {
      const result = await this.#deps.invoker.invoke(registered, { trigger: task.input });
      return historyEvent.taskCompleted(
        this.#clock(),
        task.id,
        result.returnValue === undefined ? null : JSON.stringify(result.returnValue),
      );
    } catch (err) {
      const { reason, details } = activityFailure(task.name, err);
      this.#deps.logger.info('durable.activity.failed', { instanceId: work.instanceId, name: task.name, taskId: task.id, reason });
      return historyEvent.taskFailed(this.#clock(), task.id, reason, details);
    }
  }
}
