/**
 * Conversions between host-side values and the worker's RPC typed data, chosen the way the host
 * sends them: a string as `string` (the library then tries JSON.parse on it, as with a real queue
 * message), a Buffer or Uint8Array as `bytes`, a finite number as `int`/`double`, anything else
 * JSON-serializable as `json`; an HTTP trigger's request as `http` with the body as raw bytes (the
 * worker announces `RawHttpBodyBytes`). Back from the library: `json` is parsed, `string` stays a
 * string, `bytes` becomes a Buffer, `http` becomes an `HttpResponseData`.
 */
import { type HttpRequestData, type HttpResponseData } from '../contracts';
import { type RpcHttpCookie, type RpcHttpData, type RpcTypedData } from './rpcTypes';

export function toTypedData(value: unknown): RpcTypedData | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return { string: value };
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return { bytes: value };
  if (typeof value === 'number' && Number.isFinite(value)) return Number.isInteger(value) ? { int: value } : { double: value };
  return { json: JSON.stringify(value) };
}

export function toHttpTypedData(request: HttpRequestData): RpcTypedData {
  const http: RpcHttpData = {
    method: request.method,
    url: request.url,
    headers: { ...request.headers },
    query: { ...request.query },
    params: { ...request.params },
    body: { bytes: request.body },
  };
  return { http };
}

export function fromTypedData(data: RpcTypedData | null | undefined): unknown {
  if (data === null || data === undefined) return undefined;
  if (data.string !== undefined && data.string !== null) return data.string;
  if (data.json !== undefined && data.json !== null) return JSON.parse(data.json) as unknown;
  if (data.bytes !== undefined && data.bytes !== null) return Buffer.from(data.bytes);
  if (data.stream !== undefined && data.stream !== null) return Buffer.from(data.stream);
  if (data.http !== undefined && data.http !== null) return fromHttpData(data.http);
  if (data.int !== undefined && data.int !== null) return Number(data.int);
  if (data.double !== undefined && data.double !== null) return data.double;
  return undefined;
}

function fromHttpData(http: RpcHttpData): HttpResponseData {
  const status = Number(http.statusCode ?? '200');
  const body = fromTypedData(http.body);
  return {
    status: Number.isInteger(status) && status >= 100 && status <= 999 ? status : 500,
    headers: { ...(http.headers ?? {}) },
    cookies: (http.cookies ?? []).map(toSetCookie),
    body: body === undefined ? Buffer.alloc(0) : Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)),
  };
}

/** One `Set-Cookie` header value (RFC 6265 attribute names), as the host writes them. */
export function toSetCookie(cookie: RpcHttpCookie): string {
  const parts = [`${cookie.name ?? ''}=${cookie.value ?? ''}`];
  if (cookie.domain?.value) parts.push(`Domain=${cookie.domain.value}`);
  if (cookie.path?.value) parts.push(`Path=${cookie.path.value}`);
  const expires = cookie.expires?.value;
  if (expires?.seconds !== undefined && expires.seconds !== null) {
    parts.push(`Expires=${new Date(Number(expires.seconds) * 1000 + Math.floor((expires.nanos ?? 0) / 1e6)).toUTCString()}`);
  }
  if (cookie.maxAge?.value !== undefined && cookie.maxAge.value !== null) parts.push(`Max-Age=${cookie.maxAge.value}`);
  if (cookie.secure?.value === true) parts.push('Secure');
  if (cookie.httpOnly?.value === true) parts.push('HttpOnly');
  if (cookie.sameSite === 'lax') parts.push('SameSite=Lax');
  else if (cookie.sameSite === 'strict') parts.push('SameSite=Strict');
  else if (cookie.sameSite === 'explicitNone') parts.push('SameSite=None');
  return parts.join('; ');
}
