/** host.json options the development host honors, with the real host's defaults and limits. */
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { describe, it } from 'node:test';

import { DEFAULT_FUNCTION_TIMEOUT_MS, parseHostConfig, resolveSettingExpression } from '../../src/HostConfig';

describe('parseHostConfig', () => {
  it('uses the host defaults for an empty host.json', () => {
    const config = parseHostConfig({ version: '2.0' });
    assert.equal(config.routePrefix, 'api');
    assert.deepEqual(config.queues, {
      batchSize: 16,
      newBatchThreshold: 8,
      maxPollingIntervalMs: 60_000,
      visibilityTimeoutMs: 0,
      maxDequeueCount: 5,
      messageEncoding: 'base64',
    });
    assert.deepEqual(config.singleton, { listenerLockPeriodMs: 60_000, listenerLockRecoveryPollingIntervalMs: 60_000 });
  });

  it('reads the queue, http and singleton options (property names case-insensitive)', () => {
    const config = parseHostConfig({
      extensions: { Http: { routePrefix: '' }, queues: { batchSize: 4, maxPollingInterval: '00:00:02', visibilityTimeout: '00:00:10', maxDequeueCount: 2, messageEncoding: 'None' } },
      singleton: { listenerLockPeriod: '00:00:15', listenerLockRecoveryPollingInterval: '00:00:20' },
      functionTimeout: '00:10:00',
    });
    assert.equal(config.routePrefix, '');
    assert.equal(config.queues.batchSize, 4);
    assert.equal(config.queues.newBatchThreshold, 2);
    assert.equal(config.queues.maxPollingIntervalMs, 2_000);
    assert.equal(config.queues.visibilityTimeoutMs, 10_000);
    assert.equal(config.queues.messageEncoding, 'none');
    assert.equal(config.singleton.listenerLockPeriodMs, 15_000);
    assert.equal(config.functionTimeoutMs, 600_000);
  });

  it('rejects values the host would reject, naming the property', () => {
    const cases: Array<[unknown, string]> = [
      [{ extensions: { queues: { batchSize: 33 } } }, 'extensions.queues.batchSize'],
      [{ extensions: { queues: { maxPollingInterval: '00:00:00.050' } } }, 'extensions.queues.maxPollingInterval'],
      [{ extensions: { queues: { messageEncoding: 'utf8' } } }, 'extensions.queues.messageEncoding'],
      [{ singleton: { listenerLockPeriod: '00:02:00' } }, 'singleton.listenerLockPeriod'],
    ];
    for (const [doc, property] of cases) {
      assert.throws(
        () => parseHostConfig(doc),
        (err: { code?: string; message?: string }) => err.code === 'DEVHOST_BAD_HOST_JSON' && (err.message ?? '').includes(property),
      );
    }
  });
});

describe('parseHostConfig: functionTimeout (azure-functions-host ScriptHostOptionsSetup)', () => {
  it('defaults to 30 minutes (plans other than Consumption), takes "-1" as no limit, and refuses less than a second', () => {
    assert.equal(parseHostConfig({}).functionTimeoutMs, DEFAULT_FUNCTION_TIMEOUT_MS);
    assert.equal(DEFAULT_FUNCTION_TIMEOUT_MS, 30 * 60_000);
    assert.equal(parseHostConfig({ functionTimeout: '-1' }).functionTimeoutMs, undefined);
    assert.equal(parseHostConfig({ functionTimeout: '1.00:00:00' }).functionTimeoutMs, 86_400_000);
    for (const bad of ['00:00:00.500', 'soon', 5]) {
      assert.throws(
        () => parseHostConfig({ functionTimeout: bad }),
        (err: { code?: string; message?: string }) => err.code === 'DEVHOST_BAD_HOST_JSON' && (err.message ?? '').includes('functionTimeout'),
      );
    }
  });
});

