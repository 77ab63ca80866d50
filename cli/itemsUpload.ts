/**
 * `coordinator submit` above the inline limit: the items go to a blob in the app's first job input
 * container and the job names it (`itemsBlob`). The app says where (GET /api/job-inputs: its blob
 * endpoint and JOB_INPUT_CONTAINERS, never a credential); this command writes with its own
 * identity: on Azurite the public development account's key, elsewhere `DefaultAzureCredential`
 * (`az login`, environment variables, a managed identity). On Azure that identity needs Storage Blob
 * Data Contributor on the account, which the deployment grants to `deployerPrincipalId`.
 */
import { randomBytes } from 'node:crypto';

import { type BlobServiceClient } from '@azure/storage-blob';

import { CliError, type CoordinatorClient, EXIT } from './CoordinatorClient';
import { isLocalAzurite, storageCredential } from './storageAccess';

/** What GET /api/job-inputs answers (schemas/openapi.json JobInputs). */
export interface InputTarget {
  readonly blobServiceUrl: string;
  readonly containers: readonly string[];
  readonly maxBytes: number;
  readonly inlineMaxBytes: number;
}

/** The container to upload to: the first exact name, else the first prefix (`inputs-*`) made whole with `cli`. */
export function uploadContainer(containers: readonly string[]): string {
  const exact = containers.find((c) => !c.endsWith('*'));
  if (exact !== undefined) return exact;
  const prefix = containers[0];
  if (prefix === undefined) throw new CliError(EXIT.refused, 'The app allows no job input container (JOB_INPUT_CONTAINERS is empty): items above the inline limit cannot be submitted.');
  return `${prefix.slice(0, -1)}cli`;
}

const BLOCK_BYTES = 4 * 1024 * 1024;

/** `cli/<UTC date>/<job id or random>.json`: names that sort by day and never collide across submitters. */
export function uploadBlobName(jobId: string | undefined, now: Date = new Date()): string {
  return `cli/${now.toISOString().slice(0, 10)}/${jobId ?? `items-${randomBytes(6).toString('hex')}`}-${now.getTime().toString(36)}.json`;
}

async function serviceClient(blobServiceUrl: string): Promise<BlobServiceClient> {
  const blob = await import('@azure/storage-blob');
  return new blob.BlobServiceClient(blobServiceUrl, await storageCredential(blobServiceUrl, 'blob'));
}

function megabytes(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(1);
}

/** `[##########----------] 3.1/7.9 MB`: upload progress on one line. */
export function uploadLine(done: number, total: number, width = 20): string {
  const cells = total === 0 ? width : Math.floor((done / total) * width);
  return `[${'#'.repeat(cells)}${'-'.repeat(width - cells)}] ${megabytes(done)}/${megabytes(total)} MB`;
}

function uploadFailure(err: unknown, where: string, local: boolean): CliError {
  const status = (err as { statusCode?: number }).statusCode;
  const name = (err as { name?: string }).name ?? '';
  if (name === 'CredentialUnavailableError' || name === 'AggregateAuthenticationError' || name === 'AuthenticationRequiredError') {
    return new CliError(EXIT.unauthorized, `Cannot upload the items to ${where}: no Azure sign-in found. Run \`az login\` (or set AZURE_CLIENT_ID/AZURE_TENANT_ID/AZURE_CLIENT_SECRET).`, 'NO_CREDENTIAL');
  }
  if (status === 401 || status === 403) {
    return new CliError(
      EXIT.unauthorized,
      `Cannot upload the items to ${where} (${status}): your identity needs Storage Blob Data Contributor on the app's storage account ` +
        '(azd provision grants it to deployerPrincipalId; see docs/deploy.md).',
      'UPLOAD_FORBIDDEN',
    );
  }
  const cause = err instanceof Error ? err.message.split('\n')[0] : String(err);
  return new CliError(EXIT.unavailable, `Cannot upload the items to ${where}: ${cause}${local ? ' Is Azurite running (npm start starts it)?' : ''}`, 'UPLOAD_FAILED');
}

export interface UploadIo {
  readonly stderr: { write(text: string): unknown; isTTY?: boolean };
}

/** Uploads `items` as a JSON array; returns the `itemsBlob` reference (`<container>/<blob>`). */
export async function uploadItems(client: CoordinatorClient, items: readonly unknown[], jobId: string | undefined, io: UploadIo): Promise<string> {
  const target = await client.request<InputTarget>('GET', '/job-inputs');
  const body = Buffer.from(JSON.stringify(items), 'utf8');
  if (body.length > target.maxBytes) {
    throw new CliError(
      EXIT.usage,
      `The items are ${megabytes(body.length)} MB as JSON; a job's items blob holds at most ${megabytes(target.maxBytes)} MB. Split them into several jobs.`,
      'ITEMS_BLOB_TOO_LARGE',
    );
  }
  const container = uploadContainer(target.containers);
  const name = uploadBlobName(jobId);
  const where = `${container}/${name}`;
  const local = isLocalAzurite(target.blobServiceUrl);
  const tty = io.stderr.isTTY === true;
  io.stderr.write(`uploading ${items.length} items (${megabytes(body.length)} MB) to ${where}\n`);
  let lastTenth = -1;
  try {
    const containerClient = (await serviceClient(target.blobServiceUrl)).getContainerClient(container);
    // Created where it is missing (Azurite); on Azure the deployment created it and a 403 here is fine.
    await containerClient.createIfNotExists().catch((err: unknown) => {
      const status = (err as { statusCode?: number }).statusCode;
      if (status !== 403 && status !== 409) throw err;
    });
    await containerClient.getBlockBlobClient(name).uploadData(body, {
      blockSize: BLOCK_BYTES,
      concurrency: 4,
      blobHTTPHeaders: { blobContentType: 'application/json' },
      onProgress: ({ loadedBytes }) => {
        if (tty) io.stderr.write(`\r${uploadLine(loadedBytes, body.length)}\x1b[K`);
        else if (Math.floor((loadedBytes / body.length) * 10) > lastTenth) {
          lastTenth = Math.floor((loadedBytes / body.length) * 10);
          io.stderr.write(`${uploadLine(loadedBytes, body.length)}\n`);
        }
      },
    });
  } catch (err) {
    if (tty) io.stderr.write('\n');
    throw uploadFailure(err, where, local);
  }
  if (tty) io.stderr.write(`\r${uploadLine(body.length, body.length)}\x1b[K\n`);
  return where;
}
