/**
 * The benchmarks `npm run bench` runs, in order. Each gets the connection string of an Azurite
 * started for the run and returns what it measured as printable lines. To add one, write a module
 * exporting a `Bench` and append it to `benches`.
 */
import { type BenchHost } from './appCluster';
import { azuriteSizeBench } from './azuriteSize';
import { burstFailoverBench } from './burstFailover';
import { concurrentJobsBench } from './concurrentJobs';
import { fairnessBench } from './fairness';
import { idleCostBench } from './idleCost';
import { idleFailoverBench } from './idleFailover';
import { inputStagingBench } from './inputStaging';
import { jobsScaleBench } from './jobsScale';
import { jobsThroughputBench } from './jobsThroughput';
import { leaderFailoverBench } from './leaderFailover';
import { livePageBench } from './livePage';
import { recoveryBench } from './recovery';
import { smallJobLatencyBench } from './smallJobLatency';
import { tooManyItemsBench } from './tooManyItems';

export interface BenchContext {
  readonly connectionString: string;
  /** The host the bench's app runs on (`--host`, the extensions host by default). */
  readonly host: BenchHost;
  /** Progress notes (stderr), not results. */
  readonly note: (message: string) => void;
  /** Arguments after the bench names, e.g. `--trials 20`. */
  readonly options: ReadonlyMap<string, string>;
}

export interface BenchResult {
  readonly title: string;
  /** The figures, ready to print (a table, then notes). */
  readonly lines: readonly string[];
}

export interface Bench {
  /** Short name to select it: `npm run bench -- leader-failover`. */
  readonly name: string;
  readonly description: string;
  run(ctx: BenchContext): Promise<BenchResult>;
}

export const benches: Bench[] = [
  leaderFailoverBench,
  jobsThroughputBench,
  smallJobLatencyBench,
  recoveryBench,
  fairnessBench,
  inputStagingBench,
  concurrentJobsBench,
  tooManyItemsBench,
  jobsScaleBench,
  burstFailoverBench,
  livePageBench,
  idleCostBench,
  idleFailoverBench,
  azuriteSizeBench,
];
