/**
 * `npm run infra:check`: the Bicep of infra/ checked by the real compiler, offline, and what azd
 * gives it and takes from it checked against what the compiler emits. Steps:
 *   1. the Bicep CLI at the version infra/tools/bicep-cli.csproj pins, restored from NuGet with
 *      `dotnet restore` into .tools/bicep/ when missing (scripts/bicepCli.ts);
 *   2. `bicep build infra/main.bicep` to ARM JSON in a temporary folder, and `bicep lint` of every
 *      .bicep file under infra/, both with infra/bicepconfig.json (every linter rule at error level)
 *      and without restoring anything from a registry: any error, warning or info fails the check;
 *   3. infra/main.parameters.json, azure.yaml and the outputs table of docs/deploy.md against the
 *      emitted template (scripts/infraContract.ts).
 * Exit code 0 when all pass, 1 with every problem listed otherwise.
 *
 * Guarantees: the template azd deploys compiles with the pinned compiler without a diagnostic; no
 * module comes from a registry (the build does not restore, so one fails it); the checks of step 3
 * run on the template as compiled, not on the Bicep source.
 * Not guaranteed: Azure's own validation (quotas, names taken, region support, what-if) needs a
 * subscription; this check needs none.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';

import { parse as parseYaml } from 'yaml';

import { type BicepCli, type BicepDiagnostic, ensureBicepCli, runBicep, TOOL_PROJECT } from './bicepCli';
import { allResources, type ArmTemplate, type AzureYaml, checkAzureYaml, checkDocumentedOutputs, checkParametersFile } from './infraContract';

/** The files the check reads (repository-relative). */
export const INFRA_FILES = {
  main: 'infra/main.bicep',
  parameters: 'infra/main.parameters.json',
  bicepConfig: 'infra/bicepconfig.json',
  azureYaml: 'azure.yaml',
  deployDoc: 'docs/deploy.md',
} as const;

export interface InfraCheckResult {
  /** Every problem, one line each; empty when the check passes. */
  readonly problems: string[];
  /** What passed, one line per step. */
  readonly passed: string[];
  /** The compiled template, when the build succeeded. */
  readonly template: ArmTemplate | undefined;
}

/** The .bicep files under a folder (absolute paths, sorted), tool output folders left out. */
export function bicepFilesUnder(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) return name === 'obj' || name === 'bin' || name.startsWith('.') ? [] : bicepFilesUnder(full);
      return name.endsWith('.bicep') ? [full] : [];
    })
    .sort();
}

/** Compiler codes of a module reference that needs a registry (not restored, cannot be restored). */
const REGISTRY_CODES = new Set(['BCP190', 'BCP192']);

function formatDiagnostic(root: string, d: BicepDiagnostic): string {
  const file = relative(root, d.file).split('\\').join('/') || d.file;
  const hint = REGISTRY_CODES.has(d.code) ? ' (no module may come from a registry: declare its resources in a local module under infra/app/)' : '';
  return `${file}:${d.line}:${d.column} ${d.level} ${d.code}: ${d.message}${hint}`;
}

