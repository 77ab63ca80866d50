/** An app with a binding the development host cannot serve fails at load, naming function and binding. */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { it } from 'node:test';

import { loadFunctionApp } from '../../src/AppLoader';

it('fails at start with the function and binding name when a binding type is unsupported', async () => {
  const appRoot = join(__dirname, '..', 'fixtures', 'unsupportedApp');
  await assert.rejects(loadFunctionApp({ appRoot, main: '*.js' }), (err: { code?: string; message?: string }) => {
    assert.equal(err.code, 'DEVHOST_UNSUPPORTED_BINDING');
    assert.match(err.message ?? '', /Function "onBlob": binding "blobTrigger\w*" \(type "blobTrigger"/);
    return true;
  });
});
