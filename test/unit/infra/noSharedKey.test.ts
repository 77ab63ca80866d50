import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Node } from 'web-tree-sitter';

import { BicepFile, plain } from './BicepFile';
import { readRepoFile, repoFilesUnder, repoPath } from './repoFiles';

/** Ways a template or setting would use an account key or a key-derived token. */
const SHARED_KEY_MARKERS = [/listKeys\s*\(/i, /listAccountSas\s*\(/i, /listServiceSas\s*\(/i, /AccountKey\s*=/i, /SharedAccessSignature\s*=/i, /\.primaryKey\b/i, /StorageAccountConnectionString/];

const DEPLOYED_FILES = (): string[] => [...repoFilesUnder('infra', '.bicep'), ...repoFilesUnder('infra', '.json'), 'azure.yaml', 'host.json'];

/** Every value given to a property of this name in infra/ (ARM property names are case-insensitive: so is this). */
async function propertyValues(name: string): Promise<{ file: string; value: string }[]> {
  const values = [];
  for (const file of repoFilesUnder('infra', '.bicep')) {
    const bicep = await BicepFile.parse(repoPath(file));
    for (const property of bicep.nodesOfType('object_property')) {
      const [key, value] = [property.namedChild(0), property.namedChildren.at(-1)];
      if (key?.text.toLowerCase() === name.toLowerCase() && value !== null && value !== undefined) values.push({ file, value: plain(bicep.evaluate(value)) ?? '' });
    }
  }
  return values;
}

/** The resources of one type (`Microsoft.Web/sites/basicPublishingCredentialsPolicies`), any API version, in infra/. */
async function resourcesOfType(type: string): Promise<{ file: string; bicep: BicepFile; node: Node }[]> {
  const found = [];
  for (const file of repoFilesUnder('infra', '.bicep')) {
    const bicep = await BicepFile.parse(repoPath(file));
    for (const node of bicep.nodesOfType('resource_declaration')) {
      if (node.text.includes(`'${type}@`)) found.push({ file, bicep, node });
    }
  }
  return found;
}

function propertyOf(node: Node, key: string): Node | undefined {
  const property = node.descendantsOfType('object_property').find((p) => p?.namedChild(0)?.text === key);
  return property?.namedChildren.at(-1) ?? undefined;
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

  it('Application Insights (and its Log Analytics workspace) accept Entra ID authentication only', async () => {
    const localAuth = await propertyValues('disableLocalAuth');
    assert.ok(
      localAuth.some((v) => v.file === 'infra/app/applicationInsights.bicep'),
      'DisableLocalAuth must be set on the Application Insights component (infra/app/applicationInsights.bicep)',
    );
    for (const { file, value } of localAuth) assert.equal(value, 'true', `${file}: disableLocalAuth`);
  });

  it('the Flex deployment package is read with the user-assigned identity', async () => {
    const types = await propertyValues('type');
    assert.ok(types.some((t) => t.value === 'UserAssignedIdentity'), 'functionAppConfig.deployment.storage.authentication.type must be UserAssignedIdentity');
    assert.ok(!types.some((t) => t.value === 'StorageAccountConnectionString'));
  });

  it('the Function App has no working publishing user name and password (FTP and SCM basic auth off)', async () => {
    const policies = await resourcesOfType('Microsoft.Web/sites/basicPublishingCredentialsPolicies');
    const byName = new Map<string, string | undefined>();
    for (const { file, bicep, node } of policies) {
      const [name, allow] = [propertyOf(node, 'name'), propertyOf(node, 'allow')];
      assert.ok(name !== undefined && allow !== undefined, `${file}: a basicPublishingCredentialsPolicies resource must set its name and properties.allow`);
      byName.set(plain(bicep.evaluate(name)) ?? '', plain(bicep.evaluate(allow)));
    }
    assert.equal(byName.get('ftp'), 'false', 'FTP basic authentication must be disabled');
    assert.equal(byName.get('scm'), 'false', 'SCM (deployment) basic authentication must be disabled');
  });
});
