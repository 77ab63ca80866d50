/**
 * The seams inside the development host: the part that captures the app's registrations and
 * invokes its functions (the host core: `@azure/functions-core` shim, triggers, HTTP server) and
 * the Durable backend (the extension's HTTP API for the durable-functions client, and the
 * orchestration/activity dispatcher). Each side codes against this file only.
 */
import { type IncomingMessage, type ServerResponse } from 'node:http';

import { type WebhookAuth } from './durable/DurableHttpApi';
import { type DurableTaskOptions } from './durable/DurableTaskOptions';
import { type Logger } from './log';
import { type StorageConnection } from './storage';

/** A binding as the app registered it (the v4 library's core metadata: `type`, `direction`, and the binding's own properties). */
export interface BindingMetadata {
  readonly type: string;
  readonly direction: 'in' | 'out' | 'inout';
  readonly [property: string]: unknown;
}

export interface HostedFunction {
  readonly name: string;
  /** The trigger binding's type, e.g. `httpTrigger`, `queueTrigger`, `timerTrigger`, `orchestrationTrigger`, `activityTrigger`. */
  readonly triggerType: string;
  /** Name of the trigger binding. */
  readonly triggerName: string;
  /** Every binding by name, as registered (`$return` included when present). */
  readonly bindings: Readonly<Record<string, BindingMetadata>>;
}

export interface InvocationRequest {
  /**
   * The trigger's value as the worker receives it from the host: a JSON-serializable value is sent
   * as JSON typed data, a string as a string, a Buffer as bytes.
   */
  readonly trigger: unknown;
  /** Trigger metadata (e.g. a queue message's id and dequeueCount), camelCase keys. */
  readonly triggerMetadata?: Readonly<Record<string, unknown>>;
  /** Values for input bindings by binding name; the host fills the ones it knows (the durableClient payload) when absent. */
  readonly inputs?: Readonly<Record<string, unknown>>;
}

/**
 * An HTTP trigger's request as the host passes it (the `trigger` of an `httpTrigger` invocation):
 * sent to the library as RPC `http` typed data, so the handler gets the library's own HttpRequest.
 */
export interface HttpRequestData {
  readonly method: string;
  /** Absolute URL as the client called it. */
  readonly url: string;
  /** Lower-case header names; repeated headers joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  readonly query: Readonly<Record<string, string>>;
  /** Route parameters by name. */
  readonly params: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

/** An `http` output binding's value (an HTTP function's response) converted back from typed data. */
export interface HttpResponseData {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  /** `Set-Cookie` header values. */
  readonly cookies: readonly string[];
  readonly body: Buffer;
}

export interface InvocationResult {
  /** The function's return value, converted back from typed data (JSON parsed where it was JSON; an `HttpResponseData` for an `http` binding). */
  readonly returnValue: unknown;
  /** Output binding values by binding name. */
  readonly outputs: Readonly<Record<string, unknown>>;
}

/** Implemented by the host core. */
export interface FunctionInvoker {
  list(): readonly HostedFunction[];
  /** Invokes through the v4 library's own invocation model; rejects with the function's error if it threw. */
  invoke(functionName: string, request: InvocationRequest): Promise<InvocationResult>;
}

export interface DurableBackendOptions {
  readonly invoker: FunctionInvoker;
  /** Where Durable state lives (AzureWebJobsStorage): Azurite locally. */
  readonly storage: StorageConnection;
  readonly taskHub: string;
  /** This host's base URL, e.g. `http://127.0.0.1:7071`; the client payload's URLs are built from it. */
  readonly baseUrl: string;
  /** This host process's id (for logs and work-item ownership). */
  readonly instanceId: string;
  readonly logger: Logger;
  /** host.json extensions.durableTask as the extension reads it; its defaults when absent. */
  readonly durableTask?: DurableTaskOptions;
  /** With keys on: the webhooks require the extension's system key (or the master key). */
  readonly webhookAuth?: WebhookAuth;
  /**
   * What this process dispatches, as the extension starts its listeners per trigger: orchestration
   * episodes only when the app registers an orchestration (or entity), activities only when it
   * registers an activity. An app with neither (an HTTP front with a Durable client only) runs no
   * Durable work. Absent: both.
   */
  readonly dispatch?: { readonly episodes: boolean; readonly activities: boolean };
}

/** Implemented by the Durable backend; the host core mounts it and starts/stops it with the host. */
export interface DurableBackend {
  /** The value of a `durableClient` input binding, exactly as the extension provides it. */
  clientBindingValue(): unknown;
  /** Serves `/runtime/webhooks/durabletask/...` and the local RPC path `/durabletask/...`; resolves false when the URL is not its. */
  handleHttp(req: IncomingMessage, res: ServerResponse, url: URL): Promise<boolean>;
  /** Starts dispatching orchestration and activity work. */
  start(): Promise<void>;
  /** Stops dispatching; work in flight is finished or left for another instance (nothing lost). */
  stop(): Promise<void>;
}
