/**
 * What a job's run reports: the orchestration's small output summary (final status, counts, the
 * result inline when small) and the custom status it publishes while it runs. Plain JSON.
 */
import { type Json } from '../worktypes/WorkType';
import { type JobErrorInfo } from './JobError';

export type FinalStatus = 'completed' | 'completed_with_errors' | 'failed' | 'cancelled';

export interface Counts {
  readonly total: number;
  readonly done: number;
  readonly failed: number;
}

export interface JobProgress {
  readonly chunks: Counts;
  readonly items: Counts;
}

/**
 * The orchestration's output: small on purpose; the full result is in `resultBlob`, or, where that is
 * absent, in the summary itself (a result of at most `INLINE_RESULT_BYTES` without errors).
 */
export interface JobSummary {
  readonly jobId: string;
  readonly workType: string;
  readonly status: FinalStatus;
  readonly progress: JobProgress;
  /** The work type's result, inline when its JSON is at most `INLINE_RESULT_BYTES`. */
  readonly result?: Json;
  readonly resultBlob?: string;
  readonly error?: JobErrorInfo;
  /** The first few chunk and item errors; all of them are in the result blob (a summary with errors has one). */
  readonly errors?: readonly JobErrorInfo[];
  readonly epoch: number;
  readonly finishedAt: string;
  /**
   * Set on the output of a run that stood down at its plan step because the job's start record names
   * a newer start (or a newer leader epoch exists): not the job's outcome; the newer start's is.
   */
  readonly superseded?: { readonly reason: string };
}

/** Whether an orchestration output is a stood-down run's marker rather than the job's outcome. */
export function isSuperseded(output: unknown): boolean {
  return output !== null && typeof output === 'object' && (output as Partial<JobSummary>).superseded !== undefined;
}

export const INLINE_RESULT_BYTES = 4096;

/** An item's error, as a chunk's result records it (JobStore's ChunkResult) and the result document lists it. */
export interface ItemError {
  /** Index of the item in the job. */
  readonly index: number;
  readonly code: string;
  readonly message: string;
}

/**
 * A job's full result, what `GET /api/jobs/{jobId}/result` serves: stored as `jobs/<jobId>/result.json`
 * (the summary's `resultBlob`), or, for a job whose summary holds its result inline and no errors,
 * built from that summary (`resultDocumentOf`).
 */
export interface JobResultDocument {
  readonly jobId: string;
  readonly workType: string;
  readonly status: FinalStatus;
  readonly progress: JobProgress;
  readonly result: Json;
  readonly chunkErrors: readonly (JobErrorInfo & { readonly chunk: number })[];
  readonly itemErrors: readonly ItemError[];
  readonly epoch: number;
  readonly finishedAt: string;
}

/** The document with its fields in one order, whoever builds it: the stored blob and the one built from a summary are the same bytes. */
export function resultDocument(d: JobResultDocument): JobResultDocument {
  const { jobId, workType, status, progress, result, chunkErrors, itemErrors, epoch, finishedAt } = d;
  return { jobId, workType, status, progress, result, chunkErrors, itemErrors, epoch, finishedAt };
}

/** The result document a summary stands for when no result blob was stored (undefined when one was, or the summary has no result). */
export function resultDocumentOf(summary: JobSummary): JobResultDocument | undefined {
  if (summary.resultBlob !== undefined || summary.result === undefined || isSuperseded(summary)) return undefined;
  const { jobId, workType, status, progress, result, epoch, finishedAt } = summary;
  return resultDocument({ jobId, workType, status, progress, result, chunkErrors: [], itemErrors: [], epoch, finishedAt });
}

/** The custom status the orchestration publishes while it runs. */
export interface JobCustomStatus {
  readonly phase: 'planning' | 'running' | 'aggregating' | 'done';
  readonly epoch: number;
  readonly progress: JobProgress;
  readonly dispatch: number;
  readonly generation: number;
  /** The activity call the run waits on, counting this execution's calls from 1 (with `generation`, it names the call). */
  readonly wait: number;
  /** Present when the call is a repeat after a resume: how many times it was called again (StalledJobs backs off by it). */
  readonly repeat?: number;
  readonly updatedAt: string;
  /**
   * Set when the plan step stood down as superseded (this start may not run the job): the run has
   * ended, though Durable shows it Running until every call it made has answered, and the intake
   * starts the job's current start in the next instance generation at once (intake/startSteps.ts, nextStartStep).
   */
  readonly superseded?: true;
}
