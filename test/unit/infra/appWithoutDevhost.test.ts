/**
 * The app's runtime code uses nothing of the development host: `devhost/` is a development
 * dependency (npm start, tests, benchmarks), so what runs on Azure must not import it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { readRepoFile, readRepoJson, repoFilesUnder } from './repoFiles';

const IMPORT_FROM = /(?:from\s+|require\(\s*|import\(\s*)['"]([^'"]+)['"]/g;

describe('the app without the development host', () => {
  it('imports nothing of devhost from functions/ or shared/', () => {
    for (const file of [...repoFilesUnder('functions', '.ts'), ...repoFilesUnder('shared', '.ts')]) {
      for (const match of readRepoFile(file).matchAll(IMPORT_FROM)) {
        const specifier = match[1] ?? '';
        assert.ok(!/^devhost(\/|$)/.test(specifier) && !/(^|\/)devhost\//.test(specifier), `${file} imports ${specifier}`);
      }
    }
  });

  it('keeps devhost out of the app\'s dependencies and out of its TypeScript build', () => {
    const pkg = readRepoJson<{ dependencies?: Record<string, string>; workspaces?: string[] }>('package.json');
    assert.equal(pkg.dependencies?.devhost, undefined, 'devhost is a workspace, not a runtime dependency');
    assert.deepEqual(pkg.workspaces, ['devhost']);
    const tsconfig = readRepoJson<{ include: string[] }>('tsconfig.json');
    assert.ok(!tsconfig.include.some((folder) => folder.startsWith('devhost')), 'the app\'s tsconfig does not compile devhost');
  });
});
