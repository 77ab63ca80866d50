/**
 * The files the live page and the OpenAPI route read at run time travel with the app: the remote
 * build uploads what .funcignore keeps, so .funcignore must keep dashboard/ and the schemas.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, it } from 'node:test';

import ignore from 'ignore';

import { readRepoFile, repoPath } from '../infra/repoFiles';

describe('run-time assets in the deployment', () => {
  it('.funcignore keeps dashboard/ and schemas/openapi.json', () => {
    const ignored = ignore().add(readRepoFile('.funcignore'));
    for (const file of ['dashboard/index.html', 'dashboard/dashboard.css', 'dashboard/dashboard.js', 'schemas/openapi.json', 'schemas/job.schema.json']) {
      assert.ok(existsSync(repoPath(...file.split('/'))), `${file} exists`);
      assert.ok(!ignored.ignores(file), `${file} is read at run time but .funcignore drops it`);
    }
  });
});
