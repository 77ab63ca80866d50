/**
 * Finds the HTTP/1.1 requests in one client-to-server byte stream as it passes through a proxy, so
 * a fault can be injected at a named storage request (the chaos harness's "kill the leader right
 * after its instance write"). It frames requests by `Content-Length` or chunked encoding and buffers
 * no body, except the bodies its `wantsBody` option asks for (framed by `Content-Length`, up to
 * `maxBodyBytes`): such a request is returned once its last body byte arrived, with its body, head
 * and body held back together (a request whose body tells what it is: a Durable start message).
 * A head it cannot read (too long, not HTTP) turns it off for the rest of the connection, and the
 * bytes still pass.
 * Not handled: pipelining checks (the Azure SDK's Node client sends one request per connection at
 * a time, which is also what pairs a response with its request) and `Expect: 100-continue`.
 */
export interface SniffedRequest {
  readonly method: string;
  /** The request target as sent: path and query. */
  readonly path: string;
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  /** The whole body, only for a request `wantsBody` asked for (and whose body could be held). */
  readonly body?: Buffer;
}

export interface SnifferOptions {
  /** Asked once per request head: hold the request back until its body is complete, and return it with its body. */
  readonly wantsBody?: (request: SniffedRequest) => boolean;
  /** A larger body (or a chunked one) passes as usual, and its request is returned without a body. Default 1 MiB. */
  readonly maxBodyBytes?: number;
}

/** What `feed` found in one chunk: byte ranges in order, each either plain bytes or the start of a request. */
export type SniffedPart = { readonly bytes: Buffer; readonly request?: SniffedRequest };

const MAX_HEAD_BYTES = 64 * 1024;
const MAX_BODY_BYTES = 1024 * 1024;

type State =
  | { kind: 'head'; buffered: Buffer }
  | { kind: 'body'; remaining: number }
  | { kind: 'held-body'; head: Buffer; request: SniffedRequest; received: Buffer[]; remaining: number }
  | { kind: 'chunk-size'; line: string }
  | { kind: 'chunk-data'; remaining: number }
  | { kind: 'chunk-end'; remaining: number }
  | { kind: 'trailer'; line: string }
  | { kind: 'opaque' };

export class HttpRequestSniffer {
  #state: State = { kind: 'head', buffered: Buffer.alloc(0) };

  constructor(private readonly options: SnifferOptions = {}) {}

  /** True once the stream stopped looking like HTTP/1.1 requests; bytes then pass without parts. */
  get opaque(): boolean {
    return this.#state.kind === 'opaque';
  }

