/**
 * The Bicep CLI that `npm run infra:check` runs: one exact version, pinned in
 * infra/tools/bicep-cli.csproj and restored from NuGet by `dotnet restore` into the git-ignored
 * .tools/bicep/ (no registry module, no download at deployment time: the CLI is the only thing
 * fetched, and only once per clone).
 *
 * Guarantees: `ensureBicepCli` returns the pinned version's executable, restoring it when it is
 * missing, and fails with a message that says what to install when `dotnet` is not on PATH or the
 * restore fails; `parseDiagnostics` reads every diagnostic line the CLI prints (error, warning or
 * info, compiler or linter), and keeps any other line so that nothing the CLI says is dropped.
 * Not guaranteed: the platform names map the common Node.js platforms to NuGet runtime ids; an
 * unknown platform is refused rather than guessed.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { accessSync, chmodSync, constants, existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The tool project (repository-relative) that pins the CLI's version. */
export const TOOL_PROJECT = 'infra/tools/bicep-cli.csproj';
/** Where the restore puts the package (repository-relative, git-ignored; set in the tool project). */
export const TOOLS_PACKAGES = '.tools/bicep/packages';

/** The version the tool project pins (its BicepCliVersion property). */
export function pinnedBicepVersion(projectText: string): string {
  const version = /<BicepCliVersion>\s*([^<\s]+)\s*<\/BicepCliVersion>/.exec(projectText)?.[1];
  if (version === undefined || !/^\d+\.\d+\.\d+$/.test(version)) {
    throw new Error(`${TOOL_PROJECT} must pin the Bicep CLI to one exact version (<BicepCliVersion>x.y.z</BicepCliVersion>)`);
  }
  return version;
}

/** The NuGet runtime id of the Azure.Bicep.CommandLine package for this platform, if it has one. */
export function bicepRuntimeId(platform: NodeJS.Platform = process.platform, arch: string = process.arch): string | undefined {
  const os = ({ linux: 'linux', darwin: 'osx', win32: 'win' } as Partial<Record<NodeJS.Platform, string>>)[platform];
  const cpu = ({ x64: 'x64', arm64: 'arm64' } as Record<string, string>)[arch];
  return os === undefined || cpu === undefined ? undefined : `${os}-${cpu}`;
}

/** Where the restored executable is (absolute). */
export function bicepExecutablePath(repoRoot: string, version: string, runtimeId: string): string {
  const exe = runtimeId.startsWith('win-') ? 'bicep.exe' : 'bicep';
  return join(repoRoot, TOOLS_PACKAGES, `azure.bicep.commandline.${runtimeId}`, version, 'tools', exe);
}

export interface BicepCli {
  readonly path: string;
  readonly version: string;
  /** What `bicep --version` prints, e.g. "Bicep CLI version 0.49.2 (b34271ac51)". */
  readonly versionLine: string;
  /** True when this call restored it. */
  readonly restored: boolean;
}

