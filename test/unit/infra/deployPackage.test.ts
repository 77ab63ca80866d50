import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import ignore from 'ignore';
import { parse } from 'yaml';

import { BicepFile } from './BicepFile';
import { readRepoFile, readRepoJson, repoPath } from './repoFiles';

interface AzureYaml {
  readonly infra?: { readonly path?: string; readonly module?: string };
  readonly services?: Record<string, { readonly project?: string; readonly language?: string; readonly host?: string; readonly remoteBuild?: boolean }>;
}

interface TsConfig {
  readonly compilerOptions: { readonly outDir: string };
  readonly include: readonly string[];
}

const azureYaml = (): AzureYaml => parse(readRepoFile('azure.yaml')) as AzureYaml;
const funcIgnore = (): ReturnType<typeof ignore> => ignore().add(readRepoFile('.funcignore'));

describe('deployment package', () => {
  it('azure.yaml deploys this folder as the TypeScript function service `api` from infra/main.bicep', () => {
    const config = azureYaml();
    assert.equal(config.infra?.path ?? 'infra', 'infra');
    assert.equal(config.infra?.module ?? 'main', 'main');
    const api = config.services?.api;
    assert.ok(api !== undefined, 'azure.yaml needs a service named api (the Bicep tags the app azd-service-name=api)');
    assert.equal(api.project, '.');
    assert.equal(api.language, 'ts');
    assert.equal(api.host, 'function');
    assert.ok(readRepoFile('infra', 'app', 'functionApp.bicep').includes("'azd-service-name': 'api'"));
  });

  it('.funcignore matches the build mode: remote build uploads sources without node_modules', () => {
    const remoteBuild = azureYaml().services?.api?.remoteBuild === true;
    const ignored = funcIgnore();
    // azd refuses remoteBuild: true unless .funcignore excludes node_modules, and false unless it
    // includes it; Core Tools' --build remote has the same need.
    assert.equal(ignored.ignores('node_modules/'), remoteBuild, 'node_modules must be excluded exactly when the build is remote');
    if (!remoteBuild) return;
    for (const file of ['package.json', 'package-lock.json', 'tsconfig.json', 'host.json']) {
      assert.ok(!ignored.ignores(file), `${file} is needed by the remote build but .funcignore excludes it`);
    }
    const tsconfig = readRepoJson<TsConfig>('tsconfig.json');
    for (const folder of tsconfig.include) {
      assert.ok(!ignored.ignores(`${folder}/`) && !ignored.ignores(`${folder}/module.ts`), `tsconfig includes ${folder}/ but .funcignore drops it: the remote tsc would fail`);
    }
    assert.ok(ignored.ignores(`${tsconfig.compilerOptions.outDir}/`), 'stale local build output must not be uploaded: the remote build recreates it');
    for (const local of ['local.settings.json', 'infra/main.bicep', '.git/config', 'dist-h5/x.js']) {
      assert.ok(ignored.ignores(local), `${local} must not be deployed`);
    }
  });

  it('package.json main points into the folder the build writes', () => {
    const main = readRepoJson<{ main: string }>('package.json').main;
    const outDir = readRepoJson<TsConfig>('tsconfig.json').compilerOptions.outDir;
    assert.ok(main.startsWith(`${outDir}/functions/`), `package.json main (${main}) must point at ${outDir}/functions/`);
  });

  it('main.parameters.json passes only parameters main.bicep declares', async () => {
    const main = await BicepFile.parse(repoPath('infra', 'main.bicep'));
    const parameters = readRepoJson<{ parameters: Record<string, unknown> }>('infra', 'main.parameters.json').parameters;
    for (const name of Object.keys(parameters)) assert.ok(main.parameters.has(name), `main.parameters.json sets ${name}, which main.bicep does not declare`);
    for (const [name, declaration] of main.parameters) {
      if (declaration.defaultValue === undefined) assert.ok(name in parameters, `required parameter ${name} is not supplied by main.parameters.json`);
    }
  });
});
