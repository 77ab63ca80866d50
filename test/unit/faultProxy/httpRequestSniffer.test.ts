/** The proxy's HTTP/1.1 request framing: heads found however the bytes are split, bodies skipped, every byte passed on. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { HttpRequestSniffer, responseStatus } from '../../support/httpRequestSniffer';

function run(chunks: readonly Buffer[]): { requests: string[]; bytes: Buffer; opaque: boolean } {
  const sniffer = new HttpRequestSniffer();
  const requests: string[] = [];
  const out: Buffer[] = [];
  for (const chunk of chunks) {
    for (const part of sniffer.feed(chunk)) {
      if (part.request !== undefined) requests.push(`${part.request.method} ${part.request.path} ${part.request.headers['if-none-match'] ?? ''}`.trim());
      out.push(part.bytes);
    }
  }
  return { requests, bytes: Buffer.concat(out), opaque: sniffer.opaque };
}

/** Every way of cutting `bytes` into two or three pieces. */
function splits(bytes: Buffer): Buffer[][] {
  const result: Buffer[][] = [[bytes]];
  for (let i = 1; i < bytes.length; i += 7) {
    result.push([bytes.subarray(0, i), bytes.subarray(i)]);
    const j = Math.min(bytes.length - 1, i + 13);
    if (j > i) result.push([bytes.subarray(0, i), bytes.subarray(i, j), bytes.subarray(j)]);
  }
  return result;
}

const stream = Buffer.from(
  'PUT /devstoreaccount1/hub-instances/job-a HTTP/1.1\r\nHost: x\r\nIf-None-Match: *\r\nContent-Length: 12\r\n\r\nGET / HTTP/1' +
    'POST /devstoreaccount1/hub-control-00/messages HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nGET /\r\n3;x=1\r\nabc\r\n0\r\nTrailer: 1\r\n\r\n' +
    'DELETE /devstoreaccount1/jobs/messages/m1?popreceipt=p HTTP/1.1\r\nContent-Length: 0\r\n\r\n',
);

describe('HTTP request sniffer', () => {
  it('finds each request once, whatever the chunking, and never mistakes a body for a request', () => {
    for (const chunks of splits(stream)) {
      const { requests, bytes } = run(chunks);
      assert.deepEqual(requests, ['PUT /devstoreaccount1/hub-instances/job-a *', 'POST /devstoreaccount1/hub-control-00/messages', 'DELETE /devstoreaccount1/jobs/messages/m1?popreceipt=p']);
      assert.ok(bytes.equals(stream), 'every byte passes, in order');
    }
  });

  it('gives up on what is not HTTP but still passes every byte', () => {
    const junk = Buffer.from('\u0016\u0003\u0001 not http\r\n\r\nmore bytes');
    const { requests, bytes, opaque } = run([junk]);
    assert.deepEqual(requests, []);
    assert.equal(opaque, true);
    assert.ok(bytes.equals(junk));
  });

  it('reads the status at the start of a response', () => {
    assert.equal(responseStatus(Buffer.from('HTTP/1.1 201 Created\r\n')), 201);
    assert.equal(responseStatus(Buffer.from('xyz')), undefined);
  });
});
