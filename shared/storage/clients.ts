/**
 * Storage clients built from a validated `StorageConnection`: a connection string (Azurite's
 * `UseDevelopmentStorage=true` included) or identity-based service URIs with
 * DefaultAzureCredential (or a user-assigned managed identity when `clientId` is set).
 * Clients are cached per connection, since they hold HTTP agents.
 */
import { type TokenCredential } from '@azure/core-auth';
import { DefaultAzureCredential, ManagedIdentityCredential } from '@azure/identity';
import { BlobServiceClient, type StoragePipelineOptions } from '@azure/storage-blob';
import { QueueServiceClient, type StoragePipelineOptions as QueuePipelineOptions } from '@azure/storage-queue';

import { type StorageConnection } from '../config/settings';

const blobClients = new Map<string, BlobServiceClient>();
const queueClients = new Map<string, QueueServiceClient>();
let credential: TokenCredential | undefined;

function cacheKey(conn: StorageConnection): string {
  return conn.kind === 'connectionString' ? `cs:${conn.connectionString}` : `id:${conn.blobServiceUri}|${conn.queueServiceUri}|${conn.clientId ?? ''}`;
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
  const key = cacheKey(conn);
  let client = blobClients.get(key);
  if (client === undefined) {
    client = createBlobServiceClient(conn);
    blobClients.set(key, client);
  }
  return client;
}

export function queueServiceClient(conn: StorageConnection, options?: QueuePipelineOptions): QueueServiceClient {
  if (options !== undefined) return createQueueServiceClient(conn, options);
  const key = cacheKey(conn);
  let client = queueClients.get(key);
  if (client === undefined) {
    client = createQueueServiceClient(conn);
    queueClients.set(key, client);
  }
  return client;
}

function createBlobServiceClient(conn: StorageConnection, options?: StoragePipelineOptions): BlobServiceClient {
  return conn.kind === 'connectionString'
    ? BlobServiceClient.fromConnectionString(conn.connectionString, options)
    : new BlobServiceClient(conn.blobServiceUri, credentialFor(conn), options);
}

function createQueueServiceClient(conn: StorageConnection, options?: QueuePipelineOptions): QueueServiceClient {
  return conn.kind === 'connectionString'
    ? QueueServiceClient.fromConnectionString(conn.connectionString, options)
    : new QueueServiceClient(conn.queueServiceUri, credentialFor(conn), options);
}
