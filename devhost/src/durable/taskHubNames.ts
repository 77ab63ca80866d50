/**
 * Storage names of one task hub. Everything the Durable backend stores lives under the hub's name
 * (lowercased), so several task hubs, and several test runs, can share one storage account:
 * `<hub>-instances` (one blob per orchestration instance), `<hub>-largemessages` (queue payloads
 * too big for a queue message), `<hub>-control-NN` (instance events) and `<hub>-workitems`
 * (activity work), the queue names the real Azure Storage provider uses.
 */
import { DevHostError } from '../errors';

export interface TaskHubNames {
  readonly taskHub: string;
  readonly instancesContainer: string;
  readonly largeMessagesContainer: string;
  readonly controlQueues: readonly string[];
  readonly workItemQueue: string;
}

// The extension's rule for Azure Storage task hubs: 3-45 characters, letters and digits, starting with a letter.
const TASK_HUB_PATTERN = /^[A-Za-z][A-Za-z0-9]{2,44}$/;

export function taskHubNames(taskHub: string, partitionCount = 4): TaskHubNames {
  if (!TASK_HUB_PATTERN.test(taskHub)) {
    throw new DevHostError(
      'DURABLE_BAD_TASK_HUB',
      `Task hub name "${taskHub}" is invalid: use 3 to 45 letters and digits, starting with a letter (the Durable extension's rule for Azure Storage).`,
      true,
    );
  }
  if (!Number.isInteger(partitionCount) || partitionCount < 1 || partitionCount > 16) {
    throw new DevHostError('DURABLE_BAD_PARTITION_COUNT', `PartitionCount must be an integer value between 1 and 16, got ${partitionCount}.`, true);
  }
  const prefix = taskHub.toLowerCase();
  return {
    taskHub,
    instancesContainer: `${prefix}-instances`,
    largeMessagesContainer: `${prefix}-largemessages`,
    controlQueues: Array.from({ length: partitionCount }, (_, i) => `${prefix}-control-${String(i).padStart(2, '0')}`),
    workItemQueue: `${prefix}-workitems`,
  };
}

/**
 * The extension's instance id rules (DurableClient.StartNewAsync): not empty, at most 256
 * characters, no `/`, `\`, `#`, `?` or control characters, not starting with `@`.
 */
export function validateInstanceId(instanceId: string): string | undefined {
  if (instanceId.length === 0) return 'Instance ids must not be empty.';
  if (instanceId.length > 256) return 'Instance ID lengths must not exceed 256 characters.';
  if (instanceId.startsWith('@')) return 'Orchestration instance ids must not start with @.';
  // eslint-disable-next-line no-control-regex -- control characters are exactly what is rejected
  if (/[/\\#?\u0000-\u001f\u007f-\u009f]/.test(instanceId)) return 'Orchestration instance ids must not contain /, \\, #, ?, or control characters.';
  return undefined;
}

/** The blob name of an instance: its id percent-encoded, so any valid id is a safe, prefix-preserving name. */
export function instanceBlobName(instanceId: string): string {
  return encodeURIComponent(instanceId);
}

export function instanceIdFromBlobName(blobName: string): string {
  return decodeURIComponent(blobName);
}
