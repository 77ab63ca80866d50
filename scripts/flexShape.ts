/**
 * A local cluster in Flex Consumption's shape (`npm start -- --flex`, the e2e flex tests): the
 * platform scales an app per function, the HTTP functions together, the Durable ones together, and
 * every other function on instances of its own (docs/deploy.md, "What runs where on Flex
 * Consumption"). Each instance here loads only its group's functions (an entry file of
 * scripts/flex/), all sharing one host id, as instances of one app.
 */
import { join, relative, sep } from 'node:path';

export type FlexGroup = 'http' | 'durable' | 'timer' | 'worker';

/** The group each function file of functions/ scales with on Flex Consumption. */
export const FLEX_GROUPS: Readonly<Record<FlexGroup, { readonly entry: string; readonly functions: readonly string[] }>> = {
  http: { entry: 'httpGroup.js', functions: ['dashboard', 'health', 'jobsApi', 'leaderApi', 'openapi', 'queuesApi'] },
  durable: { entry: 'durableGroup.js', functions: ['jobActivities', 'jobOrchestrator'] },
  timer: { entry: 'timerGroup.js', functions: ['leaderTimer'] },
  worker: { entry: 'workerGroup.js', functions: ['workItemsWorker'] },
};

/** The instances of the shape, in start order: one of each group, and `workers` of the worker's. */
export function flexInstances(workers = 2): Array<{ group: FlexGroup; instanceId: string }> {
  return [
    { group: 'timer', instanceId: 'timer-1' },
    { group: 'durable', instanceId: 'durable-1' },
    { group: 'http', instanceId: 'http-1' },
    ...Array.from({ length: workers }, (_, i) => ({ group: 'worker' as const, instanceId: `worker-${i + 1}` })),
  ];
}

/** A group's entry file as a `--main` glob relative to `root` (compiled layout: <outDir>/scripts/flex/). */
export function flexMain(root: string, group: FlexGroup): string {
  return relative(root, join(__dirname, 'flex', FLEX_GROUPS[group].entry)).split(sep).join('/');
}
