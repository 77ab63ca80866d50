/**
 * The development host's public API: run a Node.js v4-model Functions app in-process
 * (`FunctionHost.start`) or as a process (`HOST_PROCESS_ENTRY`, what `npx devhost` runs), and the
 * pieces an embedding caller needs (its logger, errors, host.json and connection parsing). Test
 * helpers (an in-memory Durable backend, Azurite, host processes) are in `devhost/testing`.
 */
export { LoadedApp, loadFunctionApp, type LoadFunctionAppOptions } from './AppLoader';
export type { BindingMetadata, DurableBackend, FunctionInvoker, HostedFunction, InvocationRequest, InvocationResult } from './contracts';
export { clientBindingPayload, type DurableBackendExtras, WEBHOOK_PATH } from './durable';
export { DevHostError, toDevHostError } from './errors';
export { DEFAULT_TASK_HUB, defaultHostId, FunctionHost, type FunctionHostOptions, validateHostId } from './FunctionHost';
export { type HostConfig, parseHostConfig, readHostConfig, resolveSettingExpression } from './HostConfig';
export { createLogger, type LogFields, type Logger, type LogLevel, type LogLine, memoryLogger } from './log';
export { DEFAULT_PORT, loadLocalSettings, parseArgs, READY_LINE_PREFIX } from './main';
export { blobServiceClient, DEFAULT_CONNECTION, queueServiceClient, readStorageConnection, type StorageConnection } from './storage';
export { HOST_PROCESS_ENTRY, WORKER_ENTRY } from './testing/hostProcess';
