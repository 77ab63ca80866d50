/**
 * Every command README.md and docs/ give must run as written, on a fresh clone (CI's `npm test`
 * runs in one) and against the deployed security:
 *
 * - `npm start|test|run <script>`: the script exists, and options meant for it come after `--`;
 * - `npx <command>`: a command of this project (tracked by git, not hidden by .gitignore, with its
 *   execute bit in git, so that `npx` finds and runs it after any build) or of an installed package;
 *   the project's own commands answer `--help` through npx;
 * - `az storage ...` data-plane commands sign in with Entra ID (`--auth-mode login`): the deployed
 *   account refuses shared keys, so no doc may use a connection string, an account key or a SAS
 *   (except Azurite's public development account, `UseDevelopmentStorage=true`);
 * - no tracked file is matched by .gitignore (a fresh clone would lack it; `devhost/bin/` once was).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const REPO_ROOT = join(__dirname, '..', '..', '..');

interface Documented {
  readonly file: string;
  readonly command: string;
}

interface PackageJson {
  readonly scripts?: Record<string, string>;
  readonly bin?: Record<string, string> | string;
  readonly name?: string;
  readonly workspaces?: readonly string[];
}

function readJson(path: string): PackageJson {
  return JSON.parse(readFileSync(join(REPO_ROOT, path), 'utf8')) as PackageJson;
}

const DOC_FILES = ['README.md', join('devhost', 'README.md'), ...readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f))];

/** Commands in shell code blocks (lines joined on a trailing `\`, comments cut) and in inline code. */
export function documentedCommands(file: string, text: string): Documented[] {
  const found: string[] = [];
  const fence = /^```(\w*)\n([\s\S]*?)^```/gm;
  for (const block of text.matchAll(fence)) {
    if (!['bash', 'sh', 'shell', 'console', ''].includes(block[1] ?? '')) continue;
    const joined = (block[2] ?? '').replace(/\\\n\s*/g, ' ');
    for (const line of joined.split('\n')) found.push(line.replace(/(^|\s)#.*$/, '').trim());
  }
  for (const span of text.replace(fence, '').matchAll(/`([^`\n]+)`/g)) found.push((span[1] ?? '').trim());
  return found
    .flatMap((line) => line.split(/\s*(?:&&|\|\||;|\|)\s*/))
    .map((c) => c.replace(/\s+/g, ' ').trim())
    .filter((c) => /^(npm|npx|az) /.test(c))
    .map((command) => ({ file, command }));
}

const ALL = DOC_FILES.flatMap((file) => documentedCommands(file, readFileSync(join(REPO_ROOT, file), 'utf8')));

function git(args: readonly string[]): string {
  const run = spawnSync('git', ['-C', REPO_ROOT, ...args], { encoding: 'utf8' });
  assert.equal(run.status, 0, `git ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

/** The project's own commands: package.json `bin` of the root and of each workspace. */
function ownBins(): Map<string, string> {
  const bins = new Map<string, string>();
  const root = readJson('package.json');
  for (const dir of ['.', ...(root.workspaces ?? [])]) {
    const pkg = readJson(join(dir, 'package.json'));
    const entries = typeof pkg.bin === 'string' ? { [pkg.name ?? '']: pkg.bin } : (pkg.bin ?? {});
    for (const [name, target] of Object.entries(entries)) bins.set(name, join(dir, target).split('\\').join('/'));
  }
  return bins;
}

describe('commands the docs give', () => {
  it('finds the commands (the extraction works)', () => {
    const commands = ALL.map((c) => c.command);
    for (const expected of ['npm start', 'npm test', 'npx coordinator list --status running', 'npx devhost . --port 7071 [--host-id ID] [--instance-id ID]']) {
      assert.ok(commands.includes(expected), `"${expected}" not found among ${commands.length} commands`);
    }
    const sample = documentedCommands('x.md', '```bash\nnpm ci && npm start -- \\\n  --port 8080   # a comment\n```\nthen `npx coordinator watch $id > r.json`');
    assert.deepEqual(sample.map((c) => c.command), ['npm ci', 'npm start -- --port 8080', 'npx coordinator watch $id > r.json']);
  });

  it('npm: every script exists, and options for the script come after --', () => {
    const scripts: Record<string, Record<string, string>> = { root: readJson('package.json').scripts ?? {}, devhost: readJson('devhost/package.json').scripts ?? {} };
    const problems: string[] = [];
    for (const { file, command } of ALL.filter((c) => c.command.startsWith('npm '))) {
      const tokens = command.split(/\s+/).slice(1);
      const verb = tokens[0] ?? '';
      if (['ci', 'install', 'i', 'exec'].includes(verb)) continue;
      const workspace = tokens.includes('-w') ? tokens[tokens.indexOf('-w') + 1] : undefined;
      const name = verb === 'run' ? tokens[1] : verb;
      const own = scripts[workspace ?? 'root'] ?? {};
      if (name === undefined || /^[<[]/.test(name)) continue; // a placeholder: `npm run bench -- <name>`
      if (own[name] === undefined) problems.push(`${file}: \`${command}\`: no script "${name}"${workspace === undefined ? '' : ` in ${workspace}`}`);
      const beforeSeparator = tokens.slice(verb === 'run' ? 2 : 1, tokens.includes('--') ? tokens.indexOf('--') : undefined);
      const misplaced = beforeSeparator.filter((t, i) => t.startsWith('--') && t !== '--silent' && beforeSeparator[i - 1] !== '-w' && t !== '--workspace');
      if (misplaced.length > 0) problems.push(`${file}: \`${command}\`: npm takes ${misplaced.join(' ')} for itself; write \`npm ${verb === 'run' ? `run ${name}` : name} -- ${misplaced.join(' ')} ...\``);
    }
    assert.deepEqual(problems, []);
  });

  it('npx: every command is this project\'s or an installed package\'s', () => {
    const bins = ownBins();
    const problems: string[] = [];
    for (const { file, command } of ALL.filter((c) => c.command.startsWith('npx '))) {
      const name = command.split(/\s+/)[1] ?? '';
      if (name === '-y' || name.startsWith('-p')) continue;
      if (bins.has(name)) continue;
      if (existsSync(join(REPO_ROOT, 'node_modules', '.bin', name))) continue;
      problems.push(`${file}: \`${command}\`: no command "${name}" in this project or its packages`);
    }
    assert.deepEqual(problems, []);
  });

  it("the project's commands are tracked, executable in git, outside the build output, and answer --help through npx", () => {
    const bins = ownBins();
    assert.deepEqual([...bins.keys()].sort(), ['coordinator', 'devhost']);
    for (const [name, target] of bins) {
      const staged = git(['ls-files', '-s', '--', target]).trim();
      assert.match(staged, /^100755 /, `${target} (the ${name} command) must be tracked with its execute bit (git update-index --chmod=+x)`);
      assert.ok(!target.split('/').includes('dist'), `${target}: a build rewrites dist/ without the execute bit`);
      assert.ok((statSync(join(REPO_ROOT, target)).mode & 0o111) !== 0, `${target} is executable on disk`);
      assert.match(readFileSync(join(REPO_ROOT, target), 'utf8'), /^#!\/usr\/bin\/env node\n/);
      const run = spawnSync('npx', ['--no-install', name, '--help'], { cwd: REPO_ROOT, encoding: 'utf8', timeout: 60_000 });
      assert.equal(run.status, 0, `npx ${name} --help: ${run.stderr}`);
      assert.match(run.stdout, new RegExp(`^Usage: ${name} `), `npx ${name} --help prints its usage`);
    }
  });

  it('.gitignore hides no tracked file', () => {
    assert.equal(git(['ls-files', '--cached', '--ignored', '--exclude-standard']).trim(), '');
    for (const target of ownBins().values()) {
      const ignored = spawnSync('git', ['-C', REPO_ROOT, 'check-ignore', '--no-index', '-q', target]);
      assert.equal(ignored.status, 1, `${target} is hidden by .gitignore`);
    }
  });

  it('az storage commands sign in with Entra ID: no keys, connection strings or SAS anywhere in the docs', () => {
    const storage = ALL.filter((c) => /^az storage /.test(c.command));
    assert.ok(storage.length >= 2, 'the docs show how to put and clear queue messages');
    // Azurite's development account is the one exception: its key is public and it has no Entra ID.
    const azurite = /\s--connection-string UseDevelopmentStorage=true\b/;
    const problems = storage
      .filter((c) => !/\s--auth-mode login\b/.test(c.command) && !azurite.test(c.command))
      .map((c) => `${c.file}: \`${c.command}\` needs --auth-mode login (or, on Azurite, --connection-string UseDevelopmentStorage=true)`);
    const keyed = ALL.filter((c) => /--(connection-string|account-key|sas-token)\b/.test(c.command.replace(azurite, '')))
      .map((c) => `${c.file}: \`${c.command}\` uses a shared key`);
    assert.ok(storage.some((c) => /\s--auth-mode login\b/.test(c.command)), 'the docs show the Azure form of a queue command');
    assert.deepEqual([...problems, ...keyed], []);
  });
});
