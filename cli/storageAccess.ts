/**
 * How the command line reaches the app's storage itself (an items upload, a reply queue): the app
 * names the endpoint, never a credential; this side signs in on its own. Azurite's development
 * account (name and key published by Microsoft, the same everywhere) on this machine; anywhere else
 * `DefaultAzureCredential` (`az login`, environment variables, a managed identity).
 */
import { type TokenCredential } from '@azure/core-auth';
import { type StorageSharedKeyCredential as BlobSharedKey } from '@azure/storage-blob';

const AZURITE_ACCOUNT = 'devstoreaccount1';
const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

/** True for Azurite's account on this machine (the only place a key is used). */
export function isLocalAzurite(serviceUrl: string): boolean {
  const url = new URL(serviceUrl);
  return ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname) && url.pathname.replace(/^\/+/, '').split('/')[0] === AZURITE_ACCOUNT;
}

/** The credential for a blob or queue service URL the app gave (each package's own shared-key class on Azurite). */
export async function storageCredential(
  serviceUrl: string,
  service: 'blob' | 'queue',
): Promise<BlobSharedKey | TokenCredential> {
  // The queue package's StorageSharedKeyCredential has the same shape; the object made is the right package's.
  if (!isLocalAzurite(serviceUrl)) return new (await import('@azure/identity')).DefaultAzureCredential();
  const { StorageSharedKeyCredential } = service === 'blob' ? await import('@azure/storage-blob') : await import('@azure/storage-queue');
  return new StorageSharedKeyCredential(AZURITE_ACCOUNT, AZURITE_KEY);
}
