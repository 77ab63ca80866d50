/**
 * What a job looks like to a client, and how that view is made from whichever of the job's records
 * shows its state: its Durable instance's snapshot, its start record (accepted, not started yet) or
 * its record (a pending HTTP submission, or a rejection). Pure: no storage reads here.
 *
 * Guarantees: a run that stood down (its summary says superseded) is never shown as the job's
 * outcome, only as pending; a finished job's `updatedAt` is never earlier than when its outcome
 * was recorded (Durable's times are whole seconds). The list's and the index's shorter forms of a
 * view (JobListEntry, IndexEntry) are made from it here, so the three agree; lists sort newest
 * first, then by job id.
 * Route: docs/architecture.md, "A submission from POST to result blob", step 8.
 */
import { publicMessage } from '../../errors';
import { type Json } from '../../worktypes/WorkType';
import { type DeliveryView } from '../delivery/OutcomeDelivery';
import { type JobErrorInfo } from '../JobError';
import { type JobCustomStatus, type JobProgress, type JobSummary } from '../JobSummary';
import { type OrchestrationSnapshot, runOf } from '../run/OrchestrationClient';
import { ACTIVITY_MISSING } from '../run/registeredActivities';
import { type IndexEntry } from '../store/JobIndex';
import { type JobRecord, type StartRecord } from '../store/JobStore';

