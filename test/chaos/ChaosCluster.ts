/**
 * The system under chaos: one private Azurite, and N host processes running this build's app, each
 * reaching storage only through its own three TCP proxies (blob, queue, table) so its storage can be
 * cut or reset alone. Every line a process prints goes to its log file in the run folder and, parsed,
 * to `onLog`; every storage request it makes passes `onRequest`.
 *
 * The host is the development host (one Node.js process per instance, scripts/devHostProcess.ts) or
 * the extensions host (exthost/: a .NET WebJobs host with the real Durable, queue and timer
 * extensions and the app in the Node.js worker it starts, scripts/extHostProcess.ts; built once
 * before the first instance starts). An extensions host instance is two processes: a pause
 * (SIGSTOP, SIGCONT) and a kill (SIGKILL) reach both, the .NET host and its worker, read from
 * /proc as test/e2e/support/pauseProcess.ts does; a graceful stop (SIGTERM) goes to the .NET host,
 * which stops its listeners and then sends SIGTERM to its worker (the app's own shutdown).
 *
 * Instances keep their port and name across restarts; each start is a new generation with its
 * own COORDINATOR_INSTANCE_ID (`instance-2.g3`), so every lease holder names exactly one process.
 * An exit the harness did not ask for is reported as unexpected, and the instance is started again.
 *
 * `flex`: the instances of Flex Consumption's shape instead (scripts/flexShape.ts, as `npm start --
 * --flex` runs them): `timer-1`, `durable-1`, `http-1`, `worker-1`, `worker-2`, one app (one host
 * id), each loading only its scale group's entry file (scripts/flex/<group>Group.js), so only
 * `http-1` answers the app's HTTP API.
 */
import { type ChildProcess, spawn, type SpawnOptions } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, mkdirSync, readFileSync, symlinkSync, writeFileSync,type WriteStream } from 'node:fs';
import { join, resolve } from 'node:path';

import { type AzuriteInstance, connectionStringFor, freePort, startAzurite } from 'devhost/testing';

import { spawnDevHost } from '../../scripts/devHostProcess';
import { buildExtHost, EXTHOST_READY_PREFIX, extHostCommand } from '../../scripts/extHostProcess';
import { FLEX_GROUPS, type FlexGroup, flexInstances } from '../../scripts/flexShape';
import { type E2EHost } from '../e2e/support/appHost';
import { processTree, signalAll } from '../e2e/support/pauseProcess';
import { type SniffedRequest } from '../support/httpRequestSniffer';
import { type ProxiedRequest, type ProxiedResponse, startTcpProxy, type TcpProxy } from '../support/tcpProxy';
import { type LogEntry, type ProcessExit, type ProcessRef } from './ChaosRecord';

/** <outDir> (this file is <outDir>/test/chaos/ChaosCluster.js) and the repository root above it. */
const OUT_DIR = resolve(__dirname, '..', '..');
const REPO_ROOT = resolve(OUT_DIR, '..');
const READY: Readonly<Record<E2EHost, string>> = { devhost: 'Development host listening on ', extensions: EXTHOST_READY_PREFIX };
/** The .NET host starts slower (JIT, the extensions' own listeners) than a Node.js process, as in test/e2e/support/appHost.ts. */
const START_TIMEOUT_MS: Readonly<Record<E2EHost, number>> = { devhost: 90_000, extensions: 120_000 };
const STOP_TIMEOUT_MS = 30_000;
const TAIL_LINES = 15;
/** What the extensions host prints before it stops itself on an error that escaped the WebJobs SDK (exthost/TimeoutHandler.cs). */
const HOST_STOPPED_PREFIX = 'exthost: unhandled error, stopping the host: ';

export const TASK_HUB = 'ChaosHub';

export type ServiceName = 'blob' | 'queue' | 'table';

export interface ClusterOptions {
  /** Which host runs each instance; the development host when absent. */
  readonly host?: E2EHost;
  readonly instances: number;
  readonly separateApps: boolean;
  /** Flex Consumption's shape (one instance per scale group, two workers; `instances` and `separateApps` do not apply). */
  readonly flex?: boolean;
  /** Folder for the app root, log files and Azurite's data. */
  readonly runDir: string;
  readonly onLog: (entry: LogEntry) => void;
  readonly onExit: (exit: ProcessExit) => void;
  readonly onRequest: (instance: ChaosInstance, service: ServiceName, request: ProxiedRequest) => 'forward' | 'drop' | void;
  readonly onResponse: (instance: ChaosInstance, service: ServiceName, response: ProxiedResponse) => void;
  /** The requests `onRequest` needs the body of (held back by the proxy until it is whole); none when absent. */
  readonly wantsBody?: (service: ServiceName, request: SniffedRequest) => boolean;
  /** Extra app settings for every instance. */
  readonly settings?: Readonly<Record<string, string>>;
}

