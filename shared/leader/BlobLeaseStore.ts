/**
 * `LeaseStore` on a real blob with @azure/storage-blob's BlobLeaseClient.
 *
 * The blob client is built with a retry policy of one try: the SDK's default policy (4 tries,
 * exponential backoff from 4 s) can block far longer than a 15 s lease, and a renewal that answers
 * after the renew deadline is worthless; the elector retries on its own schedule instead. The
 * policy's `tryTimeoutInMs` only becomes the service-side `timeout` parameter (the SDK has no
 * client-side per-try timeout; a blackholed connection hung for 89 s in our test), so the hard
 * limit on every call is the AbortSignal the elector passes, which the SDK does honour.
 *
 * Error mapping (where it happens, as the service documents it): on lease and write operations a
 * 409 or 412 means "this id does not hold the lease" or "the blob changed under us" -> LeaseLostError.
 * On acquire a 409 means another id holds it -> false. A 404 on acquire creates the blob.
 * Route: docs/architecture.md, "The lease epoch from the elector to the fence", steps 1, 2 and 6 (the fence reads the epoch here).
 */
import { type BlobServiceClient, type BlockBlobClient, type ContainerClient, isRestError } from '@azure/storage-blob';

import { type StorageConnection } from '../config/settings';
import { blobServiceClient } from '../storage/clients';
import { LeaseLostError } from './errors';
import { type LeaseSnapshot, type LeaseStore, parseRecord } from './LeaseStore';

export class BlobLeaseStore implements LeaseStore {
  readonly description: string;
  private readonly container: ContainerClient;
  private readonly blob: BlockBlobClient;

  constructor(service: BlobServiceClient, containerName: string, blobName: string) {
    this.container = service.getContainerClient(containerName);
    this.blob = this.container.getBlockBlobClient(blobName);
    this.description = `${containerName}/${blobName}`;
  }

  /** A store whose client never retries and gives each try at most `requestTimeoutMs`. */
  static fromConnection(conn: StorageConnection, containerName: string, blobName: string, requestTimeoutMs: number): BlobLeaseStore {
    const service = blobServiceClient(conn, { retryOptions: { maxTries: 1, tryTimeoutInMs: Math.max(1, Math.ceil(requestTimeoutMs)) } });
    return new BlobLeaseStore(service, containerName, blobName);
  }

  async acquire(leaseId: string, leaseSeconds: number, signal: AbortSignal): Promise<boolean> {
    try {
      return await this.tryAcquire(leaseId, leaseSeconds, signal);
    } catch (err) {
      if (!isRestError(err) || err.statusCode !== 404) throw err;
    }
    await this.ensureBlob(signal);
    return this.tryAcquire(leaseId, leaseSeconds, signal);
  }

  async renew(leaseId: string, signal: AbortSignal): Promise<{ etag: string }> {
    try {
      const lease = await this.blob.getBlobLeaseClient(leaseId).renewLease({ abortSignal: signal });
      return { etag: lease.etag ?? '' };
    } catch (err) {
      throw asLeaseLost(err);
    }
  }

  async release(leaseId: string, signal: AbortSignal): Promise<void> {
    try {
      await this.blob.getBlobLeaseClient(leaseId).releaseLease({ abortSignal: signal });
    } catch (err) {
      throw asLeaseLost(err);
    }
  }

  async read(signal: AbortSignal): Promise<LeaseSnapshot> {
    try {
      const props = await this.blob.getProperties({ abortSignal: signal });
      const { record, extra } = parseRecord(props.metadata);
      return {
        record,
        extra,
        leaseState: props.leaseState ?? 'available',
        leaseStatus: props.leaseStatus ?? 'unlocked',
        etag: props.etag ?? '',
      };
    } catch (err) {
      if (isRestError(err) && err.statusCode === 404) {
        return { record: undefined, extra: {}, leaseState: 'available', leaseStatus: 'unlocked', etag: '' };
      }
      throw err;
    }
  }

  async write(
    leaseId: string,
    metadata: Readonly<Record<string, string>>,
    ifMatch: string,
    signal: AbortSignal,
  ): Promise<{ etag: string }> {
    try {
      const res = await this.blob.setMetadata({ ...metadata }, { conditions: { leaseId, ifMatch }, abortSignal: signal });
      return { etag: res.etag ?? '' };
    } catch (err) {
      throw asLeaseLost(err);
    }
  }

  private async tryAcquire(leaseId: string, leaseSeconds: number, signal: AbortSignal): Promise<boolean> {
    try {
      await this.blob.getBlobLeaseClient(leaseId).acquireLease(leaseSeconds, { abortSignal: signal });
      return true;
    } catch (err) {
      // 409 LeaseAlreadyPresent (or LeaseIsBreakingAndCannotBeAcquired): another id holds it.
      if (isRestError(err) && err.statusCode === 409) return false;
      throw err;
    }
  }

  private async ensureBlob(signal: AbortSignal): Promise<void> {
    await this.container.createIfNotExists({ abortSignal: signal });
    try {
      await this.blob.upload('', 0, { conditions: { ifNoneMatch: '*' }, abortSignal: signal });
    } catch (err) {
      // Another instance created it first (409 BlobAlreadyExists, or 412 when it is already leased): that is success.
      if (!isRestError(err) || (err.statusCode !== 409 && err.statusCode !== 412)) throw err;
    }
  }
}

function asLeaseLost(err: unknown): unknown {
  if (isRestError(err) && (err.statusCode === 409 || err.statusCode === 412 || err.statusCode === 404)) {
    return new LeaseLostError(err.code ?? String(err.statusCode), { cause: err });
  }
  return err;
}
