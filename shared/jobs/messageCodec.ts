/**
 * What travels as text between the pipeline's parts, and its checks: a submission on the jobs queue
 * (base64 of UTF-8 JSON, the Functions host's default), request bodies (UTF-8 JSON), and the
 * work-item message (one per chunk, on the work-items queue). Decoding refuses what is not base64,
 * not UTF-8 or not JSON with a `JobError`; `parseWorkItemMessage` checks a work item's shape. What a
 * submission must hold is JobSubmission's business, not this module's.
 */
import { type Json } from '../worktypes/WorkType';
import { JobError } from './JobError';
import { isValidJobId } from './jobIds';
import { JOB_LIMITS } from './jobLimits';

/** The base64 text a queue client sends for a submission (the Functions host's default encoding). */
export function encodeQueueMessage(submission: unknown): string {
  return Buffer.from(JSON.stringify(submission), 'utf8').toString('base64');
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** A queue message's text to the JSON value it carries. */
export function decodeQueueMessage(text: string): unknown {
  const compact = text.replace(/\s+/g, '');
  if (compact.length === 0 || !BASE64.test(compact)) {
    throw new JobError(
      'NOT_BASE64',
      'The message is not base64: queue messages carry base64-encoded UTF-8 JSON (the Functions host default).',
    );
  }
  return parseJsonText(decodeUtf8(Buffer.from(compact, 'base64'), 'The message decodes from base64 but not to UTF-8 text.'));
}

/** Bytes to text, refusing what is not UTF-8 (a lenient decode would put U+FFFD into the job's items). */
export function decodeUtf8(bytes: Uint8Array, refusal = 'The submission is not UTF-8 text.'): string {
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new JobError('INVALID_JSON', refusal);
  }
}

export function parseJsonText(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new JobError('INVALID_JSON', `The submission is not JSON: ${err instanceof Error ? err.message : String(err)}.`);
  }
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
  /** Set on a copy sent again in its round (unclaimed, overtaken, silent): the worker checks for a result first. */
  readonly resent?: true;
  /** Inline items, or the name of a blob in the results container holding them. */
  readonly items?: Json[];
  readonly itemsRef?: string;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

const isNat = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

/**
 * Several chunks in one queue message (the dispatcher packs up to `JOB_CHUNKS_PER_MESSAGE`, default
 * `CHUNKS_PER_MESSAGE`, consecutive sends, within the message size): one send, one receive share and one delete carry
 * them all. Each part is a whole work-item message, handled as if it had come alone.
 */
export interface WorkItemEnvelope {
  readonly v: 1;
  readonly parts: readonly WorkItemMessage[];
}

/**
 * The work-items queue's doorbell: a submission by HTTP writes this message through the route's
 * queue output binding, and the host then wakes this instance's work-items trigger at once (the
 * host's SharedQueueWatcher: a queue output binding's write notifies the listener of that queue in
 * the same host), so the job's first chunks, sent a moment later by the leader's pass, are not left
 * waiting for the trigger's backed-off poll (up to host.json `maxPollingInterval`). Workers skip it.
 */
export const WAKE_WORKERS_MESSAGE = { wake: 1 } as const;

/**
 * The doorbell that says the lease is free: rung by a leader right after its graceful release and by
 * an instance whose lease watch found nobody holding it (JobComponents.ringWorkers). The instance
 * whose worker takes it campaigns at once (AppRoot.offer), instead of at its next campaign period.
 * Workers skip it too.
 */
export const LEASE_FREE_MESSAGE = { wake: 1, lease: 'free' } as const;

/** The doorbell as the queue trigger hands it over (text or parsed JSON): `work`, `lease-free`, or undefined for anything else. */
export function doorbellOf(value: unknown): 'work' | 'lease-free' | undefined {
  let parsed = value;
  if (typeof value === 'string') {
    if (!value.includes('"wake"')) return undefined;
    try {
      parsed = JSON.parse(value);
    } catch {
      return undefined;
    }
  }
  if (!isRecord(parsed) || parsed.wake !== 1) return undefined;
  const keys = Object.keys(parsed).length;
  if (keys === 1) return 'work';
  return keys === 2 && parsed.lease === 'free' ? 'lease-free' : undefined;
}

