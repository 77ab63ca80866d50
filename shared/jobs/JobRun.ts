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
  /**
   * This start's id, named by the job's start record (JobStore `start.json`): the run does work only
   * while the record names it. Absent in runs started before start records existed.
   */
  readonly startId?: string;
}

/**
 * The Durable instance id of a job: derived from the job id, so starting a job twice finds the first.
 * A start that had to be repaired (its instance stuck Pending) runs under `job-<jobId>.<generation>`.
 */
export function instanceIdFor(jobId: string, generation = 1): string {
  return generation === 1 ? `job-${jobId}` : `job-${jobId}.${generation}`;
}

/** The job id and generation of a job's instance id, or undefined for other instances. */
export function parseInstanceId(instanceId: string): { readonly jobId: string; readonly generation: number } | undefined {
  const match = /^job-([A-Za-z0-9_-]{1,64})(?:\.([2-9]|[1-9]\d{1,5}))?$/.exec(instanceId);
  if (match?.[1] === undefined || !isValidJobId(match[1])) return undefined;
  return { jobId: match[1], generation: match[2] === undefined ? 1 : Number(match[2]) };
}

export function jobIdFromInstanceId(instanceId: string): string | undefined {
  return parseInstanceId(instanceId)?.jobId;
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

/** The custom status the orchestration publishes while it runs. */
export interface JobCustomStatus {
  readonly phase: 'planning' | 'running' | 'aggregating' | 'done';
  readonly epoch: number;
  readonly progress: JobProgress;
  readonly dispatch: number;
  readonly generation: number;
  readonly updatedAt: string;
}
