/** Runs `fn` over `inputs` with at most `limit` in flight; results keep the inputs' order. */
export async function mapLimit<T, R>(inputs: readonly T[], limit: number, fn: (input: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(inputs.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, inputs.length) }, async () => {
    while (next < inputs.length) {
      const index = next++;
      results[index] = await fn(inputs[index] as T, index);
    }
  });
  await Promise.all(workers);
  return results;
}

/**
 * Runs `fn` over `inputs` in order, at most `limit` in flight, starting each only while `canStart()`
 * holds (one that started runs to its end). Resolves with how many started: `inputs.slice(started)`
 * never began.
 */
export async function mapWhile<T>(
  inputs: readonly T[],
  limit: number,
  canStart: () => boolean,
  fn: (input: T) => Promise<void>,
): Promise<number> {
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, inputs.length) }, async () => {
    while (next < inputs.length && canStart()) await fn(inputs[next++] as T);
  });
  await Promise.all(workers);
  return next;
}
