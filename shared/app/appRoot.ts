/**
 * The app's composition root: the one place that reads the settings (from `process.env`, once) and
 * builds what the functions share: the job components, the Durable client holder, and the leader
 * runtime with its status source and operators' records. Every file in functions/ takes what it
 * needs from `appRoot()` and only registers and delegates.
 *
 * Guarantees: one root per process, so one settings read, one set of job components and at most
 * one runtime (with the SIGTERM/SIGINT handlers); a bad setting throws at the first `appRoot()`,
 * when the functions load, with a message naming it. Only `tick` (the timer) and `offer` (the
 * work-items worker, the mutating jobs routes) hand over a Durable client and make this instance
 * campaign; reading routes never do.
 * Not guaranteed: a runtime in every process. It is built by the first function that needs it (the
 * timer, the leader and health routes); the deployed app loads them all, while a host that loads
 * only the jobs functions (tests, benches driving the pass themselves) has none, and `offer` there
 * only keeps the client.
 */
import { type DurableClient } from 'durable-functions';

import { loadSettings, type Settings } from '../config/settings';
import { jobCoordinationPass } from '../jobs/intake/jobCoordinationPass';
import { ClusterRecords } from '../leader/ClusterRecords';
import { type CoordinatorRuntime, createCoordinatorRuntime, type RuntimeState } from '../leader/CoordinatorRuntime';
import { cachedStatusSource } from '../leader/leaderStatus';
import { LeaseWatch } from '../leader/LeaseWatch';
import { DurableClientHolder } from './DurableClientHolder';
import { buildJobComponents, type JobComponents } from './jobComponents';

/** How long a stopping leader's doorbell may take (AppRoot.stop). */
const RING_TIMEOUT_MS = 1_000;

/** Anonymous probes of the leader and health share one lease read per 2 s per instance. */
export const LEADER_READ_TTL_MS = 2_000;

/** The leader's side of the app: the runtime and what the leader, cluster and health routes read. */
export interface Leader {
  readonly runtime: CoordinatorRuntime;
  /** The runtime's state with lease reads cached for LEADER_READ_TTL_MS. */
  readonly status: ReturnType<typeof cachedStatusSource>;
  readonly clusterRecords: ClusterRecords;
}

export class AppRoot {
  readonly durableClient = new DurableClientHolder();
  private jobComponents: JobComponents | undefined;
  private builtLeader: Leader | undefined;
  private watch: LeaseWatch | undefined;

  constructor(readonly settings: Settings) {}

  get jobs(): JobComponents {
    this.jobComponents ??= buildJobComponents(this.settings);
    return this.jobComponents;
  }

  /** The process's leader runtime, built on the first call (see the module comment). */
  leader(): Leader {
    if (this.builtLeader === undefined) {
      const clusterRecords = ClusterRecords.fromSettings(this.settings);
      const pass = jobCoordinationPass(this.jobs, () => this.durableClient.get());
      const runtime = createCoordinatorRuntime(
        this.settings,
        async (ctx) => {
          await pass(ctx);
        },
        clusterRecords,
        // A graceful release rings the doorbell that says the lease is free (see stop()).
        () =>
          this.jobs
            .ringWorkers(AbortSignal.timeout(RING_TIMEOUT_MS))
            .catch((err: unknown) => this.jobs.logger.warn('leader.ring_failed', { error: err })),
      );
      runtime.installSignalHandlers();
      this.builtLeader = { runtime, status: cachedStatusSource(runtime, LEADER_READ_TTL_MS), clusterRecords };
      // Not campaigning (no Durable client yet), this instance still notices a leader that died (LeaseWatch.ts).
      if (this.settings.leader.watchIntervalMs > 0) {
        this.watch = new LeaseWatch({
          leaseState: async () => (await runtime.currentLeader()).leaseState,
          ring: (signal) => this.jobs.ringWorkers(signal),
          idle: () => {
            const state = runtime.state();
            return !state.campaigning && state.role !== 'stopped' && this.durableClient.get() === undefined;
          },
          logger: this.jobs.logger.child('watch'),
          periodMs: this.settings.leader.watchIntervalMs,
        });
        this.watch.start();
      }
    }
    return this.builtLeader;
  }

  /** A timer firing: keep its client, campaign, and while leading run a pass (CoordinatorRuntime.tick). */
  tick(client: DurableClient): Promise<RuntimeState> {
    this.durableClient.set(client);
    return this.leader().runtime.tick();
  }

  /**
   * A function that should make this instance campaign (the work-items worker on every instance, a
   * mutating jobs route) hands over its client, so this instance can lead even when the host's timer
   * lock sits on another instance and its own timer never fires (CoordinatorRuntime.offer). The
   * runtime is built when the app loads (functions/health.ts, leaderApi.ts: every instance on Azure
   * loads every function file; `npm start -- --flex` builds it in each group's entry).
   * `leaseFree`: the invocation was the doorbell that says the lease is free (a leader's graceful
   * release, a lease watch that found it free): a campaign attempt now rather than at the next period.
   */
  offer(client: DurableClient, options: { readonly leaseFree?: boolean } = {}): void {
    this.durableClient.set(client);
    this.builtLeader?.runtime.offer({ attemptNow: options.leaseFree === true });
  }

  /** A submission just arrived: a leading runtime takes it now rather than at its next pass. */
  nudge(): void {
    this.builtLeader?.runtime.nudge();
  }

  /**
   * Graceful stop of the runtime, if there is one (the host's app-terminate hook, or SIGTERM). A
   * leader that released its lease then rings the doorbell that says so (JobComponents.ringWorkers,
   * as soon as the release is done): the instance whose worker takes it campaigns at once, and one
   * that nothing had been asked of yet (no Durable client, so it did not campaign) is handed one and
   * takes over, instead of waiting for the host to move the timer's listener lock. Best effort,
   * bounded: the host gives a worker 5 s to end.
   */
  async stop(): Promise<void> {
    this.watch?.stop();
    await this.builtLeader?.runtime.stop();
  }

}

let root: AppRoot | undefined;

/**
 * The process's root, built from `process.env` on first use (when the functions load), which also
 * starts creating the app's queues, results container and index table (`JobComponents.ensureStorage`):
 * the queue trigger then finds the work-items queue at once instead of asking whether it exists at
 * every poll. A failure is logged (`app.storage_not_ready`) and each part is created again when
 * first used.
 */
export function appRoot(): AppRoot {
  if (root === undefined) {
    const built = new AppRoot(loadSettings());
    root = built;
    const hint = 'each queue, container and table is created when first used';
    built.jobs.ensureStorage().catch((err: unknown) => built.jobs.logger.warn('app.storage_not_ready', { error: err, hint }));
  }
  return root;
}
