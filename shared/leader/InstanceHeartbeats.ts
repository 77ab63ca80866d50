/**
 * Which instances are alive and what role each plays, for people (the live page, GET /api/cluster):
 * every instance overwrites one empty blob, `<lease blob>.instances/<instance id>`, whose metadata
 * says its role, epoch, start time, passes and its own beat interval, every `intervalMs` (15 s;
 * `leaderIntervalMs` while it leads and its passes find work, the renew interval, 5 s by default, so
 * the live page shows a working leader's death within seconds; a leader whose passes have backed off,
 * finding none, beats at `intervalMs` as followers do: nothing waits on it then) and at once when its role
 * changes; a graceful stop writes a last beat with role `stopped`. Readers list the prefix with
 * metadata (one List Blobs per 5,000 instances) and judge age by the service's Last-Modified
 * against each instance's own interval. The leader deletes beats unseen for `forgetAfterMs` (an
 * hour), at most every 10 minutes.
 *
 * Cost: one blob write per instance per interval (0.07 transactions/s at 15 s; a working leader's 0.2 at 5 s).
 * Not guaranteed: an instance listed `alive` may have died within its last 2 intervals (+1 s); roles come
 * from each instance's own belief, so for a moment during a handover two may say `leader`. Who
 * holds the lease is the lease blob's answer, not this one.
 */
import { type ContainerClient, isRestError } from '@azure/storage-blob';

import { type Logger } from '../observability/log';
import { type Clock, systemClock } from './Clock';
import { type ElectorRole } from './LeaseElector';

export interface HeartbeatState {
  readonly role: ElectorRole;
  readonly epoch: number | undefined;
  readonly passes: number;
  /** A leader whose passes find no work beats at `intervalMs`, as followers do. */
  readonly idle?: boolean;
}

export type InstanceState = 'alive' | 'silent' | 'stopped';

export interface InstanceSeen {
  readonly id: string;
  /** The role the instance last reported; `stopped` after a graceful stop. */
  readonly role: ElectorRole;
  readonly epoch: number | null;
  readonly passes: number;
  readonly startedAt: string | null;
  /** When storage last received its beat (the service's clock). */
  readonly lastSeenAt: string;
  readonly ageSeconds: number;
  /** How often the instance said it beats (its role's interval when it beat). */
  readonly intervalSeconds: number;
  /** alive: beat within 2 of its intervals (+1 s); silent: older (it probably died); stopped: said goodbye. */
  readonly state: InstanceState;
}

export interface InstanceHeartbeatsOptions {
  readonly intervalMs?: number;
  /** The interval while this instance leads (the live page judges the leader by it); default `intervalMs`. */
  readonly leaderIntervalMs?: number;
  readonly forgetAfterMs?: number;
  readonly requestTimeoutMs?: number;
  readonly clock?: Clock;
}

export const HEARTBEAT_DEFAULTS = {
  intervalMs: 15_000,
  forgetAfterMs: 3_600_000,
  requestTimeoutMs: 10_000,
  pruneEveryMs: 600_000,
} as const;

/** The prefix under which a lease blob's instances beat. */
export function heartbeatPrefix(leaseBlob: string): string {
  return `${leaseBlob}.instances/`;
}

const ROLES: readonly ElectorRole[] = ['leader', 'follower', 'stopped'];

/**
 * Silent after 2 missed beats of the instance's own interval, plus 1 s: Last-Modified has whole
 * seconds. One late beat (a slow write) is not silence; two are.
 */
export function isSilent(ageMs: number, intervalMs: number): boolean {
  return ageMs > 2 * intervalMs + 1_000;
}

/** Reads every instance's beat: one listing with metadata. */
export async function listInstances(
  container: ContainerClient,
  prefix: string,
  options: { intervalMs?: number; now?: Date } = {},
): Promise<InstanceSeen[]> {
  const intervalMs = options.intervalMs ?? HEARTBEAT_DEFAULTS.intervalMs;
  const now = (options.now ?? new Date()).getTime();
  const seen: InstanceSeen[] = [];
  try {
    for await (const blob of container.listBlobsFlat({ prefix, includeMetadata: true })) {
      const id = blob.name.slice(prefix.length);
      const meta = blob.metadata ?? {};
      const role = ROLES.includes(meta.role as ElectorRole) ? (meta.role as ElectorRole) : 'follower';
      const lastSeen = blob.properties.lastModified;
      const ageMs = Math.max(0, now - lastSeen.getTime());
      const epoch = Number(meta.epoch);
      const passes = Number(meta.passes);
      const every = Number(meta.every);
      // Beats written before instances said their interval: the reader's own.
      const everyMs = Number.isSafeInteger(every) && every > 0 ? every : intervalMs;
      seen.push({
        id,
        role,
        epoch: Number.isSafeInteger(epoch) && epoch > 0 ? epoch : null,
        passes: Number.isSafeInteger(passes) && passes >= 0 ? passes : 0,
        startedAt: typeof meta.startedat === 'string' ? meta.startedat : null,
        lastSeenAt: lastSeen.toISOString(),
        ageSeconds: Math.round(ageMs / 100) / 10,
        intervalSeconds: everyMs / 1000,
        state: role === 'stopped' ? 'stopped' : isSilent(ageMs, everyMs) ? 'silent' : 'alive',
      });
    }
  } catch (err) {
    if (isRestError(err) && err.statusCode === 404) return [];
    throw err;
  }
  const rank = (i: InstanceSeen): number => (i.state === 'alive' ? (i.role === 'leader' ? 0 : 1) : i.state === 'silent' ? 2 : 3);
  return seen.sort((a, b) => rank(a) - rank(b) || a.id.localeCompare(b.id));
}

