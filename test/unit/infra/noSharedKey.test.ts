import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BicepFile, plain } from './BicepFile';
import { readRepoFile, repoFilesUnder, repoPath } from './repoFiles';

/** Ways a template or setting would use an account key or a key-derived token. */
const SHARED_KEY_MARKERS = [/listKeys\s*\(/i, /listAccountSas\s*\(/i, /listServiceSas\s*\(/i, /AccountKey\s*=/i, /SharedAccessSignature\s*=/i, /\.primaryKey\b/i, /StorageAccountConnectionString/];

const DEPLOYED_FILES = (): string[] => [...repoFilesUnder('infra', '.bicep'), ...repoFilesUnder('infra', '.json'), 'azure.yaml', 'host.json'];

async function propertyValues(name: string): Promise<{ file: string; value: string }[]> {
  const values = [];
  for (const file of repoFilesUnder('infra', '.bicep')) {
    const bicep = await BicepFile.parse(repoPath(file));
    for (const property of bicep.nodesOfType('object_property')) {
      const [key, value] = [property.namedChild(0), property.namedChildren.at(-1)];
      if (key?.text === name && value !== null && value !== undefined) values.push({ file, value: plain(bicep.evaluate(value)) ?? '' });
    }
  }
  return values;
}

describe('nothing deployed needs a shared key', () => {
  it('no template, setting or host file reads or builds an account key', () => {
    for (const file of DEPLOYED_FILES()) {
      const text = readRepoFile(file);
      for (const marker of SHARED_KEY_MARKERS) assert.doesNotMatch(text, marker, `${file} uses a shared key (${marker.source})`);
    }
  });

  it('the storage account disables shared-key access and public blob access', async () => {
    const sharedKey = await propertyValues('allowSharedKeyAccess');
    assert.ok(sharedKey.length > 0, 'allowSharedKeyAccess must be set explicitly (Azure defaults it to true)');
    for (const { file, value } of sharedKey) assert.equal(value, 'false', `${file}: allowSharedKeyAccess`);
    for (const { file, value } of await propertyValues('allowBlobPublicAccess')) assert.equal(value, 'false', `${file}: allowBlobPublicAccess`);
  });

  it('Application Insights accepts Entra ID authentication only', async () => {
    const localAuth = await propertyValues('disableLocalAuth');
    assert.ok(localAuth.length > 0, 'disableLocalAuth must be set on the Application Insights component');
    for (const { file, value } of localAuth) assert.equal(value, 'true', `${file}: disableLocalAuth`);
  });

  it('the Flex deployment package is read with the user-assigned identity', async () => {
    const types = await propertyValues('type');
    assert.ok(types.some((t) => t.value === 'UserAssignedIdentity'), 'functionAppConfig.deployment.storage.authentication.type must be UserAssignedIdentity');
    assert.ok(!types.some((t) => t.value === 'StorageAccountConnectionString'));
  });

  it('the Function App has no working publishing user name and password (FTP and SCM basic auth off)', async () => {
    const policies = await propertyValues('basicPublishingCredentialsPolicies');
    assert.equal(policies.length, 1, 'functionApp.bicep must pass basicPublishingCredentialsPolicies to the site module');
    const byName = new Map((JSON.parse(policies[0]?.value ?? '[]') as { name: string; allow: boolean }[]).map((p) => [p.name, p.allow]));
    assert.equal(byName.get('ftp'), false, 'FTP basic authentication must be disabled');
    assert.equal(byName.get('scm'), false, 'SCM (deployment) basic authentication must be disabled');
  });
});
