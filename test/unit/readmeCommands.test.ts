/**
 * Commands the READMEs and docs/ tell a newcomer to type must work as written. Azurite: the storage SDKs the
 * app and the Functions host use speak API versions newer than Azurite knows, so every Azurite
 * command needs --skipApiVersionCheck (what `npm start` and the tests pass, devhost/testing's
 * startAzurite); without it the host fails with "The API version ... is not supported by Azurite".
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';

const REPO_ROOT = join(__dirname, '..', '..', '..');

function azuriteCommands(file: string): string[] {
  const text = readFileSync(join(REPO_ROOT, file), 'utf8');
  return [...text.matchAll(/`(npx azurite\b[^`]*)`/g)].map((m) => m[1] as string);
}

describe('README commands', () => {
  it('every Azurite command passes --skipApiVersionCheck, as npm start does', () => {
    const docs = readdirSync(join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => join('docs', f));
    const files = ['README.md', join('devhost', 'README.md'), ...docs];
    const commands = files.flatMap(azuriteCommands);
    assert.ok(commands.length >= 1, 'the README shows how to run Azurite without npm start');
    for (const command of commands) assert.match(command, /--skipApiVersionCheck\b/, command);
    const startedByTests = readFileSync(join(REPO_ROOT, 'devhost', 'src', 'testing', 'azurite.ts'), 'utf8');
    assert.match(startedByTests, /'--skipApiVersionCheck'/, 'the flag npm start and the tests use');
  });
});
