/**
 * Which errors mean "storage could not be reached" (refused, reset, timed out, DNS, the service
 * answering 5xx), as opposed to a bug or a refusal about the request itself. An HTTP route answers
 * those with 503 SERVICE_UNAVAILABLE, which a client may retry, instead of 500.
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'REQUEST_SEND_ERROR',
]);

export function isStorageUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === 'AbortError' || err.name === 'TimeoutError') return true;
  const { code, statusCode } = err as { code?: unknown; statusCode?: unknown };
  if (err.name === 'RestError') {
    if (typeof code === 'string' && NETWORK_CODES.has(code)) return true;
    return statusCode === undefined || (typeof statusCode === 'number' && statusCode >= 500);
  }
  return typeof code === 'string' && NETWORK_CODES.has(code);
}
