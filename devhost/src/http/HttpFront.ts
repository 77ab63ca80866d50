/**
 * The development host's HTTP server: HTTP-triggered functions under the route prefix, the Durable
 * backend's endpoints, and the host's own `/` and `/admin/host/*` endpoints.
 *
 * Behavior kept from the real host: routing and methods (see RouteTable; an unknown route or a
 * wrong method is 404 with an empty body), function keys (see FunctionKeys; 401 with an empty
 * body), a function that throws is 500 with an empty body (the error goes to the log only), a body
 * over 100 MB is 413, a function that returns nothing is 204. Nothing in a response or a log line
 * carries a key.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo } from 'node:net';

import { type DurableBackend, type FunctionInvoker, type HostedFunction, type HttpRequestData, type HttpResponseData } from '../contracts';
import { toDevHostError } from '../errors';
import { type Logger } from '../log';
import { type AuthLevel, authLevelOf, type FunctionKeys, presentedKey } from './FunctionKeys';
import { RouteTable } from './RouteTable';

/** The host's default `maxRequestBodySize` (100 MB). */
export const MAX_REQUEST_BODY_BYTES = 100 * 1024 * 1024;

interface HttpTarget {
  readonly fn: HostedFunction;
  readonly authLevel: AuthLevel;
}

export interface HttpFrontOptions {
  readonly functions: readonly HostedFunction[];
  readonly routePrefix: string;
  readonly invoker: FunctionInvoker;
  readonly keys: FunctionKeys;
  readonly logger: Logger;
  /** Host status for `/admin/host/status`. */
  readonly status: () => Record<string, unknown>;
}

class HttpError extends Error {
  constructor(readonly status: number) {
    super(`HTTP ${status}`);
  }
}

