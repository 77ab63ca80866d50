/**
 * The job contract's defaults and bounds, in one place. schemas/job.schema.json states the same
 * numbers for clients; the contract test checks the two agree.
 */
export const JOB_OPTION_DEFAULTS = {
  /** Items per chunk: one work-items message and one result blob per chunk. */
  chunkSize: 500,
  /** Tries per chunk before it is recorded as failed. */
  attempts: 3,
  /** A chunk without a result this long after dispatch is dispatched again. */
  deadlineSeconds: 300,
} as const;

export const JOB_OPTION_BOUNDS = {
  chunkSize: { min: 1, max: 10_000 },
  // The host moves a message to the poison queue after queues.maxDequeueCount (5 in host.json)
  // deliveries; the worker must record the failure on its last delivery, so attempts <= 5.
  attempts: { min: 1, max: 5 },
  deadlineSeconds: { min: 5, max: 86_400 },
} as const;

export const JOB_LIMITS = {
  maxItems: 1_000_000,
  /** Each chunk is a queue message, a result blob and a listing entry: keep a job's fan-out bounded. */
  maxChunks: 10_000,
  /**
   * A queue message holds 64 KiB; base64 (the host's default encoding) makes 4 bytes of 3, so a
   * message's JSON may be at most 48 KiB. HTTP bodies larger than this are refused: use itemsBlob.
   */
  maxMessageJsonBytes: 48 * 1024,
  /** An itemsBlob is read whole by the planner. */
  maxItemsBlobBytes: 64 * 1024 * 1024,
  jobIdPattern: /^[A-Za-z0-9_-]{1,64}$/,
} as const;

/** The most items a job may hold at a chunk size: `maxItems`, or fewer when `maxChunks` chunks hold less. */
export function maxItemsAt(chunkSize: number): number {
  return Math.min(JOB_LIMITS.maxItems, JOB_LIMITS.maxChunks * chunkSize);
}

export interface JobOptions {
  readonly chunkSize: number;
  readonly attempts: number;
  readonly deadlineSeconds: number;
}
