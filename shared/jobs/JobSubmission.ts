/**
 * The job contract, enforced the same way on every path (HTTP body, queue message, code): decode,
 * parse, check against schemas/job.schema.json, then the checks a schema cannot make (work type
 * registered, each inline item valid for its type, chunk count, message size). Every refusal is a
 * `JobError` with a stable code; checks run in a fixed order so one input always gets one code.
 *
 * Guarantees: an `AcceptedJob` has a valid job id, a registered work type, exactly one item source
 * (inline items that each pass the type's `validateItem`, or a well-formed blob reference outside
 * the app's own containers), options resolved to their defaults within bounds, and a fingerprint
 * that is equal for equal submissions (key order ignored). Not checked here: that an `itemsBlob`
 * exists or holds valid items (the coordination pass and the planner check those).
 */
import Ajv2020, { type ErrorObject } from 'ajv/dist/2020';

import schema from '../../schemas/job.schema.json';
import { type Json } from '../worktypes/WorkType';
import { type WorkTypeRegistry } from '../worktypes/WorkTypeRegistry';
import { canonicalJson, sha256Hex } from './canonicalJson';
import { type DeliveryTargets, hasReply, type JobReply, replyOf } from './delivery/DeliveryTargets';
import { type BlobRef, isBlobRef, parseBlobRef } from './input/BlobRef';
import { type InputContainers } from './input/InputContainers';
import { ItemRejections } from './input/ItemRejections';
import { JobError } from './JobError';
import { assertJobId } from './jobIds';
import { JOB_LIMITS, JOB_OPTION_BOUNDS, JOB_OPTION_DEFAULTS, type JobOptions } from './jobLimits';

/** A submission as a client writes it (the schema's shape). */
export interface JobSubmission {
  jobId?: string;
  workType: string;
  items?: Json[];
  itemsBlob?: string;
  options?: Partial<JobOptions>;
  replyTo?: string;
  correlationId?: string;
  callbackUrl?: string;
}

export type ItemSource = { readonly kind: 'inline'; readonly items: Json[] } | ({ readonly kind: 'blob' } & BlobRef);

export interface AcceptedJob {
  readonly jobId: string;
  readonly workType: string;
  readonly source: ItemSource;
  readonly options: JobOptions;
  /** sha256 of the canonical submission without its job id: equal submissions, equal fingerprints. */
  readonly fingerprint: string;
  /** Where the outcome goes when the job ends (absent: nowhere but the status API and the outcome stream). */
  readonly reply?: JobReply;
}

export interface ValidationContext {
  readonly registry: WorkTypeRegistry;
  /** Used when the submission has no job id (HTTP: random; queue: derived from the message id). */
  readonly generateJobId: () => string;
  /** The containers an itemsBlob may name (the allow-list; the app's own are never on it). */
  readonly inputContainers: InputContainers;
  /** The reply queues and callback hosts a submission may name (absent: `replyTo` and `callbackUrl` are refused). */
  readonly delivery?: DeliveryTargets | undefined;
}

// strictRequired is off: the oneOf branches name properties defined at the top level, which is the point.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
const validateSchema = ajv.compile<JobSubmission>(schema);


function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}


/**
 * JSON nests as deep as the sender likes (JSON.parse copes with thousands of levels), but the
 * recursive code after validation (canonical JSON for the fingerprint, work types) would overflow
 * the stack: refuse deep values first, with a loop rather than recursion.
 */
export const MAX_NESTING_DEPTH = 64;

export function nestingDepthExceeds(value: unknown, limit: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [current, depth] = stack.pop() as [unknown, number];
    if (current === null || typeof current !== 'object') continue;
    if (depth > limit) return true;
    for (const child of Object.values(current as Record<string, unknown>)) stack.push([child, depth + 1]);
  }
  return false;
}

/** Validates a parsed submission; throws `JobError` with the first problem found. */
export function validateSubmission(value: unknown, ctx: ValidationContext): AcceptedJob {
  if (nestingDepthExceeds(value, MAX_NESTING_DEPTH)) {
    throw new JobError('NESTING_TOO_DEEP', `The submission nests arrays or objects more than ${MAX_NESTING_DEPTH} levels deep.`);
  }
  if (!isPlainObject(value)) {
    throw new JobError(
      'NOT_AN_OBJECT',
      `A submission is a JSON object { workType, items | itemsBlob, ... }, ` +
        `not ${Array.isArray(value) ? 'an array' : value === null ? 'null' : typeof value}.`,
    );
  }
  if ('jobId' in value) assertJobId(value.jobId);
  const hasItems = 'items' in value;
  const hasBlob = 'itemsBlob' in value;
  if (hasItems && hasBlob) {
    throw new JobError('ITEMS_AMBIGUOUS', 'Give exactly one of items (inline) or itemsBlob (a blob holding a JSON array), not both.');
  }
  if (!hasItems && !hasBlob) {
    throw new JobError('ITEMS_MISSING', 'Give exactly one of items (inline) or itemsBlob (a blob holding a JSON array).');
  }

  if (!validateSchema(value)) throw schemaError(validateSchema.errors ?? [], value);
  const submission = value;

  const workType = ctx.registry.get(submission.workType);
  if (workType === undefined) {
    throw new JobError('UNKNOWN_WORK_TYPE', `Unknown workType "${submission.workType}"; registered: ${ctx.registry.names().join(', ')}.`);
  }
  const options: JobOptions = { ...JOB_OPTION_DEFAULTS, ...submission.options };

  let source: ItemSource;
  if (submission.items !== undefined) {
    const rejections = new ItemRejections(workType);
    submission.items.forEach((item, index) => rejections.check(item, index));
    rejections.throwIfAny(submission.items.length);
    assertChunkCount(submission.items.length, options.chunkSize);
    source = { kind: 'inline', items: submission.items };
  } else {
    const ref = parseBlobRef(submission.itemsBlob);
    if (!isBlobRef(ref)) throw new JobError('INVALID_ITEMS_BLOB', `itemsBlob: ${ref.reason}.`);
    if (!ctx.inputContainers.allows(ref.container)) {
      throw new JobError(
        'INVALID_ITEMS_BLOB',
        `itemsBlob: container "${ref.container}" is not a job input container; allowed: ${ctx.inputContainers.describe()}.`,
      );
    }
    source = { kind: 'blob', container: ref.container, blob: ref.blob };
  }

  const replied = replyOf(value, ctx.delivery);
  if ('refused' in replied) throw replied.refused;
  const reply = { ...replied.reply, ...(submission.correlationId === undefined ? {} : { correlationId: submission.correlationId }) };

  const { jobId: _ignored, ...content } = submission;
  return {
    jobId: submission.jobId ?? ctx.generateJobId(),
    workType: workType.name,
    source,
    options,
    fingerprint: sha256Hex(canonicalJson({ ...content, options })),
    ...(hasReply(reply) || reply.correlationId !== undefined ? { reply } : {}),
  };
}

