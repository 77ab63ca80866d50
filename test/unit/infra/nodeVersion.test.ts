/**
 * The Node.js version the project declares is the true one: what Azure runs the app on (Bicep
 * runtimeVersion), and at least what every installed dependency declares (azurite, the storage SDKs
 * and @azure/identity need 22), so `npm ci` on the declared version prints no EBADENGINE warning.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

import { REPO_ROOT } from './repoFiles';

function readJson(path: string): Record<string, unknown> {
  return JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
}

/** The lowest major version a `>=N` (or `>=N.x.y`, `^N`, `N.x || >=M`) range allows; undefined when it says nothing. */
export function minimumMajor(range: string): number | undefined {
  const majors = [...range.matchAll(/(?:>=|\^|~|^|\|\|\s*)v?(\d+)/g)].map((m) => Number(m[1]));
  return majors.length === 0 ? undefined : Math.min(...majors);
}

function installedPackages(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    if (name.startsWith('.')) return [];
    if (name.startsWith('@')) return readdirSync(join(dir, name)).map((sub) => join(dir, name, sub));
    return [join(dir, name)];
  });
}

describe('the declared Node.js version', () => {
  const declared = (readJson(join(REPO_ROOT, 'package.json')).engines as { node?: string } | undefined)?.node ?? '';
  const declaredMajor = minimumMajor(declared);

  it('is what Azure runs the app on', () => {
    const bicep = readFileSync(join(REPO_ROOT, 'infra', 'main.bicep'), 'utf8');
    const azure = Number(/runtimeVersion:\s*'(\d+)'/.exec(bicep)?.[1]);
    assert.equal(declaredMajor, azure, `package.json engines.node "${declared}" vs Bicep runtimeVersion ${azure}`);
    assert.match(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8'), new RegExp(`You need Node\\.js ${azure}\\b`));
  });

  it('is at least what every installed dependency declares', () => {
    const tooLow: string[] = [];
    for (const dir of installedPackages(join(REPO_ROOT, 'node_modules'))) {
      const manifest = join(dir, 'package.json');
      if (!existsSync(manifest)) continue;
      const pkg = readJson(manifest);
      const engine = (pkg.engines as { node?: unknown } | undefined)?.node;
      if (typeof engine !== 'string') continue;
      const needs = minimumMajor(engine);
      if (needs !== undefined && declaredMajor !== undefined && needs > declaredMajor) tooLow.push(`${String(pkg.name)} needs node ${engine}`);
    }
    assert.deepEqual(tooLow, [], `package.json declares node "${declared}"`);
  });

  it('reads ranges the way npm does for their lowest major', () => {
    assert.equal(minimumMajor('>=22.0.0'), 22);
    assert.equal(minimumMajor('^20.17.0 || >=22.9.0'), 20);
    assert.equal(minimumMajor('>=18'), 18);
  });
});
