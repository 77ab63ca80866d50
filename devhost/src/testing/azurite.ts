/**
 * Starts a private Azurite (blob, queue, table) as a child process on free loopback ports with its
 * data in a temporary folder (Azurite's in-memory mode stalls for seconds to minutes after thousands
 * of queue deletions), or in a folder the caller keeps (`npm start` keeps `.azurite/`). Used once per
 * test run by scripts/runTests, by the benchmarks, by `npm start`, and by tests that need to stop
 * and restart storage on purpose.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { get } from 'node:http';
import { createServer, Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const AZURITE_ACCOUNT = 'devstoreaccount1';
// Azurite's well-known development key (public, documented; not a secret).
export const AZURITE_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

export interface AzuriteOptions {
  /** Data folder; a fresh temporary one (removed on stop) when absent. */
  readonly location?: string;
  readonly blobPort?: number;
  readonly queuePort?: number;
  readonly tablePort?: number;
  /** Print Azurite's own output (debugging). */
  readonly verbose?: boolean;
  /**
   * Run Azurite in its own process group, so a terminal's Ctrl-C reaches only the caller, which can
   * stop its app first (the leader releases its lease through Azurite) and Azurite last.
   */
  readonly detached?: boolean;
}

export interface AzuriteInstance {
  readonly blobPort: number;
  readonly queuePort: number;
  readonly tablePort: number;
  readonly location: string;
  readonly connectionString: string;
  /** The Azurite process's id while it runs (undefined once stopped). */
  readonly pid: number | undefined;
  /** Stops the process (SIGTERM, then SIGKILL) and removes a temporary data folder. */
  stop(): Promise<void>;
  /** Stops the process but keeps the data folder, so `restart` comes back with the same state. */
  kill(): Promise<void>;
  /** Starts again on the same ports and data folder. */
  restart(): Promise<void>;
}

export function connectionStringFor(host: string, blobPort: number, queuePort: number, tablePort: number): string {
  return (
    `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};` +
    `BlobEndpoint=http://${host}:${blobPort}/${AZURITE_ACCOUNT};` +
    `QueueEndpoint=http://${host}:${queuePort}/${AZURITE_ACCOUNT};` +
    `TableEndpoint=http://${host}:${tablePort}/${AZURITE_ACCOUNT};`
  );
}

/** A free TCP port on 127.0.0.1 (bind to 0, read, close). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

function azuriteEntry(): string {
  // require('azurite') resolves to its VS Code extension entry; the CLI lives in dist/src.
  return join(require.resolve('azurite/package.json'), '..', 'dist', 'src', 'azurite.js');
}

async function waitForPort(port: number, deadline: number, exited: () => boolean): Promise<void> {
  while (Date.now() < deadline) {
    // A process that exited listens nowhere (a port another process took between freePort and the bind).
    if (exited()) throw new Error(`Azurite exited before it listened on port ${port}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = new Socket();
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
      socket.connect(port, '127.0.0.1');
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`Azurite did not listen on port ${port} in time`);
}

/**
 * Whether the server on `port` is Azurite (its `Server` header, `Azurite-Blob/...` and the like): a
 * port another process took between freePort and Azurite's bind accepts connections too, while the
 * Azurite that could not bind it exits (a suite file once got such an Azurite, dead by the time it
 * was used: ECONNREFUSED on every request).
 */
export function answersAsAzurite(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = get({ host: '127.0.0.1', port, path: '/', timeout: 5_000 }, (res) => {
      res.resume();
      resolve(String(res.headers.server ?? '').startsWith('Azurite'));
    });
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(false));
  });
}

export async function startAzurite(options: AzuriteOptions = {}): Promise<AzuriteInstance> {
  const temporary = options.location === undefined;
  const location = options.location ?? mkdtempSync(join(tmpdir(), 'azurite-'));
  const blobPort = options.blobPort ?? (await freePort());
  const queuePort = options.queuePort ?? (await freePort());
  const tablePort = options.tablePort ?? (await freePort());
  let child: ChildProcess | undefined;

  const launch = async (): Promise<void> => {
    const args = [
      azuriteEntry(),
      '--silent',
      '--disableTelemetry',
      '--skipApiVersionCheck',
      '--location',
      location,
      '--blobHost',
      '127.0.0.1',
      '--blobPort',
      String(blobPort),
      '--queueHost',
      '127.0.0.1',
      '--queuePort',
      String(queuePort),
      '--tableHost',
      '127.0.0.1',
      '--tablePort',
      String(tablePort),
    ];
    const proc = spawn(process.execPath, args, { stdio: options.verbose === true ? 'inherit' : 'ignore', detached: options.detached === true });
    child = proc;
    let exited = false;
    proc.once('exit', () => {
      exited = true;
    });
    // A spawn that failed (no 'exit' follows): the start fails at its next look instead of crashing on an unheard 'error'.
    proc.once('error', () => {
      exited = true;
    });
    const deadline = Date.now() + 30_000;
    try {
      for (const port of [blobPort, queuePort, tablePort]) {
        await waitForPort(port, deadline, () => exited);
        if (exited) throw new Error('Azurite exited during start');
      }
      for (const port of [blobPort, queuePort, tablePort]) {
        if (!(await answersAsAzurite(port)) || exited) throw new Error(`Port ${port} answers, but not as this Azurite (another process took it)`);
      }
    } catch (err) {
      // Not left running (or hung) behind a start that failed.
      await kill();
      throw err;
    }
  };

  const kill = async (): Promise<void> => {
    const proc = child;
    child = undefined;
    if (proc === undefined || proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      // SIGKILL after 5 s; given up after 10 s (a process that never spawned sends no 'exit').
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      const giveUp = setTimeout(resolve, 10_000);
      const done = (): void => {
        clearTimeout(timer);
        clearTimeout(giveUp);
        resolve();
      };
      proc.once('exit', done);
      proc.once('error', done);
      proc.kill('SIGTERM');
    });
  };

  try {
    await launch();
  } catch (err) {
    // Nothing left behind by a start that failed: the temporary data folder goes too.
    if (temporary) rmSync(location, { recursive: true, force: true });
    throw err;
  }
  return {
    blobPort,
    queuePort,
    tablePort,
    location,
    connectionString: connectionStringFor('127.0.0.1', blobPort, queuePort, tablePort),
    get pid() {
      return child?.exitCode === null && child.signalCode === null ? child.pid : undefined;
    },
    kill,
    restart: launch,
    stop: async () => {
      await kill();
      if (temporary) rmSync(location, { recursive: true, force: true });
    },
  };
}
