import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';

import { BicepFile, plain } from './BicepFile';
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

  it('every module is a local file that exists: none comes from a registry', async () => {
    // A registry module (br:, br/public:, ts:) would make the build and every deployment depend on
    // that registry; npm run infra:check builds without restoring, so it would fail there too.
    for (const file of files) {
      const bicep = await BicepFile.parse(repoPath(file));
      for (const declaration of bicep.nodesOfType('module_declaration')) {
        const target = declaration.namedChildren.find((c) => c?.type === 'string')?.text.slice(1, -1) ?? '';
        assert.doesNotMatch(target, /^(br|ts)[:/]/, `${file}: module ${target} comes from a registry; declare its resources in infra/app/ instead`);
        assert.ok(existsSync(join(dirname(repoPath(file)), target)), `${file}: module ${target} does not exist`);
      }
    }
  });

  it('the evaluator computes what the templates rely on: lambdas, filters, property access, given parameters', async () => {
    // Guards the evaluator the settings and role checks stand on, with Bicep whose results are known.
    const source = [
      "param optional string = ''",
      'param host bool = true',
      "var ids = { a: '1', b: '2' }",
      'var chosen = host ? [ids.a, ids.b] : [ids.b]',
      "var settings = { KEEP: 'k', EMPTY: optional, OUT: 'https://${storage.outputs.name}' }",
      'var kept = toObject(filter(items(settings), s => !empty(s.value)), s => s.key, s => s.value)',
      "var merged = union(settings, empty(optional) ? {} : { EXTRA: 'x' })",
    ].join('\n');
    const file = await BicepFile.parse('evaluator.bicep', source);
    assert.deepEqual(file.syntaxErrors(), []);
    const value = (bicep: BicepFile, name: string): string | undefined => {
      const node = bicep.variables.get(name);
      return node === undefined ? undefined : plain(bicep.evaluate(node));
    };
    assert.equal(value(file, 'chosen'), '["1","2"]');
    assert.equal(value(file.withParameters({ host: false }), 'chosen'), '["2"]');
    assert.equal(value(file, 'kept'), '{"KEEP":"k","OUT":"https://storageoutputsname"}');
    assert.equal(value(file.withParameters({ optional: 'v' }), 'kept'), '{"EMPTY":"v","KEEP":"k","OUT":"https://storageoutputsname"}');
    assert.equal(value(file, 'merged'), '{"KEEP":"k","EMPTY":"","OUT":"https://storageoutputsname"}');
    assert.equal(value(file.withParameters({ optional: 'v' }), 'merged'), '{"KEEP":"k","EMPTY":"v","OUT":"https://storageoutputsname","EXTRA":"x"}');
    assert.throws(() => file.withParameters({ undeclared: 1 }), /declares no parameter undeclared/);
  });
});
