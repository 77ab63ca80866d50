/**
 * Loads a compiled v4 Node.js function app the way the Functions worker does and invokes its
 * functions through the library's own programming model.
 *
 * Guarantees:
 * - `@azure/functions-core` is supplied before any entry point loads, so the app's `app.*` and
 *   durable-functions' `df.app.*` calls register exactly the metadata they would on Azure; app code
 *   is unchanged.
 * - An unsupported trigger or binding type fails `loadFunctionApp` with the function's and the
 *   binding's name (`DEVHOST_UNSUPPORTED_BINDING`).
 * - `invoke` runs the worker's sequence: InvocationModel.getArguments, preInvocation hooks,
 *   invokeFunction, postInvocation hooks, getResponse; it rejects with the function's own error.
 *
 * Not guaranteed: one app per process (like one worker per app); a second load in the same process
 * fails with `DEVHOST_APP_ALREADY_LOADED`. Output bindings are returned, not written (the host does
 * that, see OutputBindings).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

import {
  type BindingMetadata,
  type FunctionInvoker,
  type HostedFunction,
  type HttpRequestData,
  type InvocationRequest,
  type InvocationResult,
} from './contracts';
import { findEntryPoints } from './core/findEntryPoints';
import { type FunctionsCoreRegistry, installFunctionsCore, type RegisteredFunction } from './core/functionsCoreModule';
import { type CoreInvocationContext, type RpcParameterBinding, type RpcTypedData } from './core/rpcTypes';
import { assertSupported } from './core/supportedBindings';
import { fromTypedData, toHttpTypedData, toTypedData } from './core/typedData';
import { DevHostError } from './errors';
import { createLogger, type Logger } from './log';

export interface LoadFunctionAppOptions {
  /** Glob of entry points relative to `appRoot`, like package.json `main`; defaults to package.json's. */
  readonly main?: string;
  readonly appRoot: string;
  readonly logger?: Logger;
}

/** Supplies an input binding's value when the caller did not (e.g. the `durableClient` payload). */
export type InputProvider = (binding: BindingMetadata, functionName: string) => unknown;

let loadedOnce = false;

function readPackageJson(appRoot: string): { main?: unknown; type?: unknown } {
  try {
    return JSON.parse(readFileSync(join(appRoot, 'package.json'), 'utf8')) as { main?: unknown; type?: unknown };
  } catch {
    return {};
  }
}

// TypeScript compiles `import()` to `require()` under CommonJS; an ES module entry point needs the
// real dynamic import, so it is built at runtime (the worker uses eval for the same reason).
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const dynamicImport = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<unknown>;

async function loadEntryPoint(file: string, esm: boolean): Promise<void> {
  if (esm) await dynamicImport(pathToFileURL(file).href);
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loading the app is the point
  else require(file);
}

function toHostedFunction(registered: RegisteredFunction): HostedFunction {
  const bindings: Record<string, BindingMetadata> = {};
  let trigger: [string, BindingMetadata] | undefined;
  for (const [name, raw] of Object.entries(registered.metadata.bindings)) {
    const binding = { ...raw, name, type: String(raw.type ?? ''), direction: raw.direction ?? 'in' } as BindingMetadata;
    bindings[name] = binding;
    if (trigger === undefined && /trigger$/i.test(binding.type)) trigger = [name, binding];
  }
  if (trigger === undefined) {
    throw new DevHostError('DEVHOST_NO_TRIGGER', `Function "${registered.metadata.name}" has no trigger binding.`, true);
  }
  return { name: registered.metadata.name, triggerType: trigger[1].type, triggerName: trigger[0], bindings };
}

export class LoadedApp implements FunctionInvoker {
  readonly #registry: FunctionsCoreRegistry;
  readonly #functions: ReadonlyMap<string, HostedFunction>;
  readonly #inputProviders = new Map<string, InputProvider>();
  #inFlight = 0;
  #idleWaiters: Array<() => void> = [];