function firstString(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

export class HttpFront {
  readonly routes = new RouteTable<HttpTarget>();
  readonly #server: Server;
  readonly #open = new Set<Promise<void>>();
  #durable: DurableBackend | undefined;

  constructor(private readonly o: HttpFrontOptions) {
    for (const fn of o.functions) {
      if (fn.triggerType !== 'httpTrigger') continue;
      const trigger = fn.bindings[fn.triggerName];
      const route = typeof trigger?.route === 'string' && trigger.route !== '' ? trigger.route : fn.name;
      const methods = Array.isArray(trigger?.methods) ? (trigger.methods as unknown[]).map((m) => String(m).toUpperCase()) : [];
      this.routes.add({ functionName: fn.name, template: route, methods, target: { fn, authLevel: authLevelOf(trigger?.authLevel) } });
    }
    this.#server = createServer((req, res) => {
      const task: Promise<void> = this.#handle(req, res).finally(() => this.#open.delete(task));
      this.#open.add(task);
    });
    // The host keeps connections alive; a short idle timeout lets a stop finish quickly.
    this.#server.keepAliveTimeout = 5_000;
  }

  /** Mounts the Durable backend's endpoints (set once the port, and so the base URL, is known). */
  setDurable(backend: DurableBackend): void {
    this.#durable = backend;
  }

  /** URL paths of the HTTP functions, for printing (`/api/jobs/{jobId}` [POST]). */
  describeRoutes(): Array<{ name: string; path: string; methods: readonly string[]; authLevel: AuthLevel }> {
    return this.routes.entries.map((e) => ({
      name: e.functionName,
      path: `/${[this.o.routePrefix, e.template.replace(/^\/+/, '')].filter((p) => p !== '').join('/')}`,
      methods: e.methods,
      authLevel: e.target.authLevel,
    }));
  }

  async listen(port: number, host: string): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, host, () => {
        this.#server.off('error', reject);
        resolve();
      });
    });
    return (this.#server.address() as AddressInfo).port;
  }

  /** Stops accepting connections; waits (bounded) for requests in progress. */
  async close(timeoutMs: number): Promise<void> {
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeIdleConnections();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...this.#open]), new Promise((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    if (timer !== undefined) clearTimeout(timer);
    this.#server.closeAllConnections();
    await closed;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
    } catch {
      this.#empty(res, 400);
      return;
    }
    try {
      if (this.#durable !== undefined && (await this.#durable.handleHttp(req, res, url))) return;
      if (this.#hostEndpoint(req, res, url)) return;
      await this.#functionEndpoint(req, res, url);
    } catch (err) {
      const status = err instanceof HttpError ? err.status : 500;
      if (status === 500) this.o.logger.error('http.request_failed', { path: url.pathname, error: toDevHostError(err) });
      if (!res.headersSent) this.#empty(res, status);
      else res.destroy();
    }
  }

  #hostEndpoint(req: IncomingMessage, res: ServerResponse, url: URL): boolean {
    const path = url.pathname.replace(/\/+$/, '') || '/';
    if (path === '/' && (req.method === 'GET' || req.method === 'HEAD')) {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<!doctype html><title>Functions</title><p>Your Functions 4.0 app is up and running (development host).</p>');
      return true;
    }
    if (path.toLowerCase() === '/admin/host/ping') {
      this.#empty(res, 200);
      return true;
    }
    if (path.toLowerCase() === '/admin/host/status') {
      const headers = this.#headers(req);
      if (!this.o.keys.authorize('admin', '', presentedKey(headers, url))) {
        this.#empty(res, 401);
        return true;
      }
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(this.o.status()));
      return true;
    }
    return false;
  }

  async #functionEndpoint(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const prefix = this.o.routePrefix.toLowerCase();
    const parts = url.pathname.split('/').filter((p) => p !== '');
    if (prefix !== '' && parts[0]?.toLowerCase() !== prefix) {
      this.#empty(res, 404);
      return;
    }
    const rest = (prefix === '' ? parts : parts.slice(1)).join('/');
    const method = (req.method ?? 'GET').toUpperCase();
    const match = this.routes.match(rest, method);
    if (match === undefined) {
      this.#empty(res, 404);
      return;
    }
    const { fn, authLevel } = match.entry.target;
    const headers = this.#headers(req);
    if (!this.o.keys.authorize(authLevel, fn.name, presentedKey(headers, url))) {
      this.o.logger.debug('http.unauthorized', { function: fn.name });
      this.#empty(res, 401);
      return;
    }
    const body = await this.#readBody(req);
    const query: Record<string, string> = {};
    for (const key of new Set(url.searchParams.keys())) query[key] = url.searchParams.getAll(key).join(',');
    const request: HttpRequestData = { method, url: url.href, headers, query, params: match.params, body };

    let response: HttpResponseData | undefined;
    try {
      const result = await this.o.invoker.invoke(fn.name, { trigger: request });
      response = result.returnValue as HttpResponseData | undefined;
    } catch (err) {
      // The function's error is the operator's to read in the log; the caller gets a bare 500.
      this.o.logger.error('http.function_failed', { function: fn.name, error: toDevHostError(err) });
      this.#empty(res, 500);
      return;
    }
    if (response === undefined || response === null) {
      this.#empty(res, 204);
      return;
    }
    const outHeaders: Record<string, string | string[]> = { ...response.headers };
    if (response.cookies.length > 0) outHeaders['set-cookie'] = [...response.cookies];
    const noBody = response.status === 204 || response.status === 304 || method === 'HEAD';
    if (!noBody) outHeaders['content-length'] = String(response.body.length);
    res.writeHead(response.status, outHeaders);
    res.end(noBody ? undefined : response.body);
  }

  #headers(req: IncomingMessage): Record<string, string> {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers)) {
      const text = firstString(value);
      if (text !== undefined) headers[name.toLowerCase()] = text;
    }
    return headers;
  }

  async #readBody(req: IncomingMessage): Promise<Buffer> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > MAX_REQUEST_BODY_BYTES) throw new HttpError(413);
      chunks.push(buffer);
    }
    return Buffer.concat(chunks);
  }

  #empty(res: ServerResponse, status: number): void {
    res.writeHead(status, { 'content-length': '0' });
    res.end();
  }
}
