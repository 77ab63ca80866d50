/**
 * The Node.js worker of the extensions host (`exthost/`, a .NET WebJobs host running the real
 * Durable, queue and timer extensions): loads the app with the development host's own loader
 * (AppLoader: the `@azure/functions-core` shim and the v4 library's invocation model) and serves
 * its functions to the .NET host over loopback HTTP, in the role the Functions host's gRPC channel
 * to the Node.js worker plays on Azure.
 *
 * `node devhost/dist/src/worker/workerMain.js --app-root DIR [--port 0]`; the first line starting
 * with "Extension worker listening on " carries the URL. The environment is the .NET host's
 * (it loaded local.settings.json). Protocol, all JSON:
 *
 * - `GET /functions`: every registered function (name, triggerType, triggerName, bindings as registered).
 * - `POST /invoke` `{ name, trigger, triggerMetadata?, inputs? }`: `{ returnValue, outputs }`, or
 *   HTTP 500 `{ error: { name, message, stack } }` with the function's own error. An `httpTrigger`'s
 *   trigger is `{ method, url, headers, query, params, body }`; bytes travel as `{ "$base64": "..." }`
 *   both ways (an HTTP request's body, an HTTP response's body).
 *
 * The host writes output bindings (the worker only returns them), as the Functions host does.
 * SIGTERM/SIGINT: stop accepting, let invocations finish (10 s at most), run appTerminate hooks,
 * exit. With `--exit-with-stdin`, the end of stdin (the host died) exits at once.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';
import { resolve } from 'node:path';

import { loadFunctionApp } from '../AppLoader';
import { type HttpRequestData, type InvocationRequest } from '../contracts';
import { toDevHostError } from '../errors';
import { createLogger } from '../log';

export const WORKER_READY_PREFIX = 'Extension worker listening on ';
const DRAIN_MS = 10_000;

/** Buffers as `{ $base64 }`, everything else as JSON. */
function encode(value: unknown): string {
  return JSON.stringify(value, function replacer(this: Record<string, unknown>, key: string, v: unknown) {
    const raw = this[key];
    if (Buffer.isBuffer(raw) || raw instanceof Uint8Array) return { $base64: Buffer.from(raw).toString('base64') };
    return v;
  });
}

function decodeBytes(value: unknown): Buffer {
  if (value !== null && typeof value === 'object' && typeof (value as { $base64?: unknown }).$base64 === 'string') {
    return Buffer.from((value as { $base64: string }).$base64, 'base64');
  }
  if (typeof value === 'string') return Buffer.from(value, 'utf8');
  return Buffer.alloc(0);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

function send(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

interface InvokeBody {
  name: string;
  trigger?: unknown;
  triggerMetadata?: Record<string, unknown>;
  inputs?: Record<string, unknown>;
}

export async function runWorker(argv: readonly string[] = process.argv.slice(2)): Promise<void> {
  const arg = (name: string): string | undefined => {
    const i = argv.indexOf(name);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const appRoot = resolve(arg('--app-root') ?? '.');
  const port = Number(arg('--port') ?? '0');
  const logger = createLogger('exthost-worker');
  const main = arg('--main');
  const app = await loadFunctionApp({ appRoot, logger, ...(main === undefined ? {} : { main }) });

  const server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://worker');
      if (req.method === 'GET' && url.pathname === '/functions') {
        send(res, 200, encode(app.list()));
        return;
      }
      if (req.method !== 'POST' || url.pathname !== '/invoke') {
        send(res, 404, '{}');
        return;
      }
      let body: InvokeBody;
      try {
        body = JSON.parse(await readBody(req)) as InvokeBody;
      } catch (err) {
        send(res, 400, encode({ error: { name: 'BadRequest', message: String(err) } }));
        return;
      }
      const fn = app.get(body.name);
      let trigger = body.trigger;
      if (fn?.triggerType === 'httpTrigger') {
        const t = trigger as Omit<HttpRequestData, 'body'> & { body: unknown };
        trigger = { ...t, body: decodeBytes(t.body) } satisfies HttpRequestData;
      }
      const request: InvocationRequest = {
        trigger,
        ...(body.triggerMetadata === undefined ? {} : { triggerMetadata: body.triggerMetadata }),
        ...(body.inputs === undefined ? {} : { inputs: body.inputs }),
      };
      try {
        const result = await app.invoke(body.name, request);
        send(res, 200, encode(result));
      } catch (err) {
        const e = err instanceof Error ? err : new Error(String(err));
        logger.debug('worker.invocation_failed', { function: body.name, error: toDevHostError(err) });
        send(res, 500, encode({ error: { name: e.name, message: e.message, stack: e.stack } }));
      }
    })().catch((err: unknown) => {
      logger.error('worker.request_failed', { error: toDevHostError(err) });
      if (!res.headersSent) send(res, 500, '{}');
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolveListen);
  });
  const address = server.address() as AddressInfo;
  console.log(`${WORKER_READY_PREFIX}http://127.0.0.1:${address.port}`);

  let stopping = false;
  const stop = (): void => {
    if (stopping) process.exit(1);
    stopping = true;
    server.close();
    server.closeIdleConnections();
    void app
      .drain(DRAIN_MS)
      .then(() => app.terminate())
      .finally(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  // The host that started this worker holds our stdin open: its end means the host is gone (killed
  // outright), and the worker goes at once as well, like a worker whose channel to the host broke:
  // no drain, no hooks, so a killed host behaves as a killed process on Azure.
  if (argv.includes('--exit-with-stdin')) {
    process.stdin.on('end', () => process.exit(1));
    process.stdin.on('error', () => process.exit(1));
    process.stdin.resume();
  }
}

if (require.main === module) {
  runWorker().catch((err: unknown) => {
    console.error(`exthost worker failed to start: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
