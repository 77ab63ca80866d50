/**
 * The timer trigger, following the host's TimerListener:
 * - it runs only in the process holding the function's listener lock (one per host id), and the
 *   others retry the lock every recovery interval, so a schedule fires at most once per host id;
 * - invocations never overlap: the next occurrence is scheduled after the current one finishes;
 * - with a schedule whose occurrences are at least a minute apart (and `useMonitor` not false), the
 *   schedule status `{ Last, Next, LastUpdated }` is kept in
 *   `azure-webjobs-hosts/timers/{hostId}/{name}/status`; a start after a missed occurrence fires
 *   at once with `isPastDue: true`, and the handler gets `scheduleStatus`;
 * - `runOnStartup` fires once when the listener starts (also when it takes over the lock).
 *
 * The trigger value is the host's TimerInfo JSON (`Schedule.AdjustForDST`, `ScheduleStatus`,
 * `IsPastDue`), which the v4 library camel-cases for the handler. Times are UTC.
 */
import { type BlobServiceClient, isRestError } from '@azure/storage-blob';

import { type FunctionInvoker, type HostedFunction } from '../contracts';
import { type Logger } from '../log';
import { type TimerSchedule } from '../schedule/TimerSchedule';
import { HOSTS_CONTAINER, ListenerLock } from './ListenerLock';

/** setTimeout's limit (~24.8 days); longer waits are done in steps, like the host's MaxTimerInterval. */
const MAX_TIMER_DELAY_MS = 2_147_483_647;
const NEVER = new Date(0);
/** .NET's default(DateTime), which the host writes for "never". */
const NEVER_DOTNET = new Date('0001-01-01T00:00:00.000Z');

interface ScheduleStatus {
  Last: string;
  Next: string;
  LastUpdated: string;
}

/** .NET's round-trip form as the host serializes DateTime in UTC. */
function dotnetTime(date: Date): string {
  return date.toISOString().replace('Z', '+00:00');
}

export interface TimerListenerOptions {
  readonly fn: HostedFunction;
  readonly schedule: TimerSchedule;
  readonly runOnStartup: boolean;
  readonly useMonitor: boolean;
  readonly invoker: FunctionInvoker;
  readonly blobService: BlobServiceClient;
  readonly hostId: string;
  readonly instanceId: string;
  readonly listenerLockPeriodMs: number;
  readonly recoveryPollingIntervalMs: number;
  readonly logger: Logger;
  readonly now?: () => Date;
}

export class TimerListener {
  readonly #lock: ListenerLock;
  readonly #now: () => Date;
  readonly #timerName: string;
  #timer: NodeJS.Timeout | undefined;
  #recovery: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #stopped = false;
  #listening = false;
  #status: ScheduleStatus | undefined;
  #nextDue: Date = NEVER;

