/**
 * The subset of the `@azure/functions-core` contract (the API the Node.js worker gives the v4
 * library) that the development host implements, declared here in our own words. The shapes follow
 * the worker's RPC messages: what the host sends (typed data, invocation requests) and what the
 * library answers (invocation responses). Nothing here is enforced at runtime; it types our shim.
 */

export interface RpcHttpData {
  method?: string | null;
  url?: string | null;
  headers?: Record<string, string> | null;
  body?: RpcTypedData | null;
  params?: Record<string, string> | null;
  query?: Record<string, string> | null;
  statusCode?: string | null;
  cookies?: RpcHttpCookie[] | null;
  enableContentNegotiation?: boolean | null;
}

export interface RpcHttpCookie {
  name?: string | null;
  value?: string | null;
  domain?: { value?: string | null } | null;
  path?: { value?: string | null } | null;
  expires?: { value?: { seconds?: number | null; nanos?: number | null } | null } | null;
  secure?: { value?: boolean | null } | null;
  httpOnly?: { value?: boolean | null } | null;
  sameSite?: 'none' | 'lax' | 'strict' | 'explicitNone' | null;
  maxAge?: { value?: number | null } | null;
}

export interface RpcTypedData {
  string?: string | null;
  json?: string | null;
  bytes?: Uint8Array | null;
  stream?: Uint8Array | null;
  http?: RpcHttpData | null;
  int?: number | null;
  double?: number | null;
}

export interface RpcBindingInfo {
  type?: string | null;
  direction?: 'in' | 'out' | 'inout' | null;
  [property: string]: unknown;
}

export interface FunctionMetadata {
  name: string;
  functionId?: string;
  bindings: Record<string, RpcBindingInfo>;
  retryOptions?: unknown;
}

export interface RpcParameterBinding {
  name?: string | null;
  data?: RpcTypedData | null;
}

export interface RpcInvocationRequest {
  invocationId?: string | null;
  functionId?: string | null;
  inputData?: RpcParameterBinding[] | null;
  triggerMetadata?: Record<string, RpcTypedData> | null;
  traceContext?: { traceParent?: string | null; traceState?: string | null; attributes?: Record<string, string> | null } | null;
  retryContext?: { retryCount?: number | null; maxRetryCount?: number | null } | null;
}

export interface RpcInvocationResponse {
  invocationId?: string | null;
  outputData?: RpcParameterBinding[] | null;
  returnValue?: RpcTypedData | null;
}

export type RpcLogLevel = 'trace' | 'debug' | 'information' | 'warning' | 'error' | 'critical' | 'none';
export type RpcLogCategory = 'user' | 'system' | 'customMetric';
export type InvocationState = 'preInvocationHooks' | 'postInvocationHooks' | 'invocation';

export interface CoreInvocationContext {
  invocationId: string;
  request: RpcInvocationRequest;
  metadata: { name: string; bindings: Record<string, RpcBindingInfo>; functionId?: string };
  state?: InvocationState;
  log(level: RpcLogLevel, category: RpcLogCategory, message: string): void;
}

export type FunctionCallback = (...args: unknown[]) => unknown;

export interface InvocationModel {
  getArguments(): Promise<{ context: unknown; inputs: unknown[] }>;
  invokeFunction(context: unknown, inputs: unknown[], callback: FunctionCallback): Promise<unknown>;
  getResponse(context: unknown, result: unknown): Promise<RpcInvocationResponse>;
}

export interface ProgrammingModel {
  name: string;
  version: string;
  getInvocationModel(coreContext: CoreInvocationContext): InvocationModel | Promise<InvocationModel>;
  getCapabilities?(defaults: Record<string, string>): Record<string, string> | Promise<Record<string, string>>;
}

export type HookName = 'preInvocation' | 'postInvocation' | 'appStart' | 'appTerminate' | 'log';
export type HookCallback = (context: Record<string, unknown>) => void | Promise<void>;
