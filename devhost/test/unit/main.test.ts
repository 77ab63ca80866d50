/** The host process's command line and local.settings.json handling. */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { loadLocalSettings, parseArgs, storageUnreachableHint } from '../../src/main';

describe('devhost main', () => {
  it('parses flags with defaults', () => {
    assert.deepEqual(parseArgs([], '/app'), { appRoot: '/app', port: 7071, listen: '127.0.0.1', drainTimeoutMs: 10_000 });
    const args = parseArgs(['sub', '--port=7072', '--host-id', 'myapp', '--instance-id', 'i-2', '--main', 'dist/*.js'], '/app');
    assert.deepEqual(args, { appRoot: '/app/sub', port: 7072, listen: '127.0.0.1', drainTimeoutMs: 10_000, hostId: 'myapp', instanceId: 'i-2', main: 'dist/*.js' });
  });

  it('rejects bad flags with a stable code', () => {
    for (const argv of [['--port', 'x'], ['--bogus', '1'], ['--host-id', 'Not_Valid'], ['--port']]) {
      assert.throws(() => parseArgs(argv, '/app'), (err: { code?: string }) => err.code === 'DEVHOST_BAD_ARGS' || err.code === 'DEVHOST_BAD_HOST_ID', argv.join(' '));
    }
  });

  it('loads local.settings.json Values without overriding the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'devhost-main-'));
    try {
      writeFileSync(join(dir, 'local.settings.json'), JSON.stringify({ IsEncrypted: false, Values: { A: 'from-file', B: 'from-file', N: 5 } }));
      const env: NodeJS.ProcessEnv = { A: 'from-env' };
      assert.deepEqual(loadLocalSettings(dir, env).sort(), ['B', 'N']);
      assert.deepEqual(env, { A: 'from-env', B: 'from-file', N: '5' });
      assert.deepEqual(loadLocalSettings(join(dir, 'missing'), env), []);
      writeFileSync(join(dir, 'local.settings.json'), '{ not json');
      assert.throws(() => loadLocalSettings(dir, {}), (err: { code?: string }) => err.code === 'DEVHOST_BAD_LOCAL_SETTINGS');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('names the storage settings that point at an endpoint that did not answer, and says what to do', () => {
    const account = 'AccountName=devstoreaccount1;AccountKey=a2V5;';
    const env = {
      AzureWebJobsStorage: `DefaultEndpointsProtocol=http;${account}BlobEndpoint=http://127.0.0.1:43705/devstoreaccount1;QueueEndpoint=http://127.0.0.1:43705/devstoreaccount1;`,
      CoordinatorStorage: 'UseDevelopmentStorage=true',
      Other: 'http://127.0.0.1:43705/',
    };
    const remote = storageUnreachableHint('connect ECONNREFUSED 127.0.0.1:43705', env);
    assert.match(remote ?? '', /^The storage named by AzureWebJobsStorage did not answer at 127\.0\.0\.1:43705 \(ECONNREFUSED\)/);
    assert.match(remote ?? '', /npx azurite --location \.azurite --skipApiVersionCheck/);
    assert.match(storageUnreachableHint('connect ECONNREFUSED 127.0.0.1:10001', env) ?? '', /^The storage named by CoordinatorStorage did not answer/);
    assert.match(storageUnreachableHint('getaddrinfo ENOTFOUND nowhere.example', env) ?? '', /^A storage account the app uses did not answer at nowhere\.example/);
    assert.equal(storageUnreachableHint('Unable to load entry point', env), undefined);
    assert.ok(!(remote ?? '').includes('a2V5'), 'no key in the hint');
  });
});
