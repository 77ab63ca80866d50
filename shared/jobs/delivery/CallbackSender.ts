/**
 * One signed callback POST. Before it connects, the host's addresses are resolved and every one is
 * checked (DeliveryTargets.refusedAddress): a name that resolves to a private, loopback or
 * link-local address is refused (`CALLBACK_ADDRESS_REFUSED`), and the connection goes to the very
 * address that was checked (no second lookup a rebinding DNS could answer differently). Redirects
 * are not followed. A 2xx answer is a delivery; anything else is a failure the caller retries.
 */
import { lookup } from 'node:dns/promises';
import { request as httpRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP, type LookupFunction } from 'node:net';

import { type JobErrorInfo } from '../JobError';
import { JOB_ID_HEADER, SIGNATURE_HEADER, signCallback, TIMESTAMP_HEADER } from './callbackSignature';
import { refusedAddress } from './DeliveryTargets';

export interface CallbackRequest {
  readonly url: string;
  readonly jobId: string;
  readonly body: string;
}

export type CallbackResult =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly error: JobErrorInfo; readonly permanent: boolean };

export type SendCallback = (request: CallbackRequest) => Promise<CallbackResult>;

const CALLBACK_TIMEOUT_MS = 10_000;

export interface CallbackSenderOptions {
  readonly secret: string;
  readonly allowLoopback: boolean;
  readonly now?: () => number;
}

function failure(error: JobErrorInfo, permanent = false): CallbackResult {
  return { ok: false, permanent, error };
}

export function callbackSender(options: CallbackSenderOptions): SendCallback {
  return async ({ url, jobId, body }) => {
    const target = new URL(url);
    const host = target.hostname.replace(/^\[|\]$/g, '');
    let address: { address: string; family: number };
    try {
      const all = isIP(host) !== 0 ? [{ address: host, family: isIP(host) }] : await lookup(host, { all: true, verbatim: true });
      const refused = all.map((a) => refusedAddress(a.address, options.allowLoopback)).find((why) => why !== undefined);
      if (refused !== undefined) {
        return failure({ code: 'CALLBACK_ADDRESS_REFUSED', message: `${host} resolves to a ${refused} address.` });
      }
      const first = all[0];
      if (first === undefined) throw new Error(`${host} has no address`);
      address = first;
    } catch (err) {
      return failure({ code: 'CALLBACK_UNREACHABLE', message: `${host}: ${(err as Error).message}` });
    }
    const timestamp = Math.floor((options.now?.() ?? Date.now()) / 1000);
    const pinned: LookupFunction = (_hostname, opts, callback) => {
      if ((opts as { all?: boolean }).all === true) callback(null, [{ address: address.address, family: address.family }]);
      else callback(null, address.address, address.family);
    };
    const requestOptions: RequestOptions = {
      method: 'POST',
      lookup: pinned,
      timeout: CALLBACK_TIMEOUT_MS,
      headers: {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(body, 'utf8'),
        [TIMESTAMP_HEADER]: String(timestamp),
        [SIGNATURE_HEADER]: signCallback(options.secret, timestamp, body),
        [JOB_ID_HEADER]: jobId,
        'User-Agent': 'leader-coordinator-callback/1',
      },
    };
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    return new Promise<CallbackResult>((resolve) => {
      const req = send(target, requestOptions, (res) => {
        res.resume();
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) resolve({ ok: true, status });
          // 410 Gone: the receiver says this callback will never be wanted.
          else resolve(failure({ code: 'CALLBACK_HTTP_ERROR', message: `${host} answered ${status}.` }, status === 410));
        });
      });
      req.on('timeout', () => req.destroy(new Error(`no answer within ${CALLBACK_TIMEOUT_MS / 1000} s`)));
      req.on('error', (err) => resolve(failure({ code: 'CALLBACK_UNREACHABLE', message: `${host}: ${err.message}` })));
      req.end(body);
    });
  };
}
