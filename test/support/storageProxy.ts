/**
 * An HTTP-aware proxy in front of the run's Azurite (blob, queue and table endpoints), for tests that
 * must stop a process at an exact step of its storage traffic: `hold(match)` holds the next request
 * that `match` recognizes (by method, path and body) and reports it; the test then kills or pauses
 * the process and decides whether the held request ever reaches storage (`release()`) or never does.
 * `refuse(match, status)` answers every matching request with that status instead, until removed.
 * Every other request passes straight through; each request is recorded (`requests()`), with storage's
 * answer (headers and body) for the requests that `keepResponse` names.
 *
 * A held request whose client went away (the process was SIGKILLed) is never forwarded: storage
 * must not see a write from a process that died before sending it.
 */
import { Agent, createServer, type IncomingHttpHeaders, type IncomingMessage, request as httpRequest, type Server, type ServerResponse } from 'node:http';

import { AZURITE_ACCOUNT, AZURITE_KEY } from 'devhost/testing';

export interface ProxiedRequest {
  readonly service: 'blob' | 'queue' | 'table';
  readonly method: string;
  /** The URL path, account included (`/devstoreaccount1/<container>/<blob>`). */
  readonly path: string;
  readonly query: URLSearchParams;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  readonly at: number;
}

export interface HeldRequest {
  readonly request: ProxiedRequest;
  /** True once the process that sent it closed its connection (killed). */
  readonly clientGone: boolean;
  /** Forwards it to storage (unless its client is gone); resolves with the status storage answered, or undefined. */
  release(): Promise<number | undefined>;
}

export interface Hold {
  /** Resolves with the first matching request, held. */
  readonly held: Promise<HeldRequest>;
  /** Stops waiting for a match. */
  cancel(): void;
  /** `held`, or a rejection naming `what` after `ms` (the timer is cleared either way: it must not outlive the test). */
  within(ms: number, what: string): Promise<HeldRequest>;
}

/** Storage's answer to a recorded request, kept when the proxy's `keepResponse` asked for it. */
export interface ProxiedResponse {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  readonly at: number;
}

export type RecordedRequest = ProxiedRequest & { readonly status: number | undefined; readonly response: ProxiedResponse | undefined };

export interface StorageProxy {
  /** A connection string for a process that should reach Azurite through this proxy. */
  readonly connectionString: string;
  hold(match: (request: ProxiedRequest) => boolean): Hold;
  /** Answers every matching request with `status` (storage never sees it) until `remove()`. */
  refuse(match: (request: ProxiedRequest) => boolean, status?: number): { remove(): void };
  /**
   * Every request seen so far, in arrival order, with the status storage answered (undefined while
   * pending or never forwarded) and, where `keepResponse` matched, its answer once fully received.
   */
  requests(): readonly RecordedRequest[];
  close(): Promise<void>;
}

interface Waiter {
  readonly match: (request: ProxiedRequest) => boolean;
  readonly resolve: (held: HeldRequest) => void;
}

/**
 * The text of a queue message in a Put Message body, decoded: base64 (`<MessageText>base64</MessageText>`,
 * how the development host's Durable backend and the queue bindings send), or XML-escaped UTF-8 text
 * (how the Azure Storage provider of the real Durable extension sends its JSON).
 */
