/**
 * What the coordinator keeps for operators beside its lease blob, and what it answers from it: the
 * recent terms (TermHistory) and the instances seen recently with their roles (InstanceHeartbeats).
 * `recorder()` is the runtime's observer that writes them (and summarizes passes in the log);
 * `terms()` and `instances()` read them for GET /api/cluster and the live page.
 *
 * Guarantees: recording never blocks or fails leadership (writes run in the background and a
 * failure is a warning); a graceful stop waits at most `flushTimeoutMs` for them.
 */
import { type ContainerClient } from '@azure/storage-blob';

import { type Settings } from '../config/settings';
import { createLogger, type Logger } from '../observability/log';
import { PassSummary } from '../observability/PassSummary';
import { blobServiceClient } from '../storage/clients';
import { type RuntimeObserver } from './CoordinatorRuntime';
import {
  HEARTBEAT_DEFAULTS,
  heartbeatPrefix,
  InstanceHeartbeats,
  type InstanceHeartbeatsOptions,
  type InstanceSeen,
  listInstances,
} from './InstanceHeartbeats';
import { checkLeaderTiming } from './leaderTiming';
import { type TermEntry, TermHistory, termHistoryBlobName } from './TermHistory';

export interface RecorderState {
  readonly role: 'leader' | 'follower' | 'stopped';
  readonly epoch: number | undefined;
  readonly passes: number;
  /** While leading: its passes have backed off, finding no work (CoordinatorRuntime RuntimeState.idle). */
  readonly idle?: boolean;
}

export interface ClusterRecordsOptions {
  readonly heartbeats?: InstanceHeartbeatsOptions;
  readonly maxTerms?: number;
  readonly flushTimeoutMs?: number;
  readonly passSummaryWindowMs?: number;
}

export class ClusterRecords {
  readonly history: TermHistory;
  readonly prefix: string;

  constructor(
    readonly container: ContainerClient,
    leaseBlob: string,
    private readonly options: ClusterRecordsOptions = {},
  ) {
    this.history = new TermHistory(
      container,
      termHistoryBlobName(leaseBlob),
      options.maxTerms === undefined ? {} : { maxTerms: options.maxTerms },
    );
    this.prefix = heartbeatPrefix(leaseBlob);
  }

  /**
   * While it leads and its passes find work, an instance beats at the renew interval, so the live page
   * sees a working leader go quiet within seconds; an idle leader beats at the followers' interval.
   */
  static fromSettings(settings: Settings, options: ClusterRecordsOptions = {}): ClusterRecords {
    const leaderIntervalMs = checkLeaderTiming(settings.leader).renewIntervalMs;
    return new ClusterRecords(
      blobServiceClient(settings.storage).getContainerClient(settings.leader.container),
      settings.leader.blob,
      { ...options, heartbeats: { leaderIntervalMs, ...options.heartbeats } },
    );
  }

  terms(): Promise<TermEntry[]> {
    return this.history.read();
  }

  instances(now?: Date): Promise<InstanceSeen[]> {
    return listInstances(this.container, this.prefix, {
      intervalMs: this.options.heartbeats?.intervalMs ?? HEARTBEAT_DEFAULTS.intervalMs,
      ...(now === undefined ? {} : { now }),
    });
  }

  recorder(instanceId: string, state: () => RecorderState, logger: Logger = createLogger('leader')): RuntimeRecorder {
    const heartbeats = new InstanceHeartbeats(this.container, this.prefix, instanceId, state, logger, this.options.heartbeats);
    const passes = new PassSummary(logger, this.options.passSummaryWindowMs);
    return new RuntimeRecorder(this.history, heartbeats, passes, logger, this.options.flushTimeoutMs ?? 5_000);
  }
}

export class RuntimeRecorder implements RuntimeObserver {
  /** History writes run one after another: a term's end must not race its own start. */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly history: TermHistory,
    readonly heartbeats: InstanceHeartbeats,
    private readonly passes: PassSummary,
    private readonly logger: Logger,
    private readonly flushTimeoutMs: number,
  ) {}

  start(): void {
    this.heartbeats.start();
    this.passes.start();
  }

  termStarted(term: { readonly epoch: number; readonly holder: string; readonly acquiredAt: string }): void {
    this.heartbeats.beatSoon();
    this.enqueue(() => this.history.recordStart(term), term.epoch);
  }

  termEnded(term: {
    readonly epoch: number;
    readonly holder: string;
    readonly reason: 'lost' | 'deadline' | 'stalled' | 'released' | 'abandoned';
  }): void {
    this.heartbeats.beatSoon();
    // 'abandoned' stands for a crash (tests, benchmarks): a crashed process records nothing.
    if (term.reason === 'abandoned') return;
    const endedAt = new Date().toISOString();
    this.enqueue(() => this.history.recordEnd({ epoch: term.epoch, holder: term.holder, endedAt, reason: term.reason }), term.epoch);
  }

  passFinished(pass: { readonly epoch: number; readonly durationMs: number; readonly failed: boolean }): void {
    this.passes.add(pass);
  }

  async stopped(): Promise<void> {
    this.passes.stop();
    const flushed = Promise.all([this.chain, this.heartbeats.stop()]).then(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, this.flushTimeoutMs);
    });
    await Promise.race([flushed, timeout]).finally(() => clearTimeout(timer));
  }

  private enqueue(write: () => Promise<void>, epoch: number): void {
    this.chain = this.chain.then(write).catch((err: unknown) => this.logger.warn('leader.history_failed', { epoch, error: err }));
  }
}
