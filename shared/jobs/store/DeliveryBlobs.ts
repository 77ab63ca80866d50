/**
 * A job's outcome delivery in the results container (delivery/OutcomeDelivery.ts decides what is
 * sent): `jobs/<jobId>/delivery.json`, what was sent where and the callback's retries, and
 * `deliveries-due/<jobId>`, an empty mark for a delivery not done yet, which the leader's pass
 * lists and retries (one listing per 5,000).
 */
import { isValidJobId } from '../jobIds';
import { checkJobId, type JsonDocuments } from './BlobDocuments';

const DELIVERY_DUE_PREFIX = 'deliveries-due/';

export class DeliveryBlobs {
  constructor(private readonly docs: JsonDocuments) {}

  static recordBlob(jobId: string): string {
    return `jobs/${checkJobId(jobId)}/delivery.json`;
  }
  static dueBlob(jobId: string): string {
    return `${DELIVERY_DUE_PREFIX}${checkJobId(jobId)}`;
  }

  async readDelivery<T>(jobId: string, signal?: AbortSignal): Promise<T | undefined> {
    return this.docs.get<T>(DeliveryBlobs.recordBlob(jobId), signal);
  }

  async writeDelivery(jobId: string, value: unknown, signal?: AbortSignal): Promise<void> {
    await this.docs.put(DeliveryBlobs.recordBlob(jobId), value, { signal });
  }

  /** Puts the job on the list of deliveries the leader's pass retries (a callback not delivered yet). */
  async markDeliveryDue(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.put(DeliveryBlobs.dueBlob(jobId), {}, { signal });
  }

  async clearDeliveryDue(jobId: string, signal?: AbortSignal): Promise<void> {
    await this.docs.delete(DeliveryBlobs.dueBlob(jobId), signal);
  }

  /** Every job with a delivery still due (one listing per 5,000). */
  async listDeliveriesDue(signal?: AbortSignal): Promise<string[]> {
    const out: string[] = [];
    for await (const blob of this.docs.list(DELIVERY_DUE_PREFIX, false, signal)) {
      const jobId = blob.name.slice(DELIVERY_DUE_PREFIX.length);
      if (isValidJobId(jobId)) out.push(jobId);
    }
    return out;
  }
}
