/**
 * Storage clients built from a validated `StorageConnection`: a connection string (Azurite's
 * `UseDevelopmentStorage=true` included) or identity-based service URIs with
 * DefaultAzureCredential (or a user-assigned managed identity when `clientId` is set).
 * Clients are cached per connection, since they hold HTTP agents. The table client (the job
 * index) comes from the same connection: its `TableEndpoint` (or `__tableServiceUri`), else the
 * blob endpoint with `.blob.` read as `.table.`, as the identity settings derive it.
 * Every request of these clients is counted (requestCounter.ts: the app's storage requests per minute).
 */
import { type TokenCredential } from '@azure/core-auth';
import { TableClient, type TableServiceClientOptions } from '@azure/data-tables';
import { DefaultAzureCredential, ManagedIdentityCredential } from '@azure/identity';
import { BlobServiceClient, newPipeline as newBlobPipeline, type StoragePipelineOptions } from '@azure/storage-blob';
import {
  newPipeline as newQueuePipeline,
  QueueServiceClient,
  type StoragePipelineOptions as QueuePipelineOptions,
} from '@azure/storage-queue';

import { ConfigError } from '../config/ConfigError';
import { type StorageConnection } from '../config/settings';
import { countingHttpClient, countingPolicyFactory } from './requestCounter';

/**
 * The SDK's default retries (4 tries, exponential back-off) keep an HTTP caller waiting about 16 s
 * when storage refuses connections; three quick tries answer within about 2 s, and the callers that
 * need more patience (queue triggers, Durable activities) are retried by their hosts anyway.
 */
export const APP_RETRY_OPTIONS = { maxTries: 3, retryDelayInMs: 250, maxRetryDelayInMs: 1_000 } as const;

const blobClients = new Map<string, BlobServiceClient>();
const queueClients = new Map<string, QueueServiceClient>();
let credential: TokenCredential | undefined;

function cacheKey(conn: StorageConnection): string {
  return conn.kind === 'connectionString'
    ? `cs:${conn.connectionString}`
    : `id:${conn.blobServiceUri}|${conn.queueServiceUri}|${conn.clientId ?? ''}`;
}

/** The credential for identity-based connections; one per process. */
export function credentialFor(conn: Extract<StorageConnection, { kind: 'identity' }>): TokenCredential {
  if (credential === undefined) {
    credential =
      conn.credential === 'managedidentity'
        ? new ManagedIdentityCredential(conn.clientId === undefined ? {} : { clientId: conn.clientId })
        : new DefaultAzureCredential(conn.clientId === undefined ? {} : { managedIdentityClientId: conn.clientId });
  }
  return credential;
}

export function blobServiceClient(conn: StorageConnection, options?: StoragePipelineOptions): BlobServiceClient {
  if (options !== undefined) return createBlobServiceClient(conn, options);
  return cached(blobClients, conn, () => createBlobServiceClient(conn));
}

export function queueServiceClient(conn: StorageConnection, options?: QueuePipelineOptions): QueueServiceClient {
  if (options !== undefined) return createQueueServiceClient(conn, options);
  return cached(queueClients, conn, () => createQueueServiceClient(conn));
}

/** The SDK's own retries for tables, as quick as the blob and queue clients' (APP_RETRY_OPTIONS). */
const TABLE_RETRY_OPTIONS = { maxRetries: 2, retryDelayInMs: 250, maxRetryDelayInMs: 1_000 } as const;

/** A client of one table of the app's storage (not cached: it is built once per process by the job components). */
export function tableClient(conn: StorageConnection, tableName: string): TableClient {
  const options: TableServiceClientOptions = { retryOptions: TABLE_RETRY_OPTIONS, httpClient: countingHttpClient('table') };
  return namingTheSetting(conn, () => {
    if (conn.kind === 'identity') {
      const insecure = conn.tableServiceUri.startsWith('http:');
      return new TableClient(conn.tableServiceUri, tableName, credentialFor(conn), { ...options, allowInsecureConnection: insecure });
    }
    const connectionString = withTableEndpoint(conn.connectionString);
    // Azurite (and any other http endpoint, e.g. a test proxy) is plain http; the SDK refuses that unless told.
    const insecure = /(^|;)\s*(TableEndpoint\s*=\s*http:|DefaultEndpointsProtocol\s*=\s*http(;|$))/i.test(connectionString);
    const clientOptions = insecure ? { ...options, allowInsecureConnection: true } : options;
    return TableClient.fromConnectionString(connectionString, tableName, clientOptions);
  });
}

/** A connection string with a BlobEndpoint but no TableEndpoint: the table endpoint beside it. */
function withTableEndpoint(connectionString: string): string {
  if (/(^|;)\s*TableEndpoint\s*=/i.test(connectionString)) return connectionString;
  const blob = /(?:^|;)\s*BlobEndpoint\s*=\s*([^;]+)/i.exec(connectionString)?.[1];
  if (blob === undefined || !blob.includes('.blob.')) return connectionString;
  return `${connectionString.replace(/;?\s*$/, '')};TableEndpoint=${blob.replace('.blob.', '.table.')}`;
}

/** One client per connection and process (clients with their own options are not shared). */
function cached<C>(clients: Map<string, C>, conn: StorageConnection, create: () => C): C {
  const key = cacheKey(conn);
  let client = clients.get(key);
  if (client === undefined) {
    client = create();
    clients.set(key, client);
  }
  return client;
}

function createBlobServiceClient(
  conn: StorageConnection,
  options: StoragePipelineOptions = { retryOptions: APP_RETRY_OPTIONS },
): BlobServiceClient {
  return namingTheSetting(conn, () => {
    const plain =
      conn.kind === 'connectionString'
        ? BlobServiceClient.fromConnectionString(conn.connectionString, options)
        : new BlobServiceClient(conn.blobServiceUri, credentialFor(conn), options);
    // The same client with every request counted (the app's storage requests per minute).
    const pipeline = newBlobPipeline(plain.credential, options);
    pipeline.factories.push(countingPolicyFactory('blob'));
    return new BlobServiceClient(plain.url, pipeline);
  });
}

function createQueueServiceClient(
  conn: StorageConnection,
  options: QueuePipelineOptions = { retryOptions: APP_RETRY_OPTIONS },
): QueueServiceClient {
  return namingTheSetting(conn, () => {
    const plain =
      conn.kind === 'connectionString'
        ? QueueServiceClient.fromConnectionString(conn.connectionString, options)
        : new QueueServiceClient(conn.queueServiceUri, credentialFor(conn), options);
    // The queue client keeps its credential protected (the blob client's is public); bracket access reads the same field.
    const pipeline = newQueuePipeline(plain['credential'], options);
    pipeline.factories.push(countingPolicyFactory('queue'));
    return new QueueServiceClient(plain.url, pipeline);
  });
}

/** The SDK says only "Invalid BlobEndpoint": say which setting holds it (never its value: it may hold a key). */
function namingTheSetting<T>(conn: StorageConnection, create: () => T): T {
  try {
    return create();
  } catch (err) {
    const detail = err instanceof Error ? err.message.replace(/\s+/g, ' ').slice(0, 120) : String(err);
    throw new ConfigError(conn.settingName, `is not a usable storage connection (${detail}).`);
  }
}
