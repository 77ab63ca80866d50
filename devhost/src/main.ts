/**
 * The development host process: `npx devhost [appRoot] [--port 7071] [--host-id id] [--instance-id id]
 * [--main glob] [--listen 127.0.0.1] [--drain-timeout seconds]` (this file, compiled).
 *
 * Like `func start`: `local.settings.json` Values are loaded into the environment without
 * overriding variables already set, host.json is read, and what is served is printed. The first
 * line starting with "Development host listening on " carries the URL (scripts and tests wait for
 * it). SIGTERM/SIGINT stop gracefully (triggers, in-flight invocations, Durable backend, HTTP, the
 * app's appTerminate hooks); the app's own signal handlers (the leader releasing its lease) run
 * alongside, and the process then exits when nothing is left to do (at most 15 s later). A second
 * signal exits at once.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';

import { DevHostError, toDevHostError } from './errors';
import { defaultHostId, FunctionHost, validateHostId } from './FunctionHost';
import { FunctionKeys } from './http/FunctionKeys';
import { createLogger } from './log';

export const DEFAULT_PORT = 7071;
export const READY_LINE_PREFIX = 'Development host listening on ';
const EXIT_GRACE_MS = 15_000;

export interface MainArgs {
  readonly appRoot: string;
  readonly port: number;
  readonly hostId?: string;
  readonly instanceId?: string;
  readonly main?: string;
  readonly listen: string;
  readonly drainTimeoutMs: number;
}

export function parseArgs(argv: readonly string[], cwd: string): MainArgs {
  const values = new Map<string, string>();
  let appRoot: string | undefined;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    if (arg.startsWith('--')) {
      const eq = arg.indexOf('=');
      const name = eq > 0 ? arg.slice(2, eq) : arg.slice(2);
      const value = eq > 0 ? arg.slice(eq + 1) : argv[++i];
      if (!['port', 'host-id', 'instance-id', 'main', 'listen', 'drain-timeout', 'app-root'].includes(name)) {
        throw new DevHostError('DEVHOST_BAD_ARGS', `Unknown option --${name}.`, true);
      }
      if (value === undefined || value === '') throw new DevHostError('DEVHOST_BAD_ARGS', `Option --${name} needs a value.`, true);
      values.set(name, value);
    } else if (appRoot === undefined) {
      appRoot = arg;
    } else {
      throw new DevHostError('DEVHOST_BAD_ARGS', `Unexpected argument "${arg}".`, true);
    }
  }
  const port = Number(values.get('port') ?? DEFAULT_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new DevHostError('DEVHOST_BAD_ARGS', '--port must be an integer from 0 to 65535.', true);
  const drain = Number(values.get('drain-timeout') ?? '10');
  if (!Number.isFinite(drain) || drain < 0) throw new DevHostError('DEVHOST_BAD_ARGS', '--drain-timeout must be a number of seconds.', true);
  const hostId = values.get('host-id');
  if (hostId !== undefined) validateHostId(hostId);
  const instanceId = values.get('instance-id');
  if (instanceId !== undefined && !/^[A-Za-z0-9._:-]{1,128}$/.test(instanceId)) {
    throw new DevHostError('DEVHOST_BAD_ARGS', '--instance-id must be 1-128 letters, digits, ".", "_", ":" or "-".', true);
  }
  const main = values.get('main');
  return {
    appRoot: resolve(cwd, values.get('app-root') ?? appRoot ?? '.'),
    port,
    listen: values.get('listen') ?? '127.0.0.1',
    drainTimeoutMs: drain * 1000,
    ...(hostId === undefined ? {} : { hostId }),
    ...(instanceId === undefined ? {} : { instanceId }),
    ...(main === undefined ? {} : { main }),
  };
}

/**
 * Copies `Values` of `<appRoot>/local.settings.json` into `env` where not already set (as `func
 * start` does); returns the names it set. A missing file is fine; a malformed one is an error.
 */
export function loadLocalSettings(appRoot: string, env: NodeJS.ProcessEnv): string[] {
  const path = join(appRoot, 'local.settings.json');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return [];
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new DevHostError('DEVHOST_BAD_LOCAL_SETTINGS', `${path} is not valid JSON.`, true);
  }
  const values = (parsed as { Values?: unknown }).Values;
  if (values === undefined) return [];
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    throw new DevHostError('DEVHOST_BAD_LOCAL_SETTINGS', `${path}: "Values" must be an object of strings.`, true);
  }
  const set: string[] = [];
  for (const [name, value] of Object.entries(values as Record<string, unknown>)) {
    if (env[name] !== undefined) continue;
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue;
    env[name] = String(value);
    set.push(name);
  }
  return set;
}

export const USAGE = `Usage: devhost [appRoot] [options]

Runs a Node.js v4-model Functions app (default: the current folder) the way \`func start\` does.

Options:
  --port <n>             HTTP port (default ${DEFAULT_PORT}; 0 picks a free one)
  --host-id <id>         the host id (timers' and locks' blobs); default derived from appRoot
  --instance-id <id>     this process's instance id (WEBSITE_INSTANCE_ID)
  --main <glob>          the app's entry files (default: package.json "main")
  --listen <address>     the address to listen on (default 127.0.0.1)
  --drain-timeout <s>    seconds in-flight invocations get at shutdown (default 10)
  -h, --help             this text
`;

