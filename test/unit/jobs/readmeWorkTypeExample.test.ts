/**
 * The README's worked work-type example ("the longest line") is real code: this test takes it out
 * of README.md, type-checks it under the project's compiler options against the real WorkType
 * contract, runs it, checks the result the README promises, and lints both of its files with the
 * project's own ESLint config (whoever follows the README must still pass `npm test`).
 */
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { describe, it } from 'node:test';

import { ESLint } from 'eslint';
import ts from 'typescript';

import { type Json, type WorkType } from '../../../shared/worktypes/WorkType';
import { WorkTypeRegistry } from '../../../shared/worktypes/WorkTypeRegistry';

// <outDir>/test/unit/jobs -> repository root.
const ROOT = resolve(__dirname, '..', '..', '..', '..');

/** The README's code block that starts with the comment `// <path>`. */
function exampleBlock(path: string): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const escaped = path.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  const block = new RegExp(`\`\`\`ts\\n(// ${escaped}[^\\n]*\\n[\\s\\S]*?)\`\`\``).exec(readme)?.[1];
  assert.ok(block !== undefined, `the README has the ${path} example`);
  return block;
}

function exampleSource(): string {
  return exampleBlock('shared/worktypes/longestWorkType.ts');
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

  it('passes the project lint, both files, as a newcomer would add them', async () => {
    // A copy of the project's sources with the two example files added where the README puts them,
    // linted with the project's own config and type information (node_modules is linked, not copied).
    const dir = mkdtempSync(join(tmpdir(), 'readme-lint-'));
    try {
      for (const name of ['shared', 'functions', 'schemas']) cpSync(join(ROOT, name), join(dir, name), { recursive: true });
      for (const name of ['tsconfig.json', 'eslint.config.mjs', 'package.json']) cpSync(join(ROOT, name), join(dir, name));
      symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
      const config = JSON.parse(readFileSync(join(dir, 'tsconfig.json'), 'utf8')) as { include: string[] };
      writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ ...config, include: ['functions', 'shared'] }));
      const files = ['shared/worktypes/longestWorkType.ts', 'functions/workTypes.ts'];
      for (const file of files) {
        mkdirSync(join(dir, file, '..'), { recursive: true });
        writeFileSync(join(dir, file), exampleBlock(file));
      }
      const results = await new ESLint({ cwd: dir }).lintFiles(files);
      const problems = results.flatMap((r) => r.messages.map((m) => `${relative(dir, r.filePath)}:${m.line} ${m.ruleId ?? ''} ${m.message}`));
      assert.deepEqual(problems, []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
