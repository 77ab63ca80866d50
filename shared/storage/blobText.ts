/**
 * A whole blob's bytes in one request. The SDK's `downloadToBuffer()` without a length first asks
 * for the blob's properties and then downloads: two transactions for every small JSON read, and the
 * job pipeline reads several per job (jobs-scale --breakdown: a HEAD beside nearly every GET).
 * `download(0)` answers the body and its etag at once.
 */
import { type BlobClient } from '@azure/storage-blob';

/** The blob's bytes and etag, in one request; a 404 throws as the SDK does (callers map it). */
export async function downloadWhole(blob: BlobClient, signal?: AbortSignal): Promise<{ readonly body: Buffer; readonly etag: string }> {
  const response = await blob.download(0, undefined, { abortSignal: signal });
  const chunks: Buffer[] = [];
  for await (const chunk of response.readableStreamBody ?? []) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk));
  return { body: Buffer.concat(chunks), etag: response.etag ?? '' };
}
