/**
 * When a client should ask again about a job that has not ended: the `Retry-After` (whole seconds,
 * RFC 9110) of the 202 that accepted it and of each status answer while it is pending or running.
 * Chosen from what the answer already knows, at no storage cost:
 * - pending: the leader takes submissions at its next pass (every second while jobs arrive or run):
 *   1 s; one still pending after 30 s waits behind others (a backlog, or no leader yet): 5 s;
 * - running: the time its progress says is left (elapsed over the part done, for the part not
 *   done), half of it, within 1 and 10 s: a small job is asked again within a second, a long one a
 *   few times before it ends, never slower than every 10 s; 1 s while nothing is done yet.
 * A status read costs one or two storage requests (JobStatusReader), so a client that follows this
 * costs the app a few requests a job.
 */
import { type JobView } from './jobViews';

export const RETRY_AFTER = { minSeconds: 1, maxSeconds: 10, pendingSeconds: 1, backlogSeconds: 5, backlogAfterMs: 30_000 } as const;

/** The Retry-After seconds for a job's status, or undefined once it has ended (nothing to wait for). */
export function retryAfterSeconds(view: Pick<JobView, 'status' | 'createdAt' | 'progress'>, nowMs: number): number | undefined {
  const createdMs = view.createdAt === null ? Number.NaN : Date.parse(view.createdAt);
  const elapsedMs = Number.isFinite(createdMs) ? Math.max(0, nowMs - createdMs) : 0;
  if (view.status === 'pending') return elapsedMs > RETRY_AFTER.backlogAfterMs ? RETRY_AFTER.backlogSeconds : RETRY_AFTER.pendingSeconds;
  if (view.status !== 'running') return undefined;
  const items = view.progress?.items;
  const finished = items === undefined ? 0 : items.done + items.failed;
  if (items === undefined || items.total <= 0 || finished <= 0) return RETRY_AFTER.minSeconds;
  const leftMs = (elapsedMs * (items.total - finished)) / finished;
  return Math.min(RETRY_AFTER.maxSeconds, Math.max(RETRY_AFTER.minSeconds, Math.round(leftMs / 2 / 1000)));
}
