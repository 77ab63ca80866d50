/**
 * Every error the job pipeline reports on purpose, by stable code. Clients and operators match on
 * `code`; messages are for people and may change. `httpStatus` is what the HTTP API answers.
 */
import { CoordinatorError } from '../errors';

export const JOB_ERROR_CODES = {
  // The submission itself (queue message or HTTP body).
  NOT_BASE64: 400,
  INVALID_JSON: 400,
  NOT_AN_OBJECT: 400,
  PAYLOAD_TOO_LARGE: 413,
  SCHEMA_VIOLATION: 400,
  NESTING_TOO_DEEP: 400,
  INVALID_JOB_ID: 400,
  UNKNOWN_WORK_TYPE: 400,
  ITEMS_MISSING: 400,
  ITEMS_AMBIGUOUS: 400,
  ITEMS_EMPTY: 400,
  ITEMS_TOO_MANY: 400,
  ITEM_REJECTED: 400,
  INVALID_ITEMS_BLOB: 400,
  ITEMS_BLOB_NOT_FOUND: 400,
  ITEMS_BLOB_INVALID: 400,
  OPTION_OUT_OF_RANGE: 400,
  DUPLICATE_JOB_ID: 409,
  INVALID_REPLY_TO: 400,
  INVALID_CALLBACK_URL: 400,
  // Later in a job's life.
  START_FAILED: 500,
  VALIDATION_FAILED: 500,
  CHUNK_FAILED: 500,
  DEADLINE_EXCEEDED: 500,
  INVALID_WORK_ITEM: 400,
  ACTIVITY_MISSING: 500,
  // The HTTP API.
  JOB_NOT_FOUND: 404,
  JOB_ALREADY_FINISHED: 409,
  INVALID_STATUS_FILTER: 400,
  INVALID_PAGING: 400,
  INVALID_WORK_TYPE_FILTER: 400,
  JOB_NOT_FINISHED: 409,
  SERVICE_UNAVAILABLE: 503,
} as const;

export type JobErrorCode = keyof typeof JOB_ERROR_CODES;

export class JobError extends CoordinatorError {
  override readonly name = 'JobError';
  declare readonly code: JobErrorCode;
  constructor(code: JobErrorCode, message: string, options?: { cause?: unknown }) {
    const status = JOB_ERROR_CODES[code];
    super(code, message, status < 500, options);
  }

  get httpStatus(): number {
    return JOB_ERROR_CODES[this.code];
  }

  toJSON(): { code: JobErrorCode; message: string } {
    return { code: this.code, message: this.message };
  }
}

/** The `{ code, message }` shape stored in records and shown by the status API. */
export interface JobErrorInfo {
  readonly code: string;
  readonly message: string;
}
