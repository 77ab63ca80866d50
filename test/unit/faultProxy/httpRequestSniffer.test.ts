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

  it('holds back a request it wants the body of until the body is whole, and hands it over with it', () => {
    const message = '<QueueMessage><MessageText>{"instanceId":"job-a"}</MessageText></QueueMessage>';
    const withBody = Buffer.concat([
      Buffer.from(`POST /devstoreaccount1/hub-control-01/messages HTTP/1.1\r\nContent-Length: ${message.length}\r\n\r\n${message}`),
      stream,
    ]);
    const large = Buffer.from('POST /devstoreaccount1/hub-control-02/messages HTTP/1.1\r\nContent-Length: 140\r\n\r\n' + 'x'.repeat(140));
    for (const chunks of splits(Buffer.concat([withBody, large]))) {
      const sniffer = new HttpRequestSniffer({ wantsBody: (r) => r.method === 'POST', maxBodyBytes: 100 });
      const seen: Array<{ path: string; body: string | undefined; bytesBefore: number }> = [];
      const out: Buffer[] = [];
      for (const chunk of chunks) {
        for (const part of sniffer.feed(chunk)) {
          const request = part.request;
          const bytesBefore = Buffer.concat(out).length;
          if (request !== undefined) seen.push({ path: request.path, body: request.body?.toString('utf8'), bytesBefore });
          out.push(part.bytes);
        }
      }
      assert.deepEqual(
        seen.map((r) => [r.path, r.body]),
        [
          ['/devstoreaccount1/hub-control-01/messages', message],
          ['/devstoreaccount1/hub-instances/job-a', undefined],
          // chunked: passed as it comes, without its body
          ['/devstoreaccount1/hub-control-00/messages', undefined],
          ['/devstoreaccount1/jobs/messages/m1?popreceipt=p', undefined],
          // over maxBodyBytes: passed as it comes, without its body
          ['/devstoreaccount1/hub-control-02/messages', undefined],
        ],
      );
      // Nothing of the held request went out before the decision on it.
      assert.equal(seen[0]?.bytesBefore, 0);
      assert.ok(Buffer.concat(out).equals(Buffer.concat([withBody, large])), 'every byte passes, in order');
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
