/**
 * The jobs API while the app's storage (CoordinatorStorage) refuses connections: every route answers
 * 503 SERVICE_UNAVAILABLE naming the setting, within a few seconds, not 500 after the SDK's long
 * retries. The host's own storage (AzureWebJobsStorage, Durable) stays up.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { AZURITE_ACCOUNT, AZURITE_KEY, freePort } from 'devhost/testing';

import { type JobsHost, startJobsHost } from './support/jobsHost';

describe('jobs API with its storage unreachable', () => {
  let h: JobsHost;

  before(async () => {
    // A port nobody listens on: connections are refused at once.
    const port = await freePort();
    const unreachable =
      `DefaultEndpointsProtocol=http;AccountName=${AZURITE_ACCOUNT};AccountKey=${AZURITE_KEY};` +
      `BlobEndpoint=http://127.0.0.1:${port}/${AZURITE_ACCOUNT};QueueEndpoint=http://127.0.0.1:${port}/${AZURITE_ACCOUNT};`;
    h = await startJobsHost('unreach', ['jobsApi'], { CoordinatorStorage: unreachable });
  });
  after(async () => {
    await h.stop();
  });

  for (const [method, path, body] of [
    ['POST', '/api/jobs', JSON.stringify({ workType: 'sum', items: [1, 2] })],
    ['GET', '/api/jobs/some-job', undefined],
    ['GET', '/api/jobs/some-job/result', undefined],
    ['DELETE', '/api/jobs/some-job', undefined],
  ] as const) {
    it(`${method} ${path} answers 503 SERVICE_UNAVAILABLE naming the setting, quickly`, async () => {
      const started = Date.now();
      const res = await h.request(method, path, body);
      const elapsed = Date.now() - started;
      assert.equal(res.status, 503, res.text);
      assert.equal((res.json as { code: string }).code, 'SERVICE_UNAVAILABLE');
      assert.match((res.json as { message: string }).message, /CoordinatorStorage/);
      assert.doesNotMatch(res.text, /AccountKey|127\.0\.0\.1/);
      // The SDK's default retries took about 16 s; three quick tries take about 2. Loose for a loaded machine.
      assert.ok(elapsed < 10_000, `answered after ${elapsed} ms`);
    });
  }
});
