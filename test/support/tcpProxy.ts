/**
 * A TCP proxy on a free loopback port in front of a real endpoint (the run's Azurite), for outage
 * tests: `blackhole()` makes storage unreachable the nasty way, with connections that accept but
 * never answer (requests hang until the client's own timeout), rather than refusing them.
 * `restore()` forwards again; connections that lived through the blackhole are destroyed, since
 * bytes were dropped mid-request, and clients reconnect.
 */
import { createServer, type Server, Socket } from 'node:net';

export interface TcpProxy {
  readonly port: number;
  readonly blackholed: boolean;
  blackhole(): void;
  restore(): void;
  close(): Promise<void>;
}

interface Pair {
  readonly client: Socket;
  readonly upstream: Socket;
  /** Lived through a blackhole: its byte stream is no longer whole. */
  damaged: boolean;
}

export async function startTcpProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<TcpProxy> {
  const pairs = new Set<Pair>();
  let blackholed = false;

  const server: Server = createServer((client) => {
    const upstream = new Socket();
    const pair: Pair = { client, upstream, damaged: blackholed };
    pairs.add(pair);
    const drop = (): void => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('data', (chunk) => {
      if (blackholed || pair.damaged) {
        pair.damaged = true;
        return;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk) => {
      if (blackholed || pair.damaged) {
        pair.damaged = true;
        return;
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
    blackhole: () => {
      blackholed = true;
      for (const pair of pairs) pair.damaged = true;
    },
    restore: () => {
      blackholed = false;
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
