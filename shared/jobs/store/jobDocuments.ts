/**
 * The documents the job pipeline keeps in blobs (JobStore says where each lives): a submission's
 * record, a job's start record, a chunk's result and what a listing tells about results and claims.
 * Route: docs/architecture.md, "A submission from POST to result blob".
 */
import { type Json } from '../../worktypes/WorkType';
import { type JobReply } from '../delivery/DeliveryTargets';
import { type JobErrorInfo } from '../JobError';
import { type JobRun } from '../JobRun';
import { type ItemError, type JobSummary } from '../JobSummary';

export type RecordStatus = 'pending' | 'rejected';

export interface JobRecord {
  readonly jobId: string;
  readonly status: RecordStatus;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Fingerprint of the submission, when it could be parsed. */
  readonly fingerprint?: string;
  readonly error?: JobErrorInfo;
  /** The leader epoch that rejected it. */
  readonly epoch?: number;
  /** For a rejection stored under a derived id: the job id the submission asked for. */
  readonly submittedJobId?: string;
  readonly messageId?: string;
  /** Set once the original message is in the poison queue, so a redelivery does not copy it twice. */
  readonly poisonMessageId?: string;
  readonly via: 'http' | 'queue';
  /** The submission's work type, when it named a known one (a pending submission shows it). */
  readonly workType?: string;
  /** Where the submission asked its outcome to go (a pending one; a rejection's, when its reply fields were valid). */
  readonly reply?: JobReply;
}

/**
 * Which start of a job may run it (intake/startSteps.ts). Created once per job id before its first start;
 * after that only replaced with If-Match, by a leader whose epoch is at least the record's.
 */
export interface StartRecord {
  readonly v: 1;
  readonly jobId: string;
  readonly fingerprint: string;
  /** `rejected`: the submission was refused after all (START_FAILED); no run may do work. */
  readonly state: 'active' | 'rejected';
  /** The start a run must carry (`run.startId`) to do work. */
  readonly startId: string;
  /** Instance generation: 1 is `job-<jobId>`, n is `job-<jobId>.<n>` (a stuck instance was left behind). */
  readonly generation: number;
  /**
   * The shared run this start runs in (`batch-<uuid>`, run/batchOrchestration.ts), when the intake
   * started it together with other small jobs; absent: `job-<jobId>[.<generation>]`. A start taken
   * over runs alone (the field goes).
   */
  readonly instance?: string;
  /** The leader epoch that decided this start (created the record or took it over). */
  readonly epoch: number;
  readonly holder: string;
  readonly at: string;
  /** The orchestration input's run, carrying `startId` and `epoch`. */
  readonly run: JobRun;
  /** Why the record last changed hands (absent for the first start). */
  readonly reason?: string;
  /**
   * The job's final summary, copied here once it is recorded (`final.json` stays the record of it),
   * so that one read of this record shows a finished job (JobStatusReader). Absent until then.
   */
  readonly outcome?: JobSummary;
  /** Earlier starts, oldest first, at most a few (for people reading the record). */
  readonly previous?: ReadonlyArray<{ readonly startId: string; readonly generation: number; readonly epoch: number; readonly at: string }>;
}

/** A stored document with the etag to write it back with. */
export interface Versioned<T> {
  readonly value: T;
  readonly etag: string;
}

export interface ChunkResult {
  readonly jobId: string;
  readonly chunk: number;
  readonly status: 'ok' | 'failed';
  readonly itemCount: number;
  readonly itemsFailed: number;
  /** The work type's partial over the chunk's good items (null when the chunk failed). */
  readonly partial: Json;
  readonly itemErrors: readonly ItemError[];
  readonly error?: JobErrorInfo;
  /** The queue delivery (dequeueCount) that wrote it. */
  readonly attempt: number;
  /** The dispatch round of the message that wrote it (1 first, 2 after a deadline re-dispatch, ...). */
  readonly dispatch: number;
  readonly writtenBy: string;
  readonly writtenAt: string;
}

/** What a listing tells about a chunk result without reading it. */
export interface ChunkResultEntry {
  readonly chunk: number;
  readonly status: 'ok' | 'failed';
  readonly itemCount: number;
  readonly itemsFailed: number;
  /** Present when the partial was small enough for metadata. */
  readonly partial?: Json;
  readonly errorCode?: string;
}

/** A worker's latest claim on one dispatch of a chunk. */
export interface ChunkClaimEntry {
  readonly chunk: number;
  readonly dispatch: number;
  /** ISO time of the latest delivery of that dispatch's message to a worker. */
  readonly claimedAt: string;
  /** ISO time of the claiming worker's latest heartbeat (absent: a claim written without heartbeats). */
  readonly beatAt?: string;
}

export interface JobListing {
  readonly cancelled: boolean;
  readonly results: ChunkResultEntry[];
  readonly claims: ChunkClaimEntry[];
}
