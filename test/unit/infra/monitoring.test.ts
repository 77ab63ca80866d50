/**
 * What the deployment gives operators beyond the app: the workbook and the two alert rules
 * (infra/app/monitoringAlerts.bicep, queries in infra/app/queries/), and the deployer's data roles
 * (infra/app/deployerAccess.bicep, `deployerPrincipalId` from azd's AZURE_PRINCIPAL_ID). The
 * queries the rules run are the ones docs/operations.md shows (whose events and fields
 * test/unit/ops/readmeObservability.test.ts checks against the app's catalogue), and every workbook
 * query is one of them.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';

import { BicepFile } from './BicepFile';
import { readRepoFile, readRepoJson, repoPath } from './repoFiles';

const docs = readRepoFile('docs', 'operations.md');
const docQueries = [...docs.matchAll(/```kusto\n([\s\S]*?)```/g)].map((m) => m[1] ?? '');

interface Workbook {
  readonly version: string;
  readonly items: ReadonlyArray<{ readonly type: number; readonly name: string; readonly content: { readonly query?: string; readonly title?: string } }>;
}

describe('alerts and the workbook', () => {
  const alerts = readRepoFile('infra', 'app', 'monitoringAlerts.bicep');
  const loaded = [...alerts.matchAll(/loadTextContent\('([^']+)'\)/g)].map((m) => m[1] ?? '');

  it('the rules and the workbook load files that exist: the two queries and the workbook', () => {
    assert.deepEqual(loaded.sort(), ['queries/job-failed-or-stalled.kql', 'queries/no-leader.kql', 'queries/workbook.json']);
    for (const file of loaded) assert.ok(existsSync(repoPath('infra', 'app', file)), file);
    assert.match(alerts, /displayName: 'Coordinator: no leader for 2 minutes'/);
    assert.match(alerts, /displayName: 'Coordinator: a job failed or stalled'/);
  });

  it('each rule runs a query docs/operations.md shows as it is', () => {
    for (const file of loaded.filter((f) => f.endsWith('.kql'))) {
      const query = readRepoFile('infra', 'app', file);
      assert.ok(docQueries.includes(query), `${file} is not among docs/operations.md's kusto blocks (copy it there as it is)`);
    }
  });

  it('the workbook is Notebook/1.0 and every query in it is one docs/operations.md shows', () => {
    const workbook = readRepoJson<Workbook>('infra', 'app', 'queries', 'workbook.json');
    assert.equal(workbook.version, 'Notebook/1.0');
    const queries = workbook.items.filter((i) => i.type === 3).map((i) => i.content.query ?? '');
    assert.ok(queries.length >= 6, `${queries.length} queries`);
    for (const query of queries) assert.ok(docQueries.some((d) => d.trimEnd() === query.trimEnd()), `a workbook query the docs do not show:\n${query}`);
    assert.equal(new Set(workbook.items.map((i) => i.name)).size, workbook.items.length, 'item names are unique');
  });

  it('main.bicep provisions them on the app\'s Application Insights, with an optional e-mail', async () => {
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    assert.equal(main.parameters.get('alertEmailAddress')?.defaultValue?.text, "''");
    const source = readRepoFile('infra', 'main.bicep');
    assert.match(source, /module monitoringAlerts 'app\/monitoringAlerts\.bicep' = \{[\s\S]*?applicationInsightsName: monitoring\.outputs\.name/);
    const parameters = readRepoJson<{ parameters: Record<string, { value: string }> }>('infra', 'main.parameters.json').parameters;
    assert.equal(parameters.alertEmailAddress?.value, '${COORDINATOR_ALERT_EMAIL=}');
  });
});

describe("the deployer's data roles", () => {
  it('azd passes the signed-in account; without one nobody but the app gets a role', async () => {
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    assert.equal(main.parameters.get('deployerPrincipalId')?.defaultValue?.text, "''");
    const source = readRepoFile('infra', 'main.bicep');
    assert.match(source, /module deployerAccess 'app\/deployerAccess\.bicep' = if \(!empty\(deployerPrincipalId\)\) \{[\s\S]*?storageAccountName: coordinatorAccountName/);
    const parameters = readRepoJson<{ parameters: Record<string, { value: string }> }>('infra', 'main.parameters.json').parameters;
    assert.equal(parameters.deployerPrincipalId?.value, '${AZURE_PRINCIPAL_ID=}');
    assert.equal(parameters.deployerPrincipalType?.value, '${AZURE_PRINCIPAL_TYPE=User}');
  });

  it('grants exactly Blob and Queue Data Contributor, on the storage account only', async () => {
    const access = await BicepFile.parse(repoPath('infra', 'app', 'deployerAccess.bicep'));
    assert.deepEqual(Object.fromEntries(access.evaluateObjectVariable('storageRoles')), {
      storageBlobDataContributor: 'ba92f5b4-2d11-453d-a403-e96b0029c9fe',
      storageQueueDataContributor: '974c5e8b-45b9-4653-ba55-5f855dd0fb88',
    });
    const source = readRepoFile('infra', 'app', 'deployerAccess.bicep');
    assert.match(source, /for roleId in \[storageRoles\.storageBlobDataContributor, storageRoles\.storageQueueDataContributor\]/);
    assert.match(source, /scope: storageAccount\n/);
  });
});