async function main(): Promise<void> {
  if (process.argv.slice(2).some((a) => a === '--help' || a === '-h')) {
    process.stdout.write(USAGE);
    return;
  }
  const args = parseArgs(process.argv.slice(2), process.cwd());
  const logger = createLogger('devhost');
  loadLocalSettings(args.appRoot, process.env);
  const hostId = args.hostId ?? process.env.AzureFunctionsWebHost__hostid ?? defaultHostId(args.appRoot);
  // Port 0 (tests) gives no distinguishing number up front, so a random suffix stands in for it.
  const instanceId = args.instanceId ?? `${hostname().replace(/[^A-Za-z0-9._:-]/g, '-').slice(0, 100)}-${args.port === 0 ? randomBytes(3).toString('hex') : args.port}`;
  // What App Service sets for an app on Azure: the instance's identity and its public host name
  // (durable-functions rewrites its client URLs to localhost:7071 when WEBSITE_HOSTNAME is unset).
  process.env.WEBSITE_INSTANCE_ID ??= instanceId;
  process.env.AzureFunctionsWebHost__hostid ??= hostId;
  if (args.port !== 0) process.env.WEBSITE_HOSTNAME ??= `localhost:${args.port}`;

  const host = await FunctionHost.start({
    appRoot: args.appRoot,
    ...(args.main === undefined ? {} : { main: args.main }),
    port: args.port,
    listenHost: args.listen,
    hostId,
    instanceId,
    env: process.env,
    logger,
    drainTimeoutMs: args.drainTimeoutMs,
  });
  process.env.WEBSITE_HOSTNAME ??= `localhost:${host.port}`;

  const base = `http://${args.listen === '0.0.0.0' ? 'localhost' : args.listen}:${host.port}`;
  const lines = [`${READY_LINE_PREFIX}${base} (host id ${hostId}, instance ${instanceId})`, '', 'Functions:'];
  const keysOn = FunctionKeys.fromEnv(process.env).enabled;
  if (!keysOn) lines.splice(1, 0, 'Function keys: off (set DEVHOST_HOST_KEYS / DEVHOST_FUNCTION_KEYS / DEVHOST_MASTER_KEY to enforce them)');
  for (const route of host.http.describeRoutes()) {
    lines.push(`  ${route.name}: [${route.methods.length === 0 ? 'ALL' : route.methods.join(',')}] ${base}${route.path}${route.authLevel === 'anonymous' || !keysOn ? '' : ` (${route.authLevel} key)`}`);
  }
  for (const fn of host.app.list()) {
    if (fn.triggerType !== 'httpTrigger') lines.push(`  ${fn.name}: ${fn.triggerType}`);
  }
  lines.push(
    '',
    host.durableEnabled
      ? `Durable: served at ${base}/runtime/webhooks/durabletask${keysOn ? ' (system key durabletask_extension, or the master key)' : ''}; task hub settings from host.json durableTask`
      : 'Durable: not served',
  );
  console.log(lines.join('\n'));

  let signals = 0;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals > 1) {
      console.error(`Second ${signal}: exiting now.`);
      process.exit(1);
    }
    console.log(`${signal} received: stopping the development host...`);
    void host.stop().then(
      () => {
        console.log('Development host stopped.');
        // Exit once the app's own shutdown work (its signal handlers) has let the event loop empty;
        // the unref'd timer only bounds a process that something still keeps alive.
        setTimeout(() => process.exit(0), EXIT_GRACE_MS).unref();
      },
      (err: unknown) => {
        console.error(`Stop failed: ${toDevHostError(err).message}`);
        process.exit(1);
      },
    );
  };
  // process.on (not once): the app's handlers see a listener and leave the exit to us.
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}

/** The endpoints a storage connection setting's value points at (host:port), Azurite's for UseDevelopmentStorage=true. */
function endpointsOf(value: string): string[] {
  if (/UseDevelopmentStorage=true/i.test(value)) return ['127.0.0.1:10000', '127.0.0.1:10001', '127.0.0.1:10002', 'localhost:10000', 'localhost:10001', 'localhost:10002'];
  return [...value.matchAll(/https?:\/\/([^/;:\s]+)(?::(\d+))?/gi)].map((m) => `${(m[1] ?? '').toLowerCase()}:${m[2] ?? (m[0].startsWith('https') ? '443' : '80')}`);
}

/**
 * For a start that failed because storage did not answer (ECONNREFUSED and the like): which
 * settings point at that endpoint, and what to do. Undefined for any other failure.
 */
export function storageUnreachableHint(message: string, env: Readonly<Record<string, string | undefined>>): string | undefined {
  const refused = /\b(ECONNREFUSED|ETIMEDOUT|EHOSTUNREACH|ENOTFOUND|EAI_AGAIN)\b\s*([^\s,;)]*)/.exec(message);
  if (refused === null) return undefined;
  const target = (refused[2] ?? '').toLowerCase().replace(/^::ffff:/, '');
  const settings = Object.entries(env)
    .filter(([name, value]) => value !== undefined && /(^AzureWebJobsStorage$|Storage$|__(blob|queue|table)ServiceUri$|ConnectionString$)/i.test(name) && (target === '' || endpointsOf(value).includes(target)))
    .map(([name]) => name)
    .sort();
  const which = settings.length > 0 ? `The storage named by ${settings.join(', ')}` : 'A storage account the app uses';
  return (
    `${which} did not answer${target === '' ? '' : ` at ${target}`} (${refused[1] ?? 'unreachable'}). ` +
    'Locally that is Azurite: `npm start` starts it, or run `npx azurite --location .azurite --skipApiVersionCheck`. ' +
    'Otherwise check the setting\'s endpoint and the network.'
  );
}

/** Runs the host process (the `devhost` command): what `node main.js` and `npx devhost` do. */
export function runHostProcess(): void {
  main().catch((err: unknown) => {
    const error = toDevHostError(err, 'DEVHOST_START_FAILED');
    const hint = storageUnreachableHint(error.message, process.env);
    console.error(`Development host failed to start: [${error.code}] ${error.message}${hint === undefined ? '' : `\n  ${hint}`}`);
    process.exit(1);
  });
}

if (require.main === module) runHostProcess();
