/**
 * Where a job's outcome may go, checked at submission (HTTP and queue alike): `replyTo`, a queue on
 * the allow-list `JOB_REPLY_QUEUES` (names or `prefix-*`; the app's own queues never), and
 * `callbackUrl`, an `https` URL (plain `http` too off Azure) whose host is on `JOB_CALLBACK_HOSTS`
 * (exact names or `*.suffix`; empty: every callback is refused). Deny by default: anything not on a
 * list is refused with a stable code (`INVALID_REPLY_TO`, `INVALID_CALLBACK_URL`).
 *
 * The addresses a callback host resolves to are checked again at each delivery (CallbackSender):
 * a name on the list that resolves to a private, loopback or link-local address is refused then.
 */
import { isIP } from 'node:net';

import { allowListed, type DeliverySettings } from '../../config/settings';
import { JobError, type JobErrorInfo } from '../JobError';

/** What a submission asked for its outcome: all optional. */
export interface JobReply {
  readonly replyTo?: string;
  readonly correlationId?: string;
  readonly callbackUrl?: string;
}

export const CORRELATION_ID_MAX = 256;
export const CALLBACK_URL_MAX = 2048;

export class DeliveryTargets {
  constructor(readonly settings: DeliverySettings) {}

  replyAllowed(queue: string): boolean {
    return allowListed(this.settings.replyQueues, queue);
  }

  /** The queue a submission names, or `INVALID_REPLY_TO`. */
  checkReplyTo(value: unknown): string {
    if (typeof value !== 'string' || !/^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/.test(value)) {
      throw new JobError(
        'INVALID_REPLY_TO',
        `replyTo must be a queue name (3-63 lowercase letters, digits and single hyphens); got ${JSON.stringify(value)?.slice(0, 80)}.`,
      );
    }
    if (!this.replyAllowed(value)) {
      throw new JobError(
        'INVALID_REPLY_TO',
        `replyTo "${value}" is not a reply queue this app may write; ` +
          `allowed: ${this.settings.replyQueues.join(', ')} (setting JOB_REPLY_QUEUES).`,
      );
    }
    return value;
  }

  /** The callback URL a submission names, or `INVALID_CALLBACK_URL` (its addresses are checked at delivery). */
  checkCallbackUrl(value: unknown): string {
    const refuse = (why: string): JobError => new JobError('INVALID_CALLBACK_URL', `callbackUrl ${why}`);
    if (typeof value !== 'string' || value.length > CALLBACK_URL_MAX) {
      throw refuse(`must be a URL of at most ${CALLBACK_URL_MAX} characters.`);
    }
    if (this.settings.callbackHosts.length === 0) {
      throw refuse('is refused: this app sends no callbacks (setting JOB_CALLBACK_HOSTS is empty).');
    }
    let url: URL;
    try {
      url = new URL(value);
    } catch {
      throw refuse('is not a valid absolute URL.');
    }
    if (url.protocol !== 'https:' && !(url.protocol === 'http:' && !this.settings.httpsOnly)) {
      throw refuse(`must use https${this.settings.httpsOnly ? '' : ' (or http, off Azure)'}; got ${url.protocol.replace(':', '')}.`);
    }
    if (url.username !== '' || url.password !== '') throw refuse('must not carry credentials.');
    const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, '');
    if (!this.hostAllowed(host)) {
      throw refuse(`host "${host}" is not on the allow-list (setting JOB_CALLBACK_HOSTS).`);
    }
    if (isIP(host) !== 0 && refusedAddress(host, this.settings.allowLoopback) !== undefined) {
      throw refuse(`host "${host}" is a ${refusedAddress(host, this.settings.allowLoopback)} address.`);
    }
    return url.toString();
  }

  hostAllowed(host: string): boolean {
    return this.settings.callbackHosts.some((entry) =>
      entry.startsWith('*.') ? host.endsWith(entry.slice(1)) && host.length > entry.length - 1 : host === entry,
    );
  }
}

/**
 * The reply fields of a submission, each checked; a refusal names the first bad one. Used by the
 * validation of a submission and, for a submission refused for any reason, by the intake, which
 * sends its `rejected` outcome to a `replyTo` that is valid on its own.
 */
export function replyOf(value: Record<string, unknown>, targets: DeliveryTargets | undefined): { reply: JobReply } | { refused: JobError } {
  const refused = (code: 'INVALID_REPLY_TO' | 'INVALID_CALLBACK_URL', why: string): { refused: JobError } => ({
    refused: new JobError(code, why),
  });
  try {
    let replyTo: string | undefined;
    let callbackUrl: string | undefined;
    if ('replyTo' in value) {
      if (targets === undefined) return refused('INVALID_REPLY_TO', 'replyTo is refused: this app has no reply queues.');
      replyTo = targets.checkReplyTo(value.replyTo);
    }
    if ('callbackUrl' in value) {
      if (targets === undefined) return refused('INVALID_CALLBACK_URL', 'callbackUrl is refused: this app sends no callbacks.');
      callbackUrl = targets.checkCallbackUrl(value.callbackUrl);
    }
    const correlation = value.correlationId;
    const correlationId =
      typeof correlation === 'string' && correlation.length >= 1 && correlation.length <= CORRELATION_ID_MAX ? correlation : undefined;
    return {
      reply: {
        ...(replyTo === undefined ? {} : { replyTo }),
        ...(correlationId === undefined ? {} : { correlationId }),
        ...(callbackUrl === undefined ? {} : { callbackUrl }),
      },
    };
  } catch (err) {
    if (err instanceof JobError) return { refused: err };
    throw err;
  }
}

export function hasReply(reply: JobReply | undefined): boolean {
  return reply !== undefined && (reply.replyTo !== undefined || reply.callbackUrl !== undefined);
}

/**
 * Why an address may not receive a callback (undefined: it may): private (10/8, 172.16/12,
 * 192.168/16, 100.64/10 shared, fc00::/7 unique local), loopback (127/8, ::1), link-local
 * (169.254/16, with the cloud metadata endpoint, fe80::/10), unspecified, multicast, reserved.
 * `allowLoopback` (development host only) lets loopback through, for tests' local receivers.
 */
export function refusedAddress(address: string, allowLoopback = false): string | undefined {
  const v4 = isIP(address) === 4 ? address : /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (v4 !== undefined) {
    const [a = 0, b = 0] = v4.split('.').map(Number);
    if (a === 127) return allowLoopback ? undefined : 'loopback';
    if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127)) return 'private';
    if (a === 169 && b === 254) return 'link-local';
    if (a === 0) return 'unspecified';
    if (a >= 224) return 'multicast or reserved';
    return undefined;
  }
  const v6 = address.toLowerCase();
  if (v6 === '::1') return allowLoopback ? undefined : 'loopback';
  if (v6 === '::') return 'unspecified';
  if (/^f[cd]/.test(v6)) return 'private';
  if (/^fe[89ab]/.test(v6)) return 'link-local';
  if (/^ff/.test(v6)) return 'multicast or reserved';
  return undefined;
}

export type { JobErrorInfo };
