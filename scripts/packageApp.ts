/**
 * `npm run package:app [-- --out <dir>]`: builds the deployment package, the folder that azd
 * uploads (azure.yaml `dist`) and that `func azure functionapp publish` is run from, plus the same
 * files as a zip; checks it; prints its size. Default output: dist-deploy/app and
 * dist-deploy/<name>.zip.
 *
 * Why a local build: Flex Consumption's remote build is Oryx, which runs a plain `npm install`
 * (devDependencies and optionalDependencies included, install scripts run), then `npm run build`
 * and `npm run build:azure` when present, and never prunes for Functions; so it would ship every
 * development tool and compile tests too. Here the app alone is compiled (tsconfig.build.json:
 * functions/ and shared/, plus the JSON they import) and only production dependencies are
 * installed, from package-lock.json.
 *
 * Guarantees: the package holds host.json, a package.json with the production dependencies only
 * (no scripts, no devDependencies), the pruned lock file, dist/{functions,shared,schemas}, the live
 * page's files (dashboard/, read at run time) and
 * node_modules with the production dependencies (minus source maps, type declarations and `.bin`
 * links, which Node never loads). `findPackageProblems` fails it when it holds development-host,
 * test, benchmark or script code, TypeScript sources, a devDependency, Core Tools, a native addon
 * or a package whose install script would have had to run.
 * Not guaranteed: the production dependencies are installed by this machine's npm, so a dependency
 * with platform-specific files would be this platform's; the check refuses native addons and
 * install scripts for that reason.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';

import { listFiles, writeZip, type ZipSummary } from './zipWriter';

/** Output folder (repository-relative) when none is given; git-ignored, like every dist-* folder. */
export const DEFAULT_OUT_DIR = 'dist-deploy';
/** The package folder inside the output folder: azure.yaml's `dist` points here. */
export const STAGE_FOLDER = 'app';
/** The production build of the app: only functions/ and shared/ (what runs on Azure). */
export const APP_TSCONFIG = 'tsconfig.build.json';
/** Folders the app build emits under dist/: its two source folders and the JSON schema they import. */
export const COMPILED_FOLDERS: readonly string[] = ['functions', 'shared', 'schemas'];
/** Files read at run time besides the compiled code (repository-relative, copied as they are). */
export const RUNTIME_FILES: readonly string[] = ['host.json', 'dashboard/index.html', 'dashboard/dashboard.css', 'dashboard/dashboard.js'];
/** Written into the package: keeps local settings out of a `func azure functionapp publish`, never node_modules. */
export const PACKAGE_FUNCIGNORE = ['# The deployment package, written by scripts/packageApp.ts: everything here is uploaded.', 'local.settings.json', ''].join('\n');

/** Folders of this repository that must never reach Azure, and what they are. */
const DEVELOPMENT_FOLDERS: Readonly<Record<string, string>> = {
  devhost: 'development-host code',
  test: 'test code',
  bench: 'benchmark code',
  scripts: 'script code',
  infra: 'infrastructure templates',
};
const TOP_LEVEL = new Set(['host.json', 'package.json', 'package-lock.json', '.funcignore', 'dist', 'node_modules', ...RUNTIME_FILES.map((f) => f.split('/')[0] ?? f)]);
/** In node_modules: files Node never loads (source maps, type declarations). */
const NOT_LOADED = /\.(?:d\.[cm]?ts|[cm]?js\.map|d\.[cm]?ts\.map)$/;
const PACKAGE_MANIFEST = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/@][^/]*)\/package\.json$/;

export interface DeploymentPackage {
  /** The folder azd zips and uploads, and Core Tools publishes from. */
  readonly stageDir: string;
  readonly zipPath: string;
  readonly zip: ZipSummary;
  /** The biggest parts (dist, each top-level package), largest first, in bytes. */
  readonly largest: ReadonlyArray<{ readonly part: string; readonly bytes: number }>;
  /** Empty when the package holds only what runs on Azure. */
  readonly problems: readonly string[];
}

