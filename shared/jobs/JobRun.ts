/**
 * The messages between the pipeline's parts: a job run (the orchestration's input, built by the
 * coordination pass), the work-item message (one per chunk, on the work-items queue), and the
 * orchestration's small output summary. All are plain JSON.
 */
import { type Json } from '../worktypes/WorkType';
import { JobError, type JobErrorInfo } from './JobError';
import { type JobOptions } from './jobLimits';
import { isValidJobId, type ItemSource } from './JobSubmission';

export interface JobRun {
  readonly jobId: string;
  readonly workType: string;
  readonly fingerprint: string;
  readonly options: JobOptions;
  readonly source: ItemSource;
  /** The leader epoch that started the job (fencing: every side effect carries it). */
  readonly epoch: number;
  readonly holder: string;
  readonly submittedAt: string;
  readonly via: 'http' | 'queue';
}

/** The Durable instance id of a job: derived from the job id, so starting a job twice finds the first. */
export function instanceIdFor(jobId: string): string {
  return `job-${jobId}`;
}

export function jobIdFromInstanceId(instanceId: string): string | undefined {
  return instanceId.startsWith('job-') && isValidJobId(instanceId.slice(4)) ? instanceId.slice(4) : undefined;
}

export interface WorkItemMessage {
  readonly v: 1;
  readonly jobId: string;
  readonly chunk: number;
  readonly workType: string;
  /** Index in the job of the chunk's first item (item errors name job indexes). */
  readonly firstIndex: number;
  /** Items in the chunk (known even when they travel by blob). */
  readonly itemCount: number;
  readonly attempts: number;
  readonly epoch: number;
  /** 1 for the first dispatch, 2 for the first deadline re-dispatch, ... */
  readonly dispatch: number;
  /** Inline items, or the name of a blob in the results container holding them. */
  readonly items?: Json[];
  readonly itemsRef?: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/** Checks a work-item message's shape; a message that fails this was not written by the planner. */
export function parseWorkItemMessage(value: unknown): WorkItemMessage {
  const problem = (what: string): never => {
    throw new JobError('INVALID_WORK_ITEM', `Not a work-item message: ${what}.`);
  };
  if (!isRecord(value)) return problem('not a JSON object');
  if (value.v !== 1) problem('unknown version');
  if (!isValidJobId(value.jobId)) problem('bad jobId');
  if (!isNat(value.chunk) || !isNat(value.firstIndex) || !isNat(value.epoch) || !isNat(value.itemCount)) problem('bad chunk, firstIndex, itemCount or epoch');
  if (!isNat(value.attempts) || value.attempts < 1 || !isNat(value.dispatch) || value.dispatch < 1) problem('bad attempts or dispatch');
  if (typeof value.workType !== 'string') problem('bad workType');
  const inline = Array.isArray(value.items);
  const ref = typeof value.itemsRef === 'string' && /^jobs\/[A-Za-z0-9_-]{1,64}\/chunks\/\d+\.json$/.test(value.itemsRef);
  if (inline === ref) problem('needs exactly one of items or itemsRef');
  return value as unknown as WorkItemMessage;
}

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

/** The orchestration's output: small on purpose; the full result is in `resultBlob`. */
export interface JobSummary {
  readonly jobId: string;
  readonly workType: string;
  readonly status: FinalStatus;
  readonly progress: JobProgress;
  /** The work type's result, inline when its JSON is at most `INLINE_RESULT_BYTES`. */
  readonly result?: Json;
  readonly resultBlob?: string;
  readonly error?: JobErrorInfo;
  /** The first few chunk and item errors; all of them are in the result blob. */
  readonly errors?: readonly JobErrorInfo[];
  readonly epoch: number;
  readonly finishedAt: string;
}

export const INLINE_RESULT_BYTES = 4096;

/** The custom status the orchestration publishes while it runs. */
export interface JobCustomStatus {
  readonly phase: 'planning' | 'running' | 'aggregating' | 'done';
  readonly epoch: number;
  readonly progress: JobProgress;
  readonly dispatch: number;
  readonly generation: number;
  readonly updatedAt: string;
}
