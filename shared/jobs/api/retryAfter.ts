/**
 * When a client should ask again about a job that has not ended: the `Retry-After` (whole seconds,
 * RFC 9110) of the 202 that accepted it and of each status answer while it is pending or running.
 * Chosen from what the answer already knows, at no storage cost, so that a client asks a few
 * times whatever the job's wait, and sees its end within a fraction of that wait:
 * - pending: a third of the time it has waited so far, within 1 and 5 s: a lone submission is
 *   taken at the leader's next pass (every second while jobs arrive or run) and asked again in 1 s;
 *   one behind a backlog (a burst, or no leader yet) is asked less often the longer it waits;
 * - running: the time its progress says is left (elapsed over the part done, for the part not
 *   done), half of it; with nothing done yet, a third of its age; within 1 and 10 s either way.
 * A status read costs one or two storage requests (JobStatusReader); in a burst every poll competes
 * with the jobs for storage (1,000 four-chunk jobs whose clients asked every second read their
 * status 15 times a job, a third of the burst's storage requests: `jobs-scale`).
 */
import { type JobView } from './jobViews';

export const RETRY_AFTER = { minSeconds: 1, maxSeconds: 10, pendingSeconds: 1, pendingMaxSeconds: 5, ageFraction: 1 / 3 } as const;

/** The Retry-After seconds for a job's status, or undefined once it has ended (nothing to wait for). */
export function retryAfterSeconds(view: Pick<JobView, 'status' | 'createdAt' | 'progress'>, nowMs: number): number | undefined {
  const createdMs = view.createdAt === null ? Number.NaN : Date.parse(view.createdAt);
  const elapsedMs = Number.isFinite(createdMs) ? Math.max(0, nowMs - createdMs) : 0;
  const byAge = (max: number): number =>
    Math.min(max, Math.max(RETRY_AFTER.minSeconds, Math.round((elapsedMs * RETRY_AFTER.ageFraction) / 1000)));
  if (view.status === 'pending') return byAge(RETRY_AFTER.pendingMaxSeconds);
  if (view.status !== 'running') return undefined;
  const items = view.progress?.items;
  const finished = items === undefined ? 0 : items.done + items.failed;
  if (items === undefined || items.total <= 0 || finished <= 0) return byAge(RETRY_AFTER.maxSeconds);
  const leftMs = (elapsedMs * (items.total - finished)) / finished;
  return Math.min(RETRY_AFTER.maxSeconds, Math.max(RETRY_AFTER.minSeconds, Math.round(leftMs / 2 / 1000)));
}
