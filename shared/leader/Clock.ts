/**
 * Time as the elector sees it. Decisions (renew deadline, watchdog, lease expiry estimates) use only
 * `now()`, a monotonic clock local to this process, never a remote or wall-clock timestamp: a wall
 * clock can jump, and another machine's clock says nothing about when our lease was granted.
 * `wallNow()` exists only for what people read (`acquiredAt`). `withTimeout` and `settlesWithin`
 * bound a storage call or a wait on such a clock, so tests on a manual clock stay deterministic.
 */
import { LeaseRequestTimeoutError } from './errors';

export interface Clock {
  /** Monotonic milliseconds since an arbitrary origin; never decreases. */
  now(): number;
  /** Wall-clock time, for display and metadata only. */
  wallNow(): Date;
  /** Resolves after `ms`, or as soon as `signal` aborts (never rejects). */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => new Date(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve) => {
      if (signal?.aborted === true) {
        resolve();
        return;
      }
      const done = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, ms));
      signal?.addEventListener('abort', done, { once: true });
    }),
};

/**
 * Runs `fn` with a hard timeout on `clock`, whatever `fn` does with its signal: at the timeout the
 * signal aborts and the call rejects with a LeaseRequestTimeoutError naming `operation`.
 */
export async function withTimeout<T>(
  clock: Clock,
  operation: string,
  timeoutMs: number,
  fn: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const request = new AbortController();
  const timer = new AbortController();
  const timedOut = clock.sleep(Math.max(0, timeoutMs), timer.signal).then(() => {
    if (timer.signal.aborted) return undefined as never;
    const error = new LeaseRequestTimeoutError(operation, timeoutMs);
    request.abort(error);
    throw error;
  });
  try {
    return await Promise.race([fn(request.signal), timedOut]);
  } finally {
    timer.abort();
  }
}

/** Whether `work` settled within `ms` on `clock` (it keeps running either way). */
export async function settlesWithin(clock: Clock, work: Promise<unknown>, ms: number): Promise<boolean> {
  const timer = new AbortController();
  const finished = await Promise.race([work.then(() => true), clock.sleep(ms, timer.signal).then(() => false)]);
  timer.abort();
  return finished;
}
