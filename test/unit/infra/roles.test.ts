import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import type { Node } from 'web-tree-sitter';

import { BicepFile, type BicepValue, plain } from './BicepFile';
import { repoFilesUnder, repoPath } from './repoFiles';

/**
 * The built-in roles the app's identity may hold, copied from Microsoft's list of Azure built-in
 * roles (the id column): https://learn.microsoft.com/azure/role-based-access-control/built-in-roles
 * (Storage: .../built-in-roles/storage; Monitor: .../built-in-roles/monitor).
 */
const DOCUMENTED_ROLES: Readonly<Record<string, { readonly name: string; readonly why: string }>> = {
  'b7e6dc6d-f1e8-4753-8033-0f276bb0955b': { name: 'Storage Blob Data Owner', why: 'host containers, Flex deployment package, and by default the lease and results' },
  'ba92f5b4-2d11-453d-a403-e96b0029c9fe': { name: 'Storage Blob Data Contributor', why: 'leader lease and results on a shared coordinator account' },
  '974c5e8b-45b9-4653-ba55-5f855dd0fb88': { name: 'Storage Queue Data Contributor', why: 'jobs and work-items queues, Durable queues' },
  '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3': { name: 'Storage Table Data Contributor', why: "Durable's instance and history tables; the app's job index table" },
  '3913510d-42f4-4e42-8a64-420c390055eb': { name: 'Monitoring Metrics Publisher', why: 'Application Insights ingestion with Entra ID' },
};

const ROLE_ID = (name: string): string => {
  const id = Object.keys(DOCUMENTED_ROLES).find((k) => DOCUMENTED_ROLES[k]?.name === name);
  if (id === undefined) throw new Error(`no documented role ${name}`);
  return id;
};

const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** "Storage Blob Data Owner" and "storageBlobDataOwner" compare equal. */
function normalize(name: string): string {
  return name.replace(/[^A-Za-z0-9]/g, '').toLowerCase();
}

async function guidLiterals(): Promise<{ file: string; line: number; id: string; label: string | undefined }[]> {
  const found = [];
  for (const file of repoFilesUnder('infra', '.bicep')) {
    const bicep = await BicepFile.parse(repoPath(file));
    for (const literal of bicep.nodesOfType('string')) {
      const id = literal.text.slice(1, -1);
      if (!GUID.test(id)) continue;
      // The name the Bicep gives the id: the object key or variable it is assigned to.
      const holder = literal.parent;
      const label = holder?.type === 'object_property' || holder?.type === 'variable_declaration' ? holder.namedChild(0)?.text : undefined;
      found.push({ file, line: literal.startPosition.row + 1, id, label });
    }
  }
  return found;
}