/** Steps 2 and 3 on the repository (or a copy of it) at `root`, with an already restored CLI. */
export function runInfraCheck(root: string, cli: Pick<BicepCli, 'path'>): InfraCheckResult {
  const problems: string[] = [];
  const passed: string[] = [];
  const config = join(root, INFRA_FILES.bicepConfig);
  const work = mkdtempSync(join(tmpdir(), 'infra-check-'));
  let template: ArmTemplate | undefined;
  try {
    // Build: ARM JSON to a temporary folder. --no-restore: a registry module cannot be fetched, so it fails here.
    const outFile = join(work, 'main.json');
    const build = runBicep(cli, ['build', join(root, INFRA_FILES.main), '--outfile', outFile, '--no-restore', '--config', config], root);
    // Lint: every .bicep file under infra/ (one process), modules included whether main.bicep uses them or not.
    const files = bicepFilesUnder(join(root, 'infra'));
    const lint = runBicep(cli, ['lint', '--pattern', 'infra/**/*.bicep', '--no-restore', '--config', config], root);
    // The build reports the modules' diagnostics too: each diagnostic once.
    const diagnostics = new Map<string, string>();
    for (const d of [...build.diagnostics, ...lint.diagnostics]) diagnostics.set(`${d.file}:${d.line}:${d.column}:${d.code}`, formatDiagnostic(root, d));
    problems.push(...diagnostics.values());
    problems.push(...build.other.map((line) => `bicep build: ${line}`), ...lint.other.map((line) => `bicep lint: ${line}`));
    // An exit code without a diagnostic to explain it (a crash, a usage error) is a problem of its own.
    if (build.status !== 0 && build.diagnostics.length === 0) problems.push(`bicep build ${INFRA_FILES.main} exited with ${build.status ?? 'a signal'}`);
    if (lint.status !== 0 && lint.diagnostics.length === 0) problems.push(`bicep lint exited with ${lint.status ?? 'a signal'}`);
    // A build with warnings still writes the template: check it too, so one run reports everything.
    if (build.status === 0) template = JSON.parse(readFileSync(outFile, 'utf8')) as ArmTemplate;
    if (problems.length === 0 && template !== undefined) {
      const deployments = allResources(template).filter((r) => r.type === 'Microsoft.Resources/deployments').length;
      passed.push(
        `bicep build ${INFRA_FILES.main}: ARM JSON with ${Object.keys(template.parameters ?? {}).length} parameters, ` +
          `${Object.keys(template.outputs ?? {}).length} outputs, ${allResources(template).length} resources (${deployments} module deployments)`,
      );
      passed.push(`bicep lint: ${files.length} files under infra/, every linter rule an error (${INFRA_FILES.bicepConfig}): no diagnostic`);
    }

    if (template !== undefined) {
      const parameters = JSON.parse(readFileSync(join(root, INFRA_FILES.parameters), 'utf8')) as unknown;
      const deployDoc = readFileSync(join(root, INFRA_FILES.deployDoc), 'utf8');
      const parameterProblems = checkParametersFile(template, parameters, deployDoc, INFRA_FILES.parameters);
      problems.push(...parameterProblems);
      if (parameterProblems.length === 0) {
        const count = Object.keys((parameters as { parameters: object }).parameters).length;
        passed.push(`${INFRA_FILES.parameters}: ${count} parameters, each declared by the template with a compatible value; every required one set`);
      }
      const azureYaml = parseYaml(readFileSync(join(root, INFRA_FILES.azureYaml), 'utf8')) as AzureYaml;
      const yamlProblems = checkAzureYaml(template, azureYaml, INFRA_FILES.main, INFRA_FILES.azureYaml);
      problems.push(...yamlProblems);
      if (yamlProblems.length === 0) {
        const services = Object.entries(azureYaml.services ?? {}).map(([name, s]) => `${name} (${s?.host ?? '?'})`);
        passed.push(`${INFRA_FILES.azureYaml}: provisions ${INFRA_FILES.main}; services ${services.join(', ')} each tagged on a resource azd can deploy to`);
      }
      const outputProblems = checkDocumentedOutputs(template, deployDoc, INFRA_FILES.deployDoc);
      problems.push(...outputProblems);
      if (outputProblems.length === 0) passed.push(`${INFRA_FILES.deployDoc}: the outputs table lists exactly the template's ${Object.keys(template.outputs ?? {}).length} outputs, all strings`);
    } else {
      problems.push(`${INFRA_FILES.parameters}, ${INFRA_FILES.azureYaml} and the outputs of ${INFRA_FILES.deployDoc} not checked: the template did not build`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { problems, passed, template };
}

function main(): number {
  const root = process.cwd();
  let cli: BicepCli;
  try {
    cli = ensureBicepCli(root, (line) => console.log(`[infra:check] ${line}`));
  } catch (err) {
    console.error(`infra:check failed: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
  console.log(`[infra:check] ${cli.versionLine}, pinned by ${TOOL_PROJECT}${cli.restored ? ' (restored now)' : ''}`);
  const started = Date.now();
  const result = runInfraCheck(root, cli);
  for (const line of result.passed) console.log(`  ok  ${line}`);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  if (result.problems.length > 0) {
    console.error(`infra:check failed (${result.problems.length} problem${result.problems.length === 1 ? '' : 's'}, ${seconds} s):`);
    for (const problem of result.problems) console.error(`  ${problem}`);
    return 1;
  }
  console.log(`infra:check passed in ${seconds} s`);
  return 0;
}

if (require.main === module) {
  try {
    process.exitCode = main();
  } catch (err) {
    console.error(err instanceof Error ? (err.stack ?? err.message) : err);
    process.exitCode = 1;
  }
}