  /**
   * Splits a chunk into parts: a request's head is returned with the request (held back until its
   * last byte arrives, so the caller can decide before any of it is forwarded), everything else as is.
   */
  feed(chunk: Buffer): SniffedPart[] {
    const parts: SniffedPart[] = [];
    let offset = 0;
    let passStart = 0;
    const flushPass = (end: number): void => {
      if (end > passStart) parts.push({ bytes: chunk.subarray(passStart, end) });
    };
    while (offset < chunk.length) {
      const state = this.#state;
      if (state.kind === 'opaque') {
        offset = chunk.length;
        break;
      }
      if (state.kind === 'head') {
        flushPass(offset);
        const combined = Buffer.concat([state.buffered, chunk.subarray(offset)]);
        const end = combined.indexOf('\r\n\r\n');
        if (end < 0) {
          if (combined.length > MAX_HEAD_BYTES) {
            this.#state = { kind: 'opaque' };
            parts.push({ bytes: combined });
          } else {
            this.#state = { kind: 'head', buffered: combined };
          }
          return parts;
        }
        const headBytes = combined.subarray(0, end + 4);
        const consumedFromChunk = headBytes.length - state.buffered.length;
        const request = parseHead(headBytes.toString('latin1'));
        offset += consumedFromChunk;
        passStart = offset;
        if (request === undefined) {
          this.#state = { kind: 'opaque' };
          parts.push({ bytes: headBytes });
          continue;
        }
        const next = nextAfterHead(request);
        const maxBody = this.options.maxBodyBytes ?? MAX_BODY_BYTES;
        if (next.kind === 'body' && next.remaining <= maxBody && this.options.wantsBody?.(request) === true) {
          this.#state = { kind: 'held-body', head: headBytes, request, received: [], remaining: next.remaining };
          continue;
        }
        parts.push({ bytes: headBytes, request });
        this.#state = next;
        continue;
      }
      if (state.kind === 'held-body') {
        flushPass(offset);
        const take = Math.min(state.remaining, chunk.length - offset);
        state.received.push(chunk.subarray(offset, offset + take));
        offset += take;
        passStart = offset;
        state.remaining -= take;
        if (state.remaining > 0) continue;
        const body = Buffer.concat(state.received);
        parts.push({ bytes: Buffer.concat([state.head, body]), request: { ...state.request, body } });
        this.#state = { kind: 'head', buffered: Buffer.alloc(0) };
        continue;
      }
      if (state.kind === 'body' || state.kind === 'chunk-data' || state.kind === 'chunk-end') {
        const take = Math.min(state.remaining, chunk.length - offset);
        offset += take;
        const remaining = state.remaining - take;
        if (remaining > 0) this.#state = { ...state, remaining };
        else if (state.kind === 'chunk-data') this.#state = { kind: 'chunk-end', remaining: 2 };
        else if (state.kind === 'chunk-end') this.#state = { kind: 'chunk-size', line: '' };
        else this.#state = { kind: 'head', buffered: Buffer.alloc(0) };
        continue;
      }
      // chunk-size or trailer: a line ending in CRLF.
      const newline = chunk.indexOf(0x0a, offset);
      const lineEnd = newline < 0 ? chunk.length : newline + 1;
      const line = state.line + chunk.subarray(offset, lineEnd).toString('latin1');
      offset = lineEnd;
      if (newline < 0) {
        if (line.length > 1024) this.#state = { kind: 'opaque' };
        else this.#state = { ...state, line };
        continue;
      }
      const text = line.replace(/\r?\n$/, '');
      if (state.kind === 'trailer') {
        this.#state = text === '' ? { kind: 'head', buffered: Buffer.alloc(0) } : { kind: 'trailer', line: '' };
        continue;
      }
      const size = Number.parseInt(text.split(';')[0]?.trim() ?? '', 16);
      if (!Number.isFinite(size) || size < 0) this.#state = { kind: 'opaque' };
      else if (size === 0) this.#state = { kind: 'trailer', line: '' };
      else this.#state = { kind: 'chunk-data', remaining: size };
    }
    flushPass(offset);
    return parts;
  }
}

function nextAfterHead(request: SniffedRequest): State {
  const encoding = request.headers['transfer-encoding'];
  if (encoding !== undefined) return /chunked\s*$/i.test(encoding) ? { kind: 'chunk-size', line: '' } : { kind: 'opaque' };
  const length = Number(request.headers['content-length'] ?? '0');
  if (!Number.isSafeInteger(length) || length < 0) return { kind: 'opaque' };
  return length === 0 ? { kind: 'head', buffered: Buffer.alloc(0) } : { kind: 'body', remaining: length };
}

function parseHead(text: string): SniffedRequest | undefined {
  const lines = text.split('\r\n');
  const match = /^([A-Z]+) (\S+) HTTP\/1\.[01]$/.exec(lines[0] ?? '');
  if (match === null) return undefined;
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    if (colon <= 0) return undefined;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  if (headers['expect'] !== undefined) return undefined;
  return { method: match[1] as string, path: match[2] as string, headers };
}

/** The status code at the start of a response (`HTTP/1.1 201 Created`), if the bytes begin one. */
export function responseStatus(bytes: Buffer): number | undefined {
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(bytes.subarray(0, 16).toString('latin1'));
  return match === null ? undefined : Number(match[1]);
}
