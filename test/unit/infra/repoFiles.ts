/**
 * Paths of the deployment files the infra checks read. Compiled tests live in
 * <outDir>/test/unit/infra, so the repository root is four levels up whatever the outDir.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

export const REPO_ROOT = join(__dirname, '..', '..', '..', '..');

export function repoPath(...segments: string[]): string {
  return join(REPO_ROOT, ...segments);
}

export function readRepoFile(...segments: string[]): string {
  return readFileSync(repoPath(...segments), 'utf8');
}

export function readRepoJson<T>(...segments: string[]): T {
  return JSON.parse(readRepoFile(...segments)) as T;
}

/** Files under a repository folder whose names end with `suffix`, as repository-relative paths, sorted. */
export function repoFilesUnder(folder: string, suffix: string): string[] {
  const found: string[] = [];
  const visit = (dir: string): void => {
    for (const name of readdirSync(dir)) {
      const full = join(dir, name);
      if (statSync(full).isDirectory()) visit(full);
      else if (name.endsWith(suffix)) found.push(relative(REPO_ROOT, full).split('\\').join('/'));
    }
  };
  visit(repoPath(folder));
  return found.sort();
}
