/**
 * The storage requests of a Durable instance's life that the e2e fault tests hold or refuse, in the
 * layout of the host the tests run on (`E2E_HOST`):
 * - the development host keeps an instance as one blob (`<hub>-instances/<id>`): its start writes
 *   the blob (after sending the start message), an episode's commit is one write of that blob;
 * - the real extension's Azure Storage provider (exthost/) keeps it as rows: its start reads the
 *   instance's row (`<Hub>Instances`, `$select` without its input), sends the start message to the
 *   control queue, then inserts the row (POST to the table); an episode's commit sends its outbound
 *   messages, writes the history (`$batch` to `<Hub>History`), merges the row (custom status), then
 *   deletes the control-queue messages it handled. (Recorded through the storage proxy, extension 3.19.0.)
 * Both send the start message (an ExecutionStarted event naming the instance) before the instance exists.
 */
import { AZURITE_ACCOUNT } from 'devhost/testing';

import { type ProxiedRequest, putMessageText } from '../../support/storageProxy';
import { type E2EHost, e2eHost } from './appHost';

/** What a Scenario names: its task hub (each host derives its tables, queues and containers from it). */
export interface TaskHubNames {
  readonly taskHub: string;
}

export interface DurableRequests {
  readonly host: E2EHost;
  /** A message sent to one of the hub's control queues whose text names `instanceId` (case-insensitive: the provider writes `InstanceId`). */
  controlMessage(r: ProxiedRequest, instanceId: string): boolean;
  /** The start message of `instanceId`: on the extension an ExecutionStarted event; on the development host its first control message. */
  startMessage(r: ProxiedRequest, instanceId: string): boolean;
  /** The write that makes the (Pending) instance exist: the instance blob's first write, or the insert of its Instances row. */
  instanceWrite(r: ProxiedRequest, instanceId: string): boolean;
  /** A read of the instance's state by the storage layer (the blob, or its Instances row). */
  instanceRead(r: ProxiedRequest, instanceId: string): boolean;
  /**
   * The first write of an episode's commit that names the instance: the instance blob on the development
   * host (its one write); on the extension the activity messages it sends (work-item queue) or, for an
   * episode that sends none, its history batch: before either, nothing of the episode is stored.
   */
  episodeWrite(r: ProxiedRequest, instanceId: string): boolean;
  /** The write of the instance's status (custom status included): the blob, or the merge of its Instances row. */
  statusWrite(r: ProxiedRequest, instanceId: string): boolean;
}

/**
 * The index of the control queue the Azure Storage provider gives an instance: FNV-1a (32-bit) of the
 * id's UTF-8 bytes modulo the partition count (4 unless host.json sets `partitionCount`). Azure/durabletask
 * at 5217032, src/DurableTask.AzureStorage: AzureStorageOrchestrationService.cs line 2155,
 * Fnv1aHashHelper.cs lines 35-60 (UTF-8 unless told otherwise).
 */
export function controlQueueIndex(instanceId: string, partitionCount = 4): number {
  let hash = 2166136261;
  for (const byte of Buffer.from(instanceId, 'utf8')) hash = Math.imul(hash ^ byte, 16777619) >>> 0;
  return hash % partitionCount;
}

export function durableRequests(names: TaskHubNames, host: E2EHost = e2eHost()): DurableRequests {
  const hub = names.taskHub;
  const controlQueue = new RegExp(`^/${AZURITE_ACCOUNT}/${hub.toLowerCase()}-control-\\d+/messages$`);
  const blobPath = (id: string): string => `/${AZURITE_ACCOUNT}/${hub.toLowerCase()}-instances/${id}`;
  const instancesTable = `/${AZURITE_ACCOUNT}/${hub}Instances`;
  const rowKeyOf = (id: string): string => `PartitionKey='${id.replace(/'/g, "''")}'`;
  const workItems = `/${AZURITE_ACCOUNT}/${hub.toLowerCase()}-workitems/messages`;
  const namesInstance = (text: string, id: string): boolean => text.toLowerCase().includes(`"instanceid":"${id.toLowerCase()}"`);
  const controlMessage = (r: ProxiedRequest, instanceId: string): boolean =>
    r.service === 'queue' &&
    r.method === 'POST' &&
    controlQueue.test(r.path) &&
    namesInstance(putMessageText(r.body) ?? '', instanceId);
  if (host === 'devhost') {
    return {
      host,
      controlMessage,
      startMessage: controlMessage,
      instanceWrite: (r, id) => r.service === 'blob' && r.method === 'PUT' && r.path === blobPath(id),
      instanceRead: (r, id) => r.service === 'blob' && r.method === 'GET' && r.path === blobPath(id),
      episodeWrite: (r, id) => r.service === 'blob' && r.method === 'PUT' && r.path === blobPath(id),
      statusWrite: (r, id) => r.service === 'blob' && r.method === 'PUT' && r.path === blobPath(id),
    };
  }
  return {
    host,
    controlMessage,
    startMessage: (r, id) => controlMessage(r, id) && (putMessageText(r.body) ?? '').includes('DurableTask.Core.History.ExecutionStartedEvent'),
    instanceWrite: (r, id) => {
      if (r.service !== 'table' || r.method !== 'POST' || r.path !== instancesTable) return false;
      try {
        return (JSON.parse(r.body.toString('utf8')) as { PartitionKey?: unknown }).PartitionKey === id;
      } catch {
        return false;
      }
    },
    instanceRead: (r, id) =>
      r.service === 'table' &&
      r.method === 'GET' &&
      r.path === `${instancesTable}()` &&
      (r.query.get('$filter') ?? '').includes(rowKeyOf(id).replace('=', ' eq ')),
    episodeWrite: (r, id) =>
      (r.service === 'queue' && r.method === 'POST' && r.path === workItems && namesInstance(putMessageText(r.body) ?? '', id)) ||
      (r.service === 'table' &&
        r.method === 'POST' &&
        r.path === `/${AZURITE_ACCOUNT}/$batch` &&
        r.body.toString('utf8').includes(`/${hub}History(${rowKeyOf(id)},`)),
    statusWrite: (r, id) =>
      r.service === 'table' &&
      ['PATCH', 'MERGE', 'PUT'].includes(r.method) &&
      decodeURIComponent(r.path) === `${instancesTable}(${rowKeyOf(id)},RowKey='')`,
  };
}
