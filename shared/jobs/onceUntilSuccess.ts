/**
 * Idempotent set-up (create a queue or container if it does not exist) done once per object:
 * concurrent callers share one attempt, a success is remembered, and a failure is forgotten so the
 * next call tries again instead of failing forever. The first caller's AbortSignal governs the
 * shared attempt.
 */
export function onceUntilSuccess(setUp: (signal?: AbortSignal) => Promise<unknown>): (signal?: AbortSignal) => Promise<void> {
  let attempt: Promise<void> | undefined;
  return (signal) => {
    // A set-up that throws before its first await (a client that cannot be built) fails the attempt like a rejection.
    attempt ??= Promise.resolve().then(() => setUp(signal)).then(
      () => undefined,
      (err: unknown) => {
        attempt = undefined;
        throw err;
      },
    );
    return attempt;
  };
}
