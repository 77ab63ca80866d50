/**
 * The polling back-off of DurableTask.AzureStorage (Azure/durabletask
 * src/DurableTask.AzureStorage/BackoffPollingHelper.cs, minimum from Messaging/TaskHubQueue.cs):
 * randomized exponential growth from 50 ms to maxQueuePollingInterval, and an immediate next poll
 * after one that found messages, back to the minimum.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { QueuePoller } from '../../../src/durable/QueuePoller';
import { partitionOf } from '../../../src/durable/TaskHubQueues';

describe('QueuePoller', () => {
  it('grows 50, 100, 150, 250, 450 ... ms with no jitter, up to the maximum, and restarts after messages', async () => {
    const poller = new QueuePoller(50, 500, () => 0.5);
    const seen: number[] = [];
    for (let i = 0; i < 7; i += 1) {
      await poller.wait();
      seen.push(poller.currentIntervalMs);
    }
    assert.deepEqual(seen, [50, 100, 150, 250, 450, 500, 500]);
    poller.reset();
    const started = Date.now();
    await poller.wait();
    assert.ok(Date.now() - started < 40, 'the poll after one that found messages does not wait');
    assert.equal(poller.currentIntervalMs, 50);
  });

  it('ends a wait in progress when reset (a message this process sent: TaskHubQueue.AddMessageAsync), back to the minimum', async () => {
    const poller = new QueuePoller(50, 30_000, () => 0.5);
    for (let i = 0; i < 12; i += 1) {
      const waited = poller.wait();
      poller.interrupt();
      await waited;
    }
    assert.equal(poller.currentIntervalMs, 30_000, 'backed off to the ceiling');
    const started = Date.now();
    const waiting = poller.wait();
    setTimeout(() => poller.reset(), 20);
    await waiting;
    assert.ok(Date.now() - started < 1_000, `the 30 s wait ended when reset (${Date.now() - started} ms)`);
    assert.equal(poller.currentIntervalMs, 50);
  });

  it('keeps each step within the strategy\'s 20 % randomization', async () => {
    const low = new QueuePoller(50, 10_000, () => 0);
    const high = new QueuePoller(50, 10_000, () => 0.999_999);
    for (let i = 0; i < 3; i += 1) {
      await low.wait();
      await high.wait();
    }
    // Third step: 50 + 2^1 x 50 x factor.
    assert.ok(Math.abs(low.currentIntervalMs - (50 + 2 * 50 * 0.8)) < 1e-6, String(low.currentIntervalMs));
    assert.ok(Math.abs(high.currentIntervalMs - (50 + 2 * 50 * 1.2)) < 1e-3, String(high.currentIntervalMs));
  });
});

describe('partitionOf (AzureStorageOrchestrationService.GetControlQueueAsync, Fnv1aHashHelper)', () => {
  it('hashes the instance id\'s UTF-8 bytes with FNV-1a, modulo the partition count', () => {
    // FNV-1a 32-bit reference values: "" -> 0x811c9dc5, "a" -> 0xe40c292c, "foobar" -> 0xbf9cf968.
    assert.equal(partitionOf('', 2 ** 32), 0x811c9dc5);
    assert.equal(partitionOf('a', 2 ** 32), 0xe40c292c);
    assert.equal(partitionOf('foobar', 2 ** 32), 0xbf9cf968);
    assert.equal(partitionOf('foobar', 4), 0xbf9cf968 % 4);
    // UTF-8, not UTF-16: "é" hashes its two bytes C3 A9.
    let expected = 0x811c9dc5;
    for (const byte of [0xc3, 0xa9]) expected = Math.imul(expected ^ byte, 0x01000193) >>> 0;
    assert.equal(partitionOf('é', 2 ** 32), expected);
  });
});
