/** What of an error may be shown to a client or kept in a job's record: the message, never a stack or a path. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { publicMessage } from '../../../shared/errors';

describe('publicMessage', () => {
  it('keeps the exception message of a failure the host reports, without its stack', () => {
    const text = [
      'Result: Failure',
      'Exception: Maximum call stack size exceeded',
      'Stack: RangeError: Maximum call stack size exceeded',
      '    at sortKeys (/home/site/wwwroot/dist/shared/jobs/api/canonicalJson.js:14:5)',
      '    at /home/site/wwwroot/dist/shared/jobs/api/canonicalJson.js:12:30',
    ].join('\n');
    assert.equal(publicMessage(text), 'Maximum call stack size exceeded');
  });

  it('drops server paths and stack frames from a single line', () => {
    const text = "ENOENT: no such file or directory, open '/srv/app/dist/x.js:3:1' Stack: Error at f (/srv/app/dist/y.js:1:2)";
    const out = publicMessage(text);
    assert.doesNotMatch(out, /\/srv|Stack|\.js/);
    assert.match(out, /ENOENT: no such file or directory/);
  });

  it('drops a Windows path too, and bounds the length', () => {
    assert.doesNotMatch(publicMessage('failed in C:\\home\\site\\wwwroot\\dist\\a.js:1:2'), /wwwroot|\.js/);
    assert.equal(publicMessage('x'.repeat(1000)).length, 300);
  });

  it('leaves a plain message alone', () => {
    assert.equal(publicMessage('storage unreachable'), 'storage unreachable');
  });
});
