/**
 * Temporary app folders for host-process tests: package.json (main index.js), host.json,
 * local.settings.json, and an index.js requiring one of the compiled fixture apps.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The package's compiled output root (this file is <root>/dist/test/support/appRoot.js). */
export const COMPILED_ROOT = join(__dirname, '..', '..');
export const fixtureEntry = (name: string): string => join(COMPILED_ROOT, 'test', 'fixtures', name, 'functions.js');

export interface AppRoot {
  readonly dir: string;
  remove(): void;
}

/** `fixture`: a folder under test/fixtures holding functions.js, or the compiled file's path itself. */
export function createAppRoot(options: { fixture: string; hostJson: unknown; values: Record<string, string> }): AppRoot {
  const dir = mkdtempSync(join(tmpdir(), 'devhost-app-'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'fixture-app', main: 'index.js' }));
  writeFileSync(join(dir, 'host.json'), JSON.stringify(options.hostJson));
  writeFileSync(join(dir, 'local.settings.json'), JSON.stringify({ IsEncrypted: false, Values: options.values }));
  const entry = options.fixture.endsWith('.js') ? options.fixture : fixtureEntry(options.fixture);
  writeFileSync(join(dir, 'index.js'), `require(${JSON.stringify(entry)});\n`);
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