  constructor(private readonly options: TimerListenerOptions) {
    this.#now = options.now ?? (() => new Date());
    this.#timerName = `Host.Functions.${options.fn.name}`;
    this.#lock = new ListenerLock({
      service: options.blobService,
      hostId: options.hostId,
      lockId: `${this.#timerName}.Listener`,
      ownerId: options.instanceId,
      leasePeriodMs: options.listenerLockPeriodMs,
      logger: options.logger,
      onLost: () => this.#onLockLost(),
    });
  }

  get listening(): boolean {
    return this.#listening;
  }

  async start(): Promise<void> {
    this.#stopped = false;
    await this.#tryTakeLock();
  }

  /** Stops scheduling, waits for a running invocation, then releases the lock (in that order, like the host). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearTimers();
    await this.#running;
    this.#listening = false;
    await this.#lock.release();
  }

  async #tryTakeLock(): Promise<void> {
    if (this.#stopped) return;
    let acquired = false;
    try {
      acquired = await this.#lock.tryAcquire();
    } catch (err) {
      this.options.logger.warn('timer.lock_error', { function: this.options.fn.name, error: err });
    }
    if (this.#stopped) {
      await this.#lock.release();
      return;
    }
    if (!acquired) {
      this.options.logger.debug('timer.lock_unavailable', { function: this.options.fn.name, lock: this.#lock.blobName });
      this.#recovery = setTimeout(() => void this.#tryTakeLock(), this.options.recoveryPollingIntervalMs);
      return;
    }
    this.options.logger.info('timer.listening', { function: this.options.fn.name, schedule: this.options.schedule.expression });
    await this.#startListening();
  }

  #onLockLost(): void {
    this.options.logger.warn('timer.lock_lost', { function: this.options.fn.name });
    this.#listening = false;
    this.#clearTimers();
    if (!this.#stopped) this.#recovery = setTimeout(() => void this.#tryTakeLock(), this.options.recoveryPollingIntervalMs);
  }

  async #startListening(): Promise<void> {
    this.#listening = true;
    const now = this.#now();
    let pastDue = false;
    const monitored = this.options.useMonitor && this.options.schedule.monitorable;
    if (monitored) {
      this.#status = await this.#readStatus();
      pastDue = await this.#checkPastDue(now);
    }
    this.#nextDue = this.#status === undefined ? this.options.schedule.next(now) : new Date(this.#status.Next);
    if (!monitored) this.#status = undefined;
    if (pastDue) this.#arm(0, { isPastDue: true, runOnStartup: false });
    else if (this.options.runOnStartup) this.#arm(0, { isPastDue: false, runOnStartup: true });
    else this.#armForNext();
  }

  #armForNext(): void {
    this.#arm(this.#nextDue.getTime() - this.#now().getTime(), { isPastDue: false, runOnStartup: false });
  }

  #arm(delayMs: number, kind: { isPastDue: boolean; runOnStartup: boolean }): void {
    if (this.#stopped || !this.#listening) return;
    const wait = Math.max(0, delayMs);
    if (wait > MAX_TIMER_DELAY_MS) {
      this.#timer = setTimeout(() => this.#arm(delayMs - MAX_TIMER_DELAY_MS, kind), MAX_TIMER_DELAY_MS);
      return;
    }
    this.#timer = setTimeout(() => {
      this.#running = this.#fire(kind).finally(() => {
        this.#running = undefined;
        this.#armForNext();
      });
    }, wait);
  }

  async #fire(kind: { isPastDue: boolean; runOnStartup: boolean }): Promise<void> {
    if (this.#stopped || !this.#listening) return;
    const invocationTime = this.#now();
    const trigger = {
      Schedule: { AdjustForDST: true },
      ScheduleStatus: this.#status ?? null,
      IsPastDue: kind.isPastDue,
    };
    try {
      await this.options.invoker.invoke(this.options.fn.name, { trigger });
    } catch (err) {
      // Like the host: a failed invocation never stops the schedule.
      this.options.logger.error('timer.invocation_failed', { function: this.options.fn.name, error: err });
    }
    // If the timer fired a little early (clock granularity), count it as the scheduled occurrence so
    // the same occurrence is not scheduled twice.
    const adjusted = !kind.isPastDue && !kind.runOnStartup && this.#nextDue > invocationTime ? this.#nextDue : invocationTime;
    this.#nextDue = this.options.schedule.next(adjusted);
    if (this.options.useMonitor && this.options.schedule.monitorable) {
      this.#status = { Last: dotnetTime(adjusted), Next: dotnetTime(this.#nextDue), LastUpdated: dotnetTime(adjusted) };
      await this.#writeStatus(this.#status);
    }
  }

  #clearTimers(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    if (this.#recovery !== undefined) clearTimeout(this.#recovery);
    this.#timer = undefined;
    this.#recovery = undefined;
  }

  #statusBlob() {
    return this.options.blobService.getContainerClient(HOSTS_CONTAINER).getBlockBlobClient(`timers/${this.options.hostId}/${this.#timerName}/status`);
  }

  async #readStatus(): Promise<ScheduleStatus | undefined> {
    try {
      const body = await this.#statusBlob().downloadToBuffer();
      const parsed = JSON.parse(body.toString('utf8')) as Partial<ScheduleStatus>;
      if (typeof parsed.Last === 'string' && typeof parsed.Next === 'string' && typeof parsed.LastUpdated === 'string') {
        return { Last: parsed.Last, Next: parsed.Next, LastUpdated: parsed.LastUpdated };
      }
      return undefined;
    } catch (err) {
      if (isRestError(err) && err.statusCode === 404) return undefined;
      if (err instanceof SyntaxError) return undefined;
      throw err;
    }
  }

  async #writeStatus(status: ScheduleStatus): Promise<void> {
    try {
      await this.options.blobService.getContainerClient(HOSTS_CONTAINER).createIfNotExists();
      const text = JSON.stringify(status);
      await this.#statusBlob().upload(text, Buffer.byteLength(text));
    } catch (err) {
      this.options.logger.error('timer.status_write_failed', { function: this.options.fn.name, error: err });
    }
  }

  /** The host's ScheduleMonitor.CheckPastDueAsync: also re-bases a status written for an older schedule. */
  async #checkPastDue(now: Date): Promise<boolean> {
    const schedule = this.options.schedule;
    let recordedNext: Date;
    if (this.#status === undefined) {
      recordedNext = schedule.next(now);
      this.#status = { Last: dotnetTime(NEVER_DOTNET), Next: dotnetTime(recordedNext), LastUpdated: dotnetTime(now) };
      await this.#writeStatus(this.#status);
    } else {
      const last = new Date(this.#status.Last);
      const lastUpdated = new Date(this.#status.LastUpdated);
      let base = isNever(last) ? (isNever(lastUpdated) ? now : lastUpdated) : last;
      let expected = schedule.next(base);
      if (new Date(this.#status.Next).getTime() !== expected.getTime()) {
        if (now > expected) {
          base = now;
          expected = schedule.next(now);
        }
        this.#status = { Last: dotnetTime(NEVER_DOTNET), Next: dotnetTime(expected), LastUpdated: dotnetTime(base) };
        await this.#writeStatus(this.#status);
      }
      recordedNext = new Date(this.#status.Next);
    }
    return now > recordedNext;
  }
}

function isNever(date: Date): boolean {
  return Number.isNaN(date.getTime()) || date.getUTCFullYear() <= 1;
}