/** True for either doorbell (`WAKE_WORKERS_MESSAGE`, `LEASE_FREE_MESSAGE`): no work in it. */
export function isWakeMessage(value: unknown): boolean {
  return doorbellOf(value) !== undefined;
}

/** The JSON an envelope adds around its parts: `{"v":1,"parts":[]}`. */
const ENVELOPE_BYTES = Buffer.byteLength(JSON.stringify({ v: 1, parts: [] }), 'utf8');

/**
 * Items packed into envelopes in their order, never one split: a pack holds at most `perMessage`
 * chunks and `JOB_LIMITS.maxMessageJsonBytes` of JSON (an item alone over either is a pack of its
 * own). `chunks` and `bytes` say what an item adds: its chunks, and their JSON with a comma each.
 */
export function packInEnvelopes<T>(
  items: readonly T[],
  perMessage: number,
  chunks: (item: T) => number,
  bytes: (item: T) => number,
): T[][] {
  const packs: T[][] = [];
  let current: T[] = [];
  let parts = 0;
  let size = ENVELOPE_BYTES;
  for (const item of items) {
    const [itemParts, itemBytes] = [chunks(item), bytes(item)];
    if (current.length > 0 && (parts + itemParts > perMessage || size + itemBytes > JOB_LIMITS.maxMessageJsonBytes)) {
      packs.push(current);
      current = [];
      parts = 0;
      size = ENVELOPE_BYTES;
    }
    current.push(item);
    parts += itemParts;
    size += itemBytes;
  }
  if (current.length > 0) packs.push(current);
  return packs;
}

/** Most parts an envelope may carry (a bound on what one delivery starts). */
export const MAX_ENVELOPE_PARTS = 16;

/** One message's chunks: the message itself, or an envelope's parts, each checked (`parseWorkItemMessage`). */
export function parseWorkItemDelivery(value: unknown): WorkItemMessage[] {
  if (isRecord(value) && Array.isArray(value.parts)) {
    if (value.v !== 1) throw new JobError('INVALID_WORK_ITEM', 'Not a work-item message: unknown envelope version.');
    const parts: unknown[] = value.parts;
    if (parts.length < 1 || parts.length > MAX_ENVELOPE_PARTS) {
      const what = `an envelope of ${parts.length} parts (1 to ${MAX_ENVELOPE_PARTS})`;
      throw new JobError('INVALID_WORK_ITEM', `Not a work-item message: ${what}.`);
    }
    return parts.map(parseWorkItemMessage);
  }
  return [parseWorkItemMessage(value)];
}

/** The queue message for `messages`: the one message itself, or an envelope of them. */
export function workItemPayload(messages: readonly WorkItemMessage[]): WorkItemMessage | WorkItemEnvelope {
  const [only] = messages;
  if (only === undefined) throw new Error('A work-item message needs at least one chunk.');
  return messages.length === 1 ? only : { v: 1, parts: messages };
}

/** Checks a work-item message's shape; a message that fails this was not written by the planner. */
export function parseWorkItemMessage(value: unknown): WorkItemMessage {
  const problem = (what: string): never => {
    throw new JobError('INVALID_WORK_ITEM', `Not a work-item message: ${what}.`);
  };
  if (!isRecord(value)) return problem('not a JSON object');
  if (value.v !== 1) problem('unknown version');
  if (!isValidJobId(value.jobId)) problem('bad jobId');
  if (!isNat(value.chunk) || !isNat(value.firstIndex) || !isNat(value.epoch) || !isNat(value.itemCount)) {
    problem('bad chunk, firstIndex, itemCount or epoch');
  }
  if (!isNat(value.attempts) || value.attempts < 1 || !isNat(value.dispatch) || value.dispatch < 1) problem('bad attempts or dispatch');
  if (typeof value.workType !== 'string') problem('bad workType');
  const inline = Array.isArray(value.items);
  const ref = typeof value.itemsRef === 'string' && /^jobs\/[A-Za-z0-9_-]{1,64}\/chunks\/\d+\.json$/.test(value.itemsRef);
  if (inline === ref) problem('needs exactly one of items or itemsRef');
  return value as unknown as WorkItemMessage;
}
