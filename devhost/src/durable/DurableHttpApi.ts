/**
 * The Durable extension's HTTP API under `/runtime/webhooks/durabletask/`, the routes and status
 * codes of the extension's HttpApiHandler that the durable-functions client calls through
 * `rpcBaseUrl`, and the client binding payload that points it here.
 *
 * Routes: POST orchestrators/{name}[/{id}] (202 + management links; `timeout`/`pollingInterval`
 * wait for completion), GET instances/{id} (202 while Pending/Running, 200 when finished, 404
 * unknown), GET instances/ (filters, `top`, `x-ms-continuation-token`), POST
 * instances/{id}/raiseEvent/{event} and /terminate (202, 404 unknown, 410 finished), DELETE
 * instances/{id} and instances/?filters (purge). Rewind, suspend, resume, restart and entities
 * answer 501 with code DURABLE_NOT_SUPPORTED.
 * The same API is served twice, as by the real host: at `/runtime/webhooks/durabletask/`, which
 * with keys on requires the extension's system key (`durabletask_extension`) or the master key in
 * `code` or `x-functions-key` (401 otherwise; HttpApiHandler links carry `code=<system key>`), and at
 * the local RPC path `/durabletask/` that the durable-functions client calls (the extension's
 * LocalHttpListener on 127.0.0.1: no key, and only loopback callers are answered).
 *
 * Starting an instance follows DurableClient.StartNewAsync and DurableTask.AzureStorage
 * CreateTaskOrchestrationAsync: an id whose instance is Running, Pending, ContinuedAsNew or
 * Suspended is refused with OrchestrationAlreadyExistsException (HTTP 500; none is refused with
 * overridableExistingInstanceStates AnyState), and nothing is re-sent; otherwise the start message
 * is sent first, then the instance record is written as Pending, and a record written meanwhile by a
 * concurrent start is left alone (its start wins; this start's message is discarded by the
 * dispatcher) while this call still answers 202, as the provider does.
 */
import { randomUUID } from 'node:crypto';
import { type IncomingMessage, type ServerResponse } from 'node:http';

import { type FunctionInvoker } from '../contracts';
import { type Logger } from '../log';
import { type OverridableStates } from './DurableTaskOptions';
import { fromJsonText, historyEvent, isRuntimeStatus, isTerminal, type RuntimeStatus } from './HistoryEvent';
import { type InstanceFilter, type InstanceStore, newInstanceState } from './InstanceStore';
import { unknownFunctionMessage } from './replayActions';
import { durableFunctions } from './runEpisode';
import { taskHubNames, validateInstanceId } from './taskHubNames';
import { newMessageId, type TaskHubQueues } from './TaskHubQueues';
import { toStatusPayload } from './toStatusPayload';

export const WEBHOOK_PATH = '/runtime/webhooks/durabletask';
/** The extension's placeholder for the instance id in management URLs. */
const INSTANCE_ID_PLACEHOLDER = 'INSTANCEID';
const DEFAULT_CONNECTION_NAME = 'Storage';
const MAX_BODY_BYTES = 8 * 1024 * 1024;
/** The extension's LocalHttpListener base path (the client binding's rpcBaseUrl). */
export const RPC_PATH = '/durabletask';
const DEFAULT_PAGE_SIZE = 100;
/** OverridableStatesExtensions.ToDedupeStatuses(NonRunningStates). */
const NON_RUNNING_DEDUPE: readonly RuntimeStatus[] = ['Running', 'ContinuedAsNew', 'Pending', 'Suspended'];

export interface DurableHttpApiDeps {
  readonly taskHub: string;
  readonly baseUrl: string;
  readonly invoker: FunctionInvoker;
  readonly store: InstanceStore;
  readonly queues: TaskHubQueues;
  readonly logger: Logger;
  /** host.json durableTask.overridableExistingInstanceStates. */
  readonly overridableExistingInstanceStates?: OverridableStates;
  /** With keys on: the system key the webhooks require (the master key opens them too). */
  readonly webhookAuth?: WebhookAuth;
  readonly clock?: () => Date;
}

export interface WebhookAuth {
  /** The `durabletask_extension` system key, put in the links this API hands out. */
  readonly systemKey: string;
  /** True when `presented` is the system key or the master key. */
  authorize(presented: string | undefined): boolean;
}

interface Reply {
  readonly status: number;
  readonly body?: unknown;
  readonly headers?: Record<string, string>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly exceptionMessage?: string,
  ) {
    super(message);
  }
}

