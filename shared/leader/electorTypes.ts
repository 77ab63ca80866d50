/**
 * The elector's public surface: what leader work receives, the callbacks, the options, the states
 * and counters. The algorithm is in LeaseElector.ts, which re-exports all of this.
 */
import { type Logger } from '../observability/log';
import { type Clock } from './Clock';
import { type ElectorTimingOptions } from './leaderTiming';
import { type LeaseStore } from './LeaseStore';

export type StepDownReason = 'lost' | 'deadline' | 'stalled' | 'released' | 'abandoned';

/** What leader work gets: its epoch, a signal aborted when leadership ends, and fenced helpers. */
export interface Leadership {
  readonly epoch: number;
  readonly holder: string;
  readonly acquiredAt: string;
  /** Aborted (with a NotLeaderError as reason) the moment this elector stops believing it leads. */
  readonly signal: AbortSignal;
  /** Confirms with the service that this term still holds the lease (a renewal); throws NotLeaderError if not. */
  verify(): Promise<void>;
  /** Writes extra metadata fields to the lease blob through the lease; only the current term can. */
  writeThroughLease(fields: Readonly<Record<string, string>>): Promise<void>;
  /**
   * Gives this term up now (signal aborted, lease released) and campaigns again only after
   * `sitOutMs`, so a healthy instance wins meanwhile; `reason` is what onStoppedLeading reports.
   */
  resign(reason: 'stalled', sitOutMs: number): Promise<void>;
}

export interface LeaderCallbacks {
  /** Called on every acquisition; the returned promise is the leader work graceful stop drains. */
  onStartedLeading(leadership: Leadership): void | Promise<void>;
  /** Called once for every term that started, however it ended. */
  onStoppedLeading?(info: { readonly epoch: number; readonly reason: StepDownReason }): void;
  /** Called when the observed leader (holder, epoch) changes, this instance included. */
  onNewLeader?(leader: { readonly holder: string; readonly epoch: number }): void;
}

export interface LeaseElectorOptions extends ElectorTimingOptions {
  readonly store: LeaseStore;
  /** This instance's name, written to the metadata as `holder`. */
  readonly holder: string;
  /** Proposed lease id; a fresh GUID per elector when absent. */
  readonly leaseId?: string;
  readonly clock?: Clock;
  readonly logger?: Logger;
  /** Random source for jitter, [0, 1). */
  readonly random?: () => number;
  readonly callbacks: LeaderCallbacks;
}

export interface CurrentLeader {
  /** Holder of the latest epoch; the lease may have been released or expired since (see leaseState). */
  readonly holder: string | undefined;
  readonly epoch: number | undefined;
  readonly acquiredAt: string | undefined;
  readonly leaseState: string;
  readonly leaseStatus: string;
}

export interface ElectorCounters {
  acquired: number;
  renewed: number;
  renewFailures: number;
  /** Terms that ended without a release of our own: lease lost, or renew deadline passed. */
  lost: number;
  released: number;
  /** Terms given up through `resign('stalled')` (the runtime's watchdog). */
  stalls: number;
  lastRenewLatencyMs?: number;
  /**
   * Failover as this instance saw it when it took over: time from its last attempt that found the
   * lease held by someone else to its acquisition. It bounds how long the lease sat free first.
   */
  lastTakeoverWaitMs?: number;
}

/**
 * idle: not started. campaigning: trying to acquire at the campaign period. leading: holds a term.
 * stopping: stop() was called; a graceful stop keeps its term (renewing) until the work drained.
 * stopped: for good; a stopped elector never campaigns again.
 */
export type ElectorState = 'idle' | 'campaigning' | 'leading' | 'stopping' | 'stopped';

/** What operators see (heartbeats, /api/leader): leading or stopping with a term is `leader`. */
export type ElectorRole = 'leader' | 'follower' | 'stopped';
