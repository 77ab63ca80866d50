/**
 * Where a queue binding (trigger or output) points: its queue name resolved like the host does
 * (`%SETTING%` expressions, then lower-cased and validated as a queue name) and the storage
 * connection named by its `connection` property (default `AzureWebJobsStorage`). Errors name the
 * function and binding, never a connection string.
 */
import { type QueueServiceClient } from '@azure/storage-queue';

import { type BindingMetadata } from '../contracts';
import { DevHostError } from '../errors';
import { resolveSettingExpression } from '../HostConfig';
import { DEFAULT_CONNECTION, queueServiceClient, readStorageConnection } from '../storage';

export interface QueueBindingTarget {
  readonly queueName: string;
  readonly connectionName: string;
  readonly service: QueueServiceClient;
}

const QUEUE_NAME = /^[a-z0-9](?!.*--)[a-z0-9-]{1,61}[a-z0-9]$/;

export function validQueueName(name: string): boolean {
  return QUEUE_NAME.test(name);
}

export function resolveQueueTarget(
  functionName: string,
  bindingName: string,
  binding: BindingMetadata,
  env: Readonly<Record<string, string | undefined>>,
): QueueBindingTarget {
  const where = `Function "${functionName}" binding "${bindingName}"`;
  if (typeof binding.queueName !== 'string' || binding.queueName === '') {
    throw new DevHostError('DEVHOST_BAD_BINDING', `${where}: queueName is missing.`, true);
  }
  const queueName = resolveSettingExpression(binding.queueName, env, where).toLowerCase();
  if (!validQueueName(queueName)) {
    throw new DevHostError('DEVHOST_BAD_BINDING', `${where}: "${queueName}" is not a valid queue name (3-63 lowercase letters, digits and single hyphens).`, true);
  }
  const connectionName = typeof binding.connection === 'string' && binding.connection !== '' ? binding.connection : DEFAULT_CONNECTION;
  const connection = readStorageConnection(env, connectionName);
  return { queueName, connectionName, service: queueServiceClient(connection) };
}
