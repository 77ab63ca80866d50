/**
 * `npm run infra:check` (scripts/infraCheck.ts, bicepCli.ts, infraContract.ts): what it reports.
 * The checks on main.parameters.json, azure.yaml and the documented outputs run against the
 * template the pinned Bicep CLI emits from infra/main.bicep, and a copy of infra/ with mistakes in
 * it goes through the whole check. Those tests need the CLI that `npm run infra:check` restores
 * (.tools/bicep, git-ignored; CI runs it before `npm test`); they restore it themselves when it is
 * missing (the .NET SDK and NuGet, as on this project's machines) and fail, saying why, without them.
 * The rest (the pin, the diagnostics format, azd's value conversions) runs everywhere.
 */
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { parse as parseYaml } from 'yaml';

import { bicepExecutablePath, bicepRuntimeId, ensureBicepCli, parseDiagnostics, pinnedBicepVersion, runBicep, TOOL_PROJECT } from '../../../scripts/bicepCli';
import { INFRA_FILES, runInfraCheck } from '../../../scripts/infraCheck';
import { allResources, type ArmTemplate, type AzureYaml, checkAzureYaml, checkDocumentedOutputs, checkParametersFile, documentedOutputs } from '../../../scripts/infraContract';
import { readRepoFile, readRepoJson, REPO_ROOT } from './repoFiles';

const VERSION = pinnedBicepVersion(readRepoFile(TOOL_PROJECT));
let cliPath = '';

type Parameters = { parameters: Record<string, { value?: unknown; reference?: unknown }> };

const repoParameters = (): Parameters => readRepoJson<Parameters>(INFRA_FILES.parameters);
const deployDoc = (): string => readRepoFile(INFRA_FILES.deployDoc);
const repoAzureYaml = (): AzureYaml => parseYaml(readRepoFile(INFRA_FILES.azureYaml)) as AzureYaml;

describe('infra:check, the parts that need no compiler', () => {
  it('the tool project pins the Bicep CLI to one exact version, and nothing else is accepted', () => {
    assert.match(VERSION, /^\d+\.\d+\.\d+$/);
    assert.match(readRepoFile(TOOL_PROJECT), /Version="\[\$\(BicepCliVersion\)\]"/, 'the package reference must be the exact version [x.y.z]');
    for (const loose of ['<BicepCliVersion>0.49.*</BicepCliVersion>', '<BicepCliVersion>[0.49,)</BicepCliVersion>', '<Project />']) {
      assert.throws(() => pinnedBicepVersion(loose), /one exact version/);
    }
  });

  it('maps Node.js platforms to the NuGet runtime ids the CLI is published for, and refuses others', () => {
    assert.equal(bicepRuntimeId('linux', 'x64'), 'linux-x64');
    assert.equal(bicepRuntimeId('darwin', 'arm64'), 'osx-arm64');
    assert.equal(bicepRuntimeId('win32', 'x64'), 'win-x64');
    assert.equal(bicepRuntimeId('aix', 'ppc64'), undefined);
    assert.match(bicepExecutablePath('/r', '1.2.3', 'win-x64'), /azure\.bicep\.commandline\.win-x64[\\/]1\.2\.3[\\/]tools[\\/]bicep\.exe$/);
  });

  it('reads every diagnostic line, and keeps any other line the CLI prints', () => {
    const output = [
      '/r/infra/app/x.bicep(3,7) : Error no-unused-params: Parameter "p" is declared but never used. [https://aka.ms/bicep/linter-diagnostics#no-unused-params]',
      '/r/infra/app/x.bicep(3,7) : Error no-unused-params: Parameter "p" is declared but never used. [https://aka.ms/bicep/linter-diagnostics#no-unused-params]',
      'C:\\r\\infra\\main.bicep(10,1) : Warning BCP187: The property "location" does not exist.',
      'Unhandled exception. System.IO.IOException',
    ].join('\n');
    const { diagnostics, other } = parseDiagnostics(output);
    assert.deepEqual(
      diagnostics.map((d) => `${d.file}|${d.line}|${d.column}|${d.level}|${d.code}|${d.message}`),
      ['/r/infra/app/x.bicep|3|7|Error|no-unused-params|Parameter "p" is declared but never used.', 'C:\\r\\infra\\main.bicep|10|1|Warning|BCP187|The property "location" does not exist.'],
    );
    assert.deepEqual(other, ['Unhandled exception. System.IO.IOException']);
  });

  it('takes parameter values as azd passes them: ${VAR=default} substituted, strings turned into ints and bools', () => {
    const template: ArmTemplate = {
      parameters: {
        count: { type: 'int', defaultValue: 1, maxValue: 10 },
        enabled: { type: 'bool', defaultValue: false },
        secret: { type: 'securestring', defaultValue: '' },
        name: { type: 'string' },
      },
    };
    const check = (parameters: Record<string, unknown>): string[] => checkParametersFile(template, { parameters }, 'MY_COUNT MY_FLAG', 'p.json');
    const name = { value: '${AZURE_ENV_NAME}' };
    assert.deepEqual(check({ name, count: { value: '${MY_COUNT=5}' }, enabled: { value: '${MY_FLAG=true}' }, secret: { reference: { keyVault: {} } } }), []);
    assert.deepEqual(check({ name, count: { value: 3 }, enabled: { value: false } }), []);
    assert.deepEqual(check({ name, count: { value: '${MY_COUNT=50}' } }), ['p.json: "count": 50 is above maxValue 10']);
    assert.deepEqual(check({ name, count: { value: 'x${MY_COUNT=5}' } }), ['p.json: "count" expects an integer, got "x${MY_COUNT=5}" (the template declares int)']);
    assert.deepEqual(check({ name, enabled: { value: '${MY_FLAG=maybe}' } }), ['p.json: "enabled" expects a bool, got "maybe" when its variables are unset (the template declares bool)']);
    assert.deepEqual(check({ name, count: { reference: {} } }), ['p.json: "count" has no "value" (a Key Vault reference fits only a secure parameter)']);
    assert.deepEqual(check({ name: { value: '${SOMEONE_SETS_IT}' } }), [
      'p.json: "name" has no default in the template and is empty unless SOMEONE_SETS_IT is set: azd would stop to ask',
      'p.json: reads the variable SOMEONE_SETS_IT, which docs/deploy.md does not mention (how would anyone know to set it?)',
    ]);
  });
});

