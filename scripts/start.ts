/**
 * `npm start [-- --port 7071] [--instances N] [--separate-apps] [--host devhost|func|extensions]`: runs
 * the built app locally with Azurite.
 *
 * - Azurite: reused when one already answers on 10000-10002 (so `UseDevelopmentStorage=true`
 *   works), otherwise started here with its data in the git-ignored `.azurite/`; a port taken by
 *   something that is not Azurite is a clear error.
 * - `local.settings.json` is created from `local.settings.sample.json` when missing.
 * - The host (chooseHost): `func start` when Core Tools answers `func --version`; else the extensions
 *   host (exthost/: the real Durable, queue and timer extensions in a .NET WebJobs host, the app in a
 *   Node.js worker) when `dotnet --version` says an SDK 8 or later, built first with `dotnet build`
 *   (its progress and time shown; skipped when the build is newer than exthost/'s sources); else the
 *   development host. It says which and why. `--host func|extensions|devhost` (alias `--devhost`)
 *   forces one.
 * - `--instances N`: N host processes on ports port, port+1, ... with instance ids instance-1..N,
 *   sharing one host id (one scaled-out app) unless `--separate-apps` gives each its own.
 * - `--flex`: Flex Consumption's shape instead (scripts/flexShape.ts): timer-1, durable-1, http-1,
 *   worker-1, worker-2, each loading only its scale group's functions, one host id.
 * - Ctrl-C / SIGTERM / SIGHUP stops every instance gracefully (a second one kills), then Azurite if
 *   it was started here; so does npm (or the shell it runs this in) going away. An instance killed
 *   on its own leaves the others running (scripts/supervise.ts says why and what else it watches).
 * - A previous `npm start` still running (or its orphans) is named with its pids instead of failing
 *   on a port in use.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { Socket } from 'node:net';
import { join, relative, sep } from 'node:path';

import { HOST_PROCESS_ENTRY } from 'devhost';
import { startAzurite } from 'devhost/testing';

import { buildExtHost, dotnetVersion, extHostCommand } from './extHostProcess';
import { type FlexGroup, flexInstances, flexMain } from './flexShape';
import { ancestorPids, clearRunRecord, findLeftovers, leftoverMessage, superviseInstances, watchProcesses, writeRunRecord } from './supervise';


export interface AzuritePorts {
  readonly blob: number;
  readonly queue: number;
  readonly table: number;
}

/** Azurite's default ports, which `UseDevelopmentStorage=true` points at. */
export const AZURITE_PORTS: AzuritePorts = { blob: 10000, queue: 10001, table: 10002 };
const STOP_TIMEOUT_MS = 30_000;

/** Which host runs the app: `auto` is Core Tools when usable, else the extensions host with a .NET SDK 8+, else the development host. */
export type HostChoice = 'auto' | 'devhost' | 'func' | 'extensions';
const HOST_CHOICES: readonly HostChoice[] = ['auto', 'devhost', 'func', 'extensions'];

export interface StartArgs {
  readonly port: number;
  readonly instances: number;
  readonly separateApps: boolean;
  readonly host: HostChoice;
  readonly hostId: string;
  /** `--flex`: Flex Consumption's shape, one instance per scale group and two workers (scripts/flexShape.ts). */
  readonly flex: boolean;
}

export class StartError extends Error {
  override readonly name = 'StartError';
}

export function parseStartArgs(argv: readonly string[]): StartArgs {
  let port = 7071;
  let instances = 1;
  let separateApps = false;
  let host: HostChoice = 'auto';
  let hostId = 'leader-coordinator';
  let flex = false;
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] as string;
    const [name, inline] = arg.includes('=') ? [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)] : [arg, undefined];
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || v === '') throw new StartError(`${name} needs a value`);
      return v;
    };
    if (name === '--port') port = Number(value());
    else if (name === '--instances') instances = Number(value());
    else if (name === '--host-id') hostId = value();
    else if (name === '--separate-apps') separateApps = true;
    else if (name === '--flex') flex = true;
    else if (name === '--devhost') host = 'devhost';
    else if (name === '--host') {
      const choice = value();
      if (!(HOST_CHOICES as readonly string[]).includes(choice)) throw new StartError(`--host must be one of ${HOST_CHOICES.join(', ')}`);
      host = choice as HostChoice;
    } else throw new StartError(`unknown option ${arg} (known: --port N, --instances N, --separate-apps, --flex, --host devhost|func|extensions, --devhost, --host-id ID)`);
  }
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new StartError('--port must be an integer from 1 to 65535');
  if (!Number.isInteger(instances) || instances < 1 || instances > 16) throw new StartError('--instances must be an integer from 1 to 16');
  if (port + instances - 1 > 65535) throw new StartError('--port plus --instances goes past port 65535');
  if (!/^[a-z0-9](?:[a-z0-9-]{0,27}[a-z0-9])?$/.test(hostId)) throw new StartError('--host-id must be 1-29 lowercase letters, digits and dashes');
  if (flex && (instances !== 1 || separateApps)) throw new StartError('--flex runs its own instances (one per scale group, two workers): leave out --instances and --separate-apps');
  if (flex && host === 'func') throw new StartError('--flex runs each instance with only its group\'s functions, which Core Tools cannot: use --host extensions or --devhost');
  return { port, instances: flex ? flexInstances().length : instances, separateApps, host, hostId, flex };
}