export interface ManagementUrls {
  readonly id: string;
  readonly statusQueryGetUri: string;
  readonly sendEventPostUri: string;
  readonly terminatePostUri: string;
  readonly rewindPostUri: string;
  readonly purgeHistoryDeleteUri: string;
  readonly restartPostUri: string;
  readonly suspendPostUri: string;
  readonly resumePostUri: string;
}

/** HttpApiHandler.GetClientResponseLinks: links for one instance under `origin`, with the system key when keys are on. */
export function managementUrls(origin: string, taskHub: string, instanceId: string, encodeId = true, systemKey?: string): ManagementUrls {
  const base = `${origin}${WEBHOOK_PATH}/instances/${encodeId ? encodeURIComponent(instanceId) : instanceId}`;
  const query = `taskHub=${encodeURIComponent(taskHub)}&connection=${DEFAULT_CONNECTION_NAME}${systemKey === undefined ? '' : `&code=${encodeURIComponent(systemKey)}`}`;
  return {
    id: instanceId,
    statusQueryGetUri: `${base}?${query}`,
    sendEventPostUri: `${base}/raiseEvent/{eventName}?${query}`,
    terminatePostUri: `${base}/terminate?reason={text}&${query}`,
    rewindPostUri: `${base}/rewind?reason={text}&${query}`,
    purgeHistoryDeleteUri: `${base}?${query}`,
    restartPostUri: `${base}/restart?${query}`,
    suspendPostUri: `${base}/suspend?reason={text}&${query}`,
    resumePostUri: `${base}/resume?reason={text}&${query}`,
  };
}

/**
 * What a `durableClient` input binding receives (BindingHelper.DurableOrchestrationClientToString):
 * webhook links (with `code=<system key>` when keys are on), and the local RPC base the
 * durable-functions client actually calls.
 */
export function clientBindingPayload(baseUrl: string, taskHub: string, systemKey?: string): Record<string, unknown> {
  const origin = baseUrl.replace(/\/+$/, '');
  const webhookBase = `${origin}${WEBHOOK_PATH}`;
  const creation = `${webhookBase}/orchestrators/{functionName}[/{instanceId}]`;
  const required = systemKey === undefined ? '' : `code=${encodeURIComponent(systemKey)}`;
  return {
    taskHubName: taskHub,
    creationUrls: {
      createNewInstancePostUri: `${creation}?${required}`,
      createAndWaitOnNewInstancePostUri: `${creation}?timeout={timeoutInSeconds}&pollingInterval={intervalInSeconds}&${required}`,
    },
    managementUrls: managementUrls(origin, taskHub, INSTANCE_ID_PLACEHOLDER, false, systemKey),
    baseUrl: webhookBase,
    requiredQueryStringParameters: required,
    rpcBaseUrl: `${origin}${RPC_PATH}/`,
  };
}