interface PackageJson {
  readonly name?: string;
  readonly version?: string;
  readonly description?: string;
  readonly main?: string;
  readonly engines?: Record<string, string>;
  readonly dependencies?: Record<string, string>;
  readonly [key: string]: unknown;
}

interface LockEntry {
  readonly name?: string;
  readonly version?: string;
  readonly dev?: boolean;
  readonly link?: boolean;
  readonly hasInstallScript?: boolean;
}

interface Lockfile {
  readonly packages?: Readonly<Record<string, LockEntry>>;
}

function readJson<T>(path: string): T {
  return JSON.parse(readFileSync(path, 'utf8')) as T;
}

/** Builds the package under `outDir` (emptied first) from the repository at `repoRoot`, and checks it. */
export function buildDeploymentPackage(repoRoot: string, outDir: string, log: (line: string) => void = () => {}): DeploymentPackage {
  const stageDir = join(outDir, STAGE_FOLDER);
  const rootPackage = readJson<PackageJson>(join(repoRoot, 'package.json'));
  const zipPath = join(outDir, `${rootPackage.name ?? 'app'}.zip`);
  rmSync(stageDir, { recursive: true, force: true });
  rmSync(zipPath, { force: true });
  mkdirSync(stageDir, { recursive: true });

  log(`compiling the app alone (${APP_TSCONFIG}) into ${join(stageDir, 'dist')}`);
  run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', join(repoRoot, APP_TSCONFIG), '--outDir', join(stageDir, 'dist')], repoRoot);

  for (const file of RUNTIME_FILES) {
    mkdirSync(dirname(join(stageDir, file)), { recursive: true });
    copyFileSync(join(repoRoot, file), join(stageDir, file));
  }
  writeFileSync(join(stageDir, 'package.json'), `${JSON.stringify(productionManifest(rootPackage), null, 2)}\n`);
  copyFileSync(join(repoRoot, 'package-lock.json'), join(stageDir, 'package-lock.json'));
  writeFileSync(join(stageDir, '.funcignore'), PACKAGE_FUNCIGNORE);

  log('installing production dependencies from package-lock.json (npm ci --omit=dev)');
  // No install scripts: none of the production dependencies has one (the check below holds it).
  npm(['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], stageDir);
  // The lock file that ships lists what ships (a remote `npm install`, if a tool asks for one, then changes nothing).
  npm(['install', '--package-lock-only', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], stageDir);
  pruneUnloadedFiles(join(stageDir, 'node_modules'));

  log(`writing ${zipPath}`);
  const files = listFiles(stageDir, (path) => path === '.funcignore');
  const zip = writeZip(stageDir, files, zipPath);
  return { stageDir, zipPath, zip, largest: largestParts(stageDir, files), problems: findPackageProblems(stageDir, repoRoot) };
}

/** package.json as it ships: what Node and the Functions host read, and the production dependencies. */
export function productionManifest(rootPackage: PackageJson): PackageJson {
  const { name, version, description, main, engines, dependencies } = rootPackage;
  return { name, version, private: true, description, main, ...(engines === undefined ? {} : { engines }), dependencies: dependencies ?? {} };
}

/** Everything in the package folder that does not run on Azure, one line each; empty when clean. */
export function findPackageProblems(stageDir: string, repoRoot: string): string[] {
  const problems: string[] = [];
  const files = listFiles(stageDir);
  const devOnly = devOnlyPackages(readJson<Lockfile>(join(repoRoot, 'package-lock.json')));
  for (const file of files) {
    const [top = '', second = ''] = file.split('/');
    const inDependencies = top === 'node_modules';
    if (DEVELOPMENT_FOLDERS[top] !== undefined) problems.push(`${file}: ${DEVELOPMENT_FOLDERS[top]}`);
    else if (top === 'dist' && DEVELOPMENT_FOLDERS[second] !== undefined) problems.push(`${file}: ${DEVELOPMENT_FOLDERS[second]}`);
    else if (top === 'dist' && !COMPILED_FOLDERS.includes(second)) problems.push(`${file}: the app build emits only dist/{${COMPILED_FOLDERS.join(',')}}`);
    else if (!TOP_LEVEL.has(top)) problems.push(`${file}: not part of the app (the package holds ${[...TOP_LEVEL].join(', ')})`);
    if (!inDependencies && /\.[cm]?tsx?$/.test(file) && !/\.d\.[cm]?ts$/.test(file)) problems.push(`${file}: TypeScript source (the package ships compiled code)`);
    if (file.endsWith('.node')) problems.push(`${file}: a native addon, built for this machine rather than Linux x64`);
    const manifest = PACKAGE_MANIFEST.exec(file);
    if (manifest !== null) {
      const { name, version } = readJson<PackageJson>(join(stageDir, file));
      const id = `${name ?? manifest[1] ?? ''}@${version ?? ''}`;
      if (devOnly.has(id)) problems.push(`${dirname(file)}: ${id} is only a devDependency (package-lock.json)`);
      if (name === 'azure-functions-core-tools') problems.push(`${dirname(file)}: Core Tools is a development tool; install it globally`);
    }
  }
  const shipped = readJson<PackageJson>(join(stageDir, 'package.json'));
  const root = readJson<PackageJson>(join(repoRoot, 'package.json'));
  for (const field of ['scripts', 'devDependencies', 'optionalDependencies', 'workspaces']) {
    if (shipped[field] !== undefined) problems.push(`package.json: has ${field} (the package's manifest lists production dependencies only)`);
  }
  if (shipped.main !== root.main) problems.push(`package.json: main is ${String(shipped.main)}, the app's is ${String(root.main)}`);
  for (const dependency of Object.keys(root.dependencies ?? {})) {
    if (!files.includes(`node_modules/${dependency}/package.json`)) problems.push(`node_modules/${dependency}: production dependency missing`);
  }
  const lock = readJson<Lockfile>(join(stageDir, 'package-lock.json'));
  for (const [key, entry] of Object.entries(lock.packages ?? {})) {
    if (entry.dev === true) problems.push(`package-lock.json: lists ${key}, a devDependency`);
    if (entry.hasInstallScript === true) problems.push(`${key}: has an install script, which this build does not run`);
  }
  const entryPoints = matchMain(stageDir, shipped.main ?? '');
  if (entryPoints.length === 0) problems.push(`package.json: main ${String(shipped.main)} matches no file`);
  for (const file of RUNTIME_FILES) if (!files.includes(file)) problems.push(`${file}: missing`);
  return problems;
}

/** Compiled entry points that package.json `main` names (a file, or `<folder>/*.js`). */
export function matchMain(root: string, main: string): string[] {
  const folder = dirname(main);
  const pattern = basename(main);
  if (!pattern.includes('*')) return existsSync(join(root, main)) ? [main] : [];
  if (pattern !== '*.js' || folder.includes('*')) throw new Error(`package.json main ${main}: only <folder>/*.js globs are supported here`);
  if (!existsSync(join(root, folder))) return [];
  return readdirSync(join(root, folder))
    .filter((f) => f.endsWith('.js'))
    .sort()
    .map((f) => `${folder}/${f}`);
}

/** name@version of every package that only devDependencies reach (a package may be both, at one version). */
export function devOnlyPackages(lock: Lockfile): Set<string> {
  const dev = new Set<string>();
  const production = new Set<string>();
  for (const [key, entry] of Object.entries(lock.packages ?? {})) {
    const at = key.lastIndexOf('node_modules/');
    if (at < 0 || entry.link === true) continue; // the root, workspace folders and their links
    const id = `${entry.name ?? key.slice(at + 'node_modules/'.length)}@${entry.version ?? ''}`;
    (entry.dev === true ? dev : production).add(id);
  }
  return new Set([...dev].filter((id) => !production.has(id)));
}

function pruneUnloadedFiles(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.name === '.bin' || entry.isSymbolicLink()) rmSync(path, { recursive: true, force: true });
    else if (entry.isDirectory()) pruneUnloadedFiles(path);
    else if (NOT_LOADED.test(entry.name)) rmSync(path);
  }
}