describe('parseHostConfig: extensions.durableTask (azure-functions-durable-extension DurableTaskOptions, AzureStorageOptions, AzureStorageDurabilityProviderFactory)', () => {
  it('uses the extension\'s defaults outside the Consumption plan', () => {
    const durable = parseHostConfig({}).durableTask;
    assert.deepEqual(
      { ...durable, warnings: [...durable.warnings] },
      {
        hubName: undefined,
        maxConcurrentActivityFunctions: 10 * availableParallelism(),
        maxConcurrentOrchestratorFunctions: 10 * availableParallelism(),
        maxOrchestrationActions: 100_000,
        overridableExistingInstanceStates: 'NonRunningStates',
        connectionName: undefined,
        partitionCount: 4,
        controlQueueBatchSize: 32,
        controlQueueBufferThreshold: 256,
        controlQueueVisibilityTimeoutMs: 300_000,
        workItemQueueVisibilityTimeoutMs: 300_000,
        maxQueuePollingIntervalMs: 30_000,
        warnings: [],
      },
    );
  });

  it('reads what host.json sets, names case-insensitive, and turns extended sessions off with a warning as for any non-.NET app', () => {
    const durable = parseHostConfig({
      extensions: {
        DurableTask: {
          hubName: '%HUB%',
          MaxConcurrentActivityFunctions: 3,
          maxConcurrentOrchestratorFunctions: 2,
          maxOrchestrationActions: 50,
          overridableExistingInstanceStates: 'anystate',
          extendedSessionsEnabled: true,
          tracing: { traceInputsAndOutputs: false },
          storageProvider: {
            type: 'AzureStorage',
            connectionName: 'DurableStorage',
            partitionCount: 2,
            controlQueueBatchSize: 16,
            controlQueueBufferThreshold: 64,
            controlQueueVisibilityTimeout: '00:01:00',
            workItemQueueVisibilityTimeout: '00:00:30',
            maxQueuePollingInterval: '00:00:05',
          },
        },
      },
    }).durableTask;
    assert.equal(durable.hubName, '%HUB%');
    assert.equal(durable.maxConcurrentActivityFunctions, 3);
    assert.equal(durable.maxConcurrentOrchestratorFunctions, 2);
    assert.equal(durable.maxOrchestrationActions, 50);
    assert.equal(durable.overridableExistingInstanceStates, 'AnyState');
    assert.equal(durable.connectionName, 'DurableStorage');
    assert.equal(durable.partitionCount, 2);
    assert.equal(durable.controlQueueBatchSize, 16);
    assert.equal(durable.controlQueueBufferThreshold, 64);
    assert.equal(durable.controlQueueVisibilityTimeoutMs, 60_000);
    assert.equal(durable.workItemQueueVisibilityTimeoutMs, 30_000);
    assert.equal(durable.maxQueuePollingIntervalMs, 5_000);
    assert.equal(durable.warnings.length, 1);
    assert.match(durable.warnings[0] ?? '', /extendedSessions = true for non-\.NET languages/);
  });

  it('rejects what the extension rejects (AzureStorageOptions.Validate), naming the property', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ storageProvider: { partitionCount: 17 } }, 'storageProvider.partitionCount'],
      [{ storageProvider: { controlQueueVisibilityTimeout: '00:00:30' } }, 'storageProvider.controlQueueVisibilityTimeout'],
      [{ storageProvider: { controlQueueBufferThreshold: 1001 } }, 'storageProvider.controlQueueBufferThreshold'],
      [{ maxConcurrentActivityFunctions: 0 }, 'maxConcurrentActivityFunctions'],
      [{ overridableExistingInstanceStates: 'Sometimes' }, 'overridableExistingInstanceStates'],
    ];
    for (const [durableTask, property] of cases) {
      assert.throws(
        () => parseHostConfig({ extensions: { durableTask } }),
        (err: { code?: string; message?: string }) => err.code === 'DEVHOST_BAD_HOST_JSON' && (err.message ?? '').includes(property),
        property,
      );
    }
  });

  it('refuses, loudly and by name, settings the real extension acts on but this backend cannot reproduce', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ useGracefulShutdown: true }, 'useGracefulShutdown'],
      [{ storeInputsInOrchestrationHistory: true }, 'storeInputsInOrchestrationHistory'],
      [{ notifications: { eventGrid: { topicEndpoint: 'https://x' } } }, 'notifications'],
      [{ storageProvider: { trackingStoreConnectionName: 'Other' } }, 'storageProvider.trackingStoreConnectionName'],
      [{ storageProvider: { type: 'mssql' } }, 'storageProvider.type'],
    ];
    for (const [durableTask, property] of cases) {
      assert.throws(
        () => parseHostConfig({ extensions: { durableTask } }),
        (err: { code?: string; message?: string }) => err.code === 'DEVHOST_UNSUPPORTED_HOST_JSON' && (err.message ?? '').includes(property),
        property,
      );
    }
    // Set to the values that change nothing, they are accepted.
    assert.doesNotThrow(() => parseHostConfig({ extensions: { durableTask: { useGracefulShutdown: false, notifications: { eventGrid: {} } } } }));
  });
});

describe('resolveSettingExpression', () => {
  it('replaces %NAME% from app settings and fails on a missing one', () => {
    assert.equal(resolveSettingExpression('%Q%-x', { Q: 'jobs' }, 'w'), 'jobs-x');
    assert.throws(
      () => resolveSettingExpression('%MISSING%', {}, 'Function "f"'),
      (err: { code?: string; message?: string }) => err.code === 'DEVHOST_UNRESOLVED_SETTING' && (err.message ?? '').includes('MISSING'),
    );
  });
});
