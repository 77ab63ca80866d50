/** HTTP trigger routing as the Functions host does it. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { RouteTable } from '../../src/http/RouteTable';

function table(...routes: Array<[string, string, string[]]>): RouteTable<string> {
  const t = new RouteTable<string>();
  for (const [name, template, methods] of routes) t.add({ functionName: name, template, methods, target: name });
  return t;
}

describe('RouteTable', () => {
  it('matches parameters and optional trailing parameters, case-insensitively', () => {
    const t = table(['getJob', 'jobs/{jobId}', ['GET']], ['list', 'Jobs', ['GET']], ['hello', 'hello/{name?}', []]);
    assert.deepEqual(t.match('JOBS/abc', 'GET'), { entry: t.entries.find((e) => e.functionName === 'getJob'), params: { jobId: 'abc' } });
    assert.equal(t.match('jobs', 'get')?.entry.functionName, 'list');
    assert.deepEqual(t.match('hello', 'DELETE')?.params, {});
    assert.deepEqual(t.match('hello/x%20y', 'PUT')?.params, { name: 'x y' });
    assert.equal(t.match('hello/a/b', 'GET'), undefined);
  });

  it('returns no match for a method the route does not take', () => {
    const t = table(['submit', 'jobs', ['POST']]);
    assert.equal(t.match('jobs', 'GET'), undefined);
    assert.equal(t.match('jobs', 'POST')?.entry.functionName, 'submit');
  });

  it('prefers literal segments and constrained parameters over plain ones', () => {
    const t = table(['byId', 'items/{id:int}', []], ['byName', 'items/{name}', []], ['special', 'items/latest', []], ['rest', 'files/{*path}', []]);
    assert.equal(t.match('items/latest', 'GET')?.entry.functionName, 'special');
    assert.equal(t.match('items/42', 'GET')?.entry.functionName, 'byId');
    assert.equal(t.match('items/abc', 'GET')?.entry.functionName, 'byName');
    assert.deepEqual(t.match('files/a/b/c.txt', 'GET')?.params, { path: 'a/b/c.txt' });
  });

  it('refuses two functions on the same template and method, and unknown constraints', () => {
    assert.throws(() => table(['a', 'jobs/{id}', ['GET']], ['b', 'jobs/{other}', ['GET', 'POST']]), (err: { code?: string }) => err.code === 'DEVHOST_ROUTE_CONFLICT');
    assert.doesNotThrow(() => table(['a', 'jobs/{id}', ['GET']], ['b', 'jobs/{id}', ['DELETE']]));
    assert.throws(() => table(['a', 'jobs/{id:datetime}', []]), (err: { code?: string }) => err.code === 'DEVHOST_BAD_ROUTE');
    assert.throws(() => table(['a', 'jobs/{id?}/x', []]), (err: { code?: string }) => err.code === 'DEVHOST_BAD_ROUTE');
  });
});
