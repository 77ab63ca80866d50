/**
 * Imports inside shared/jobs/ run one way: api -> intake -> run -> store. A file in store/ imports
 * nothing from run/, intake/ or api/; one in run/ nothing from intake/ or api/; one in intake/
 * nothing from api/. The files at the root of shared/jobs are the contracts every layer shares
 * (JobRun.ts, JobSummary.ts, jobIds.ts, ...): they import none of the four layers. And nothing
 * under shared/jobs/ imports the app's wiring (shared/app/). Type-only imports count too: the
 * test reads the sources, not the compiled JavaScript. The other folders (delivery, dispatch,
 * input, worker) are outside the chain.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, it } from 'node:test';

import ts from 'typescript';

// <outDir>/test/unit/jobs -> repository root.
const ROOT = resolve(__dirname, '..', '..', '..', '..');
const JOBS = join(ROOT, 'shared', 'jobs');
const APP = join(ROOT, 'shared', 'app');

/** The chain, lowest first: a layer may import only layers before it. */
const LAYERS = ['store', 'run', 'intake', 'api'] as const;
type Layer = (typeof LAYERS)[number];

function tsFiles(dir: string): string[] {
  return readdirSync(dir)
    .flatMap((name) => {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) return tsFiles(full);
      return name.endsWith('.ts') ? [full] : [];
    })
    .sort();
}

/** Every module a file names: imports and exports from (type-only too), `import x = require()`, `import()` and `import('...')` types. */
function specifiersOf(fileName: string, text: string): string[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined) {
      if (ts.isStringLiteral(node.moduleSpecifier)) found.push(node.moduleSpecifier.text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteral(expression)) found.push(expression.text);
    } else if (ts.isImportTypeNode(node)) {
      const argument = node.argument;
      if (ts.isLiteralTypeNode(argument) && ts.isStringLiteral(argument.literal)) found.push(argument.literal.text);
    } else if (ts.isCallExpression(node)) {
      const callee = node.expression;
      const first = node.arguments[0];
      const loads = callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require');
      if (loads && first !== undefined && ts.isStringLiteralLike(first)) found.push(first.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Where a path under shared/jobs sits: a layer, the root (the shared contracts), or another folder. */
function placeOf(path: string): Layer | 'root' | 'other' {
  const parts = relative(JOBS, path).split(sep);
  if (parts.length === 1) return 'root';
  return (LAYERS as readonly string[]).includes(parts[0] ?? '') ? (parts[0] as Layer) : 'other';
}

function inside(dir: string, path: string): boolean {
  const rel = relative(dir, path);
  return rel !== '' && !rel.startsWith('..') && !rel.startsWith(sep);
}

/** What is wrong with `from` importing `target` (an absolute path without extension), or undefined. */
function violation(from: string, target: string): string | undefined {
  if (inside(APP, target) || target === APP) return 'shared/jobs may not import the app (shared/app)';
  if (!inside(JOBS, target)) return undefined;
  const source = placeOf(from);
  const dest = placeOf(target);
  if (dest === 'root' || dest === 'other') return undefined;
  if (source === 'root') return `a shared contract at the root of shared/jobs may not import ${dest}/`;
  if (source === 'other') return undefined;
  if (LAYERS.indexOf(dest) > LAYERS.indexOf(source)) return `${source}/ may not import ${dest}/ (api -> intake -> run -> store)`;
  return undefined;
}

function violations(): { readonly files: string[]; readonly imports: number; readonly found: string[] } {
  const files = tsFiles(JOBS);
  const found: string[] = [];
  let imports = 0;
  for (const file of files) {
    for (const specifier of specifiersOf(file, readFileSync(file, 'utf8'))) {
      if (!specifier.startsWith('.')) continue;
      imports += 1;
      const target = resolve(dirname(file), specifier).replace(/\.(ts|js)$/, '');
      const wrong = violation(file, target);
      if (wrong !== undefined) found.push(`${relative(ROOT, file).split(sep).join('/')} imports '${specifier}': ${wrong}`);
    }
  }
  return { files, imports, found };
}

describe('import direction in shared/jobs', () => {
  it('finds every kind of import, type-only ones too', () => {
    const text = [
      `import { a } from './a';`,
      `import type { B } from '../b';`,
      `import { type C } from '../c';`,
      `export { d } from './d';`,
      `export type { E } from './e';`,
      `export * from './f';`,
      `import g = require('./g');`,
      `type H = import('./h').H;`,
      `const i = () => import('./i');`,
      `import './j';`,
    ].join('\n');
    assert.deepEqual(specifiersOf('x.ts', text), ['./a', '../b', '../c', './d', './e', './f', './g', './h', './i', './j']);
  });

  it('names a wrong way as one', () => {
    const at = (...parts: string[]): string => join(JOBS, ...parts);
    assert.match(violation(at('store', 'X.ts'), at('api', 'Y')) ?? '', /store\/ may not import api\//);
    assert.match(violation(at('run', 'X.ts'), at('intake', 'Y')) ?? '', /run\/ may not import intake\//);
    assert.match(violation(at('JobRun.ts'), at('run', 'Y')) ?? '', /root of shared\/jobs may not import run\//);
    assert.match(violation(at('intake', 'X.ts'), join(APP, 'jobComponents')) ?? '', /shared\/app/);
    assert.equal(violation(at('api', 'X.ts'), at('store', 'Y')), undefined);
    assert.equal(violation(at('run', 'X.ts'), at('JobSummary')), undefined);
    assert.equal(violation(at('delivery', 'X.ts'), at('store', 'Y')), undefined);
  });

  it('runs api -> intake -> run -> store, the root files import no layer, and nothing imports shared/app', () => {
    const { files, imports, found } = violations();
    // Guards against a test that reads nothing: each layer has files, and the files import each other.
    for (const layer of LAYERS) assert.ok(files.some((f) => placeOf(f) === layer), `shared/jobs/${layer}/ has files`);
    assert.ok(imports > 100, `read ${imports} relative imports in ${files.length} files`);
    assert.deepEqual(found, [], `imports that go the wrong way:\n${found.join('\n')}`);
  });
});
