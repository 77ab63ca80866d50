/**
 * The app's own storage requests per minute, by service, for GET /api/cluster and the live page:
 * every request the app's blob, queue and table clients send (retries included: each is a
 * transaction) goes through a counting HTTP client (shared/storage/clients.ts). The Functions
 * host's own polling (Durable's queues, the queue trigger, the timer lock) goes through the host's
 * clients, which the app cannot see: docs/deploy.md ("What an idle instance costs") counts those.
 */
import { createDefaultHttpClient, type HttpClient, type PipelineRequest, type PipelineResponse } from '@azure/core-rest-pipeline';
import { type RequestPolicy, type RequestPolicyFactory } from '@azure/storage-blob';

export type StorageService = 'blob' | 'queue' | 'table';

export interface StorageRequestRate {
  /** Requests in the last `windowSeconds` (60, or the process's age when younger), all services. */
  readonly perMinute: number;
  readonly blob: number;
  readonly queue: number;
  readonly table: number;
  readonly windowSeconds: number;
  /** What is counted: the app's own requests, not the host's. */
  readonly scope: 'app';
}

const WINDOW_SECONDS = 60;

/** Counts per second over the last minute, in a ring of 60 one-second buckets. */
export class StorageRequestCounter {
  readonly #buckets = Array.from({ length: WINDOW_SECONDS }, () => ({ second: -1, blob: 0, queue: 0, table: 0 }));
  readonly #startedAt: number;

  constructor(private readonly clock: () => number = Date.now) {
    this.#startedAt = clock();
  }

  record(service: StorageService): void {
    const second = Math.floor(this.clock() / 1000);
    const bucket = this.#buckets[second % WINDOW_SECONDS] as { second: number; blob: number; queue: number; table: number };
    if (bucket.second !== second) {
      bucket.second = second;
      bucket.blob = 0;
      bucket.queue = 0;
      bucket.table = 0;
    }
    bucket[service] += 1;
  }

  lastMinute(): StorageRequestRate {
    const now = this.clock();
    const second = Math.floor(now / 1000);
    const sums = { blob: 0, queue: 0, table: 0 };
    for (const bucket of this.#buckets) {
      if (bucket.second > second - WINDOW_SECONDS && bucket.second <= second) {
        sums.blob += bucket.blob;
        sums.queue += bucket.queue;
        sums.table += bucket.table;
      }
    }
    const windowSeconds = Math.max(1, Math.min(WINDOW_SECONDS, Math.ceil((now - this.#startedAt) / 1000)));
    return { perMinute: sums.blob + sums.queue + sums.table, ...sums, windowSeconds, scope: 'app' };
  }
}

/** This process's count (the app's clients all report here). */
export const appStorageRequests = new StorageRequestCounter();

/** An HTTP client that counts each request it sends, then sends it as the SDK's default would. */
export function countingHttpClient(service: StorageService, counter: StorageRequestCounter = appStorageRequests): HttpClient {
  const inner = createDefaultHttpClient();
  return {
    sendRequest(request: PipelineRequest): Promise<PipelineResponse> {
      counter.record(service);
      return inner.sendRequest(request);
    },
  };
}

/**
 * The same count for the blob and queue clients, whose pipelines take request policy factories:
 * added last, next to the transport, so each try of a retried request counts.
 */
export function countingPolicyFactory(service: StorageService, counter: StorageRequestCounter = appStorageRequests): RequestPolicyFactory {
  return {
    create(nextPolicy: RequestPolicy): RequestPolicy {
      return {
        sendRequest(request) {
          counter.record(service);
          return nextPolicy.sendRequest(request);
        },
      };
    },
  };
}