export class InstanceHeartbeats {
  readonly intervalMs: number;
  readonly leaderIntervalMs: number;
  private readonly forgetAfterMs: number;
  private readonly requestTimeoutMs: number;
  private readonly clock: Clock;
  private readonly startedAt: string;
  private loop: Promise<void> | undefined;
  private readonly stopController = new AbortController();
  private wakeController = new AbortController();
  private lastPruneAt: number | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly container: ContainerClient,
    private readonly prefix: string,
    readonly instanceId: string,
    private readonly state: () => HeartbeatState,
    private readonly logger: Logger,
    options: InstanceHeartbeatsOptions = {},
  ) {
    this.intervalMs = options.intervalMs ?? HEARTBEAT_DEFAULTS.intervalMs;
    this.leaderIntervalMs = options.leaderIntervalMs ?? this.intervalMs;
    this.forgetAfterMs = options.forgetAfterMs ?? HEARTBEAT_DEFAULTS.forgetAfterMs;
    this.requestTimeoutMs = options.requestTimeoutMs ?? HEARTBEAT_DEFAULTS.requestTimeoutMs;
    this.clock = options.clock ?? systemClock;
    this.startedAt = this.clock.wallNow().toISOString();
  }

  /** Starts beating (idempotent): now, then every interval, until `stop()`. */
  start(): void {
    this.loop ??= this.run();
  }

  /** A role change: beat now instead of at the next interval. */
  beatSoon(): void {
    this.wakeController.abort();
  }

  /** Stops the loop and writes a last beat with role `stopped` (best effort, bounded). */
  async stop(): Promise<void> {
    if (this.stopController.signal.aborted) return;
    this.stopController.abort();
    this.beatSoon();
    await this.loop;
    await this.beat({ ...this.state(), role: 'stopped', epoch: undefined });
  }

  private async run(): Promise<void> {
    while (!this.stopController.signal.aborted) {
      // Armed before the beat: a role change during the write makes the next beat follow at once.
      const wake = new AbortController();
      this.wakeController = wake;
      const state = this.state();
      await this.beat(state);
      await this.maybePrune();
      await this.clock.sleep(this.intervalFor(state), wake.signal);
    }
  }

  private intervalFor(state: HeartbeatState): number {
    return state.role === 'leader' && state.idle !== true ? this.leaderIntervalMs : this.intervalMs;
  }

  /** One beat; beats never overlap, so a late one cannot overwrite a newer role. */
  private beat(state: HeartbeatState): Promise<void> {
    const write = async (): Promise<void> => {
      const metadata: Record<string, string> = {
        role: state.role,
        passes: String(state.passes),
        startedat: this.startedAt,
        seenat: this.clock.wallNow().toISOString(),
        every: String(this.intervalFor(state)),
        ...(state.epoch === undefined ? {} : { epoch: String(state.epoch) }),
      };
      const blob = this.container.getBlockBlobClient(`${this.prefix}${this.instanceId}`);
      const upload = (): Promise<unknown> => blob.upload('', 0, { metadata, abortSignal: AbortSignal.timeout(this.requestTimeoutMs) });
      try {
        await upload().catch(async (err: unknown) => {
          if (!isRestError(err) || err.statusCode !== 404) throw err;
          await this.container.createIfNotExists({ abortSignal: AbortSignal.timeout(this.requestTimeoutMs) });
          await upload();
        });
      } catch (err) {
        this.logger.warn('instance.heartbeat_failed', { instance: this.instanceId, error: err });
      }
    };
    this.writing = this.writing.then(write);
    return this.writing;
  }

  /** The leader forgets instances long gone, so the listing stays small as instances come and go. */
  private async maybePrune(): Promise<void> {
    if (this.state().role !== 'leader') return;
    const now = this.clock.now();
    if (this.lastPruneAt !== undefined && now - this.lastPruneAt < HEARTBEAT_DEFAULTS.pruneEveryMs) return;
    this.lastPruneAt = now;
    try {
      const cutoff = this.clock.wallNow().getTime() - this.forgetAfterMs;
      for await (const blob of this.container.listBlobsFlat({ prefix: this.prefix })) {
        if (blob.properties.lastModified.getTime() >= cutoff) continue;
        // Only if unchanged since listed: an instance that came back meanwhile keeps its beat.
        await this.container
          .getBlockBlobClient(blob.name)
          .delete({
            conditions: { ifUnmodifiedSince: blob.properties.lastModified },
            abortSignal: AbortSignal.timeout(this.requestTimeoutMs),
          })
          .catch(() => undefined);
        this.logger.info('instance.forgotten', {
          instance: blob.name.slice(this.prefix.length),
          lastSeenAt: blob.properties.lastModified.toISOString(),
        });
      }
    } catch (err) {
      this.logger.warn('instance.prune_failed', { error: err });
    }
  }
}
