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