/** The pinned CLI, restored with `dotnet restore` when missing. Throws with a clear message. */
export function ensureBicepCli(repoRoot: string, log: (line: string) => void = () => undefined): BicepCli {
  const version = pinnedBicepVersion(readFileSync(join(repoRoot, TOOL_PROJECT), 'utf8'));
  const runtimeId = bicepRuntimeId();
  if (runtimeId === undefined) {
    throw new Error(`No Bicep CLI package for ${process.platform}-${process.arch}: Azure.Bicep.CommandLine is published for linux, osx and win on x64 and arm64`);
  }
  const path = bicepExecutablePath(repoRoot, version, runtimeId);
  let restored = false;
  if (!existsSync(path)) {
    const dotnet = spawnSync('dotnet', ['--version'], { encoding: 'utf8' });
    if (dotnet.error !== undefined || dotnet.status !== 0) {
      throw new Error(
        `The Bicep CLI ${version} is not restored and the .NET SDK is missing: the \`dotnet\` command ${dotnet.error !== undefined ? 'was not found' : 'failed'}. ` +
          `Install the .NET SDK (8 or later) and run npm run infra:check again: it restores the CLI with \`dotnet restore ${TOOL_PROJECT} -p:BicepCliRuntime=${runtimeId}\`.`,
      );
    }
    log(`restoring Bicep CLI ${version} (Azure.Bicep.CommandLine.${runtimeId}) from NuGet: dotnet restore ${TOOL_PROJECT} (.NET SDK ${dotnet.stdout.trim()})`);
    const restore = spawnSync('dotnet', ['restore', TOOL_PROJECT, `-p:BicepCliRuntime=${runtimeId}`, '--nologo', '-v', 'quiet'], {
      cwd: repoRoot,
      // No first-run banner on a fresh machine: only a failure's output is shown.
      env: { ...process.env, DOTNET_NOLOGO: '1', DOTNET_SKIP_FIRST_TIME_EXPERIENCE: '1' },
      encoding: 'utf8',
      maxBuffer: 16 * 1024 * 1024,
    });
    if (restore.status !== 0 || !existsSync(path)) {
      throw new Error(`dotnet restore ${TOOL_PROJECT} did not produce ${path} (exit ${restore.status ?? 'none'}):\n${outputOf(restore).trim()}`);
    }
    restored = true;
  }
  makeExecutable(path);
  const probe = spawnSync(path, ['--version'], { encoding: 'utf8' });
  const versionLine = outputOf(probe).trim();
  if (probe.status !== 0 || !versionLine.includes(`version ${version} `)) {
    throw new Error(`${path} is not the pinned Bicep CLI ${version}: \`bicep --version\` said ${JSON.stringify(versionLine)} (exit ${probe.status ?? 'none'})`);
  }
  return { path, version, versionLine, restored };
}

/** NuGet keeps the executable bit on Linux and macOS today; make sure of it anyway. */
function makeExecutable(path: string): void {
  if (process.platform === 'win32') return;
  try {
    accessSync(path, constants.X_OK);
  } catch {
    chmodSync(path, statSync(path).mode | 0o111);
  }
}

export type DiagnosticLevel = 'Error' | 'Warning' | 'Info';

export interface BicepDiagnostic {
  readonly file: string;
  readonly line: number;
  readonly column: number;
  readonly level: DiagnosticLevel;
  /** A compiler code (BCP...) or a linter rule (no-unused-params). */
  readonly code: string;
  readonly message: string;
}

// path(line,col) : Level CODE: message [https://aka.ms/...]
const DIAGNOSTIC_LINE = /^(.+)\((\d+),(\d+)\) : (Error|Warning|Info) ([A-Za-z0-9_-]+): (.*)$/;

/** The diagnostics in the CLI's default output, deduplicated; `other` holds every line that is not one. */
export function parseDiagnostics(output: string): { diagnostics: BicepDiagnostic[]; other: string[] } {
  const diagnostics = new Map<string, BicepDiagnostic>();
  const other: string[] = [];
  for (const raw of output.split(/\r?\n/)) {
    const line = raw.trimEnd();
    if (line.trim() === '') continue;
    const match = DIAGNOSTIC_LINE.exec(line);
    if (match === null) {
      other.push(line);
      continue;
    }
    const [, file = '', row = '0', column = '0', level = 'Error', code = '', message = ''] = match;
    const diagnostic: BicepDiagnostic = {
      file,
      line: Number(row),
      column: Number(column),
      level: level as DiagnosticLevel,
      code,
      message: message.replace(/\s*\[https:\/\/aka\.ms\/[^\]]*\]$/, ''),
    };
    diagnostics.set(`${file}:${row}:${column}:${code}`, diagnostic);
  }
  return { diagnostics: [...diagnostics.values()], other };
}

export interface BicepRun {
  readonly status: number | null;
  readonly output: string;
  readonly diagnostics: BicepDiagnostic[];
  /** Lines the CLI printed that are not diagnostics (a crash, a usage error). */
  readonly other: string[];
}

/** Runs the CLI (`build`, `lint`, ...) and reads what it printed. */
export function runBicep(cli: Pick<BicepCli, 'path'>, args: readonly string[], cwd: string): BicepRun {
  const result = spawnSync(cli.path, args, { cwd, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (result.error !== undefined) throw result.error;
  const output = outputOf(result);
  return { status: result.status, output, ...parseDiagnostics(output) };
}

function outputOf(result: SpawnSyncReturns<string>): string {
  return `${result.stdout ?? ''}${result.stderr ?? ''}`;
}
