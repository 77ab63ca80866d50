import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';

import ignore from 'ignore';
import ts from 'typescript';
import { parse } from 'yaml';

import { APP_TSCONFIG, DEFAULT_OUT_DIR, PACKAGE_FUNCIGNORE, STAGE_FOLDER } from '../../../scripts/packageApp';
import { BicepFile } from './BicepFile';
import { readRepoFile, readRepoJson, repoPath } from './repoFiles';

interface Hook {
  readonly shell?: string;
  readonly run?: string;
}

interface AzureYaml {
  readonly infra?: { readonly path?: string; readonly module?: string };
  readonly services?: Record<
    string,
    {
      readonly project?: string;
      readonly language?: string;
      readonly host?: string;
      readonly dist?: string;
      readonly remoteBuild?: boolean;
      readonly hooks?: Record<string, Hook & { readonly posix?: Hook; readonly windows?: Hook }>;
    }
  >;
}

interface TsConfig {
  readonly compilerOptions?: { readonly outDir?: string; readonly sourceMap?: boolean };
  readonly include?: readonly string[];
}

const azureYaml = (): AzureYaml => parse(readRepoFile('azure.yaml')) as AzureYaml;

function tsconfig(file: string): TsConfig {
  // tsconfig files may hold comments, so TypeScript's own reader parses them.
  const result: { config?: unknown; error?: ts.Diagnostic } = ts.readConfigFile(repoPath(file), (path) => ts.sys.readFile(path));
  assert.equal(result.error, undefined, `${file} does not parse`);
  return result.config as TsConfig;
}

describe('deployment configuration', () => {
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

  it('azd uploads the checked package as built: no remote build, dist is the package folder, a prepackage hook builds it on every OS', () => {
    const api = azureYaml().services?.api;
    assert.ok(api !== undefined);
    // Without `remoteBuild: false` azd asks Flex Consumption for an Oryx build, which installs every devDependency.
    assert.equal(api.remoteBuild, false);
    assert.equal(api.dist, `${DEFAULT_OUT_DIR}/${STAGE_FOLDER}`, 'azure.yaml dist must be the folder scripts/packageApp.ts writes');
    const hook = api.hooks?.prepackage;
    for (const os of ['posix', 'windows'] as const) {
      assert.equal(hook?.[os]?.run?.trim(), 'npm run package:app', `the prepackage hook must build the package on ${os}`);
      assert.ok(hook?.[os]?.shell !== undefined, `an inline hook needs its shell (${os})`);
    }
    const scripts = readRepoJson<{ scripts: Record<string, string> }>('package.json').scripts;
    assert.match(scripts['package:app'] ?? '', /node dist\/scripts\/packageApp\.js/);
    assert.match(scripts['build:app'] ?? '', new RegExp(`tsc -p ${APP_TSCONFIG.replace('.', '\\.')}`));
  });

  it('the .funcignore files fit a local build: none excludes node_modules, the package keeps local settings out', () => {
    // azd (1.23.12+) refuses `remoteBuild: false` when the project's .funcignore excludes node_modules.
    if (existsSync(repoPath('.funcignore'))) {
      assert.ok(!ignore().add(readRepoFile('.funcignore')).ignores('node_modules/'), '.funcignore must not exclude node_modules with a local build');
    }
    const packaged = ignore().add(PACKAGE_FUNCIGNORE);
    for (const kept of ['node_modules/', 'node_modules/durable-functions/package.json', 'dist/functions/health.js', 'host.json', 'package.json']) {
      assert.ok(!packaged.ignores(kept), `the package's .funcignore drops ${kept}`);
    }
    assert.ok(packaged.ignores('local.settings.json'));
  });

  it('the production build compiles functions/ and shared/ alone, into the package, apart from the test build', () => {
    const build = tsconfig(APP_TSCONFIG);
    const all = tsconfig('tsconfig.json');
    assert.deepEqual([...(build.include ?? [])].sort(), ['functions', 'shared']);
    assert.equal(build.compilerOptions?.outDir, `${DEFAULT_OUT_DIR}/${STAGE_FOLDER}/dist`);
    assert.equal(build.compilerOptions?.sourceMap, false);
    assert.notEqual(all.compilerOptions?.outDir, build.compilerOptions?.outDir, 'the production build must not write into the test build');
    for (const folder of build.include ?? []) assert.ok(all.include?.includes(folder), `tsconfig.json must still build ${folder} for the tests`);
    const main = readRepoJson<{ main: string }>('package.json').main;
    assert.ok(main.startsWith('dist/functions/'), `package.json main (${main}) must point at dist/functions/, where both builds put the functions`);
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
