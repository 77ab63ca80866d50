/**
 * The outcome message (schemas/job-outcome.schema.json): what a reply queue, the outcome stream and
 * a callback receive once a job has ended, whatever the end (`completed`, `completed_with_errors`,
 * `failed`, `cancelled`, or `rejected` by the intake). The same JSON everywhere; on a queue it is
 * base64-encoded like every message of this app. A consumer deduplicates by `jobId` (delivery is at
 * least once).
 */
import { type Json } from '../../worktypes/WorkType';
import { type JobErrorInfo } from '../JobError';
import { type JobProgress, type JobSummary } from '../JobSummary';
import { encodeQueueMessage } from '../messageCodec';
import { type JobRecord } from '../store/JobStore';
import { type JobReply } from './DeliveryTargets';

export type OutcomeStatus = JobSummary['status'] | 'rejected';

export interface JobOutcome {
  readonly v: 1;
  readonly jobId: string;
  readonly correlationId: string | null;
  readonly status: OutcomeStatus;
  readonly workType: string | null;
  /** The work type's result, when its JSON is at most 40 KiB (read from the result blob above the status's 4 KiB). */
  readonly result?: Json;
  /** Otherwise where the full result is: its absolute URL (`resultPath`), or the path when the host name is unknown. */
  readonly resultUrl?: string;
  readonly error: JobErrorInfo | null;
  readonly errors?: readonly JobErrorInfo[];
  /** Chunk and item counts (null for a rejected submission). */
  readonly progress: JobProgress | null;
  /** For a rejection stored under a derived id (`m-<message id>`): the id the submission asked for. */
  readonly submittedJobId?: string;
  readonly createdAt: string | null;
  readonly finishedAt: string;
  readonly epoch: number | null;
}

/** The most JSON an outcome message may hold (a queue message holds 64 KiB, base64 takes a third more). */
export const OUTCOME_MAX_JSON_BYTES = 48 * 1024;
/** A result this big or smaller goes inline in the outcome (the rest of the message fits in what is left). */
export const OUTCOME_RESULT_INLINE_MAX_BYTES = 40 * 1024;

export function outcomeOfSummary(summary: JobSummary, reply: JobReply | undefined, createdAt: string | null): JobOutcome {
  return fitted({
    v: 1,
    jobId: summary.jobId,
    correlationId: reply?.correlationId ?? null,
    status: summary.status,
    workType: summary.workType,
    ...(summary.result !== undefined
      ? { result: summary.result }
      : summary.resultBlob !== undefined
        ? { resultUrl: resultPath(summary.jobId) }
        : {}),
    error: summary.error ?? null,
    ...(summary.errors === undefined ? {} : { errors: summary.errors }),
    progress: summary.progress,
    createdAt,
    finishedAt: summary.finishedAt,
    epoch: summary.epoch,
  });
}

export function outcomeOfRejection(record: JobRecord, reply: JobReply | undefined): JobOutcome {
  return fitted({
    v: 1,
    jobId: record.jobId,
    correlationId: reply?.correlationId ?? null,
    status: 'rejected',
    workType: record.workType ?? null,
    error: record.error ?? null,
    progress: null,
    ...(record.submittedJobId === undefined ? {} : { submittedJobId: record.submittedJobId }),
    createdAt: record.createdAt,
    finishedAt: record.updatedAt,
    epoch: record.epoch ?? null,
  });
}

/**
 * Where the full result is: an absolute URL when the app knows its public host name
 * (`WEBSITE_HOSTNAME`: App Service sets it on Azure, the development host to localhost:<port>),
 * otherwise the path, relative to the app's base URL.
 */
export function resultPath(jobId: string, host: string | undefined = process.env.WEBSITE_HOSTNAME): string {
  const path = `/api/jobs/${jobId}/result`;
  if (host === undefined || host.trim() === '') return path;
  const local = /^(localhost|127\.0\.0\.1|\[::1\])(:\d+)?$/i.test(host.trim());
  return `${local ? 'http' : 'https'}://${host.trim()}${path}`;
}

export function outcomeJson(outcome: JobOutcome): string {
  return JSON.stringify(outcome);
}

export function outcomeQueueText(outcome: JobOutcome): string {
  return encodeQueueMessage(outcome);
}

/** Error messages are the only open-ended part: shortened (then dropped) until the message fits. */
function fitted(outcome: JobOutcome): JobOutcome {
  const size = (o: JobOutcome): number => Buffer.byteLength(JSON.stringify(o), 'utf8');
  if (size(outcome) <= OUTCOME_MAX_JSON_BYTES) return outcome;
  const short = (e: JobErrorInfo): JobErrorInfo => ({ code: e.code, message: e.message.slice(0, 1_000) });
  const { errors: _dropped, ...rest } = outcome;
  const trimmed: JobOutcome = { ...rest, error: outcome.error === null ? null : short(outcome.error) };
  if (size(trimmed) <= OUTCOME_MAX_JSON_BYTES) return trimmed;
  // A result cannot make it this big (inline results are at most 4 KiB): only a pathological id could.
  const { result: _result, ...bare } = trimmed;
  return { ...bare, resultUrl: resultPath(outcome.jobId) };
}