/** Ports, instance ids and host ids of the instances to run (and, with --flex, each one's scale group). */
export function planInstances(args: StartArgs): Array<{ port: number; instanceId: string; hostId: string; group?: FlexGroup }> {
  if (args.flex) return flexInstances().map((f, i) => ({ port: args.port + i, instanceId: f.instanceId, hostId: args.hostId, group: f.group }));
  return Array.from({ length: args.instances }, (_, i) => ({
    port: args.port + i,
    instanceId: `instance-${i + 1}`,
    hostId: args.separateApps ? `${args.hostId}-${i + 1}` : args.hostId,
  }));
}

async function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    socket.setTimeout(1_000);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('timeout', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(false));
    socket.connect(port, '127.0.0.1');
  });
}

/**
 * The `Server` header of whatever answers HTTP on the port ("Azurite-Blob/3.37.0" for Azurite). An
 * Azurite that is busy or just started may not answer its first request within the timeout (a
 * clean-clone CI run met that on a loaded machine and took it for something else): a port that gave
 * no answer is asked again, three times in all, before it counts as not Azurite.
 */
async function serverHeader(port: number): Promise<string | undefined> {
  for (let attempt = 1; ; attempt++) {
    const answered = await serverHeaderOnce(port);
    if (answered !== null || attempt >= 3) return answered ?? undefined;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** The header, undefined for an HTTP answer without one, null for no answer in time (or no HTTP). */
async function serverHeaderOnce(port: number): Promise<string | undefined | null> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, path: '/', method: 'GET', timeout: 2_000 }, (res) => {
      res.resume();
      resolve(typeof res.headers.server === 'string' ? res.headers.server : undefined);
    });
    req.once('timeout', () => req.destroy());
    req.once('error', () => resolve(null));
    req.end();
  });
}

interface StartedAzurite {
  readonly pid: number | undefined;
  stop(): Promise<void>;
}

