/**
 * The job-id rules in one place: what a job id may be (JOB_LIMITS.jobIdPattern), how a refusal names
 * the problem, and the Durable instance ids derived from a job id. Pure functions with no
 * dependency beyond the limits, so the store (which puts job ids into blob names) and the contract
 * share them without loading the schema validator.
 */
import { JobError } from './JobError';
import { JOB_LIMITS } from './jobLimits';

export function describeJobIdProblem(value: unknown): string {
  if (typeof value !== 'string') return `jobId must be a string, got ${value === null ? 'null' : typeof value}.`;
  if (value.length === 0 || value.length > 64) return `jobId must be 1-64 characters; this one has ${value.length}.`;
  const bad = [...new Set(value.replace(/[A-Za-z0-9_-]/g, ''))].slice(0, 5).map((c) => JSON.stringify(c));
  return `jobId may only hold letters, digits, '_' and '-'; it contains ${bad.join(', ')}.`;
}

export function isValidJobId(value: unknown): value is string {
  return typeof value === 'string' && JOB_LIMITS.jobIdPattern.test(value);
}

/** Refuses an invalid job id with INVALID_JOB_ID and a message naming the problem. */
export function assertJobId(value: unknown): asserts value is string {
  if (!isValidJobId(value)) throw new JobError('INVALID_JOB_ID', describeJobIdProblem(value));
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

/** A shared run's instance id (run/batchOrchestration.ts): `batch-<uuid>`, made by the intake. */
export function batchInstanceId(uuid: string): string {
  return `batch-${uuid}`;
}

export function isBatchInstanceId(instanceId: string): boolean {
  return /^batch-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(instanceId);
}
