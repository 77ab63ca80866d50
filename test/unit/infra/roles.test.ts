import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { BicepFile } from './BicepFile';
import { repoFilesUnder, repoPath } from './repoFiles';

/**
 * The built-in roles the app's identity may hold, copied from Microsoft's list of Azure built-in
 * roles (the id column): https://learn.microsoft.com/azure/role-based-access-control/built-in-roles
 * (Storage: .../built-in-roles/storage; Monitor: .../built-in-roles/monitor).
 */
const DOCUMENTED_ROLES: Readonly<Record<string, { readonly name: string; readonly why: string }>> = {
  'b7e6dc6d-f1e8-4753-8033-0f276bb0955b': { name: 'Storage Blob Data Owner', why: 'leader lease, results, host containers, Flex deployment package' },
  '974c5e8b-45b9-4653-ba55-5f855dd0fb88': { name: 'Storage Queue Data Contributor', why: 'jobs and work-items queues, Durable queues' },
  '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3': { name: 'Storage Table Data Contributor', why: "Durable's instance and history tables" },
  '3913510d-42f4-4e42-8a64-420c390055eb': { name: 'Monitoring Metrics Publisher', why: 'Application Insights ingestion with Entra ID' },
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

  it('are built from the role id with subscriptionResourceId, for a service principal', async () => {
    for (const file of repoFilesUnder('infra', '.bicep')) {
      const bicep = await BicepFile.parse(repoPath(file));
      for (const resource of bicep.nodesOfType('resource_declaration')) {
        if (!resource.text.includes("'Microsoft.Authorization/roleAssignments@")) continue;
        assert.match(resource.text, /roleDefinitionId:\s*subscriptionResourceId\('Microsoft\.Authorization\/roleDefinitions',/, `${file}: role assignment at line ${resource.startPosition.row + 1}`);
        assert.match(resource.text, /principalType:\s*'ServicePrincipal'/, `${file}: role assignment at line ${resource.startPosition.row + 1}`);
      }
    }
  });
});