describe('role assignments', () => {
  it('use only documented built-in role ids, each named after its role', async () => {
    const literals = await guidLiterals();
    assert.ok(literals.length > 0, 'no role ids found in infra/');
    for (const { file, line, id, label } of literals) {
      const role = DOCUMENTED_ROLES[id.toLowerCase()];
      assert.ok(role !== undefined, `${file}:${line}: ${id} is not one of the documented roles this app needs`);
      assert.ok(label !== undefined && normalize(label) === normalize(role.name), `${file}:${line}: ${id} is ${role.name} but is labelled ${label ?? '(nothing)'}`);
    }
  });

  it('grant exactly the data-plane roles the app needs: no more, no fewer', async () => {
    const used = new Set((await guidLiterals()).map((l) => l.id.toLowerCase()));
    assert.deepEqual([...used].sort(), Object.keys(DOCUMENTED_ROLES).sort());
  });

  it('are built from the role id with subscriptionResourceId, for a service principal (the deployer: the type azd says)', async () => {
    for (const file of repoFilesUnder('infra', '.bicep')) {
      const bicep = await BicepFile.parse(repoPath(file));
      for (const resource of bicep.nodesOfType('resource_declaration')) {
        if (!resource.text.includes("'Microsoft.Authorization/roleAssignments@")) continue;
        assert.match(resource.text, /roleDefinitionId:\s*subscriptionResourceId\('Microsoft\.Authorization\/roleDefinitions',/, `${file}: role assignment at line ${resource.startPosition.row + 1}`);
        // The app's identity is a service principal; the deployer (deployerAccess.bicep) is a person or a pipeline.
        const principalType = file === 'infra/app/deployerAccess.bicep' ? /principalType:\s*principalType\b/ : /principalType:\s*'ServicePrincipal'/;
        assert.match(resource.text, principalType, `${file}: role assignment at line ${resource.startPosition.row + 1}`);
      }
    }
  });

  it('give each storage account only the roles of what it holds', async () => {
    const granted = await storageRolesByModule();
    const names = (ids: readonly string[]): string[] => ids.map((id) => DOCUMENTED_ROLES[id]?.name ?? id).sort();
    // The host and Durable use all three services of AzureWebJobsStorage.
    assert.deepEqual(names(granted.get('hostStorageAccess') ?? []), ['Storage Blob Data Owner', 'Storage Queue Data Contributor', 'Storage Table Data Contributor']);
    // A shared account holds the lease, queues, results and the job index table (Durable's tables stay
    // in each app's own account): blobs are read and written, never owned.
    assert.deepEqual(names(granted.get('coordinatorStorageAccess') ?? []), ['Storage Blob Data Contributor', 'Storage Queue Data Contributor', 'Storage Table Data Contributor']);
    assert.ok(!(granted.get('coordinatorStorageAccess') ?? []).includes(ROLE_ID('Storage Blob Data Owner')));
  });
});

/**
 * For every module call of app/storageAccess.bicep in main.bicep: the role definition ids its role
 * assignments get, computed from the parameters main.bicep passes (the loop evaluated item by item).
 */
async function storageRolesByModule(): Promise<Map<string, string[]>> {
  const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
  const access = await BicepFile.parse(repoPath('infra', 'app', 'storageAccess.bicep'));
  const result = new Map<string, string[]>();
  for (const declaration of main.nodesOfType('module_declaration')) {
    if (!declaration.text.includes("'app/storageAccess.bicep'")) continue;
    const symbol = declaration.namedChild(0)?.text ?? '';
    const params = propertyValue(declaration, 'params');
    assert.ok(params !== undefined, `module ${symbol} passes no params`);
    const values = Object.fromEntries(BicepFile.objectProperties(params).map(([k, v]) => [k, main.evaluate(v)]));
    const module = access.withParameters(values);
    const assignments = module.nodesOfType('resource_declaration').find((r) => r.text.includes("'Microsoft.Authorization/roleAssignments@"));
    const loop = assignments?.namedChildren.find((c) => c?.type === 'for_statement');
    assert.ok(loop !== undefined && loop !== null, 'storageAccess.bicep must assign its roles in one loop');
    const [variable, iterable] = [loop.namedChild(0), loop.namedChild(1)];
    const roleDefinition = propertyValue(loop, 'roleDefinitionId');
    const roleIdArgument = roleDefinition?.namedChildren.find((c) => c?.type === 'arguments')?.namedChild(1);
    assert.ok(variable !== null && iterable !== null && roleIdArgument !== null && roleIdArgument !== undefined);
    const items = module.evaluate(iterable);
    assert.ok(Array.isArray(items), `module ${symbol}: the role loop iterates over something that cannot be evaluated: ${iterable.text}`);
    result.set(
      symbol,
      (items as readonly BicepValue[]).map((item) => plain(module.evaluate(roleIdArgument, new Map([[variable.text, item]]))) ?? ''),
    );
  }
  return result;
}

function propertyValue(node: Node, key: string): Node | undefined {
  const property = node.descendantsOfType('object_property').find((p) => p?.namedChild(0)?.text === key);
  return property?.namedChildren.at(-1) ?? undefined;
}
