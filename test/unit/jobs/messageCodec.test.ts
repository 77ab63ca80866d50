/**
 * The queue text codec: a submission's base64 round trip, and a stable code for text that is not
 * base64, not UTF-8 or not JSON; work-item envelopes (several chunks to a message) and their packing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { packMessages, sized } from '../../../shared/jobs/dispatch/ChunkDispatcher';
import { JobError, type JobErrorCode } from '../../../shared/jobs/JobError';
import { JOB_LIMITS } from '../../../shared/jobs/jobLimits';
import {
  decodeQueueMessage,
  doorbellOf,
  encodeQueueMessage,
  isWakeMessage,
  LEASE_FREE_MESSAGE,
  MAX_ENVELOPE_PARTS,
  parseWorkItemDelivery,
  WAKE_WORKERS_MESSAGE,
  type WorkItemMessage,
  workItemPayload,
} from '../../../shared/jobs/messageCodec';

function decodeCode(text: string): JobErrorCode {
  try {
    decodeQueueMessage(text);
  } catch (err) {
    assert.ok(err instanceof JobError);
    return err.code;
  }
  assert.fail(`decoded ${text}`);
}

describe('message codec', () => {
  it('decodes base64 JSON messages and refuses anything else with a stable code', () => {
    const job = { workType: 'sum', items: [1, 2] };
    assert.deepEqual(decodeQueueMessage(encodeQueueMessage(job)), job);
    assert.equal(decodeCode(JSON.stringify(job)), 'NOT_BASE64');
    assert.equal(decodeCode(''), 'NOT_BASE64');
    assert.equal(decodeCode('abc'), 'NOT_BASE64');
    assert.equal(decodeCode(Buffer.from('not json').toString('base64')), 'INVALID_JSON');
    assert.equal(decodeCode(Buffer.from([0xff, 0xfe, 0x00]).toString('base64')), 'INVALID_JSON');
  });

  const part = (chunk: number, items: unknown[] = [chunk]): WorkItemMessage =>
    ({ v: 1, jobId: 'env', chunk, workType: 'sum', firstIndex: chunk, itemCount: items.length, attempts: 3, epoch: 1, dispatch: 1, items }) as WorkItemMessage;

  it('carries one chunk as itself and several as an envelope whose every part is checked', () => {
    assert.deepEqual(parseWorkItemDelivery(decodeQueueMessage(encodeQueueMessage(workItemPayload([part(0)])))), [part(0)]);
    const envelope = decodeQueueMessage(encodeQueueMessage(workItemPayload([part(0), part(1), part(2)])));
    assert.deepEqual(envelope, { v: 1, parts: [part(0), part(1), part(2)] });
    assert.deepEqual(parseWorkItemDelivery(envelope).map((m) => m.chunk), [0, 1, 2]);
    const refused = (value: unknown): string => {
      try {
        parseWorkItemDelivery(value);
      } catch (err) {
        assert.ok(err instanceof JobError);
        return `${err.code}: ${err.message}`;
      }
      return 'accepted';
    };
    assert.match(refused({ v: 1, parts: [part(0), { ...part(1), jobId: '../x' }] }), /^INVALID_WORK_ITEM: .*bad jobId/);
    assert.match(refused({ v: 1, parts: [] }), /^INVALID_WORK_ITEM: .*0 parts/);
    assert.match(refused({ v: 1, parts: Array.from({ length: MAX_ENVELOPE_PARTS + 1 }, (_, i) => part(i)) }), /^INVALID_WORK_ITEM: .*17 parts/);
    assert.match(refused({ v: 2, parts: [part(0)] }), /^INVALID_WORK_ITEM: .*envelope version/);
    assert.throws(() => workItemPayload([]));
  });

  it('packs consecutive chunks, at most so many to a message and never past the message size', () => {
    const ten = Array.from({ length: 10 }, (_, i) => sized(part(i)));
    assert.deepEqual(packMessages(ten, 4).map((p) => p.map((m) => m.chunk)), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]);
    assert.deepEqual(packMessages(ten, 1).length, 10);
    assert.deepEqual(packMessages([], 4), []);
    // Chunks of ~20 KiB of JSON: two fit the 48 KiB a message may hold, three do not.
    const big = Array.from({ length: 5 }, (_, i) => sized(part(i, ['x'.repeat(20 * 1024)])));
    const packs = packMessages(big, 4);
    assert.deepEqual(packs.map((p) => p.length), [2, 2, 1]);
    for (const pack of packs) assert.ok(Buffer.byteLength(JSON.stringify(workItemPayload(pack))) <= JOB_LIMITS.maxMessageJsonBytes);
  });

  it('tells the two doorbells apart, as text or parsed, and takes nothing else for one', () => {
    assert.equal(doorbellOf(WAKE_WORKERS_MESSAGE), 'work');
    assert.equal(doorbellOf(JSON.stringify(WAKE_WORKERS_MESSAGE)), 'work');
    assert.equal(doorbellOf(LEASE_FREE_MESSAGE), 'lease-free');
    assert.equal(doorbellOf(JSON.stringify(LEASE_FREE_MESSAGE)), 'lease-free');
    assert.ok(isWakeMessage(LEASE_FREE_MESSAGE) && isWakeMessage(WAKE_WORKERS_MESSAGE));
    for (const other of [{ wake: 1, lease: 'held' }, { wake: 1, lease: 'free', jobId: 'x' }, { wake: 2 }, '{"wake":', 'wake', { v: 1, parts: [] }]) {
      assert.equal(doorbellOf(other), undefined, JSON.stringify(other));
      assert.equal(isWakeMessage(other), false);
    }
  });
});
