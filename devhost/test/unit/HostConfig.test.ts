/** host.json options the development host honors, with the real host's defaults and limits. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { parseHostConfig, resolveSettingExpression } from '../../src/HostConfig';

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

describe('resolveSettingExpression', () => {
  it('replaces %NAME% from app settings and fails on a missing one', () => {
    assert.equal(resolveSettingExpression('%Q%-x', { Q: 'jobs' }, 'w'), 'jobs-x');
    assert.throws(
      () => resolveSettingExpression('%MISSING%', {}, 'Function "f"'),
      (err: { code?: string; message?: string }) => err.code === 'DEVHOST_UNRESOLVED_SETTING' && (err.message ?? '').includes('MISSING'),
    );
  });
});
