/**
 * A read that concurrent callers share: a call made while one is in flight gets its answer, a call
 * made after it settled reads again (nothing is kept). A joiner's answer was read at most one round
 * trip before its call, which a read-then-act check (the fence's lease epoch) tolerates anyway:
 * the value can change the moment after any read. Under a burst, one read serves every plan and
 * intake check waiting on it.
 */
export function sharedRead<T>(read: () => Promise<T>): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  return () => {
    inFlight ??= Promise.resolve()
      .then(read)
      .finally(() => {
        inFlight = undefined;
      });
    return inFlight;
  };
}
