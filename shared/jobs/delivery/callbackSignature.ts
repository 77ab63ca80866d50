/**
 * How a callback is signed (docs/jobs.md, "Signed callbacks", has the receiver's side):
 * `X-Coordinator-Timestamp: <unix seconds>` and
 * `X-Coordinator-Signature: sha256=<lowercase hex of HMAC-SHA256(secret, timestamp + "." + body)>`,
 * the body being the exact bytes of the POST (the outcome's JSON, UTF-8).
 */
import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Coordinator-Signature';
export const TIMESTAMP_HEADER = 'X-Coordinator-Timestamp';
export const JOB_ID_HEADER = 'X-Coordinator-Job-Id';

export function signCallback(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`, 'utf8').digest('hex')}`;
}
