/**
 * The work-type plug-in contract. A work type says how to check one item, process one item into a
 * partial result, combine two partials, and turn the final partial into the job's result.
 *
 * Guarantees the pipeline gives a work type: every item of a job passes `validateItem` before it is
 * processed (inline items at submission, blob items when the job is planned); `process` is called
 * at least once per item (a redelivered chunk may repeat it) but exactly one chunk result per chunk
 * is kept, so `combine` sees every item exactly once. Partials travel as JSON (queue, blobs), so
 * they must be JSON values; `combine` must be associative and `empty()` its identity, because
 * partials are folded per chunk and then across chunks in chunk order.
 *
 * Not guaranteed: `process` may run on any instance and concurrently with itself; keep it free of
 * shared mutable state. It must honour `signal` when it does I/O.
 */
import { type InputBlobs } from '../jobs/input/InputContainers';
import { type Logger } from '../observability/log';

/** A JSON value, the shape every partial and result must have. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface WorkContext {
  /** Blobs a job may read: only in the job input containers (the `wordcount` type reads its items here). */
  readonly inputs: InputBlobs;
  readonly signal: AbortSignal;
  readonly logger: Logger;
}

/** Raised by `process` for one bad item: recorded as an item error, the chunk goes on. */
export class ItemError extends Error {
  override readonly name = 'ItemError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export interface WorkType<P extends Json = Json, R extends Json = Json> {
  readonly name: string;
  readonly description: string;
  /** Why this item cannot be processed, or undefined when it can. Pure and cheap: runs at submission. */
  validateItem(item: unknown): string | undefined;
  /** One item to its partial. Throw `ItemError` for a bad item; anything else fails the chunk (and is retried). */
  process(item: unknown, ctx: WorkContext): Promise<P> | P;
  /** The identity of `combine`. */
  empty(): P;
  /** Associative: combine(a, combine(b, c)) equals combine(combine(a, b), c). */
  combine(a: P, b: P): P;
  /** The job's result from the combination of every chunk's partial. */
  finish(total: P): R;
}

/** Erases a work type's partial and result types so different types can share one registry. */
export type AnyWorkType = WorkType<Json, Json>;
