/**
 * `noop`: accepts any JSON item and does nothing but count it. For benchmarks: what is left is the
 * pipeline's own cost (queue, blobs, orchestration).
 */
import { type WorkType } from './WorkType';

export interface NoopPartial {
  [key: string]: number;
  count: number;
}

export const noopWorkType: WorkType<NoopPartial, NoopPartial> = {
  name: 'noop',
  description: 'Any JSON items; result { count }. For benchmarks.',
  validateItem: () => undefined,
  process: () => ({ count: 1 }),
  empty: () => ({ count: 0 }),
  combine: (a, b) => ({ count: a.count + b.count }),
  finish: (total) => ({ count: total.count }),
};
