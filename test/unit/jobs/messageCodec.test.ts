/**
 * The queue text codec: a submission's base64 round trip, and a stable code for text that is not
 * base64, not UTF-8 or not JSON.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { JobError, type JobErrorCode } from '../../../shared/jobs/JobError';
import { decodeQueueMessage, encodeQueueMessage } from '../../../shared/jobs/messageCodec';

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
});
