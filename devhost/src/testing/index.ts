/**
 * Test helpers for apps run by the development host: a private Azurite, host processes, and
 * `runOrchestration`, which replays an orchestrator through the durable-functions SDK's own
 * executor on the development host's own Durable backend, in memory and on a virtual clock.
 */
export { DURABLE_TASK_DEFAULTS } from '../durable/DurableTaskOptions';
export { partitionOf } from '../durable/TaskHubQueues';
export { AZURITE_ACCOUNT, AZURITE_KEY, type AzuriteInstance, type AzuriteOptions, connectionStringFor, freePort, startAzurite } from './azurite';
export { eventually, HOST_PROCESS_ENTRY, type HostProcess, startHostProcess, startReadyProcess, WORKER_ENTRY } from './hostProcess';
export {
  type ActivityCall,
  type ActivityScript,
  completesAfter,
  type EpisodeRecord,
  historyNames,
  type OrchestrationRun,
  type RaisedEvent,
  runOrchestration,
  type RunOrchestrationOptions,
} from './runOrchestration';
