/**
 * Supplies the `@azure/functions-core` module: the API that the Azure Functions Node.js worker
 * exposes to the v4 library (`registerFunction`, `setProgrammingModel`, `getProgrammingModel`,
 * `registerHook`, `log`, `Disposable`). The library `require`s it lazily on the first `app.*`
 * call, so the interceptor must be installed before the app is loaded.
 *
 * Guarantees: one registry per process, like the worker (one app per worker process); registering
 * after the app has finished loading fails like the worker ("only during app startup"); duplicate
 * function names fail. Not provided: HTTP streaming (the loader refuses an app that enables it) and
 * `log` hooks (stored, never called).
 */
import Module from 'node:module';

import { DevHostError } from '../errors';
import { type Logger } from '../log';
import {
  type FunctionCallback,
  type FunctionMetadata,
  type HookCallback,
  type HookName,
  type ProgrammingModel,
  type RpcLogCategory,
  type RpcLogLevel,
} from './rpcTypes';

export const CORE_MODULE_NAME = '@azure/functions-core';
/** The worker version we present ourselves as (the library only checks that `log` exists). */
const PRESENTED_WORKER_VERSION = '3.10.1';
const PRESENTED_HOST_VERSION = '4.1037.0';

export interface RegisteredFunction {
  readonly metadata: FunctionMetadata;
  readonly callback: FunctionCallback;
}

/** Same contract as the worker's Disposable (based on VS Code's). */
export class Disposable {
  static from(...items: Array<{ dispose(): unknown }>): Disposable {
    let pending: Array<{ dispose(): unknown }> | undefined = items;
    return new Disposable(() => {
      for (const item of pending ?? []) item.dispose();
      pending = undefined;
    });
  }

  #onDispose: (() => unknown) | undefined;

  constructor(onDispose: () => unknown) {
    this.#onDispose = onDispose;
  }

  dispose(): unknown {
    const fn = this.#onDispose;
    this.#onDispose = undefined;
    return fn?.();
  }
}

/** What the shim collected from the app while it loaded. */
export class FunctionsCoreRegistry {
  readonly functions = new Map<string, RegisteredFunction>();
  readonly hooks: Record<HookName, HookCallback[]> = { preInvocation: [], postInvocation: [], appStart: [], appTerminate: [], log: [] };
  readonly appHookData: Record<string, unknown> = {};
  readonly appLevelOnlyHookData: Record<string, unknown> = {};
  programmingModel: ProgrammingModel | undefined;
  /** Set once the app's entry points are loaded; registrations after that fail like the worker's. */
  indexingLocked = false;
  logger: Logger | undefined;

  registerFunction(metadata: FunctionMetadata, callback: FunctionCallback): Disposable {
    if (this.indexingLocked) {
      throw new DevHostError('DEVHOST_LATE_REGISTRATION', 'A function can only be registered during app startup.');
    }
    const id = metadata.functionId ?? metadata.name;
    if (this.functions.has(id)) {
      throw new DevHostError('DEVHOST_DUPLICATE_FUNCTION', `A function with id "${id}" has already been registered.`);
    }
    this.functions.set(id, { metadata, callback });
    return new Disposable(() => {
      if (this.indexingLocked) {
        throw new DevHostError('DEVHOST_LATE_REGISTRATION', 'A function can only be disposed during app startup.');
      }
      this.functions.delete(id);
    });
  }

  registerHook(name: string, callback: HookCallback): Disposable {
    if (!(name in this.hooks)) throw new DevHostError('DEVHOST_UNKNOWN_HOOK', `Unrecognized hook "${name}"`);
    const list = this.hooks[name as HookName];
    list.push(callback);
    return new Disposable(() => {
      const index = list.indexOf(callback);
      if (index >= 0) list.splice(index, 1);
    });
  }

  async runHooks(name: HookName, context: Record<string, unknown>): Promise<void> {
    for (const callback of [...this.hooks[name]]) await callback(context);
  }

  log(level: RpcLogLevel, category: RpcLogCategory, message: string, fields: Record<string, unknown> = {}): void {
    const logger = this.logger;
    if (logger === undefined || level === 'none') return;
    const event = category === 'user' ? 'function.log' : 'worker.log';
    const entry = { ...fields, category, message };
    if (level === 'error' || level === 'critical') logger.error(event, entry);
    else if (level === 'warning') logger.warn(event, entry);
    else if (level === 'information') logger.info(event, entry);
    else logger.debug(event, entry);
  }
}

let installed: FunctionsCoreRegistry | undefined;

/**
 * Installs (once per process) the interceptor that answers `require('@azure/functions-core')` with
 * our API, and returns the process's registry.
 */
export function installFunctionsCore(): FunctionsCoreRegistry {
  if (installed !== undefined) return installed;
  const registry = new FunctionsCoreRegistry();
  const coreApi = {
    version: PRESENTED_WORKER_VERSION,
    hostVersion: PRESENTED_HOST_VERSION,
    registerFunction: (metadata: FunctionMetadata, callback: FunctionCallback) => registry.registerFunction(metadata, callback),
    registerHook: (name: string, callback: HookCallback) => registry.registerHook(name, callback),
    setProgrammingModel: (model: ProgrammingModel) => {
      registry.programmingModel = model;
    },
    getProgrammingModel: () => registry.programmingModel,
    log: (level: RpcLogLevel, category: RpcLogCategory, message: string) => registry.log(level, category, message),
    Disposable,
  };
  // Module._load is what every CommonJS require goes through; it is not in @types/node, so it is
  // reached through a narrow cast. The worker does the same with a Proxy on Module.prototype.require.
  const loader = Module as unknown as { _load: (request: string, parent: unknown, isMain: boolean) => unknown };
  const original = loader._load;
  loader._load = function load(this: unknown, request: string, parent: unknown, isMain: boolean): unknown {
    if (request === CORE_MODULE_NAME) return coreApi;
    return original.call(this, request, parent, isMain);
  };
  installed = registry;
  return registry;
}
