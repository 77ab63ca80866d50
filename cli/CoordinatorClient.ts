/**
 * The command line's HTTP client for the app's API: base URL and function key, a timeout per
 * request, and every failure turned into a `CliError` whose exit code says what kind of failure it
 * was (EXIT below), so scripts can branch on it without parsing text.
 */
export const EXIT = {
  ok: 0,
  /** Something unexpected: a 5xx other than 503, or a bug in this command line. */
  internal: 1,
  /** Bad arguments, or an input file that cannot be read or is not JSON. */
  usage: 2,
  /** The app refused the request (4xx with a code: invalid job, not found, duplicate, finished). */
  refused: 3,
  /** The app could not be reached, timed out, or answered 503 (storage or Durable unavailable). */
  unavailable: 4,
  /** 401/403: a function key is missing or wrong. */
  unauthorized: 5,
  /** watch: the job ended completed_with_errors. */
  completedWithErrors: 10,
  /** watch: the job ended failed. */
  failed: 11,
  /** watch: the job ended cancelled. */
  cancelled: 12,
  /** watch: the job was rejected. */
  rejected: 13,
  /** watch: --timeout passed while the job was still pending or running. */
  timedOut: 14,
} as const;

export class CliError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

export interface ClientOptions {
  /** The app's base URL, e.g. https://<app>.azurewebsites.net (a trailing /api is accepted). */
  readonly baseUrl: string;
  readonly key?: string;
  readonly timeoutMs?: number;
}

export class CoordinatorClient {
  readonly baseUrl: string;

  constructor(private readonly options: ClientOptions) {
    let url: URL;
    try {
      url = new URL(options.baseUrl);
    } catch {
      throw new CliError(EXIT.usage, `"${options.baseUrl}" is not a URL; give the app's base URL, e.g. http://localhost:7071.`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(EXIT.usage, `The base URL must be http or https, not ${url.protocol}`);
    this.baseUrl = url.href.replace(/\/+$/, '').replace(/\/api$/, '');
  }

  /** The `Retry-After` of the last answer, in seconds (absent when it gave none). */
  lastRetryAfterSeconds: number | undefined;

  get hasKey(): boolean {
    return this.options.key !== undefined && this.options.key !== '';
  }

  /** A JSON request to `/api<path>`; resolves with the parsed body of a 2xx answer. */
  async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (this.hasKey) headers['x-functions-key'] = this.options.key as string;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(`${this.baseUrl}/api${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? 30_000),
      });
    } catch (err) {
      const cause = err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err);
      throw new CliError(EXIT.unavailable, `Cannot reach ${this.baseUrl}: ${cause}. Is the app running (npm start)? Set --url or COORDINATOR_URL.`, 'UNREACHABLE');
    }
    const retryAfter = Number(res.headers.get('retry-after') ?? Number.NaN);
    this.lastRetryAfterSeconds = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined;
    const text = await res.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (res.ok) return json as T;
    const answer = json as { code?: unknown; message?: unknown } | undefined;
    const code = typeof answer?.code === 'string' ? answer.code : `HTTP_${res.status}`;
    const message = typeof answer?.message === 'string' ? answer.message : `${method} ${path} answered ${res.status}.`;
    if (res.status === 401 || res.status === 403) {
      throw new CliError(EXIT.unauthorized, `${method} ${path} needs a function key (${res.status}): pass --key or set COORDINATOR_KEY (a host key opens every route).`, 'UNAUTHORIZED');
    }
    if (res.status === 404 && answer?.code === undefined) throw new CliError(EXIT.refused, `${method} ${path}: no such route on ${this.baseUrl} (404). Is this the coordinator app?`, 'NOT_FOUND');
    if (res.status === 503) throw new CliError(EXIT.unavailable, `${code}: ${message}`, code);
    if (res.status >= 400 && res.status < 500) throw new CliError(EXIT.refused, `${code}: ${message}`, code);
    throw new CliError(EXIT.internal, `${code}: ${message}`, code);
  }
}