interface RunningProcess extends ProcessRef {
  readonly child: ChildProcess;
  readonly startedAt: number;
  readonly exited: Promise<void>;
  /** Why the harness ended it, once it sent SIGKILL/SIGTERM; an exit without it is unexpected. */
  endReason?: string;
  paused: boolean;
  /** The processes a SIGSTOP reached (the extensions host and its worker): SIGCONT goes to the same. */
  pausedPids?: readonly number[];
  tail: string[];
  /** The error its host stopped on (HOST_STOPPED_PREFIX), when it printed one: its stack outruns the tail. */
  hostError?: string;
}

export class ChaosInstance {
  gen = 0;
  process: RunningProcess | undefined;
  /** Set while the harness keeps it down on purpose (between a kill and its restart). */
  down = false;

  constructor(
    readonly index: number,
    readonly name: string,
    readonly port: number,
    readonly hostId: string,
    readonly proxies: Readonly<Record<ServiceName, TcpProxy>>,
    /** Its scale group in Flex Consumption's shape; undefined where every instance runs every function. */
    readonly group?: FlexGroup,
  ) {}

  /** Whether it answers the app's HTTP API (/api/...): every instance, but in the flex shape only the `http` group's. */
  get servesApi(): boolean {
    return this.group === undefined || this.group === 'http';
  }

  get baseUrl(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.process !== undefined;
  }

  get paused(): boolean {
    return this.process?.paused === true;
  }

  get storageCut(): boolean {
    return this.proxies.blob.blackholed || this.proxies.blob.resetting;
  }

  /** Running, not paused, storage reachable: the instance can act. */
  get healthy(): boolean {
    return this.running && !this.paused && !this.storageCut;
  }

  ref(): ProcessRef | undefined {
    const p = this.process;
    return p === undefined ? undefined : { instance: p.instance, gen: p.gen, pid: p.pid, holder: p.holder };
  }
}

export class ChaosCluster {
  readonly masterKey = `chaos-${randomBytes(8).toString('hex')}`;
  readonly instances: ChaosInstance[] = [];
  #azurite: AzuriteInstance | undefined;
  #appRoot = '';
  #logs = new Map<string, WriteStream>();
  #stopping = false;
  #extHostDll: string | undefined;

  constructor(private readonly options: ClusterOptions) {}

  get host(): E2EHost {
    return this.options.host ?? 'devhost';
  }

