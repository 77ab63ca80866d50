/**
 * The Durable adapter's own rule: every call settles within its timeout, because the
 * durable-functions client can neither be aborted nor time out by itself. The client here is an
 * injected fault (calls that never answer); the adapter against the real client and backend is
 * covered by the integration tests.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { type DurableClient } from 'durable-functions';

import { JobError } from '../../../../shared/jobs/JobError';
import { durableOrchestrationClient } from '../../../../shared/jobs/run/OrchestrationClient';

const never = (): Promise<never> => new Promise<never>(() => undefined);
const hungClient = { getStatus: never, startNew: never, raiseEvent: never, getStatusAll: never, getStatusBy: never } as unknown as DurableClient;

describe('durableOrchestrationClient', () => {
  for (const [call, run, what = call] of [
    ['getStatus', (o: ReturnType<typeof durableOrchestrationClient>) => o.getStatus('job-x')],
    ['startNew', (o: ReturnType<typeof durableOrchestrationClient>) => o.start('job-x', {} as never)],
    ['raiseEvent', (o: ReturnType<typeof durableOrchestrationClient>) => o.raiseCancel('job-x', 'test')],
    ['getStatusAll', (o: ReturnType<typeof durableOrchestrationClient>) => o.list()],
    ['getStatusBy', (o: ReturnType<typeof durableOrchestrationClient>) => o.listActive()],
    ['raiseEvent', (o: ReturnType<typeof durableOrchestrationClient>) => o.raiseResume('job-x', { generation: 1, wait: 1 }), 'raiseEvent (resume)'],
  ] as const) {
    it(`gives up on a ${what} that never answers with SERVICE_UNAVAILABLE`, async () => {
      const started = performance.now();
      await assert.rejects(run(durableOrchestrationClient(hungClient, { timeoutMs: 40 })), (err: unknown) => {
        assert.ok(err instanceof JobError);
        assert.equal(err.code, 'SERVICE_UNAVAILABLE');
        assert.match(err.message, new RegExp(call));
        return true;
      });
      assert.ok(performance.now() - started < 5_000);
    });
  }

  it('still answers undefined for an instance the client reports as 404', async () => {
    const client = { getStatus: () => Promise.reject(new Error('Webhook returned unrecognized status code HTTP 404')) } as unknown as DurableClient;
    assert.equal(await durableOrchestrationClient(client, { timeoutMs: 1_000 }).getStatus('job-missing'), undefined);
  });
});
