/**
 * What the dispatcher's two sides (EpisodeDispatcher for control messages, ActivityDispatcher for
 * work messages) share with the DurableDispatcher that runs them: its dependencies, whether it is
 * stopping, the work a stop waits for, and one wake-up for free slots: a freed slot of either kind,
 * or a stop, wakes every waiter of both sides, and each checks its own room again.
 */
import { type FunctionInvoker } from '../contracts';
import { type Logger } from '../log';
import { type DispatcherTuning } from './DispatcherTuning';
import { type InstanceStore } from './InstanceStore';
import { type TaskHubQueues } from './TaskHubQueues';

export interface DispatcherDeps {
  readonly invoker: FunctionInvoker;
  readonly store: InstanceStore;
  readonly queues: TaskHubQueues;
  readonly logger: Logger;
  readonly tuning: DispatcherTuning;
  readonly clock?: () => Date;
  /** DurableBackendOptions.dispatch. */
  readonly dispatch?: { readonly episodes: boolean; readonly activities: boolean };
}

export interface DispatchContext {
  readonly deps: DispatcherDeps;
  readonly clock: () => Date;
  /** From stop() on: the poll loops end and held messages are not processed. */
  isStopping(): boolean;
  /** stop() gave up waiting: running activities leave their messages to reappear for another host. */
  isAbandoned(): boolean;
  /** Work that stop() waits for (up to the tuning's drainTimeoutMs). */
  track(work: Promise<void>): void;
  /** Resolves at the next wakeSlots(). */
  waitForSlot(): Promise<void>;
  /** An episode or activity slot was freed, or the dispatcher is stopping. */
  wakeSlots(): void;
}