export function putMessageText(body: Buffer): string | undefined {
  const match = /<MessageText>([^<]*)<\/MessageText>/.exec(body.toString('utf8'));
  if (match?.[1] === undefined) return undefined;
  const raw = match[1];
  if (/^[A-Za-z0-9+/]*={0,2}$/.test(raw)) return Buffer.from(raw, 'base64').toString('utf8');
  return raw.replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

function parsePorts(connectionString: string): { blob: number; queue: number; table: number; host: string } {
  const part = (name: string): URL => {
    const value = new RegExp(`${name}=([^;]+)`).exec(connectionString)?.[1];
    if (value === undefined) throw new Error(`The connection string has no ${name}.`);
    return new URL(value);
  };
  const blob = part('BlobEndpoint');
  return { host: blob.hostname, blob: Number(blob.port), queue: Number(part('QueueEndpoint').port), table: Number(part('TableEndpoint').port) };
}

export async function startStorageProxy(
  upstreamConnectionString: string,
  options: { readonly keepResponse?: (request: ProxiedRequest) => boolean } = {},
): Promise<StorageProxy> {
  const upstream = parsePorts(upstreamConnectionString);
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const waiters: Waiter[] = [];
  const refusals: Array<{ readonly match: (request: ProxiedRequest) => boolean; readonly status: number }> = [];
  type Entry = ProxiedRequest & { status: number | undefined; response: ProxiedResponse | undefined };
  const seen: Entry[] = [];
  const servers: Server[] = [];

  const forward = (entry: Entry, port: number, res: ServerResponse): Promise<number | undefined> =>
    new Promise((resolve) => {
      const search = entry.query.toString();
      const out = httpRequest(
        { host: upstream.host, port, method: entry.method, path: `${entry.path}${search === '' ? '' : `?${search}`}`, headers: { ...entry.headers, host: `${upstream.host}:${port}` }, agent },
        (answer) => {
          entry.status = answer.statusCode;
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          const kept: Buffer[] | undefined = options.keepResponse?.(entry) === true ? [] : undefined;
          if (kept !== undefined) answer.on('data', (chunk: Buffer) => kept.push(chunk));
          answer.pipe(res);
          answer.once('end', () => {
            if (kept !== undefined) entry.response = { headers: answer.headers, body: Buffer.concat(kept), at: Date.now() };
            resolve(answer.statusCode);
          });
        },
      );
      out.once('error', () => {
        if (!res.headersSent) res.writeHead(502);
        res.end();
        resolve(undefined);
      });
      out.end(entry.body);
    });

  const listen = async (service: ProxiedRequest['service'], port: number): Promise<number> => {
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.once('end', () => {
        const url = new URL(req.url ?? '/', 'http://proxy');
        const entry: Entry = {
          service,
          method: req.method ?? 'GET',
          path: url.pathname,
          query: url.searchParams,
          headers: req.headers,
          body: Buffer.concat(chunks),
          at: Date.now(),
          status: undefined,
          response: undefined,
        };
        seen.push(entry);
        const refusal = refusals.find((r) => r.match(entry));
        if (refusal !== undefined) {
          res.writeHead(refusal.status, { 'content-type': 'application/xml' });
          res.end(`<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code><Message>Refused by the test's storage proxy.</Message></Error>`);
          return;
        }
        const index = waiters.findIndex((w) => w.match(entry));
        if (index < 0) {
          void forward(entry, port, res);
          return;
        }
        const [waiter] = waiters.splice(index, 1);
        let gone = false;
        res.once('close', () => {
          if (!res.writableFinished) gone = true;
        });
        req.socket.once('close', () => {
          if (!res.writableFinished) gone = true;
        });
        waiter?.resolve({
          request: entry,
          get clientGone() {
            return gone;
          },
          release: () => (gone ? Promise.resolve(undefined) : forward(entry, port, res)),
        });
      });
    });
    servers.push(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    const address = server.address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  };

  const [blob, queue, table] = [await listen('blob', upstream.blob), await listen('queue', upstream.queue), await listen('table', upstream.table)];
  const endpoint = (port: number): string => `http://127.0.0.1:${port}/${AZURITE_ACCOUNT}`;
  return {
    connectionString:
      `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};` +
      `BlobEndpoint=${endpoint(blob)};QueueEndpoint=${endpoint(queue)};TableEndpoint=${endpoint(table)};`,
    hold(match) {
      let waiter: Waiter | undefined;
      const held = new Promise<HeldRequest>((resolve) => {
        waiter = { match, resolve };
        waiters.push(waiter);
      });
      const cancel = (): void => {
        const index = waiter === undefined ? -1 : waiters.indexOf(waiter);
        if (index >= 0) waiters.splice(index, 1);
      };
      return {
        held,
        cancel,
        within(ms, what) {
          let timer: NodeJS.Timeout | undefined;
          const late = new Promise<never>((_resolve, reject) => {
            timer = setTimeout(() => {
              cancel();
              reject(new Error(`${what}: no matching request within ${ms} ms`));
            }, ms);
          });
          return Promise.race([held, late]).finally(() => clearTimeout(timer));
        },
      };
    },
    refuse(match, status = 503) {
      const refusal = { match, status };
      refusals.push(refusal);
      return {
        remove: () => {
          const index = refusals.indexOf(refusal);
          if (index >= 0) refusals.splice(index, 1);
        },
      };
    },
    requests: () => [...seen],
    close: async () => {
      waiters.length = 0;
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.close(() => resolve());
              s.closeAllConnections();
            }),
        ),
      );
      agent.destroy();
    },
  };
}