/** Azurite on the given ports with its data kept in `location`, in its own process group (see AzuriteOptions.detached). */
async function launchAzurite(location: string, ports: AzuritePorts): Promise<StartedAzurite> {
  try {
    return await startAzurite({ location, blobPort: ports.blob, queuePort: ports.queue, tablePort: ports.table, detached: true });
  } catch (err) {
    throw new StartError(`Azurite did not start (is the azurite package installed? run npm ci): ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** Reuses a running Azurite on the default ports or starts one with data in `<root>/.azurite/`. */
export async function ensureAzurite(root: string, azurite: AzuritePorts = AZURITE_PORTS): Promise<{ started?: StartedAzurite; note: string }> {
  const ports = [azurite.blob, azurite.queue, azurite.table];
  const range = ports.join(', ');
  const open = await Promise.all(ports.map(portOpen));
  if (open.some(Boolean)) {
    const servers = await Promise.all(ports.map((p, i) => (open[i] === true ? serverHeader(p) : Promise.resolve(undefined))));
    const foreign = ports.filter((_, i) => open[i] === true && !(servers[i] ?? '').startsWith('Azurite'));
    if (foreign.length > 0) {
      throw new StartError(
        `port(s) ${foreign.join(', ')} are in use by something that is not Azurite; UseDevelopmentStorage=true needs Azurite on ${range}. Stop that process, or run Azurite there yourself.`,
      );
    }
    if (open.every(Boolean)) return { note: `Azurite: reusing the one already running on ports ${range}` };
    throw new StartError(`Azurite answers on only some of the ports ${range} (${ports.filter((_, i) => open[i] === true).join(', ')}); stop it or start it with blob, queue and table.`);
  }
  const location = join(root, '.azurite');
  mkdirSync(location, { recursive: true });
  const started = await launchAzurite(location, azurite);
  return { started, note: `Azurite: started on ports ${range}, data in .azurite/` };
}

/** Core Tools is usable only when `func --version` really answers (its npm install may be broken). */
export function detectCoreTools(env: NodeJS.ProcessEnv = process.env): { usable: boolean; version?: string; reason: string } {
  const result = spawnSync('func', ['--version'], { encoding: 'utf8', timeout: 30_000, env, shell: process.platform === 'win32' });
  if (result.error !== undefined) return { usable: false, reason: `\`func --version\` could not run (${(result.error as NodeJS.ErrnoException).code ?? result.error.message})` };
  const version = result.stdout.trim().split('\n')[0] ?? '';
  if (result.status !== 0 || !/^\d+\.\d+/.test(version)) return { usable: false, reason: `\`func --version\` failed (exit ${String(result.status)})` };
  return { usable: true, version, reason: `Core Tools ${version} found` };
}

export type HostKind = 'func' | 'devhost' | 'extensions';

const HOST_NAMES: Readonly<Record<HostKind, string>> = {
  func: 'Azure Functions Core Tools, func start',
  extensions: 'extensions host, the real Durable, queue and timer extensions (exthost/README.md)',
  devhost: "development host, this project's emulator of the Functions host and Durable (devhost/README.md)",
};

/** The oldest .NET SDK the extensions host builds with (exthost/ExtHost.csproj targets net8.0). */
export const MIN_DOTNET_MAJOR = 8;

/**
 * Which host `npm start` runs the app on, and why, in the order users meet the real extension: Core
 * Tools when it answers, else the extensions host when a .NET SDK 8 or later answers, else the
 * development host. A forced choice is checked for what it needs (a broken Core Tools is an error,
 * not a quiet fall-back); a missing .NET SDK for `--host extensions` is the build's error.
 * The detections are functions so that a forced choice asks nothing it does not need.
 */
export function chooseHost(
  requested: HostChoice,
  coreTools: () => { usable: boolean; reason: string },
  dotnet: () => { version?: string; reason: string },
): { kind: HostKind; reason: string } {
  if (requested === 'devhost') return { kind: 'devhost', reason: '--host devhost given' };
  if (requested === 'extensions') return { kind: 'extensions', reason: '--host extensions given' };
  const func = coreTools();
  if (requested === 'func') {
    if (!func.usable) throw new StartError(`--host func: Core Tools is not usable: ${func.reason}`);
    return { kind: 'func', reason: `--host func given; ${func.reason}` };
  }
  if (func.usable) return { kind: 'func', reason: func.reason };
  const sdk = dotnet();
  const major = sdk.version === undefined ? undefined : Number(sdk.version.split('.')[0]);
  if (major !== undefined && major >= MIN_DOTNET_MAJOR) return { kind: 'extensions', reason: `${func.reason}; ${sdk.reason} found; --devhost for the development host` };
  const why = major === undefined ? sdk.reason : `.NET SDK ${sdk.version ?? ''} is older than ${MIN_DOTNET_MAJOR}`;
  return { kind: 'devhost', reason: `${func.reason}; ${why}, so not the extensions host` };
}

function ensureLocalSettings(root: string): string | undefined {
  const target = join(root, 'local.settings.json');
  if (existsSync(target)) return undefined;
  copyFileSync(join(root, 'local.settings.sample.json'), target);
  return 'Created local.settings.json from local.settings.sample.json.';
}

function pipeWithPrefix(child: ChildProcess, prefix: string): void {
  for (const [stream, out] of [
    [child.stdout, process.stdout],
    [child.stderr, process.stderr],
  ] as const) {
    let partial = '';
    stream?.on('data', (chunk: Buffer) => {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) out.write(`${prefix} ${line}\n`);
    });
    stream?.on('end', () => {
      if (partial !== '') out.write(`${prefix} ${partial}\n`);
    });
  }
}

