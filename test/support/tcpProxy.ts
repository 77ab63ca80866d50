/**
 * A TCP proxy on a free loopback port in front of a real endpoint (the run's Azurite), for outage
 * tests and the chaos harness:
 * - `blackhole()` makes storage unreachable the nasty way, with connections that accept but never
 *   answer (requests hang until the client's own timeout), rather than refusing them. `restore()`
 *   forwards again; connections that lived through the blackhole are destroyed, since bytes were
 *   dropped mid-request, and clients reconnect.
 * - `reset()` answers every connection, open or new, with a TCP reset until `restore()`: requests
 *   fail at once (ECONNRESET) instead of hanging.
 * - `onRequest` sees each HTTP/1.1 request (method, path, headers) before any byte of it is
 *   forwarded and may drop it, with the rest of its connection (the process behind it is about to
 *   be killed); `onResponse` sees the status that answered it. A request `wantsBody` names reaches
 *   `onRequest` with its body, once the whole of it arrived (see HttpRequestSniffer).
 */
import { createServer, type Server, Socket } from 'node:net';

import { HttpRequestSniffer, responseStatus, type SniffedRequest } from './httpRequestSniffer';

export interface ProxiedRequest extends SniffedRequest {
  /** When the proxy forwarded (or dropped) its first byte, `Date.now()`. */
  readonly at: number;
}

export interface ProxiedResponse {
  readonly request: ProxiedRequest;
  readonly status: number;
  readonly at: number;
}

export interface TcpProxyOptions {
  readonly targetHost?: string;
  /** Called before a request is forwarded; `'drop'` swallows it and everything after it on that connection. */
  readonly onRequest?: (request: ProxiedRequest) => 'forward' | 'drop' | void;
  readonly onResponse?: (response: ProxiedResponse) => void;
  /** The requests `onRequest` needs the body of (held back until it is complete); none by default. */
  readonly wantsBody?: (request: SniffedRequest) => boolean;
}

export interface TcpProxy {
  readonly port: number;
  readonly blackholed: boolean;
  readonly resetting: boolean;
  blackhole(): void;
  reset(): void;
  restore(): void;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Lived through a blackhole (or had a request dropped): its byte stream is no longer whole. */
  damaged: boolean;
  readonly sniffer?: HttpRequestSniffer;
  /** The last request forwarded on this connection whose response has not begun yet. */
  awaiting?: ProxiedRequest;
}

export async function startTcpProxy(targetPort: number, targetHostOrOptions: string | TcpProxyOptions = {}): Promise<TcpProxy> {
  const options: TcpProxyOptions = typeof targetHostOrOptions === 'string' ? { targetHost: targetHostOrOptions } : targetHostOrOptions;
  const targetHost = options.targetHost ?? '127.0.0.1';
  const sniffing = options.onRequest !== undefined || options.onResponse !== undefined;
  const pairs = new Set<Pair>();
  let blackholed = false;
  let resetting = false;

  const resetPair = (pair: Pair): void => {
    pairs.delete(pair);
    if (!pair.client.destroyed) pair.client.resetAndDestroy();
    pair.upstream.destroy();
  };

  const forwardFromClient = (pair: Pair, chunk: Buffer): void => {
    if (pair.sniffer === undefined) {
      pair.upstream.write(chunk);
      return;
    }
    for (const part of pair.sniffer.feed(chunk)) {
      if (pair.damaged) return;
      if (part.request !== undefined) {
        const request: ProxiedRequest = { ...part.request, at: Date.now() };
        if (options.onRequest?.(request) === 'drop' || blackholed || resetting) {
          pair.damaged = true;
          return;
        }
        pair.awaiting = request;
      }
      pair.upstream.write(part.bytes);
    }
  };

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const snifferOptions = options.wantsBody === undefined ? {} : { wantsBody: options.wantsBody };
    const pair: Pair = { client, upstream, damaged: blackholed, ...(sniffing ? { sniffer: new HttpRequestSniffer(snifferOptions) } : {}) };
    pairs.add(pair);
    if (resetting) {
      resetPair(pair);
      return;
    }
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk: Buffer) => {
      if (blackholed || pair.damaged) {
        pair.damaged = true;
        return;
      }
      forwardFromClient(pair, chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (blackholed || pair.damaged) {
        pair.damaged = true;
        return;
      }
      const awaiting = pair.awaiting;
      if (awaiting !== undefined) {
        pair.awaiting = undefined;
        const status = responseStatus(chunk);
        if (status !== undefined) options.onResponse?.({ request: awaiting, status, at: Date.now() });
      }
      client.write(chunk);
    });
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    upstream.connect(targetPort, targetHost);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;

  return {
    port,
    get blackholed() {
      return blackholed;
    },
    get resetting() {
      return resetting;
    },
    blackhole: () => {
      blackholed = true;
      for (const pair of pairs) pair.damaged = true;
    },
    reset: () => {
      resetting = true;
      for (const pair of [...pairs]) resetPair(pair);
    },
    restore: () => {
      blackholed = false;
      resetting = false;
      for (const pair of [...pairs]) {
        if (!pair.damaged) continue;
        pairs.delete(pair);
        pair.client.destroy();
        pair.upstream.destroy();
      }
    },
    close: async () => {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      pairs.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The blob port of an Azurite connection string (BlobEndpoint=http://127.0.0.1:<port>/...). */
export function blobPortOf(connectionString: string): number {
  const match = /BlobEndpoint=https?:\/\/[^:/;]+:(\d+)/i.exec(connectionString);
  if (match?.[1] === undefined) throw new Error('connection string has no BlobEndpoint with a port');
  return Number(match[1]);
}

/** The same connection string with the blob endpoint moved to another port (the proxy's). */
export function withBlobPort(connectionString: string, port: number): string {
  return connectionString.replace(/(BlobEndpoint=https?:\/\/[^:/;]+:)(\d+)/i, `$1${port}`);
}
