/**
 * The narrow storage boundary of the elector: one blob, its lease and its metadata. The real
 * implementation is `BlobLeaseStore`; tests put a fault-injecting one in front of it or in its place.
 *
 * Contract for implementations:
 * - `acquire` creates the blob (and container) when missing; it returns false when another lease
 *   id holds the lease, true when this id now holds it (acquiring with the id that already holds it
 *   renews, as the service does).
 * - `renew`, `write` and `release` throw `LeaseLostError` when the service says this id does not
 *   hold the lease (or, for `write`, that the blob changed since `ifMatch`); any other error is
 *   transient. Every call honours its `AbortSignal`.
 */
export interface LeaseRecord {
  /** Fencing epoch: bumped on every acquisition, strictly increasing across leaders. */
  readonly epoch: number;
  /** The holder's instance id (not its lease id, which stays private to the holder). */
  readonly holder: string;
  /** Wall-clock time of the acquisition, ISO 8601; for people, never for decisions. */
  readonly acquiredAt: string;
}

export interface LeaseSnapshot {
  /** The metadata record; undefined before the first acquisition (or when the blob is missing). */
  readonly record: LeaseRecord | undefined;
  /** Blob lease state as the service reports it: available, leased, expired, breaking, broken. */
  readonly leaseState: string;
  /** locked or unlocked. */
  readonly leaseStatus: string;
  /** The blob's etag; '' when the blob does not exist. */
  readonly etag: string;
  /** Extra metadata fields a leader wrote through the lease (everything but the record's). */
  readonly extra: Readonly<Record<string, string>>;
}

export interface LeaseStore {
  /** Where the lease lives, for log lines (container/blob; never a connection string). */
  readonly description: string;
  acquire(leaseId: string, leaseSeconds: number, signal: AbortSignal): Promise<boolean>;
  /** Renews; resolves with the blob's etag (lease operations do not change it). */
  renew(leaseId: string, signal: AbortSignal): Promise<{ etag: string }>;
  release(leaseId: string, signal: AbortSignal): Promise<void>;
  read(signal: AbortSignal): Promise<LeaseSnapshot>;
  /** Replaces the metadata through the lease, only if the blob's etag is still `ifMatch`. */
  write(leaseId: string, metadata: Readonly<Record<string, string>>, ifMatch: string, signal: AbortSignal): Promise<{ etag: string }>;
}

const RECORD_KEYS = ['epoch', 'holder', 'acquiredat'];

/** The metadata that carries a record (plus a leader's extra fields, which cannot shadow it). */
export function recordMetadata(record: LeaseRecord, extra: Readonly<Record<string, string>> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(extra)) {
    if (!RECORD_KEYS.includes(key.toLowerCase())) out[key] = value;
  }
  return { ...out, epoch: String(record.epoch), holder: record.holder, acquiredAt: record.acquiredAt };
}

/** Reads a record back; metadata names are case-insensitive on the service, so lookups are too. */
export function parseRecord(metadata: Readonly<Record<string, string | undefined>> | undefined): {
  record: LeaseRecord | undefined;
  extra: Record<string, string>;
} {
  const lower = new Map<string, string>();
  const extra: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (value === undefined) continue;
    if (RECORD_KEYS.includes(key.toLowerCase())) lower.set(key.toLowerCase(), value);
    else extra[key] = value;
  }
  const epochText = lower.get('epoch');
  const epoch = epochText === undefined ? NaN : Number(epochText);
  const holder = lower.get('holder');
  if (!Number.isSafeInteger(epoch) || epoch < 0 || holder === undefined) return { record: undefined, extra };
  return { record: { epoch, holder, acquiredAt: lower.get('acquiredat') ?? '' }, extra };
}
