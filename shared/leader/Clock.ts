/**
 * Time as the elector sees it. Decisions (renew deadline, watchdog, lease expiry estimates) use only
 * `now()`, a monotonic clock local to this process, never a remote or wall-clock timestamp: a wall
 * clock can jump, and another machine's clock says nothing about when our lease was granted.
 * `wallNow()` exists only for what people read (`acquiredAt`).
 */
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
