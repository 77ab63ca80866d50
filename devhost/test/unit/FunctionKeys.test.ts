/** Function keys: which key opens which authorization level, and where keys are read from. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { authLevelOf, FunctionKeys, presentedKey } from '../../src/http/FunctionKeys';

describe('FunctionKeys', () => {
  const keys = FunctionKeys.fromEnv({ DEVHOST_MASTER_KEY: 'm', DEVHOST_HOST_KEYS: 'h1, h2', DEVHOST_FUNCTION_KEYS: 'submit=f1;cancel=f2' });

  it('opens everything when no key is configured (like func start)', () => {
    const none = FunctionKeys.fromEnv({});
    assert.equal(none.enabled, false);
    assert.equal(none.authorize('admin', 'x', undefined), true);
  });

  it('enforces function and admin levels when keys are configured', () => {
    assert.equal(keys.authorize('anonymous', 'submit', undefined), true);
    assert.equal(keys.authorize('function', 'submit', undefined), false);
    assert.equal(keys.authorize('function', 'submit', 'wrong'), false);
    assert.equal(keys.authorize('function', 'submit', 'h2'), true);
    assert.equal(keys.authorize('function', 'submit', 'f1'), true);
    assert.equal(keys.authorize('function', 'Submit', 'f1'), true);
    assert.equal(keys.authorize('function', 'cancel', 'f1'), false);
    assert.equal(keys.authorize('function', 'cancel', 'm'), true);
    assert.equal(keys.authorize('admin', 'x', 'h1'), false);
    assert.equal(keys.authorize('admin', 'x', 'm'), true);
  });

  it('reads x-functions-key before the code query parameter', () => {
    assert.equal(presentedKey({ 'x-functions-key': 'a' }, new URL('http://h/api/x?code=b')), 'a');
    assert.equal(presentedKey({}, new URL('http://h/api/x?code=b')), 'b');
    assert.equal(presentedKey({}, new URL('http://h/api/x')), undefined);
  });

  it('defaults a missing authLevel to function, like the host', () => {
    assert.equal(authLevelOf(undefined), 'function');
    assert.equal(authLevelOf('ANONYMOUS'), 'anonymous');
  });

  it('rejects malformed function key pairs without echoing them', () => {
    assert.throws(
      () => FunctionKeys.fromEnv({ DEVHOST_FUNCTION_KEYS: 'secretvalue' }),
      (err: { code?: string; message?: string }) => err.code === 'DEVHOST_BAD_KEYS' && !(err.message ?? '').includes('secretvalue'),
    );
  });
});