function largestParts(stageDir: string, files: readonly string[]): Array<{ part: string; bytes: number }> {
  const sizes = new Map<string, number>();
  for (const file of files) {
    const segments = file.split('/');
    const depth = segments[0] === 'node_modules' ? (segments[1]?.startsWith('@') === true ? 3 : 2) : 1;
    const part = segments.slice(0, Math.min(depth, segments.length)).join('/');
    sizes.set(part, (sizes.get(part) ?? 0) + statSync(join(stageDir, file)).size);
  }
  return [...sizes]
    .map(([part, bytes]) => ({ part, bytes }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 5);
}

export function describePackage(pkg: DeploymentPackage): string[] {
  const mb = (bytes: number): string => `${(bytes / 1_000_000).toFixed(1)} MB`;
  return [
    `Deployment package: ${pkg.zip.entries} files, ${mb(pkg.zip.unpackedBytes)} unpacked, ${mb(pkg.zip.zipBytes)} zipped`,
    `  folder (azd dist, func publish): ${pkg.stageDir}`,
    `  zip: ${pkg.zipPath}`,
    `  largest: ${pkg.largest.map((p) => `${p.part} ${mb(p.bytes)}`).join(', ')}`,
  ];
}

function run(command: string, args: readonly string[], cwd: string): void {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', shell: false, maxBuffer: 64 * 1024 * 1024 });
  if (result.status !== 0) {
    const output = `${result.stdout ?? ''}${result.stderr ?? ''}`.trim().split('\n').slice(-20).join('\n');
    throw new Error(`${basename(command)} ${args.join(' ')} failed (${result.error?.message ?? `exit ${String(result.status)}`}):\n${output}`);
  }
}

/** npm as `npm run` started us when it did (npm_execpath), otherwise the one on PATH. */
function npm(args: readonly string[], cwd: string): void {
  const cli = process.env.npm_execpath;
  if (cli !== undefined && /npm-cli\.[cm]?js$/.test(cli)) run(process.execPath, [cli, ...args], cwd);
  else if (process.platform === 'win32') run(process.env.ComSpec ?? 'cmd.exe', ['/d', '/s', '/c', 'npm', ...args], cwd);
  else run('npm', args, cwd);
}

function main(): number {
  const args = process.argv.slice(2);
  const outIndex = args.indexOf('--out');
  const unknown = args.filter((a, i) => a !== '--out' && i !== outIndex + 1);
  if (unknown.length > 0 || (outIndex >= 0 && args[outIndex + 1] === undefined)) {
    console.error('usage: npm run package:app [-- --out <dir>]');
    return 2;
  }
  const repoRoot = process.cwd();
  const outDir = resolve(repoRoot, outIndex >= 0 ? (args[outIndex + 1] ?? DEFAULT_OUT_DIR) : DEFAULT_OUT_DIR);
  const pkg = buildDeploymentPackage(repoRoot, outDir, (line) => console.error(`[package] ${line}`));
  for (const line of describePackage(pkg)) console.log(line);
  if (pkg.problems.length > 0) {
    console.error(`The package holds what does not run on Azure (${pkg.problems.length}):`);
    for (const problem of pkg.problems.slice(0, 50)) console.error(`  ${problem}`);
    return 1;
  }
  console.log(`Deploy it with \`azd deploy\`, or: cd ${relative(repoRoot, pkg.stageDir) || '.'} && func azure functionapp publish <app name> --javascript`);
  return 0;
}

if (require.main === module) {
  try {
    process.exitCode = main();
  } catch (err) {
    console.error(err instanceof Error ? err.message : err);
    process.exitCode = 1;
  }
}