export const JOB_STATUSES = ['pending', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export interface JobView {
  readonly jobId: string;
  readonly status: JobStatus;
  readonly workType: string | null;
  readonly progress: JobProgress | null;
  readonly phase: string | null;
  readonly result?: Json;
  readonly resultUrl?: string;
  readonly error: JobErrorInfo | null;
  readonly errors?: readonly JobErrorInfo[];
  readonly createdAt: string | null;
  readonly updatedAt: string | null;
  readonly epoch: number | null;
  /** For a rejection stored under a derived id: the id the submission asked for. */
  readonly submittedJobId?: string;
  /** For a job with `replyTo` or `callbackUrl`: where its outcome went, or is waiting to go. */
  readonly delivery?: DeliveryView;
  readonly correlationId?: string;
}

export interface JobListEntry {
  readonly jobId: string;
  readonly status: JobStatus;
  /** Null only for a rejected submission that named no known work type. */
  readonly workType: string | null;
  /** Live for a running job (what a list view draws its progress bars from); null before planning. */
  readonly progress: JobProgress | null;
  /** A failed or rejected job's error code (the job's `error.code`); null when it has none. */
  readonly errorCode: string | null;
  readonly createdAt: string | null;
  readonly updatedAt: string | null;
}

/** Newest first; equal times by job id, so the order is total and a continuation is exact. */
export function compareEntries(a: Pick<JobListEntry, 'createdAt' | 'jobId'>, b: Pick<JobListEntry, 'createdAt' | 'jobId'>): number {
  return (b.createdAt ?? '').localeCompare(a.createdAt ?? '') || a.jobId.localeCompare(b.jobId);
}

/** A view as the list shows it (the index row's fields). */
export function entryOf(view: JobView | JobListEntry): JobListEntry {
  return {
    jobId: view.jobId,
    status: view.status,
    workType: view.workType,
    progress: view.progress,
    errorCode: 'errorCode' in view ? view.errorCode : (view.error?.code ?? null),
    createdAt: view.createdAt,
    updatedAt: view.updatedAt,
  };
}

/** The index row a job's view makes (undefined: a view without a creation time cannot be indexed). */
export function indexEntryOf(view: JobView | JobListEntry): IndexEntry | undefined {
  if (view.createdAt === null) return undefined;
  return { ...entryOf(view), createdAt: view.createdAt, updatedAt: view.updatedAt ?? view.createdAt };
}

/** The view a Durable snapshot shows; `statusPath` builds the `resultUrl` of a result too large to show inline. */
export function fromSnapshot(jobId: string, s: OrchestrationSnapshot, statusPath: (jobId: string) => string): JobView {
  const run = runOf(s);
  const custom = s.customStatus as Partial<JobCustomStatus> | null | undefined;
  const base = {
    jobId,
    workType: run?.workType ?? null,
    // The run's submission time: Durable's createdTime restarts at every continue-as-new on Azure Storage.
    createdAt: run?.submittedAt ?? s.createdTime.toISOString(),
    updatedAt: s.lastUpdatedTime.toISOString(),
    epoch: run?.epoch ?? custom?.epoch ?? null,
    phase: custom?.phase ?? null,
  };
  switch (s.runtimeStatus) {
    case 'Completed': {
      const summary = s.output as JobSummary | null | undefined;
      if (summary === null || summary === undefined) {
        return {
          ...base,
          status: 'failed',
          progress: custom?.progress ?? null,
          error: { code: 'INTERNAL', message: 'The orchestration completed without a summary.' },
        };
      }
      // A run that stood down: the job's own start has not shown its state yet.
      if (summary.superseded !== undefined) return { ...base, status: 'pending', phase: null, progress: null, error: null };
      return {
        ...base,
        // Durable's status times are whole seconds, so its completion may read up to 1 s before the
        // outcome was recorded: the job changed last at whichever is later.
        updatedAt: finishedLast(s.lastUpdatedTime, summary).toISOString(),
        // The run that did the job (a late start of a finished job answers that run's summary).
        epoch: summary.epoch,
        status: summary.status,
        progress: summary.progress,
        ...(summary.result === undefined ? {} : { result: summary.result }),
        ...(summary.result === undefined && summary.resultBlob !== undefined
          ? { resultUrl: `${statusPath(jobId)}/result` }
          : {}),
        error: summary.error ?? null,
        ...(summary.errors === undefined ? {} : { errors: summary.errors }),
      };
    }
    case 'Failed': {
      const text = typeof s.output === 'string' ? s.output : undefined;
      return {
        ...base,
        status: 'failed',
        progress: custom?.progress ?? null,
        error: {
          // A deployment without the job activities (run/registeredActivities.ts) says so by its code.
          code: text?.includes(`${ACTIVITY_MISSING}:`) === true ? ACTIVITY_MISSING : 'INTERNAL',
          message: text !== undefined ? `The orchestration failed: ${publicMessage(text)}` : 'The orchestration failed.',
        },
      };
    }
    case 'Terminated':
    case 'Canceled':
      return { ...base, status: 'cancelled', progress: custom?.progress ?? null, error: null };
    case 'Pending':
      return { ...base, status: 'pending', progress: custom?.progress ?? null, error: null };
    default:
      return { ...base, status: 'running', progress: custom?.progress ?? null, error: null };
  }
}

/** The later of a run's last update and its summary's `finishedAt` (when that one reads as a time). */
export function finishedLast(lastUpdatedTime: Date, summary: Pick<JobSummary, 'finishedAt'>): Date {
  const finishedAt = Date.parse(summary.finishedAt);
  return Number.isFinite(finishedAt) && finishedAt > lastUpdatedTime.getTime() ? new Date(finishedAt) : lastUpdatedTime;
}

/** An accepted job whose run does not show its state yet: pending. */
export function fromStart(start: StartRecord): JobView {
  return {
    jobId: start.jobId,
    status: 'pending',
    workType: start.run.workType,
    progress: null,
    phase: null,
    error: null,
    createdAt: start.run.submittedAt,
    updatedAt: start.at,
    epoch: start.epoch,
  };
}

/** A job known only by its record: a pending HTTP submission, or a rejection. */
export function fromRecord(record: JobRecord): JobView {
  return {
    jobId: record.jobId,
    status: record.status,
    workType: record.workType ?? null,
    progress: null,
    phase: null,
    error: record.error ?? null,
    createdAt: record.createdAt,
    updatedAt: record.updatedAt,
    epoch: record.epoch ?? null,
    ...(record.submittedJobId === undefined ? {} : { submittedJobId: record.submittedJobId }),
  };
}
