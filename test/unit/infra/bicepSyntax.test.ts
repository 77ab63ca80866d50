import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';

import { BicepFile } from './BicepFile';
import { readRepoFile, repoFilesUnder, repoPath } from './repoFiles';

describe('Bicep files', () => {
  const files = repoFilesUnder('infra', '.bicep');

  it('include the azd entry point and its local modules', () => {
    assert.ok(files.includes('infra/main.bicep'), `infra/main.bicep missing; found ${files.join(', ')}`);
    assert.ok(files.length > 1);
  });

  for (const file of files) {
    it(`${file} parses as Bicep`, async () => {
      const errors = (await BicepFile.parse(repoPath(file))).syntaxErrors();
      assert.deepEqual(
        errors.map((e) => `${file}:${e.line}:${e.column} ${e.text}`),
        [],
        'tree-sitter-bicep found syntax errors',
      );
    });
  }

  it('the syntax check rejects a file with a structural mistake', async () => {
    // Guards the guard: a parser that accepted anything would make the checks above worthless.
    const source = readRepoFile('infra', 'main.bicep');
    const lastBrace = source.lastIndexOf('}');
    const broken = [source.slice(0, lastBrace) + source.slice(lastBrace + 1), source.replace('param location string', 'param location strin g =')];
    for (const text of broken) {
      assert.notDeepEqual((await BicepFile.parse('broken.bicep', text)).syntaxErrors(), []);
    }
  });

  it('every local module path exists and every registry module is pinned to a version', async () => {
    for (const file of files) {
      const bicep = await BicepFile.parse(repoPath(file));
      for (const declaration of bicep.nodesOfType('module_declaration')) {
        const target = declaration.namedChildren.find((c) => c?.type === 'string')?.text.slice(1, -1) ?? '';
        if (target.startsWith('br/') || target.startsWith('br:')) {
          assert.match(target, /:\d+\.\d+\.\d+$/, `${file}: registry module ${target} must name an exact version`);
        } else {
          assert.ok(existsSync(join(dirname(repoPath(file)), target)), `${file}: module ${target} does not exist`);
        }
      }
    }
  });
});
