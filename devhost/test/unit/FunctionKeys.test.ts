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

  it('opens the Durable webhooks with the extension\'s system key or the master key only (AuthorizationLevel.System)', () => {
    const withSystem = FunctionKeys.fromEnv({ DEVHOST_HOST_KEYS: 'h', DEVHOST_MASTER_KEY: 'm', DEVHOST_SYSTEM_KEYS: 'durabletask_extension=s' });
    assert.equal(withSystem.generatedSystemKey, false);
    assert.equal(withSystem.systemKey('durabletask_extension'), 's');
    assert.equal(withSystem.authorizeSystem('durabletask_extension', 's'), true);
    assert.equal(withSystem.authorizeSystem('durabletask_extension', 'm'), true);
    assert.equal(withSystem.authorizeSystem('durabletask_extension', 'h'), false, 'a host key is not a system key');
    assert.equal(withSystem.authorizeSystem('durabletask_extension', undefined), false);
    // Keys on without a configured system key: one is made for the process, as the host creates one.
    const generated = FunctionKeys.fromEnv({ DEVHOST_HOST_KEYS: 'h' });
    assert.equal(generated.generatedSystemKey, true);
    const key = generated.systemKey('durabletask_extension') ?? '';
    assert.ok(key.length >= 32);
    assert.equal(generated.authorizeSystem('durabletask_extension', key), true);
    // Keys off: no system key, everything open (like Core Tools locally).
    const none = FunctionKeys.fromEnv({});
    assert.equal(none.systemKey('durabletask_extension'), undefined);
    assert.equal(none.authorizeSystem('durabletask_extension', undefined), true);
  });

  it('rejects malformed function key pairs without echoing them', () => {
    assert.throws(
      () => FunctionKeys.fromEnv({ DEVHOST_FUNCTION_KEYS: 'secretvalue' }),
      (err: { code?: string; message?: string }) => err.code === 'DEVHOST_BAD_KEYS' && !(err.message ?? '').includes('secretvalue'),
    );
  });
});