describe('infra:check against the template the pinned Bicep CLI emits from infra/main.bicep', () => {
  let template: ArmTemplate;
  let work: string;

  before(() => {
    // Restored from NuGet when missing (as npm run infra:check does); no .NET SDK: an error that says so.
    cliPath = ensureBicepCli(REPO_ROOT).path;
    work = mkdtempSync(join(tmpdir(), 'infra-check-test-'));
    const outFile = join(work, 'main.json');
    const build = runBicep({ path: cliPath }, ['build', join(REPO_ROOT, INFRA_FILES.main), '--outfile', outFile, '--no-restore'], REPO_ROOT);
    assert.equal(build.status, 0, build.output);
    template = JSON.parse(readFileSync(outFile, 'utf8')) as ArmTemplate;
  });

  after(() => rmSync(work, { recursive: true, force: true }));

  it('the repository passes: parameters file, azure.yaml and documented outputs agree with it', () => {
    assert.deepEqual(checkParametersFile(template, repoParameters(), deployDoc()), []);
    assert.deepEqual(checkAzureYaml(template, repoAzureYaml(), INFRA_FILES.main), []);
    assert.deepEqual(checkDocumentedOutputs(template, deployDoc()), []);
    const sites = allResources(template).filter((r) => r.type === 'Microsoft.Web/sites');
    assert.equal(sites.length, 1, 'one Function App, found inside the functionApp module deployment');
  });

  it('reports a parameter the template lacks, naming the ones it has with a similar name', () => {
    const parameters = repoParameters();
    parameters.parameters.storageSku = { value: 'Standard_LRS' };
    assert.deepEqual(checkParametersFile(template, parameters, deployDoc()), [
      'infra/main.parameters.json: sets "storageSku", which the template does not declare (it declares "storageSkuName")',
    ]);
  });

  it('reports a value of the wrong type, one outside the allowed values, and a required parameter left unset', () => {
    const parameters = repoParameters();
    parameters.parameters.maximumInstanceCount = { value: 'many' };
    parameters.parameters.deployerPrincipalType = { value: '${AZURE_PRINCIPAL_TYPE=Robot}' };
    delete parameters.parameters.location;
    assert.deepEqual(checkParametersFile(template, parameters, deployDoc()), [
      'infra/main.parameters.json: "deployerPrincipalType": "Robot" is not one of the allowed values ["User","ServicePrincipal","Group"]',
      'infra/main.parameters.json: "maximumInstanceCount" expects an integer, got "many" (the template declares int)',
      'infra/main.parameters.json: does not set "location", which has no default in the template: azd would stop to ask',
    ]);
  });

  it('reports a variable the parameters file reads that docs/deploy.md never mentions', () => {
    const parameters = repoParameters();
    parameters.parameters.storageSkuName = { value: '${COORDINATOR_STORAGE_SKU=Standard_ZRS}' };
    assert.deepEqual(checkParametersFile(template, parameters, deployDoc()), [
      'infra/main.parameters.json: reads the variable COORDINATOR_STORAGE_SKU, which docs/deploy.md does not mention (how would anyone know to set it?)',
    ]);
  });

  it('reports an azure.yaml that provisions another file or names a service no resource is tagged for', () => {
    const yaml = repoAzureYaml();
    const moved: AzureYaml = { ...yaml, infra: { provider: 'bicep', path: 'infra', module: 'mian' } };
    assert.deepEqual(checkAzureYaml(template, moved, INFRA_FILES.main), [
      'azure.yaml: azd provisions infra/mian.bicep (infra.path + infra.module), but the checked template is infra/main.bicep',
    ]);
    const renamed: AzureYaml = { ...yaml, services: { web: { host: 'function' } } };
    assert.deepEqual(checkAzureYaml(template, renamed, INFRA_FILES.main), [
      'azure.yaml: service web (host function) needs a Microsoft.Web/sites tagged azd-service-name=web; the template has none',
    ]);
  });

  it('reports an output the docs promise that the template does not emit, and one it emits that the docs omit', () => {
    const doc = deployDoc();
    assert.ok(documentedOutputs(doc).includes('AZURE_STORAGE_ACCOUNT_NAME'));
    const withExtra = doc.replace('| `AZURE_RESOURCE_GROUP` |', '| `AZURE_KEY_VAULT_NAME` | a vault |\n| `AZURE_RESOURCE_GROUP` |');
    assert.deepEqual(checkDocumentedOutputs(template, withExtra), ['docs/deploy.md: documents the output AZURE_KEY_VAULT_NAME, which the template does not emit']);
    const withoutRow = doc.replace(/^\| `AZURE_STORAGE_ACCOUNT_NAME` \|.*\n/m, '');
    assert.deepEqual(checkDocumentedOutputs(template, withoutRow), ['docs/deploy.md: the template emits AZURE_STORAGE_ACCOUNT_NAME, which the outputs table does not list']);
  });

  it('the whole check fails on a lint warning (an unused parameter) and on a registry module, in a copy of infra/', () => {
    const root = join(work, 'repo');
    cpSync(join(REPO_ROOT, 'infra'), join(root, 'infra'), { recursive: true });
    cpSync(join(REPO_ROOT, INFRA_FILES.azureYaml), join(root, INFRA_FILES.azureYaml));
    cpSync(join(REPO_ROOT, INFRA_FILES.deployDoc), join(root, INFRA_FILES.deployDoc));
    const identity = join(root, 'infra', 'app', 'identity.bicep');
    writeFileSync(identity, `${readFileSync(identity, 'utf8')}\n@description('Never used.')\nparam leftOver string = ''\n`);
    writeFileSync(
      join(root, 'infra', 'app', 'fromRegistry.bicep'),
      "module vault 'br/public:avm/res/key-vault/vault:0.11.0' = {\n  name: 'vault'\n  params: {\n    name: 'kv'\n  }\n}\n",
    );
    const result = runInfraCheck(root, { path: cliPath });
    const unused = result.problems.filter((p) => p.includes('no-unused-params'));
    assert.equal(unused.length, 1, result.problems.join('\n'));
    assert.match(unused[0] ?? '', /^infra\/app\/identity\.bicep:\d+:7 Error no-unused-params: Parameter "leftOver" is declared but never used\.$/);
    assert.ok(
      result.problems.some((p) => p.startsWith('infra/app/fromRegistry.bicep:1:14 Error BCP190:') && /avm\/res\/key-vault\/vault:0\.11\.0.*no module may come from a registry/.test(p)),
      `the registry module must be reported: ${result.problems.join('\n')}`,
    );
    assert.deepEqual(result.passed, [], 'nothing passes when the build has errors');
  });
});
