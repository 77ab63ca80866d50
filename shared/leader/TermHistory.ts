/**
 * The recent history of leader terms, for people (the live page, GET /api/cluster): one small JSON
 * blob beside the lease blob, `<lease blob>.terms.json`, holding the newest `maxTerms` terms. Each new
 * leader adds its term (epoch, holder, acquiredAt) when it starts; a leader that steps down on its
 * own account (release, lost lease, deadline, stall) adds when and why. A crashed leader's term
 * has no end: the next term's start bounds it.
 *
 * Writes are read-modify-write under the blob's etag (a 412 re-reads and tries again), keyed by
 * epoch, so a stale leader adding its old term late cannot erase or reorder a newer one. The lease
 * blob itself is never touched. Cost: one read and one write per leadership change.
 *
 * Not guaranteed: completeness. History is best effort (a write that fails is logged, not retried
 * later); the lease blob's epoch, not this blob, is what fencing relies on.
 */
import { type ContainerClient, isRestError } from '@azure/storage-blob';

import { type StepDownReason } from './LeaseElector';

export interface TermEntry {
  readonly epoch: number;
  readonly holder: string;
  readonly acquiredAt: string;
  /** Set when the holder recorded its own step-down; absent for a running term or a crash. */
  readonly endedAt?: string;
  readonly endReason?: StepDownReason;
}

export interface TermHistoryOptions {
  /** Terms kept, newest first. */
  readonly maxTerms?: number;
  /** Bound on each storage request. */
  readonly requestTimeoutMs?: number;
}

export const TERM_HISTORY_DEFAULTS: Required<TermHistoryOptions> = {
  maxTerms: 50,
  requestTimeoutMs: 10_000,
};

const MAX_WRITE_TRIES = 5;
const HOLDER = /^[A-Za-z0-9._:-]{1,128}$/;
const REASONS: readonly StepDownReason[] = ['lost', 'deadline', 'stalled', 'released', 'abandoned'];

/** The history blob's name for a lease blob. */
export function termHistoryBlobName(leaseBlob: string): string {
  return `${leaseBlob}.terms.json`;
}

export class TermHistory {
  private readonly options: Required<TermHistoryOptions>;

  constructor(
    private readonly container: ContainerClient,
    readonly blobName: string,
    options: TermHistoryOptions = {},
  ) {
    this.options = { ...TERM_HISTORY_DEFAULTS, ...options };
  }

  /** The terms, newest first; [] before the first one. Entries that do not parse are left out. */
  async read(): Promise<TermEntry[]> {
    return (await this.readWithEtag()).terms;
  }

  recordStart(term: { readonly epoch: number; readonly holder: string; readonly acquiredAt: string }): Promise<void> {
    return this.update((terms) => {
      const existing = terms.find((t) => t.epoch === term.epoch);
      if (existing !== undefined) return undefined;
      return [...terms, { epoch: term.epoch, holder: term.holder, acquiredAt: term.acquiredAt }];
    });
  }

  recordEnd(term: {
    readonly epoch: number;
    readonly holder: string;
    readonly endedAt: string;
    readonly reason: StepDownReason;
  }): Promise<void> {
    return this.update((terms) => {
      const index = terms.findIndex((t) => t.epoch === term.epoch && t.holder === term.holder);
      const current = terms[index];
      // A term this holder never recorded (its start write failed) is not invented from its end.
      if (current === undefined || current.endedAt !== undefined) return undefined;
      const next = [...terms];
      next[index] = { ...current, endedAt: term.endedAt, endReason: term.reason };
      return next;
    });
  }

  /** Applies `change` (undefined: nothing to write) under the etag, retrying a lost race. */
  private async update(change: (terms: readonly TermEntry[]) => TermEntry[] | undefined): Promise<void> {
    for (let attempt = 1; ; attempt += 1) {
      const { terms, etag } = await this.readWithEtag();
      const changed = change(terms);
      if (changed === undefined) return;
      const kept = changed.sort((a, b) => b.epoch - a.epoch).slice(0, this.options.maxTerms);
      const body = JSON.stringify({ terms: kept });
      try {
        await this.container.getBlockBlobClient(this.blobName).upload(body, Buffer.byteLength(body), {
          blobHTTPHeaders: { blobContentType: 'application/json' },
          conditions: etag === undefined ? { ifNoneMatch: '*' } : { ifMatch: etag },
          abortSignal: AbortSignal.timeout(this.options.requestTimeoutMs),
        });
        return;
      } catch (err) {
        // 412: changed since we read it; 409: created by someone else first; 404: no container yet.
        const retry = isRestError(err) && (err.statusCode === 412 || err.statusCode === 409 || err.statusCode === 404);
        if (!retry || attempt >= MAX_WRITE_TRIES) throw err;
        if (err.statusCode === 404) {
          await this.container.createIfNotExists({ abortSignal: AbortSignal.timeout(this.options.requestTimeoutMs) });
        }
      }
    }
  }

  private async readWithEtag(): Promise<{ terms: TermEntry[]; etag: string | undefined }> {
    try {
      // One request for the text and its etag, so the write's condition matches what was read.
      const res = await this.container
        .getBlockBlobClient(this.blobName)
        .download(0, undefined, { abortSignal: AbortSignal.timeout(this.options.requestTimeoutMs) });
      return { terms: parseTerms(await streamText(res.readableStreamBody)), etag: res.etag };
    } catch (err) {
      if (isRestError(err) && err.statusCode === 404) return { terms: [], etag: undefined };
      throw err;
    }
  }
}

async function streamText(stream: NodeJS.ReadableStream | undefined): Promise<string> {
  if (stream === undefined) return '';
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses the blob's text; anything malformed is dropped rather than shown or trusted. */
export function parseTerms(text: string): TermEntry[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return [];
  }
  const list = (value as { terms?: unknown } | null)?.terms;
  if (!Array.isArray(list)) return [];
  const terms: TermEntry[] = [];
  for (const raw of list as unknown[]) {
    const t = raw as Partial<Record<keyof TermEntry, unknown>> | null;
    if (t === null || typeof t !== 'object') continue;
    if (typeof t.epoch !== 'number' || !Number.isSafeInteger(t.epoch) || t.epoch < 1) continue;
    if (typeof t.holder !== 'string' || !HOLDER.test(t.holder) || typeof t.acquiredAt !== 'string') continue;
    const ended = typeof t.endedAt === 'string' && REASONS.includes(t.endReason as StepDownReason);
    terms.push({
      epoch: t.epoch,
      holder: t.holder,
      acquiredAt: t.acquiredAt,
      ...(ended ? { endedAt: t.endedAt as string, endReason: t.endReason as StepDownReason } : {}),
    });
  }
  return terms.sort((a, b) => b.epoch - a.epoch);
}
