/**
 * The fault proxy on real sockets, in front of a real HTTP server: it reports each request (and the
 * status that answered it) on a keep-alive connection, drops a request it is told to drop, resets
 * connections at once, and holds them silent in a blackhole until restored.
 */
import assert from 'node:assert/strict';
import { Agent, createServer, request, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';

import { type ProxiedRequest, startTcpProxy } from '../../support/tcpProxy';

function call(port: number, agent: Agent, method: string, path: string, body = '', timeoutMs = 5_000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, agent, headers: { 'content-length': Buffer.byteLength(body) }, timeout: timeoutMs }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(body);
  });
}

describe('TCP fault proxy', () => {
  let server: Server;
  let target: number;

  before(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        res.statusCode = req.method === 'PUT' ? 201 : 200;
        res.end(`${req.method} ${req.url} ${body.length}`);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    target = (server.address() as AddressInfo).port;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('reports each request and its answer on one keep-alive connection', async () => {
    const seen: string[] = [];
    const proxy = await startTcpProxy(target, {
      onRequest: (r: ProxiedRequest) => void seen.push(`${r.method} ${r.path}`),
      onResponse: (r) => void seen.push(`${r.status} for ${r.request.path}`),
    });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      assert.deepEqual(await call(proxy.port, agent, 'PUT', '/a', 'x'.repeat(70_000)), { status: 201, body: 'PUT /a 70000' });
      assert.deepEqual(await call(proxy.port, agent, 'GET', '/b'), { status: 200, body: 'GET /b 0' });
      assert.deepEqual(seen, ['PUT /a', '201 for /a', 'GET /b', '200 for /b']);
    } finally {
      agent.destroy();
      await proxy.close();
    }
  });

  it('drops a request it is told to drop, and nothing reaches the server', async () => {
    const proxy = await startTcpProxy(target, { onRequest: (r) => (r.path === '/drop' ? 'drop' : 'forward') });
    const agent = new Agent({ keepAlive: false });
    try {
      await assert.rejects(call(proxy.port, agent, 'DELETE', '/drop', '', 500), /timeout/);
      assert.equal((await call(proxy.port, agent, 'GET', '/fine')).status, 200);
    } finally {
      agent.destroy();
      await proxy.close();
    }
  });

  it('resets connections at once until restored, and blackholes them silently until restored', async () => {
    const proxy = await startTcpProxy(target);
    const agent = new Agent({ keepAlive: false });
    try {
      proxy.reset();
      const started = Date.now();
      await assert.rejects(call(proxy.port, agent, 'GET', '/r', '', 10_000), (err: NodeJS.ErrnoException) => err.code === 'ECONNRESET' || /socket hang up/.test(err.message));
      assert.ok(Date.now() - started < 5_000, 'a reset fails fast, it does not hang');
      proxy.restore();
      assert.equal((await call(proxy.port, agent, 'GET', '/ok')).status, 200);

      proxy.blackhole();
      const hung = call(proxy.port, agent, 'GET', '/hole', '', 30_000);
      const raced = await Promise.race([hung.then(() => 'answered', () => 'failed'), new Promise((r) => setTimeout(() => r('silent'), 700))]);
      assert.equal(raced, 'silent');
      proxy.restore();
      await assert.rejects(hung, 'the connection that lived through the blackhole is closed');
      assert.equal((await call(proxy.port, agent, 'GET', '/back')).status, 200);
    } finally {
      agent.destroy();
      await proxy.close();
    }
  });
});
