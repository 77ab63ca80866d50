/**
 * devhost/testing startAzurite: a port another process took between freePort and Azurite's bind is
 * not taken for Azurite's (it accepts connections too, while the Azurite that could not bind exits).
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { describe, it } from 'node:test';

import { answersAsAzurite, freePort, startAzurite } from '../../../src/testing/azurite';

function plainServer(port: number): Promise<Server> {
  const server = createServer((_req, res) => res.end('not azurite'));
  return new Promise((resolve) => server.listen(port, '127.0.0.1', () => resolve(server)));
}

describe('startAzurite', () => {
  it('tells Azurite\'s ports from a port another server holds, and fails a start whose port another server took', async () => {
    const azurite = await startAzurite();
    try {
      for (const port of [azurite.blobPort, azurite.queuePort, azurite.tablePort]) assert.equal(await answersAsAzurite(port), true, `port ${port}`);
    } finally {
      await azurite.stop();
    }
    const port = await freePort();
    assert.equal(await answersAsAzurite(port), false, 'nothing listens');
    const other = await plainServer(port);
    try {
      assert.equal(await answersAsAzurite(port), false, 'another server listens');
      await assert.rejects(startAzurite({ blobPort: port }), /not as this Azurite|exited/);
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });
});
