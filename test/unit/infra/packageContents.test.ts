import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { buildDeploymentPackage, type DeploymentPackage, describePackage, devOnlyPackages, findPackageProblems, matchMain } from '../../../scripts/packageApp';
import { listFiles } from '../../../scripts/zipWriter';
import { REPO_ROOT } from './repoFiles';
import { readZip } from './zipReader';

/**
 * Loads every entry point the way the Functions worker does (package.json `main`), with a stand-in
 * for the worker's `@azure/functions-core` that records registrations, and prints the function
 * names. The stand-in is found through NODE_PATH only because no node_modules folder holds it.
 */
const LOADER = `
const { join } = require('node:path');
for (const file of JSON.parse(process.argv[1])) {
  const loaded = require(join(process.cwd(), file));
  // The live page reads its files at run time, beside the compiled code: this fails when they did not ship.
  if (typeof loaded.getDashboard === 'function') loaded.getDashboard();
}
setImmediate(() => { process.stdout.write('\\n' + JSON.stringify(globalThis.registeredFunctions)); process.exit(0); });
`;
const FUNCTIONS_CORE = `
globalThis.registeredFunctions = [];
const disposable = { dispose() {} };
module.exports = {
  setProgrammingModel() {}, getProgrammingModel() { return undefined; }, log() {},
  registerFunction(metadata) { globalThis.registeredFunctions.push(metadata.name); return disposable; },
  registerHook() { return disposable; },
  Disposable: class { constructor(f) { this.f = f; } dispose() { return this.f && this.f(); } static from() { return disposable; } },
};
`;

function registeredFunctions(appRoot: string, entryPoints: readonly string[], corePath: string): string[] {
  const result = spawnSync(process.execPath, ['-e', LOADER, JSON.stringify(entryPoints)], {
    cwd: appRoot,
    encoding: 'utf8',
    // Only what the app needs to load: no inherited NODE_PATH, no npm variables.
    env: { PATH: process.env.PATH ?? '', NODE_PATH: corePath, AzureWebJobsStorage: 'UseDevelopmentStorage=true', COORDINATOR_LOG_LEVEL: 'error' },
  });
  assert.equal(result.status, 0, `loading the app from ${appRoot} failed:\n${result.stderr}`);
  return (JSON.parse(result.stdout.trim().split('\n').at(-1) ?? '[]') as string[]).sort();
}

