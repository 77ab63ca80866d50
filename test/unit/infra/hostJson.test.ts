import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { readRepoFile, readRepoJson } from './repoFiles';

type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** Top-level host.json keys that need no reason in docs/deploy.md: the schema version and the standard bundle. */
const SELF_EXPLANATORY = new Set(['version', 'extensionBundle']);

/** Every leaf as [dotted path, value as text]; arrays count as one leaf, shown as JSON. */
function leaves(value: Json, path: string[] = []): [string, string][] {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
    return Object.entries(value).flatMap(([key, child]) => leaves(child, [...path, key]));
  }
  return [[path.join('.'), typeof value === 'object' ? JSON.stringify(value) : String(value)]];
}

/** Rows of the host.json table in docs/deploy.md: the settings named in the first cell, and the value cell. */
function documentedRows(): { names: string[]; value: string }[] {
  const readme = readRepoFile('docs', 'deploy.md');
  const start = readme.indexOf('<!-- section:deploy -->');
  const end = readme.indexOf('<!-- /section:deploy -->');
  assert.ok(start >= 0 && end > start, 'docs/deploy.md has no deploy section');
  return readme
    .slice(start, end)
    .split('\n')
    .filter((line) => /^\| `(extensions|logging|functionTimeout)/.test(line))
    .map((line) => {
      const cells = line.split('|').map((c) => c.trim());
      return { names: [...(cells[1] ?? '').matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? ''), value: (cells[2] ?? '').replace(/`/g, '') };
    });
}

describe('host.json', () => {
  const host = readRepoJson<{ [key: string]: Json }>('host.json');

  it('keeps the values the app and the development host rely on', () => {
    const get = (path: string): string | undefined => leaves(host).find(([p]) => p === path)?.[1];
    assert.equal(get('version'), '2.0');
    assert.equal(get('extensions.queues.messageEncoding'), 'base64');
    assert.equal(get('extensions.queues.maxDequeueCount'), '5');
    assert.equal(get('extensions.http.routePrefix'), 'api');
    assert.equal(get('extensions.durableTask.hubName'), '%TASK_HUB_NAME%');
    assert.match(get('extensionBundle.version') ?? '', /^\[4\./, 'extension bundle v4 carries Durable Functions for Node.js v4');
  });

  it('every value is explained in the deploy doc (docs/deploy.md), with the value it really has', () => {
    const rows = documentedRows();
    assert.ok(rows.length > 0, 'docs/deploy.md has no host.json table');
    for (const [path, value] of leaves(host)) {
      if (SELF_EXPLANATORY.has(path.split('.')[0] ?? '')) continue;
      const exact = rows.find((row) => row.names.includes(path));
      const ancestor = rows.find((row) => row.names.some((name) => path.startsWith(`${name}.`)));
      assert.ok(exact !== undefined || ancestor !== undefined, `host.json ${path} has no row in the host.json table of docs/deploy.md`);
      if (exact !== undefined) assert.equal(exact.value, value, `docs/deploy.md states ${path} = ${exact.value}, host.json has ${value}`);
    }
  });
});
