/**
 * The README's worked work-type example ("the longest line") is real code: this test takes it out
 * of README.md, type-checks it under the project's compiler options against the real WorkType
 * contract, runs it, and checks the result the README promises.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';

import ts from 'typescript';

import { type Json, type WorkType } from '../../../shared/worktypes/WorkType';
import { WorkTypeRegistry } from '../../../shared/worktypes/WorkTypeRegistry';

// <outDir>/test/unit/jobs -> repository root.
const ROOT = resolve(__dirname, '..', '..', '..', '..');

function exampleSource(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('<!-- section:jobs -->'), readme.indexOf('<!-- /section:jobs -->'));
  const block = /```ts\n(\/\/ shared\/worktypes\/longestWorkType\.ts\n[\s\S]*?)```/.exec(section)?.[1];
  assert.ok(block !== undefined, 'the README jobs section has the longestWorkType example');
  return block;
}

describe('README work type example', () => {
  it('compiles against the WorkType contract and behaves as the README says', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'readme-example-'));
    try {
      const file = join(dir, 'longestWorkType.ts');
      // The example imports './WorkType' from shared/worktypes; point it at the real file.
      writeFileSync(file, exampleSource().replace("from './WorkType'", `from ${JSON.stringify(join(ROOT, 'shared', 'worktypes', 'WorkType'))}`));
      const config = ts.readConfigFile(join(ROOT, 'tsconfig.json'), (p) => ts.sys.readFile(p));
      const options = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT).options;
      const program = ts.createProgram([file], { ...options, noEmit: true, rootDir: undefined, outDir: undefined });
      const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => d.file?.fileName === file);
      assert.deepEqual(
        diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
        [],
      );

      const js = ts.transpileModule(readFileSync(file, 'utf8'), { compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022 } }).outputText;
      const compiledWorkType = join(__dirname, '..', '..', '..', 'shared', 'worktypes', 'WorkType');
      const runnable = join(dir, 'longestWorkType.js');
      writeFileSync(runnable, js.replace(JSON.stringify(join(ROOT, 'shared', 'worktypes', 'WorkType')), JSON.stringify(compiledWorkType)));
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- loading the example is the point
      const { longestWorkType } = require(runnable) as { longestWorkType: WorkType<Json, Json> };
      new WorkTypeRegistry().register(longestWorkType);
      let total = longestWorkType.empty();
      for (const item of ['a', 'abc', 'ab']) {
        assert.equal(longestWorkType.validateItem(item), undefined);
        total = longestWorkType.combine(total, await longestWorkType.process(item, undefined as never));
      }
      assert.deepEqual(longestWorkType.finish(total), { text: 'abc', length: 3 });
      assert.match(longestWorkType.validateItem(3) ?? '', /string/);
      // "the first one on ties", whichever way the chunks are grouped.
      const [ab, cd] = await Promise.all(['ab', 'cd'].map(async (s) => longestWorkType.process(s, undefined as never)));
      assert.deepEqual(longestWorkType.finish(longestWorkType.combine(longestWorkType.combine(longestWorkType.empty(), ab as Json), cd as Json)), { text: 'ab', length: 2 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