export function assertChunkCount(itemCount: number, chunkSize: number): void {
  if (itemCount > JOB_LIMITS.maxItems) {
    throw new JobError('ITEMS_TOO_MANY', `${itemCount} items; a job holds at most ${JOB_LIMITS.maxItems}.`);
  }
  const chunks = Math.ceil(itemCount / chunkSize);
  if (chunks > JOB_LIMITS.maxChunks) {
    throw new JobError(
      'ITEMS_TOO_MANY',
      `${itemCount} items in chunks of ${chunkSize} make ${chunks} chunks; ` +
        `a job has at most ${JOB_LIMITS.maxChunks}: raise options.chunkSize.`,
    );
  }
}

const OPTION_NAMES = Object.keys(JOB_OPTION_BOUNDS);

// One code per input: the most specific problem wins, in this order.
function schemaError(errors: readonly ErrorObject[], value: Record<string, unknown>): JobError {
  const find = (predicate: (e: ErrorObject) => boolean): ErrorObject | undefined => errors.find(predicate);
  const at = (path: string) => (e: ErrorObject) => e.instancePath === path;

  const items = find(at('/items'));
  if (items?.keyword === 'minItems') return new JobError('ITEMS_EMPTY', 'items is empty: a job needs at least one item.');
  if (items?.keyword === 'maxItems') return new JobError('ITEMS_TOO_MANY', `items holds more than ${JOB_LIMITS.maxItems} items.`);

  if (find(at('/itemsBlob')) !== undefined) {
    const ref = parseBlobRef(value.itemsBlob);
    return new JobError('INVALID_ITEMS_BLOB', `itemsBlob: ${isBlobRef(ref) ? 'must be at most 1088 characters' : ref.reason}.`);
  }
  if (find(at('/replyTo')) !== undefined) {
    return new JobError('INVALID_REPLY_TO', `replyTo must be a queue name (3-63 lowercase letters, digits and single hyphens).`);
  }
  if (find(at('/callbackUrl')) !== undefined) {
    return new JobError('INVALID_CALLBACK_URL', `callbackUrl must be an http(s) URL of at most 2048 characters.`);
  }
  const workType = find(at('/workType'));
  if (workType !== undefined) {
    return typeof value.workType === 'string'
      ? new JobError('UNKNOWN_WORK_TYPE', `workType "${value.workType.slice(0, 40)}" is not a valid work type name.`)
      : new JobError('SCHEMA_VIOLATION', `workType must be a string.`);
  }
  const option = find((e) => e.instancePath.startsWith('/options/') && OPTION_NAMES.includes(e.instancePath.slice('/options/'.length)));
  if (option !== undefined) {
    const name = option.instancePath.slice('/options/'.length) as keyof typeof JOB_OPTION_BOUNDS;
    const bounds = JOB_OPTION_BOUNDS[name];
    return new JobError(
      'OPTION_OUT_OF_RANGE',
      `options.${name} must be a whole number from ${bounds.min} to ${bounds.max}; ` +
        `got ${JSON.stringify((value.options as Record<string, unknown>)[name])}.`,
    );
  }
  // The oneOf branch errors only restate "exactly one of items / itemsBlob", checked before the schema.
  const first = errors.find((e) => !e.schemaPath.startsWith('#/oneOf') && e.keyword !== 'oneOf') ?? errors[0];
  if (first === undefined) return new JobError('SCHEMA_VIOLATION', 'The submission does not match the job schema.');
  if (first.keyword === 'required') return new JobError('SCHEMA_VIOLATION', `${String(first.params.missingProperty)} is required.`);
  if (first.keyword === 'additionalProperties') {
    const where = first.instancePath === '' ? 'a submission' : first.instancePath.slice(1);
    return new JobError(
      'SCHEMA_VIOLATION',
      `Unknown property "${String(first.params.additionalProperty)}" in ${where}; see schemas/job.schema.json.`,
    );
  }
  return new JobError(
    'SCHEMA_VIOLATION',
    `${first.instancePath === '' ? 'The submission' : first.instancePath.slice(1)} ${first.message ?? 'is invalid'}.`,
  );
}