function isLoopback(address: string | undefined): boolean {
  return address !== undefined && (address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.'));
}

function parseBoolean(value: string | null): boolean | undefined {
  if (value === null) return undefined;
  const lower = value.toLowerCase();
  return lower === 'true' ? true : lower === 'false' ? false : undefined;
}

function parseDate(value: string | null): Date | undefined {
  if (value === null || value === '') return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : new Date(ms);
}

function parseStatuses(value: string | null): RuntimeStatus[] {
  if (value === null) return [];
  return value
    .split(',')
    .map((s) => s.trim())
    .filter(isRuntimeStatus);
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const buffer = Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk));
    size += buffer.length;
    if (size > MAX_BODY_BYTES) throw new HttpError(413, 'DURABLE_BODY_TOO_LARGE', `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Request body as JSON text for storage: empty means no value. */
function jsonTextOf(body: string): string | null {
  if (body.trim() === '') return null;
  try {
    return JSON.stringify(JSON.parse(body));
  } catch {
    throw new HttpError(400, 'DURABLE_INVALID_JSON', 'Invalid JSON content');
  }
}

function decodeSegment(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new HttpError(400, 'DURABLE_BAD_URL', `Malformed URL segment "${segment}".`);
  }
}

export class DurableHttpApi {
  readonly #deps: DurableHttpApiDeps;
  readonly #clock: () => Date;

  constructor(deps: DurableHttpApiDeps) {
    taskHubNames(deps.taskHub);
    this.#deps = deps;
    this.#clock = deps.clock ?? (() => new Date());
  }

  clientBindingValue(): Record<string, unknown> {
    return clientBindingPayload(this.#deps.baseUrl, this.#deps.taskHub, this.#deps.webhookAuth?.systemKey);
  }

  async handle(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean> {
    const under = (base: string): boolean => url.pathname === base || url.pathname.startsWith(`${base}/`);
    const base = under(WEBHOOK_PATH) ? WEBHOOK_PATH : under(RPC_PATH) ? RPC_PATH : undefined;
    if (base === undefined) return false;
    // The local RPC endpoint exists for loopback callers only; the webhooks need the system key with keys on.
    if (base === RPC_PATH && !isLoopback(req.socket.remoteAddress)) return false;
    if (base === WEBHOOK_PATH && this.#deps.webhookAuth !== undefined) {
      const header = req.headers['x-functions-key'];
      const presented = (Array.isArray(header) ? header[0] : header) ?? url.searchParams.get('code') ?? undefined;
      if (!this.#deps.webhookAuth.authorize(presented)) {
        res.writeHead(401, { 'Content-Length': '0' });
        res.end();
        return true;
      }
    }
    let reply: Reply;
    try {
      reply = await this.#route(req, url, base);
    } catch (err) {
      if (err instanceof HttpError && err.status === 501) {
        // The client turns a 501 body into an Error as is, so it is one readable string with the code.
        reply = { status: 501, body: `${err.code}: ${err.message}` };
      } else if (err instanceof HttpError) {
        reply = { status: err.status, body: { code: err.code, Message: err.message, ...(err.exceptionMessage === undefined ? {} : { ExceptionMessage: err.exceptionMessage }) } };
      } else {
        this.#deps.logger.error('durable.http.failed', { method: req.method, path: url.pathname, error: err instanceof Error ? err.message : String(err) });
        reply = { status: 500, body: { code: 'DURABLE_INTERNAL', Message: 'Something went wrong while processing your request' } };
      }
    }
    const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
    res.writeHead(reply.status, {
      ...(text === '' ? {} : { 'Content-Type': 'application/json; charset=utf-8' }),
      'Content-Length': Buffer.byteLength(text),
      ...reply.headers,
    });
    res.end(text);
    return true;
  }

  async #route(req: IncomingMessage, url: URL, base: string): Promise<Reply> {
    const method = (req.method ?? 'GET').toUpperCase();
    const raw = url.pathname.slice(base.length).replace(/^\/+/, '');
    const trailingSlash = raw.endsWith('/');
    const segments = raw.split('/').filter((s) => s !== '');
    const [controller, first, second, third] = segments;

    if (controller === 'orchestrators' && first !== undefined && segments.length <= 3) {
      if (method !== 'POST') return { status: 404 };
      const body = await readBody(req);
      return this.#start(url, decodeSegment(first), second === undefined ? undefined : decodeSegment(second), body);
    }
    if (controller === 'instances') {
      if (first === undefined) {
        if (method === 'GET') return this.#list(req, url);
        if (method === 'DELETE') return this.#purgeByFilter(url);
        return { status: 404 };
      }
      const instanceId = decodeSegment(first);
      if (second === undefined && !trailingSlash) {
        if (method === 'GET') return this.#status(url, instanceId);
        if (method === 'DELETE') return this.#purge(instanceId);
        return { status: 404 };
      }
      if (method !== 'POST') return { status: 404 };
      if (second === 'raiseEvent' && third !== undefined) return this.#raiseEvent(req, instanceId, decodeSegment(third));
      if (second === 'terminate') return this.#terminate(instanceId, url.searchParams.get('reason'));
      if (second === 'rewind' || second === 'suspend' || second === 'resume' || second === 'restart') {
        throw new HttpError(501, 'DURABLE_NOT_SUPPORTED', `The development host's Durable backend does not support ${second}.`);
      }
      return { status: 404 };
    }
    if (controller === 'entities') throw new HttpError(501, 'DURABLE_NOT_SUPPORTED', "The development host's Durable backend does not support entities.");
    return { status: 404 };
  }

  async #start(url: URL, functionName: string, requestedId: string | undefined, body: string): Promise<Reply> {
    const { orchestrators } = durableFunctions(this.#deps.invoker);
    const registered = orchestrators.find((name) => name.toLowerCase() === functionName.toLowerCase());
    if (registered === undefined) {
      throw new HttpError(400, 'DURABLE_UNKNOWN_ORCHESTRATOR', 'One or more of the arguments submitted is incorrect', unknownFunctionMessage('orchestrator', functionName, orchestrators));
    }
    // The extension's default: Guid.NewGuid().ToString("N").
    const instanceId = requestedId ?? randomUUID().replace(/-/g, '');
    const invalid = validateInstanceId(instanceId);
    if (invalid !== undefined) throw new HttpError(400, 'DURABLE_BAD_INSTANCE_ID', 'One or more of the arguments submitted is incorrect', invalid);
    const input = jsonTextOf(body);

    const existing = await this.#deps.store.read(instanceId);
    const dedupe = (this.#deps.overridableExistingInstanceStates ?? 'NonRunningStates') === 'NonRunningStates' ? NON_RUNNING_DEDUPE : [];
    if (existing !== undefined && dedupe.includes(existing.state.runtimeStatus)) throw alreadyExists(existing.state.runtimeStatus);
    const now = this.#clock();
    const executionId = randomUUID().replace(/-/g, '');
    const version = url.searchParams.get('version') ?? '';
    const generation = existing === undefined ? 0 : existing.state.generation + 1;
    // CreateTaskOrchestrationAsync: the start message first, then the record (a crash in between leaves no record).
    const started = historyEvent.executionStarted(now, { name: registered, instanceId, executionId, input, version, generation });
    await this.#deps.queues.sendControl({ mid: newMessageId(), instanceId, executionId, events: [started] });
    const state = { ...newInstanceState({ instanceId, name: registered, executionId, input, parent: null, now, generation }), version };
    const created = await this.#deps.store.create(state, existing?.etag);
    // SetNewExecutionAsync ignores a lost race: the other start's record stands, this start's message is discarded.
    if (created === 'conflict') this.#deps.logger.warn('durable.instance.start_raced', { instanceId });
    else this.#deps.logger.info('durable.instance.started', { instanceId, name: registered });

    const timeoutSeconds = Number(url.searchParams.get('timeout'));
    const pollSeconds = Number(url.searchParams.get('pollingInterval'));
    if (url.searchParams.has('timeout') && url.searchParams.has('pollingInterval') && timeoutSeconds > 0 && pollSeconds > 0) {
      return this.#waitForCompletion(url, instanceId, timeoutSeconds * 1000, pollSeconds * 1000);
    }
    return this.#checkStatusResponse(url, instanceId);
  }

  #checkStatusResponse(url: URL, instanceId: string): Reply {
    const links = managementUrls(url.origin, this.#deps.taskHub, instanceId, true, this.#deps.webhookAuth?.systemKey);
    return { status: 202, body: links, headers: { Location: links.statusQueryGetUri, 'Retry-After': '10' } };
  }

  async #waitForCompletion(url: URL, instanceId: string, timeoutMs: number, pollMs: number): Promise<Reply> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const stored = await this.#deps.store.read(instanceId);
      const status = stored?.state.runtimeStatus;
      if (stored !== undefined && status === 'Completed') return { status: 200, body: fromJsonText(stored.state.output) };
      if (stored !== undefined && status !== undefined && isTerminal(status)) return { status: 200, body: toStatusPayload(stored.state) };
      const left = deadline - Date.now();
      if (left <= 0) return this.#checkStatusResponse(url, instanceId);
      await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, left)));
    }
  }

  async #status(url: URL, instanceId: string): Promise<Reply> {
    const stored = await this.#deps.store.read(instanceId);
    if (stored === undefined) throw new HttpError(404, 'DURABLE_INSTANCE_NOT_FOUND', `No instance with ID '${instanceId}' found.`);
    const query = url.searchParams;
    const payload = toStatusPayload(stored.state, {
      showHistory: parseBoolean(query.get('showHistory')) ?? false,
      showHistoryOutput: parseBoolean(query.get('showHistoryOutput')) ?? false,
      showInput: parseBoolean(query.get('showInput')) ?? true,
    });
    const status = stored.state.runtimeStatus;
    if (!isTerminal(status)) return { status: 202, body: payload, headers: { Location: url.href, 'Retry-After': '5' } };
    const failAs500 = status === 'Failed' && parseBoolean(query.get('returnInternalServerErrorOnFailure')) === true;
    return { status: failAs500 ? 500 : 200, body: payload };
  }

  #filterFrom(url: URL): InstanceFilter {
    const query = url.searchParams;
    const from = parseDate(query.get('createdTimeFrom'));
    const to = parseDate(query.get('createdTimeTo'));
    const prefix = query.get('instanceIdPrefix');
    return {
      ...(from === undefined ? {} : { createdTimeFrom: from }),
      ...(to === undefined ? {} : { createdTimeTo: to }),
      runtimeStatus: parseStatuses(query.get('runtimeStatus')),
      ...(prefix === null || prefix === '' ? {} : { instanceIdPrefix: prefix }),
    };
  }

  async #list(req: IncomingMessage, url: URL): Promise<Reply> {
    const top = Number(url.searchParams.get('top'));
    const pageSize = Number.isInteger(top) && top > 0 ? Math.min(top, 1000) : DEFAULT_PAGE_SIZE;
    const header = req.headers['x-ms-continuation-token'];
    const incoming = Array.isArray(header) ? header[0] : header;
    let token: string | undefined;
    if (incoming !== undefined && incoming !== '') {
      token = Buffer.from(incoming, 'base64url').toString('utf8');
    }
    const showInput = parseBoolean(url.searchParams.get('showInput')) ?? true;
    const page = await this.#deps.store.list(this.#filterFrom(url), pageSize, token);
    const body = page.items.map((state) => toStatusPayload(state, { showInput }));
    const headers: Record<string, string> = page.continuationToken === undefined ? {} : { 'x-ms-continuation-token': Buffer.from(page.continuationToken).toString('base64url') };
    return { status: 200, body, headers };
  }

  async #purge(instanceId: string): Promise<Reply> {
    const deleted = await this.#deps.store.delete(instanceId);
    if (!deleted) throw new HttpError(404, 'DURABLE_INSTANCE_NOT_FOUND', `No instance with ID '${instanceId}' found.`);
    return { status: 200, body: { instancesDeleted: 1 } };
  }

  async #purgeByFilter(url: URL): Promise<Reply> {
    const filter = this.#filterFrom(url);
    if (filter.createdTimeFrom === undefined) throw new HttpError(400, 'DURABLE_MISSING_FILTER', "Please provide value for 'createdTimeFrom' parameter.");
    const matches = await this.#deps.store.listAll({ ...filter, createdTimeTo: filter.createdTimeTo ?? this.#clock() });
    let deleted = 0;
    for (const state of matches) if (await this.#deps.store.delete(state.instanceId)) deleted += 1;
    if (deleted === 0) return { status: 404 };
    return { status: 200, body: { instancesDeleted: deleted } };
  }

  async #raiseEvent(req: IncomingMessage, instanceId: string, eventName: string): Promise<Reply> {
    const stored = await this.#deps.store.read(instanceId);
    if (stored === undefined) throw new HttpError(404, 'DURABLE_INSTANCE_NOT_FOUND', `No instance with ID '${instanceId}' found.`);
    if (isTerminal(stored.state.runtimeStatus)) return { status: 410 };
    const mediaType = (req.headers['content-type'] ?? '').split(';')[0]?.trim().toLowerCase();
    const body = await readBody(req);
    if (body.trim() !== '' && mediaType !== 'application/json') throw new HttpError(400, 'DURABLE_NOT_JSON', 'Only application/json request content is supported');
    const input = jsonTextOf(body);
    await this.#deps.queues.sendControl({ mid: newMessageId(), instanceId, events: [historyEvent.eventRaised(this.#clock(), eventName, input)] });
    return { status: 202 };
  }

  async #terminate(instanceId: string, reason: string | null): Promise<Reply> {
    const stored = await this.#deps.store.read(instanceId);
    if (stored === undefined) throw new HttpError(404, 'DURABLE_INSTANCE_NOT_FOUND', `No instance with ID '${instanceId}' found.`);
    if (isTerminal(stored.state.runtimeStatus)) return { status: 410 };
    await this.#deps.queues.sendControl({ mid: newMessageId(), instanceId, events: [historyEvent.executionTerminated(this.#clock(), reason)] });
    this.#deps.logger.info('durable.instance.terminate_requested', { instanceId });
    return { status: 202 };
  }
}

function alreadyExists(status: RuntimeStatus): HttpError {
  // The extension lets DurableTask.Core's OrchestrationAlreadyExistsException reach its generic handler.
  return new HttpError(
    500,
    'DURABLE_INSTANCE_EXISTS',
    'Something went wrong while processing your request',
    `An Orchestration instance with the status ${status} already exists.`,
  );
}