  constructor(
    readonly appRoot: string,
    readonly entryPoints: readonly string[],
    registry: FunctionsCoreRegistry,
    functions: ReadonlyMap<string, HostedFunction>,
  ) {
    this.#registry = registry;
    this.#functions = functions;
  }

  list(): readonly HostedFunction[] {
    return [...this.#functions.values()];
  }

  get(functionName: string): HostedFunction | undefined {
    return this.#functions.get(functionName);
  }

  /** Registers the value source for input bindings of `bindingType` (e.g. `durableClient`). */
  provideInput(bindingType: string, provider: InputProvider): void {
    this.#inputProviders.set(bindingType, provider);
  }

  /** Invocations currently running. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Resolves when no invocation is running, or after `timeoutMs`; true when idle. */
  async drain(timeoutMs: number): Promise<boolean> {
    if (this.#inFlight === 0) return true;
    return new Promise<boolean>((resolveDrain) => {
      const timer = setTimeout(() => resolveDrain(this.#inFlight === 0), timeoutMs);
      this.#idleWaiters.push(() => {
        clearTimeout(timer);
        resolveDrain(true);
      });
    });
  }

  /** Runs the app's appTerminate hooks (the worker does this on WorkerTerminate). */
  async terminate(): Promise<void> {
    await this.#registry.runHooks('appTerminate', { hookData: this.#registry.appLevelOnlyHookData, appHookData: this.#registry.appHookData });
  }

  async invoke(functionName: string, request: InvocationRequest): Promise<InvocationResult> {
    const fn = this.#functions.get(functionName);
    const registered = this.#registry.functions.get(functionName);
    if (fn === undefined || registered === undefined) {
      throw new DevHostError('DEVHOST_UNKNOWN_FUNCTION', `No function named "${functionName}" is registered.`);
    }
    this.#inFlight += 1;
    try {
      return await this.#invoke(fn, registered, request);
    } finally {
      this.#inFlight -= 1;
      if (this.#inFlight === 0) {
        const waiters = this.#idleWaiters;
        this.#idleWaiters = [];
        for (const wake of waiters) wake();
      }
    }
  }

  async #invoke(fn: HostedFunction, registered: RegisteredFunction, request: InvocationRequest): Promise<InvocationResult> {
    const model = this.#registry.programmingModel;
    if (model === undefined) {
      throw new DevHostError('DEVHOST_NO_PROGRAMMING_MODEL', 'The app registered functions without a programming model (is @azure/functions v4 loaded?).');
    }
    const invocationId = randomUUID();
    const inputData: RpcParameterBinding[] = [{ name: fn.triggerName, data: this.#triggerData(fn, request.trigger) ?? null }];
    for (const [name, binding] of Object.entries(fn.bindings)) {
      if (name === fn.triggerName || binding.direction !== 'in') continue;
      const provided = request.inputs?.[name];
      const value = provided !== undefined ? provided : this.#inputProviders.get(binding.type)?.(binding, fn.name);
      inputData.push({ name, data: toTypedData(value) ?? null });
    }
    const triggerMetadata: Record<string, RpcTypedData> = {};
    for (const [key, value] of Object.entries(request.triggerMetadata ?? {})) {
      const typed = toTypedData(value);
      if (typed !== undefined) triggerMetadata[key] = typed;
    }
    const registry = this.#registry;
    const coreContext: CoreInvocationContext = {
      invocationId,
      request: { invocationId, functionId: fn.name, inputData, triggerMetadata },
      metadata: { name: fn.name, functionId: fn.name, bindings: registered.metadata.bindings },
      log: (level, category, message) => registry.log(level, category, message, { function: fn.name, invocationId }),
    };
    const invocationModel = await model.getInvocationModel(coreContext);
    const { context, inputs } = await invocationModel.getArguments();

    const hookData: Record<string, unknown> = {};
    const pre = { hookData, appHookData: registry.appHookData, invocationContext: context, inputs, functionCallback: registered.callback };
    coreContext.state = 'preInvocationHooks';
    try {
      await registry.runHooks('preInvocation', pre);
    } finally {
      coreContext.state = undefined;
    }
    const post = { hookData, appHookData: registry.appHookData, invocationContext: context, inputs: pre.inputs, result: null as unknown, error: null as unknown };
    coreContext.state = 'invocation';
    try {
      post.result = await invocationModel.invokeFunction(context, pre.inputs, pre.functionCallback);
    } catch (err) {
      post.error = err;
    } finally {
      coreContext.state = undefined;
    }
    coreContext.state = 'postInvocationHooks';
    try {
      await registry.runHooks('postInvocation', post);
    } finally {
      coreContext.state = undefined;
    }
    // Rethrown as the function threw it (possibly not an Error), like the worker does.
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    if (post.error !== null && post.error !== undefined) throw post.error;

    const response = await invocationModel.getResponse(context, post.result);
    const outputs: Record<string, unknown> = {};
    for (const binding of response.outputData ?? []) {
      if (typeof binding.name === 'string') outputs[binding.name] = fromTypedData(binding.data);
    }
    return { returnValue: fromTypedData(response.returnValue), outputs };
  }

  #triggerData(fn: HostedFunction, trigger: unknown): RpcTypedData | undefined {
    if (fn.triggerType === 'httpTrigger') return toHttpTypedData(trigger as HttpRequestData);
    return toTypedData(trigger);
  }
}

/** Loads the app's entry points with `@azure/functions-core` supplied, and validates what it registered. */
export async function loadFunctionApp(options: LoadFunctionAppOptions): Promise<LoadedApp> {
  const logger = options.logger ?? createLogger('devhost');
  if (loadedOnce) {
    throw new DevHostError('DEVHOST_APP_ALREADY_LOADED', 'A function app is already loaded in this process (one app per process, like the worker).');
  }
  const appRoot = resolve(options.appRoot);
  const packageJson = readPackageJson(appRoot);
  const main = options.main ?? (typeof packageJson.main === 'string' ? packageJson.main : undefined);
  if (main === undefined || main === '') {
    throw new DevHostError('DEVHOST_NO_MAIN', `No entry point: ${join(appRoot, 'package.json')} has no "main" and none was given.`, true);
  }
  const registry = installFunctionsCore();
  registry.logger = logger.child('worker');
  loadedOnce = true;

  const files = findEntryPoints(appRoot, main);
  if (files.length === 0) {
    throw new DevHostError('DEVHOST_NO_ENTRY_POINT', `Found zero files matching "${main}" under ${appRoot} (did the build run?).`, true);
  }
  for (const file of files) {
    const esm = file.endsWith('.mjs') || (!file.endsWith('.cjs') && packageJson.type === 'module');
    try {
      await loadEntryPoint(join(appRoot, file), esm);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      throw new DevHostError('DEVHOST_ENTRY_POINT_FAILED', `Unable to load entry point "${file}": ${message}`, true, { cause: err });
    }
  }
  registry.indexingLocked = true;
  // The worker asks the programming model for its capabilities at start, which also locks
  // `app.setup()`. HTTP streaming answers with a proxy URI the dev host cannot serve.
  const capabilities = (await registry.programmingModel?.getCapabilities?.({})) ?? {};
  if ('HttpUri' in capabilities) {
    throw new DevHostError('DEVHOST_UNSUPPORTED_FEATURE', 'The app enables HTTP streaming (app.setup({ enableHttpStream: true })), which the development host does not support.', true);
  }

  const functions = new Map<string, HostedFunction>();
  for (const registered of registry.functions.values()) {
    const fn = toHostedFunction(registered);
    assertSupported(fn);
    functions.set(fn.name, fn);
  }
  await registry.runHooks('appStart', { hookData: registry.appLevelOnlyHookData, appHookData: registry.appHookData, functionAppDirectory: appRoot });
  logger.debug('app.loaded', { appRoot, entryPoints: files, functions: [...functions.keys()] });
  return new LoadedApp(appRoot, files, registry, functions);
}
