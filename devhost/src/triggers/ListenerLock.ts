/**
 * The host's listener lock (WebJobs SingletonListener with BlobLeaseDistributedLockManager): a blob
 * lease on `azure-webjobs-hosts/locks/{hostId}/{lockId}` that lets exactly one host process per
 * host id run a listener (the timer trigger's). The holder renews at half the lease period; others
 * retry every `listenerLockRecoveryPollingInterval`. The holder's id is written to the blob's
 * `FunctionInstance` metadata, as the host does.
 *
 * Guarantees: at most one holder per lock blob while leases are honored by storage. Not
 * guaranteed: a holder that stops renewing (paused, partitioned) learns it lost the lock only at its
 * next renewal; `onLost` is then called, and until then two listeners may overlap for at most one
 * renewal interval.
 */
import { randomUUID } from 'node:crypto';

import { type BlobServiceClient, type BlockBlobClient, isRestError } from '@azure/storage-blob';

import { type Logger } from '../log';

export const HOSTS_CONTAINER = 'azure-webjobs-hosts';

export interface ListenerLockOptions {
  readonly service: BlobServiceClient;
  readonly hostId: string;
  /** e.g. `Host.Functions.tick.Listener`. */
  readonly lockId: string;
  /** This host process's id, written as the holder. */
  readonly ownerId: string;
  readonly leasePeriodMs: number;
  readonly logger: Logger;
  /** Called when a renewal finds the lease gone; the listener must stop. */
  readonly onLost: () => void;
}

export class ListenerLock {
  readonly #blob: BlockBlobClient;
  readonly #leaseId = randomUUID();
  #renewTimer: NodeJS.Timeout | undefined;
  #held = false;
  #containerReady = false;

  constructor(private readonly options: ListenerLockOptions) {
    this.#blob = options.service.getContainerClient(HOSTS_CONTAINER).getBlockBlobClient(`locks/${options.hostId}/${options.lockId}`);
  }

  get held(): boolean {
    return this.#held;
  }

  get blobName(): string {
    return this.#blob.name;
  }

  /** One attempt; true when this process now holds the lock. */
  async tryAcquire(): Promise<boolean> {
    if (this.#held) return true;
    const seconds = Math.round(this.options.leasePeriodMs / 1000);
    try {
      await this.#blob.getBlobLeaseClient(this.#leaseId).acquireLease(seconds);
    } catch (err) {
      if (isRestError(err) && err.statusCode === 409) return false;
      if (!isRestError(err) || err.statusCode !== 404) throw err;
      await this.#createBlob();
      try {
        await this.#blob.getBlobLeaseClient(this.#leaseId).acquireLease(seconds);
      } catch (retryErr) {
        if (isRestError(retryErr) && retryErr.statusCode === 409) return false;
        throw retryErr;
      }
    }
    this.#held = true;
    try {
      await this.#blob.setMetadata({ FunctionInstance: this.options.ownerId }, { conditions: { leaseId: this.#leaseId } });
    } catch (err) {
      this.options.logger.warn('listener_lock.metadata_failed', { lock: this.blobName, error: err });
    }
    this.#scheduleRenewal();
    return true;
  }

  /** Releases the lease if held (a graceful stop hands the listener over at once). */
  async release(): Promise<void> {
    if (this.#renewTimer !== undefined) clearTimeout(this.#renewTimer);
    this.#renewTimer = undefined;
    if (!this.#held) return;
    this.#held = false;
    try {
      await this.#blob.getBlobLeaseClient(this.#leaseId).releaseLease();
    } catch (err) {
      this.options.logger.warn('listener_lock.release_failed', { lock: this.blobName, error: err });
    }
  }

  async #createBlob(): Promise<void> {
    if (!this.#containerReady) {
      await this.options.service.getContainerClient(HOSTS_CONTAINER).createIfNotExists();
      this.#containerReady = true;
    }
    try {
      await this.#blob.upload('', 0, { conditions: { ifNoneMatch: '*' } });
    } catch (err) {
      // Another process created it (or leased it) first: fine, the acquire decides.
      if (!isRestError(err) || (err.statusCode !== 409 && err.statusCode !== 412)) throw err;
    }
  }

  #scheduleRenewal(): void {
    this.#renewTimer = setTimeout(() => {
      void this.#renew();
    }, this.options.leasePeriodMs / 2);
    this.#renewTimer.unref();
  }

  async #renew(): Promise<void> {
    if (!this.#held) return;
    try {
      await this.#blob.getBlobLeaseClient(this.#leaseId).renewLease();
      if (this.#held) this.#scheduleRenewal();
    } catch (err) {
      if (isRestError(err) && (err.statusCode === 409 || err.statusCode === 412 || err.statusCode === 404)) {
        this.#held = false;
        this.options.logger.warn('listener_lock.lost', { lock: this.blobName });
        this.options.onLost();
        return;
      }
      // A transient failure: try again sooner, the lease still has half its period.
      this.options.logger.warn('listener_lock.renew_failed', { lock: this.blobName, error: err });
      if (this.#held) {
        this.#renewTimer = setTimeout(() => void this.#renew(), Math.min(5_000, this.options.leasePeriodMs / 6));
        this.#renewTimer.unref();
      }
    }
  }
}