  /** The harness's own connection: straight to Azurite, never through a proxy. */
  get connectionString(): string {
    if (this.#azurite === undefined) throw new Error('cluster not started');
    return this.#azurite.connectionString;
  }

  async start(): Promise<void> {
    mkdirSync(this.options.runDir, { recursive: true });
    // Once, before anything runs: `dotnet build` (ExtHostUnavailable without a .NET SDK, saying so).
    if (this.host === 'extensions') this.#extHostDll = buildExtHost();
    this.#azurite = await startAzurite({ location: join(this.options.runDir, 'azurite') });
    this.#appRoot = this.#createAppRoot();
    const shape: Array<{ name: string; group?: FlexGroup }> =
      this.options.flex === true
        ? flexInstances().map((f) => ({ name: f.instanceId, group: f.group }))
        : Array.from({ length: this.options.instances }, (_, i) => ({ name: `instance-${i + 1}` }));
    for (const [n, { name, group }] of shape.entries()) {
      const i = n + 1;
      const proxies = {} as Record<ServiceName, TcpProxy>;
      const target = { blob: this.#azurite.blobPort, queue: this.#azurite.queuePort, table: this.#azurite.tablePort };
      const separate = this.options.separateApps && this.options.flex !== true;
      const instance = new ChaosInstance(i, name, await freePort(), separate ? `chaos-app-${i}` : 'chaos-app', proxies, group);
      for (const service of ['blob', 'queue', 'table'] as const) {
        const wantsBody = this.options.wantsBody;
        proxies[service] = await startTcpProxy(target[service], {
          onRequest: (request) => this.options.onRequest(instance, service, request),
          onResponse: (response) => this.options.onResponse(instance, service, response),
          ...(wantsBody === undefined ? {} : { wantsBody: (request: SniffedRequest) => wantsBody(service, request) }),
        });
      }
      this.instances.push(instance);
      this.#logs.set(name, createWriteStream(join(this.options.runDir, `${name}.log`), { flags: 'a' }));
    }
    await Promise.all(this.instances.map((instance) => this.startInstance(instance)));
  }

  /** An app folder for this build: its output linked in, the project's host.json, no local settings. */
  #createAppRoot(): string {
    const dir = join(this.options.runDir, 'app');
    mkdirSync(dir, { recursive: true });
    symlinkSync(OUT_DIR, join(dir, 'build'), 'dir');
    writeFileSync(join(dir, 'host.json'), readFileSync(join(REPO_ROOT, 'host.json')));
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'chaos-app', main: 'build/functions/*.js' }));
    return dir;
  }

  #env(instance: ChaosInstance, holder: string): NodeJS.ProcessEnv {
    const { blob, queue, table } = instance.proxies;
    const conn = connectionStringFor('127.0.0.1', blob.port, queue.port, table.port);
    return {
      PATH: process.env.PATH ?? '',
      // What startExtHostProcess gives the .NET host besides PATH.
      ...(this.host === 'extensions'
        ? { ...(process.env.HOME === undefined ? {} : { HOME: process.env.HOME }), DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' }
        : {}),
      FUNCTIONS_WORKER_RUNTIME: 'node',
      AzureWebJobsStorage: conn,
      CoordinatorStorage: conn,
      TASK_HUB_NAME: TASK_HUB,
      COORDINATOR_INSTANCE_ID: holder,
      COORDINATOR_LOG_LEVEL: 'info',
      DEVHOST_MASTER_KEY: this.masterKey,
      ...this.options.settings,
    };
  }

  async startInstance(instance: ChaosInstance): Promise<void> {
    if (instance.process !== undefined) throw new Error(`${instance.name} is already running`);
    instance.gen += 1;
    instance.down = false;
    const holder = `${instance.name}.g${instance.gen}`;
    // In the flex shape, the group's entry alone (the app root's `build` is this build's output).
    const main = instance.group === undefined ? undefined : `build/scripts/flex/${FLEX_GROUPS[instance.group].entry}`;
    const launch = { appRoot: this.#appRoot, port: instance.port, hostId: instance.hostId, instanceId: instance.name, ...(main === undefined ? {} : { main }) };
    const spawnOptions = { env: this.#env(instance, holder), stdio: ['ignore', 'pipe', 'pipe'] } satisfies SpawnOptions;
    let child: ChildProcess;
    if (this.host === 'extensions') {
      const { command, args } = extHostCommand(launch, this.#extHostDll);
      child = spawn(command, args, spawnOptions);
    } else {
      child = spawnDevHost(launch, spawnOptions);
    }
    const pid = child.pid ?? -1;
    const log = this.#logs.get(instance.name);
    log?.write(`=== ${new Date().toISOString()} generation ${instance.gen}, pid ${pid}, holder ${holder}\n`);
    let resolveExit = (): void => {};
    const running: RunningProcess = {
      instance: instance.name,
      gen: instance.gen,
      pid,
      holder,
      child,
      startedAt: Date.now(),
      exited: new Promise<void>((r) => (resolveExit = r)),
      paused: false,
      tail: [],
    };
    instance.process = running;
    let ready = false;
    let onReady = (): void => {};
    const readyPromise = new Promise<void>((r) => (onReady = r));
    for (const stream of [child.stdout, child.stderr]) {
      let partial = '';
      stream?.on('data', (chunk: Buffer) => {
        const text = partial + chunk.toString('utf8');
        const lines = text.split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          log?.write(`${line}\n`);
          running.tail.push(line);
          if (running.tail.length > TAIL_LINES) running.tail.shift();
          if (line.startsWith(HOST_STOPPED_PREFIX)) running.hostError ??= line.slice(HOST_STOPPED_PREFIX.length, HOST_STOPPED_PREFIX.length + 400);
          if (!ready && line.startsWith(READY[this.host])) {
            ready = true;
            onReady();
          }
          this.#parse(running, line);
        }
      });
    }
    child.once('exit', (code, signal) => {
      log?.write(`=== ${new Date().toISOString()} generation ${running.gen} (pid ${pid}) exited: ${signal ?? `code ${String(code)}`}\n`);
      if (instance.process === running) instance.process = undefined;
      const expected = running.endReason !== undefined || this.#stopping;
      this.options.onExit({
        instance: running.instance,
        gen: running.gen,
        pid,
        holder,
        at: Date.now(),
        code,
        signal,
        expected,
        ...(running.endReason === undefined ? (this.#stopping ? { cause: 'shutdown' } : {}) : { cause: running.endReason }),
        ...(running.hostError === undefined ? {} : { hostError: running.hostError }),
        lastLines: [...running.tail],
      });
      resolveExit();
      onReady();
      // A process that died on its own is a finding, and the run goes on with the instance restarted.
      if (!expected && !instance.down) {
        setTimeout(() => {
          if (!this.#stopping && instance.process === undefined && !instance.down) void this.startInstance(instance).catch(() => undefined);
        }, 2_000).unref();
      }
    });
    const timer = setTimeout(() => onReady(), START_TIMEOUT_MS[this.host]);
    await readyPromise;
    clearTimeout(timer);
    if (!ready) throw new Error(`${instance.name} (pid ${pid}) did not start:\n${running.tail.join('\n')}`);
  }

  #parse(running: RunningProcess, line: string): void {
    if (!line.startsWith('{')) return;
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const { ts, event, ...fields } = parsed;
    if (typeof event !== 'string') return;
    const at = typeof ts === 'string' ? Date.parse(ts) : Date.now();
    this.options.onLog({ instance: running.instance, gen: running.gen, pid: running.pid, holder: running.holder, at: Number.isFinite(at) ? at : Date.now(), event, fields });
  }

  /** Sends a signal; for SIGKILL/SIGTERM the exit that follows is recorded as caused by `reason`. */
  signal(instance: ChaosInstance, signal: 'SIGKILL' | 'SIGTERM' | 'SIGSTOP' | 'SIGCONT', reason: string): void {
    const p = instance.process;
    if (p === undefined) return;
    if (signal === 'SIGKILL' || signal === 'SIGTERM') p.endReason ??= reason;
    const resumed = signal === 'SIGCONT' || (signal === 'SIGTERM' && p.paused);
    if (signal === 'SIGSTOP') p.paused = true;
    // A graceful stop needs the process running to happen at all: resumed just after the signal.
    if (resumed) p.paused = false;
    this.#send(p, signal);
    if (signal === 'SIGTERM' && resumed) this.#send(p, 'SIGCONT');
  }

  /**
   * One signal to one instance's process: on the extensions host a SIGKILL or SIGSTOP also reaches
   * the worker (every descendant), and a SIGCONT every process the SIGSTOP reached; a SIGTERM only
   * the .NET host, which stops its worker itself.
   */
  #send(p: RunningProcess, signal: 'SIGKILL' | 'SIGTERM' | 'SIGSTOP' | 'SIGCONT'): void {
    const pid = p.child.pid;
    const alive = pid !== undefined && p.child.exitCode === null && p.child.signalCode === null;
    const descendants = this.host === 'extensions' && signal !== 'SIGTERM' && alive ? processTree(pid).slice(1) : [];
    if (signal === 'SIGSTOP') p.pausedPids = descendants;
    try {
      p.child.kill(signal);
    } catch {
      // Already gone: its exit event says so.
    }
    const others = signal === 'SIGCONT' ? [...new Set([...(p.pausedPids ?? []), ...descendants])] : descendants;
    signalAll(others, signal);
    if (signal === 'SIGCONT') p.pausedPids = undefined;
  }

  /** Waits for the instance's current process to exit, killing it after `timeoutMs`. */
  async waitForExit(instance: ChaosInstance, timeoutMs = STOP_TIMEOUT_MS): Promise<void> {
    const p = instance.process;
    if (p === undefined) return;
    const timer = setTimeout(() => this.signal(instance, 'SIGKILL', p.endReason ?? 'stop timed out'), timeoutMs);
    await p.exited;
    clearTimeout(timer);
  }

  cutStorage(instance: ChaosInstance, how: 'blackhole' | 'reset'): void {
    for (const proxy of Object.values(instance.proxies)) {
      if (how === 'blackhole') proxy.blackhole();
      else proxy.reset();
    }
  }

  restoreStorage(instance: ChaosInstance): void {
    for (const proxy of Object.values(instance.proxies)) proxy.restore();
  }

  /** Stops every instance gracefully (resuming and reconnecting them first), then the proxies and Azurite. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const instance of this.instances) {
      this.restoreStorage(instance);
      if (instance.paused) this.signal(instance, 'SIGCONT', 'shutdown');
      this.signal(instance, 'SIGTERM', 'shutdown');
    }
    await Promise.all(this.instances.map((instance) => this.waitForExit(instance)));
    await Promise.all(this.instances.flatMap((instance) => Object.values(instance.proxies).map((proxy) => proxy.close())));
    await Promise.all([...this.#logs.values()].map((stream) => new Promise<void>((r) => stream.end(r))));
    await this.#azurite?.stop();
  }
}