/** npm's pid when npm runs this script directly (package.json's start script execs node), else undefined. */
function npmParent(): number | undefined {
  try {
    // npm sets its process title ("npm start ..."), or the command line is "node .../npm-cli.js start".
    const command = readFileSync(`/proc/${process.ppid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    return /(^|[\s/\\])npm(-cli\.js)?\s/.test(command) ? process.ppid : undefined;
  } catch {
    return undefined;
  }
}

/** How to stop it: the pids that stop everything on SIGINT or SIGTERM, and the one instance's pid that does not. */
export function stopBanner(startPid: number, npmPid: number | undefined): string {
  const pids = npmPid === undefined ? `pid ${startPid}` : `npm's pid ${npmPid} or this script's pid ${startPid}`;
  return `Ctrl-C, or SIGINT/SIGTERM to ${pids}, stops everything. Killing one instance's pid leaves the others running.`;
}

async function main(): Promise<number> {
  const args = parseStartArgs(process.argv.slice(2));
  // Compiled layout: <outDir>/scripts/start.js; the project root holds host.json and package.json.
  const root = process.cwd();
  if (!existsSync(join(root, 'host.json'))) throw new StartError(`no host.json in ${root}: run npm start from the project folder`);
  const leftovers = findLeftovers(root);
  if (leftovers !== undefined) throw new StartError(leftoverMessage(leftovers));
  const busy = (await Promise.all(planInstances(args).map(async (i) => ((await portOpen(i.port)) ? i.port : undefined)))).filter((p) => p !== undefined);
  if (busy.length > 0) {
    throw new StartError(`port(s) ${busy.join(', ')} already in use: another app (or a host left by an earlier run) listens there. Stop it, or use --port.`);
  }
  const created = ensureLocalSettings(root);
  if (created !== undefined) console.log(created);

  const azurite = await ensureAzurite(root);
  console.log(azurite.note);

  const choice = chooseHost(
    args.host,
    // Core Tools loads the whole app: Flex's shape needs a host that loads a part of it.
    () => (args.flex ? { usable: false, reason: '--flex given (Core Tools cannot run one scale group alone)' } : detectCoreTools()),
    () => dotnetVersion(),
  );
  console.log(`Host: ${HOST_NAMES[choice.kind]} (${choice.reason})`);
  const kind = choice.kind;
  let extHostDll: string | undefined;
  if (kind === 'extensions') {
    try {
      extHostDll = buildExtHost({ progress: (line) => console.log(`[dotnet build] ${line}`) });
    } catch (err) {
      throw new StartError(err instanceof Error ? err.message : String(err));
    }
  }

  // The app compiled with this script (dist/functions/*.js for `npm start`, as package.json main says).
  const appMain = `${relative(root, join(__dirname, '..', 'functions')).split(sep).join('/')}/*.js`;
  const children: Array<{ child: ChildProcess; label: string; port: number }> = [];
  for (const instance of planInstances(args)) {
    const label = `[${instance.instanceId}]`;
    const instanceMain = instance.group === undefined ? appMain : flexMain(root, instance.group);
    const env = {
      ...process.env,
      AzureFunctionsWebHost__hostid: instance.hostId,
      // Core Tools sets no instance id of its own; the app falls back to WEBSITE_INSTANCE_ID.
      WEBSITE_INSTANCE_ID: instance.instanceId,
    };
    const ext = kind === 'extensions' ? extHostCommand({ appRoot: root, main: instanceMain, port: instance.port, instanceId: instance.instanceId, hostId: instance.hostId }, extHostDll) : undefined;
    const child = kind === 'func'
      ? spawn('func', ['start', '--port', String(instance.port)], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true, shell: process.platform === 'win32' })
      : ext !== undefined
      ? spawn(ext.command, ext.args, { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
      : spawn(
          process.execPath,
          [HOST_PROCESS_ENTRY, root, '--main', instanceMain, '--port', String(instance.port), '--instance-id', instance.instanceId, '--host-id', instance.hostId],
          // Own process group: Ctrl-C reaches this script only, which then stops each instance once.
          { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true },
        );
    pipeWithPrefix(child, label);
    children.push({ child, label, port: instance.port });
    const group = instance.group === undefined ? '' : `, scale group ${instance.group}`;
    console.log(`${label} http://localhost:${instance.port}/api  (host id ${instance.hostId}${group}, pid ${String(child.pid)})`);
  }
  writeRunRecord(root, {
    startedAt: new Date().toISOString(),
    startPid: process.pid,
    hosts: children.flatMap(({ child, label, port }) => (child.pid === undefined ? [] : [{ label, pid: child.pid, port }])),
    ...(azurite.started?.pid === undefined ? {} : { azuritePid: azurite.started.pid }),
  });
  if (args.flex) console.log('Flex Consumption\'s shape: each instance runs one scale group\'s functions (http, durable, timer, worker x2), one app (one host id).');
  else if (args.instances > 1) console.log(args.separateApps ? 'Each instance is its own app (own host id).' : 'All instances are one scaled-out app (one host id).');
  console.log(stopBanner(process.pid, npmParent()));

  const supervision = superviseInstances(children, {
    stopTimeoutMs: STOP_TIMEOUT_MS,
    log: (line) => console.log(line),
    error: (line) => console.error(line),
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => supervision.stopAll(signal));
  // npm does not pass SIGTERM on to its script: when npm or its shell goes, stop rather than linger.
  const ancestors = watchProcesses(ancestorPids(), (pid) => supervision.stopAll(`the process that started npm start (pid ${pid}) is gone`));

  const { codes, failed } = await supervision.done;
  ancestors.stop();
  if (azurite.started !== undefined) {
    await azurite.started.stop();
    console.log('Azurite stopped.');
  }
  clearRunRecord(root);
  return failed ? Math.max(...codes, 1) : 0;
}

if (require.main === module) {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(`npm start: ${err instanceof Error ? err.message : String(err)}`);
      process.exit(1);
    },
  );
}
