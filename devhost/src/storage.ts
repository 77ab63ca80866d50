/**
 * Storage connections as the Functions host reads them for its own needs (the listener locks, the
 * Durable task hub) and for storage bindings' `connection` property: app setting `<name>` holding a
 * connection string (`UseDevelopmentStorage=true` for Azurite), or identity-based settings
 * `<name>__accountName`, `<name>__blobServiceUri` / `<name>__serviceUri`, `<name>__queueServiceUri`,
 * `<name>__credential` (`managedidentity`) and `<name>__clientId`, used with DefaultAzureCredential.
 *
 * Guarantees: a setting that is missing or malformed fails with `DEVHOST_BAD_CONNECTION` naming the
 * setting and never echoing its value (it may hold an account key). Clients are cached per
 * connection (they hold HTTP agents).
 */
import { type TokenCredential } from '@azure/core-auth';
import { DefaultAzureCredential, ManagedIdentityCredential } from '@azure/identity';
import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';

import { DevHostError } from './errors';

export type Env = Readonly<Record<string, string | undefined>>;

export type StorageConnection =
  | {
      readonly kind: 'connectionString';
      /** The setting the value came from (never the value itself). */
      readonly settingName: string;
      readonly connectionString: string;
    }
  | {
      readonly kind: 'identity';
      readonly settingName: string;
      readonly blobServiceUri: string;
      readonly queueServiceUri: string;
      /** `managedidentity` when set; otherwise DefaultAzureCredential's chain. */
      readonly credential?: string;
      /** Client id of a user-assigned managed identity. */
      readonly clientId?: string;
    };

/** The host's own storage connection (listener locks, Durable state, bindings without `connection`). */
export const DEFAULT_CONNECTION = 'AzureWebJobsStorage';

function bad(setting: string, why: string): DevHostError {
  return new DevHostError('DEVHOST_BAD_CONNECTION', `App setting ${setting} ${why}`, true);
}

function raw(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}

/** Reads the connection named `name` (a binding's `connection`, or AzureWebJobsStorage). */
export function readStorageConnection(env: Env, name: string): StorageConnection {
  const connectionString = raw(env, name);
  if (connectionString !== undefined) {
    if (connectionString !== 'UseDevelopmentStorage=true' && !/(^|;)\s*(AccountName|BlobEndpoint|QueueEndpoint)\s*=/i.test(connectionString)) {
      throw bad(name, 'is not a storage connection string (expected AccountName=... or BlobEndpoint=..., or UseDevelopmentStorage=true).');
    }
    const connection = { kind: 'connectionString', settingName: name, connectionString } as const;
    // The SDK parses the string only when a client is made: do it now, so a typo fails here with the setting's name.
    try {
      blobServiceClient(connection);
      queueServiceClient(connection);
    } catch (err) {
      throw bad(name, `is not a usable storage connection string: ${err instanceof Error ? err.message.split('\n')[0] : 'unparseable'}.`);
    }
    return connection;
  }
  const accountName = raw(env, `${name}__accountName`);
  if (accountName !== undefined && !/^[a-z0-9]{3,24}$/.test(accountName)) {
    throw bad(`${name}__accountName`, 'is not a storage account name (3-24 lowercase letters and digits).');
  }
  const fromAccount = (service: string): string | undefined => (accountName === undefined ? undefined : `https://${accountName}.${service}.core.windows.net`);
  const blobServiceUri = raw(env, `${name}__blobServiceUri`) ?? raw(env, `${name}__serviceUri`) ?? fromAccount('blob');
  const queueServiceUri = raw(env, `${name}__queueServiceUri`) ?? fromAccount('queue');
  if (blobServiceUri === undefined && queueServiceUri === undefined) {
    throw bad(name, `is not set: give a connection string (UseDevelopmentStorage=true for Azurite) or identity-based settings ${name}__accountName (or ${name}__blobServiceUri and ${name}__queueServiceUri).`);
  }
  if (blobServiceUri === undefined) throw bad(`${name}__blobServiceUri`, `is missing (or set ${name}__accountName).`);
  if (queueServiceUri === undefined) throw bad(`${name}__queueServiceUri`, `is missing (or set ${name}__accountName).`);
  for (const [suffix, uri] of [
    ['blobServiceUri', blobServiceUri],
    ['queueServiceUri', queueServiceUri],
  ] as const) {
    if (!isHttpUrl(uri)) throw bad(`${name}__${suffix}`, 'is not an http(s) URL.');
  }
  const credential = raw(env, `${name}__credential`);
  if (credential !== undefined && credential.toLowerCase() !== 'managedidentity') {
    throw bad(`${name}__credential`, 'is not supported: use "managedidentity" or leave it unset for DefaultAzureCredential.');
  }
  const clientId = raw(env, `${name}__clientId`);
  return {
    kind: 'identity',
    settingName: name,
    blobServiceUri,
    queueServiceUri,
    ...(credential === undefined ? {} : { credential: credential.toLowerCase() }),
    ...(clientId === undefined ? {} : { clientId }),
  };
}

const blobClients = new Map<string, BlobServiceClient>();
const queueClients = new Map<string, QueueServiceClient>();
const credentials = new Map<string, TokenCredential>();

function cacheKey(conn: StorageConnection): string {
  return conn.kind === 'connectionString' ? `cs:${conn.connectionString}` : `id:${conn.blobServiceUri}|${conn.queueServiceUri}|${conn.credential ?? ''}|${conn.clientId ?? ''}`;
}

function credentialFor(conn: Extract<StorageConnection, { kind: 'identity' }>): TokenCredential {
  const key = `${conn.credential ?? ''}|${conn.clientId ?? ''}`;
  let credential = credentials.get(key);
  if (credential === undefined) {
    credential =
      conn.credential === 'managedidentity'
        ? new ManagedIdentityCredential(conn.clientId === undefined ? {} : { clientId: conn.clientId })
        : new DefaultAzureCredential(conn.clientId === undefined ? {} : { managedIdentityClientId: conn.clientId });
    credentials.set(key, credential);
  }
  return credential;
}

export function blobServiceClient(conn: StorageConnection): BlobServiceClient {
  const key = cacheKey(conn);
  let client = blobClients.get(key);
  if (client === undefined) {
    client = conn.kind === 'connectionString' ? BlobServiceClient.fromConnectionString(conn.connectionString) : new BlobServiceClient(conn.blobServiceUri, credentialFor(conn));
    blobClients.set(key, client);
  }
  return client;
}

export function queueServiceClient(conn: StorageConnection): QueueServiceClient {
  const key = cacheKey(conn);
  let client = queueClients.get(key);
  if (client === undefined) {
    client = conn.kind === 'connectionString' ? QueueServiceClient.fromConnectionString(conn.connectionString) : new QueueServiceClient(conn.queueServiceUri, credentialFor(conn));
    queueClients.set(key, client);
  }
  return client;
}
