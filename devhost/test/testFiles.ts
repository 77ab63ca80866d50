/** Where the package's compiled tests are, for its own runner and for an app's runner that includes them. */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** <package>/dist/test (this file is compiled to <package>/dist/test/testFiles.js). */
export const PACKAGE_TESTS = __dirname;

/** Every `*.test.js` under `dir`, `support` and `fixtures` folders skipped, sorted. */
export function findTestFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .flatMap((name) => {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) return name === 'support' || name === 'fixtures' ? [] : findTestFiles(full);
      return name.endsWith('.test.js') ? [full] : [];
    })
    .sort();
}