describe('deployment package: what azd and func azure functionapp publish upload', () => {
  let work: string;
  let pkg: DeploymentPackage;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'deploy-package-'));
    pkg = buildDeploymentPackage(REPO_ROOT, join(work, 'out'));
  });

  after(() => {
    rmSync(work, { recursive: true, force: true });
  });

  it('holds only what runs on Azure, and its size is printed', (t) => {
    for (const line of describePackage(pkg)) t.diagnostic(line);
    assert.deepEqual(pkg.problems, []);
    const files = listFiles(pkg.stageDir);
    assert.ok(files.includes('host.json') && files.includes('package.json'));
    assert.ok(files.some((f) => f.startsWith('dist/functions/') && f.endsWith('.js')));
    assert.ok(files.includes('dist/schemas/job.schema.json'), 'the schema the app imports must ship');
    for (const page of ['dashboard/index.html', 'dashboard/dashboard.css', 'dashboard/dashboard.js']) {
      assert.ok(files.includes(page), `${page}: the live page reads it at run time`);
    }
    assert.ok(files.includes('node_modules/durable-functions/package.json'));
  });

  it('the zip is the package folder, file for file and byte for byte', () => {
    const entries = readZip(pkg.zipPath);
    const expected = listFiles(pkg.stageDir).filter((f) => f !== '.funcignore');
    assert.deepEqual(
      entries.map((e) => e.name),
      expected,
    );
    for (const entry of entries) assert.ok(entry.data.equals(readFileSync(join(pkg.stageDir, entry.name))), `${entry.name} differs in the zip`);
    assert.ok(entries.every((e) => e.mode === 0o644));
    assert.equal(pkg.zip.entries, entries.length);
  });

  it('every function loads from the unzipped package with its production dependencies alone, as in the test build', () => {
    // Unzipped outside the repository, so nothing can resolve from the repository's node_modules.
    const unzipped = join(work, 'unzipped');
    for (const entry of readZip(pkg.zipPath)) {
      mkdirSync(dirname(join(unzipped, entry.name)), { recursive: true });
      writeFileSync(join(unzipped, entry.name), entry.data);
    }
    const core = join(work, 'core');
    mkdirSync(join(core, '@azure', 'functions-core'), { recursive: true });
    writeFileSync(join(core, '@azure', 'functions-core', 'index.js'), FUNCTIONS_CORE);
    const main = (JSON.parse(readFileSync(join(unzipped, 'package.json'), 'utf8')) as { main: string }).main;
    const deployed = registeredFunctions(unzipped, matchMain(unzipped, main), core);
    // The test build compiled the same sources into <outDir>/functions; REPO_ROOT's dist is that outDir.
    const compiled = join(__dirname, '..', '..', '..');
    const tested = registeredFunctions(compiled, matchMain(compiled, main.replace(/^dist\//, '')), core);
    assert.ok(tested.length > 0, 'the test build registered no function: this comparison would be vacuous');
    assert.deepEqual(deployed, tested);
  });

  it('the check refuses development-host, test, benchmark and script code, TypeScript sources, devDependencies and Core Tools', () => {
    const lock = JSON.parse(readFileSync(join(REPO_ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
    const typescriptVersion = lock.packages['node_modules/typescript']?.version;
    assert.ok(typescriptVersion !== undefined && devOnlyPackages(lock).has(`typescript@${typescriptVersion}`));
    const planted: Record<string, string> = {
      'dist/devhost/main.js': '',
      'dist/test/unit/a.test.js': '',
      'dist/bench/index.js': '',
      'dist/scripts/start.js': '',
      'functions/jobsApi.ts': '',
      'local.settings.json': '{}',
      'node_modules/typescript/package.json': JSON.stringify({ name: 'typescript', version: typescriptVersion }),
      'node_modules/azure-functions-core-tools/package.json': JSON.stringify({ name: 'azure-functions-core-tools', version: '4.0.0' }),
      'node_modules/some-addon/build/addon.node': '',
    };
    try {
      for (const [file, text] of Object.entries(planted)) {
        mkdirSync(dirname(join(pkg.stageDir, file)), { recursive: true });
        writeFileSync(join(pkg.stageDir, file), text);
      }
      const problems = findPackageProblems(pkg.stageDir, REPO_ROOT);
      const expectations: Array<[string, RegExp]> = [
        ['dist/devhost/main.js', /development-host code/],
        ['dist/test/unit/a.test.js', /test code/],
        ['dist/bench/index.js', /benchmark code/],
        ['dist/scripts/start.js', /script code/],
        ['functions/jobsApi.ts', /TypeScript source/],
        ['local.settings.json', /not part of the app/],
        ['node_modules/typescript', /only a devDependency/],
        ['node_modules/azure-functions-core-tools', /Core Tools/],
        ['node_modules/some-addon/build/addon.node', /native addon/],
      ];
      for (const [file, reason] of expectations) {
        assert.ok(
          problems.some((p) => p.startsWith(`${file}:`) && reason.test(p)),
          `${file} was not refused (${reason.source}); problems: ${problems.join(' | ')}`,
        );
      }
    } finally {
      for (const file of Object.keys(planted)) rmSync(join(pkg.stageDir, file), { force: true });
      for (const dir of ['dist/devhost', 'dist/test', 'dist/bench', 'dist/scripts', 'functions', 'node_modules/typescript', 'node_modules/azure-functions-core-tools', 'node_modules/some-addon']) {
        rmSync(join(pkg.stageDir, dir), { recursive: true, force: true });
      }
    }
    assert.deepEqual(findPackageProblems(pkg.stageDir, REPO_ROOT), []);
  });
});
