/**
 * The jobs HTTP API and the job functions' registrations, on the development host over real HTTP
 * (the host turns requests into the library's HttpRequest objects and enforces function keys).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { decodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { type JobsHost, startJobsHost } from '../support/jobsHost';

describe('jobs HTTP API and registrations (development host, Azurite)', () => {
  let h: JobsHost;

  before(async () => {
    h = await startJobsHost('api');
  });
  after(async () => {
    await h.stop();
  });

  async function queuedMessages(): Promise<unknown[]> {
    if (!(await h.jobsQueue.exists())) return [];
    const peeked = await h.jobsQueue.peekMessages({ numberOfMessages: 32 });
    return peeked.peekedMessageItems.map((m) => decodeQueueMessage(m.messageText));
  }

  it('registers each job function with the bindings the mission needs', () => {
    const fns = new Map(h.host.app.list().map((f) => [f.name, f]));
    const http = (name: string) => fns.get(name)?.bindings[fns.get(name)?.triggerName ?? ''];
    assert.deepEqual(
      ['jobsSubmit', 'jobsList', 'jobsGet', 'jobsResult', 'jobsCancel'].map((n) => [n, http(n)?.type, http(n)?.route, http(n)?.methods, http(n)?.authLevel]),
      [
        ['jobsSubmit', 'httpTrigger', 'jobs', ['POST'], 'function'],
        ['jobsList', 'httpTrigger', 'jobs', ['GET'], 'function'],
        ['jobsGet', 'httpTrigger', 'jobs/{jobId}', ['GET'], 'function'],
        ['jobsResult', 'httpTrigger', 'jobs/{jobId}/result', ['GET'], 'function'],
        ['jobsCancel', 'httpTrigger', 'jobs/{jobId}', ['DELETE'], 'function'],
      ],
    );
    for (const name of ['jobsSubmit', 'jobsList', 'jobsGet', 'jobsCancel']) {
      assert.ok(Object.values(fns.get(name)?.bindings ?? {}).some((b) => b.type === 'durableClient' && b.direction === 'in'), `${name} has a durableClient input`);
    }
    const worker = fns.get('workItemsWorker');
    assert.equal(worker?.triggerType, 'queueTrigger');
    const trigger = worker?.bindings[worker.triggerName];
    assert.equal(trigger?.queueName, h.env.WORK_ITEMS_QUEUE);
    assert.equal(trigger?.connection, 'CoordinatorStorage');
    assert.equal(fns.get('jobOrchestrator')?.triggerType, 'orchestrationTrigger');
    for (const activity of ['jobPlan', 'jobStep', 'jobAggregate', 'jobFinish']) {
      assert.equal(fns.get(activity)?.triggerType, 'activityTrigger', activity);
    }
  });

  it('accepts a job with 202 and a Location to its status, and enqueues exactly the submission with its id', async () => {
    const body = { workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } };
    const res = await h.request('POST', '/api/jobs', JSON.stringify(body));
    assert.equal(res.status, 202, res.text);
    const { jobId } = res.json as { jobId: string };
    assert.match(jobId, /^j-[0-9a-f-]{36}$/);
    assert.equal(res.headers.get('location'), `${h.baseUrl}/api/jobs/${jobId}`);
    assert.equal(res.headers.get('retry-after'), '1', 'the 202 says when to ask first');
    assert.deepEqual(await queuedMessages(), [{ ...body, jobId }]);

    const status = await h.request('GET', `/api/jobs/${jobId}`);
    assert.equal(status.status, 200);
    assert.equal((status.json as { status: string }).status, 'pending');
    assert.equal(status.headers.get('retry-after'), '1', 'a pending job says when to ask again');
    assert.equal((status.json as { workType: string | null }).workType, 'sum', 'a pending job shows its work type');
    const list = await h.request('GET', '/api/jobs?status=pending');
    const entry = (list.json as { jobs: Array<{ jobId: string; workType: string | null }> }).jobs.find((j) => j.jobId === jobId);
    assert.equal(entry?.workType, 'sum');
  });

  it('lists jobs a page at a time: limit, then a continuation (and its absolute nextUrl) until the end, each job once', async () => {
    for (let i = 1; i <= 5; i++) {
      const res = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: `paged-${i}`, workType: 'noop', items: [i] }));
      assert.equal(res.status, 202, res.text);
    }
    type Page = { jobs: Array<{ jobId: string }>; continuation?: string; nextUrl?: string };
    const whole = (await h.request('GET', '/api/jobs?status=pending&limit=1000')).json as Page;
    assert.equal(whole.continuation, undefined, 'everything fits: no continuation');
    const seen: string[] = [];
    let path: string | undefined = '/api/jobs?status=pending&limit=2';
    let pages = 0;
    while (path !== undefined) {
      const res = await h.request('GET', path);
      assert.equal(res.status, 200, res.text);
      const page = res.json as Page;
      assert.ok(page.jobs.length <= 2);
      seen.push(...page.jobs.map((j) => j.jobId));
      pages += 1;
      if (page.continuation === undefined) {
        path = undefined;
      } else {
        const next = new URL(page.nextUrl ?? '');
        assert.equal(next.origin, h.baseUrl, 'nextUrl is absolute');
        assert.equal(next.searchParams.get('continuation'), page.continuation);
        assert.equal(next.searchParams.get('limit'), '2');
        path = `${next.pathname}${next.search}`;
      }
    }
    assert.deepEqual(seen, whole.jobs.map((j) => j.jobId), 'the pages are the whole list, in order');
    assert.ok(pages >= 3);
    for (let i = 1; i <= 5; i++) assert.ok(seen.includes(`paged-${i}`));
    for (const bad of ['limit=0', 'limit=1001', 'limit=two', 'continuation=not-a-token', `continuation=${Buffer.from('["x","../etc"]').toString('base64url')}`]) {
      const res = await h.request('GET', `/api/jobs?${bad}`);
      assert.equal(res.status, 400, bad);
      assert.equal((res.json as { code: string }).code, 'INVALID_PAGING', bad);
    }
  });

  it('answers an identical resubmission with the same job and refuses a different one under the same id', async () => {
    const body = JSON.stringify({ jobId: 'same-id', workType: 'noop', items: ['a'] });
    assert.equal((await h.request('POST', '/api/jobs', body)).status, 202);
    const again = await h.request('POST', '/api/jobs', body);
    assert.equal(again.status, 202);
    // Still pending: sent again (the first send may have been lost); intake starts the job once.
    assert.equal((again.json as { enqueued: boolean }).enqueued, true);
    const other = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'same-id', workType: 'noop', items: ['b'] }));
    assert.equal(other.status, 409);
    assert.equal((other.json as { code: string }).code, 'DUPLICATE_JOB_ID');
    const queued = (await queuedMessages()).filter((m) => (m as { jobId: string }).jobId === 'same-id');
    assert.deepEqual(queued, [JSON.parse(body), JSON.parse(body)], 'only the identical submission is queued, never the refused one');
  });

  it('sends a pending job again when it is resubmitted after its first message was lost', async () => {
    const body = JSON.stringify({ jobId: 'lost-send', workType: 'noop', items: ['a'] });
    assert.equal((await h.request('POST', '/api/jobs', body)).status, 202);
    // The record stays, the message is gone: what a send that failed after the record was written leaves.
    const mine = (await h.jobsQueue.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 })).receivedMessageItems;
    for (const m of mine) {
      if ((JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as { jobId: string }).jobId === 'lost-send') await h.jobsQueue.deleteMessage(m.messageId, m.popReceipt);
      else await h.jobsQueue.updateMessage(m.messageId, m.popReceipt, undefined, 0);
    }
    assert.equal((await queuedMessages()).filter((m) => (m as { jobId: string }).jobId === 'lost-send').length, 0);
    const retry = await h.request('POST', '/api/jobs', body);
    assert.equal(retry.status, 202);
    assert.equal((retry.json as { enqueued: boolean }).enqueued, true);
    assert.deepEqual(
      (await queuedMessages()).filter((m) => (m as { jobId: string }).jobId === 'lost-send'),
      [JSON.parse(body)],
    );
  });

  it('requires a function key on every jobs route', async () => {
    for (const [method, path] of [
      ['POST', '/api/jobs'],
      ['GET', '/api/jobs'],
      ['GET', '/api/jobs/x'],
      ['DELETE', '/api/jobs/x'],
      ['GET', '/api/jobs/x/result'],
    ] as const) {
      assert.equal((await h.request(method, path, method === 'POST' ? '{}' : undefined, null)).status, 401, `${method} ${path}`);
      assert.equal((await h.request(method, path, method === 'POST' ? '{}' : undefined, 'wrong')).status, 401, `${method} ${path} with a wrong key`);
    }
  });

  const refused: Array<[string, string | Uint8Array, number, string]> = [
    ['not JSON', '{"workType": ', 400, 'INVALID_JSON'],
    // Bytes that are not UTF-8 inside a JSON string: the queue path refuses them, so must HTTP.
    ['JSON with invalid UTF-8 in a string', Buffer.concat([Buffer.from('{"workType":"noop","items":["a'), Buffer.from([0xff, 0xfe]), Buffer.from('"]}')]), 400, 'INVALID_JSON'],
    ['an array', '[1,2]', 400, 'NOT_AN_OBJECT'],
    ['a job id with ..', JSON.stringify({ jobId: '..', workType: 'sum', items: [1] }), 400, 'INVALID_JOB_ID'],
    ['an unknown work type', JSON.stringify({ workType: 'nope', items: [1] }), 400, 'UNKNOWN_WORK_TYPE'],
    ['empty items', JSON.stringify({ workType: 'sum', items: [] }), 400, 'ITEMS_EMPTY'],
    ['items the work type refuses', JSON.stringify({ workType: 'sum', items: [1, 'x'] }), 400, 'ITEM_REJECTED'],
    ['a missing items blob', JSON.stringify({ workType: 'sum', itemsBlob: 'inputs/missing.json' }), 400, 'ITEMS_BLOB_NOT_FOUND'],
    ['a body over a queue message', JSON.stringify({ workType: 'noop', items: Array.from({ length: 6000 }, () => 'xxxxxxxx') }), 413, 'PAYLOAD_TOO_LARGE'],
  ];
  for (const [what, body, status, code] of refused) {
    it(`refuses ${what} with ${status} ${code} and enqueues nothing`, async () => {
      const before = (await queuedMessages()).length;
      const res = await h.request('POST', '/api/jobs', body);
      assert.equal(res.status, status, res.text);
      assert.equal((res.json as { code: string }).code, code);
      assert.ok(((res.json as { message: string }).message ?? '').length > 10);
      assert.equal((await queuedMessages()).length, before);
    });
  }

  it('validates the job id in routes before it reaches storage', async () => {
    for (const id of ['a%2Fb', '..%2F..%2Fx', 'x'.repeat(65), 'a%25b']) {
      const res = await h.request('GET', `/api/jobs/${id}`);
      assert.ok(res.status === 400 || res.status === 404, `${id}: ${res.status}`);
      if (res.status === 400) assert.equal((res.json as { code: string }).code, 'INVALID_JOB_ID');
    }
    const bad = await h.request('GET', `/api/jobs/${'x'.repeat(65)}`);
    assert.equal((bad.json as { code: string }).code, 'INVALID_JOB_ID');
    const unknown = await h.request('GET', '/api/jobs/never-submitted');
    assert.equal(unknown.status, 404);
    assert.equal((unknown.json as { code: string }).code, 'JOB_NOT_FOUND');
    const filter = await h.request('GET', '/api/jobs?status=bogus');
    assert.equal(filter.status, 400);
    assert.equal((filter.json as { code: string }).code, 'INVALID_STATUS_FILTER');
  });

  it('cancels a pending job and refuses to cancel an unknown one', async () => {
    const res = await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'to-cancel', workType: 'noop', items: [1] }));
    assert.equal(res.status, 202);
    const cancel = await h.request('DELETE', '/api/jobs/to-cancel');
    assert.equal(cancel.status, 202, cancel.text);
    assert.equal((cancel.json as { status: string }).status, 'cancelling');
    const unknown = await h.request('DELETE', '/api/jobs/no-such-job');
    assert.equal(unknown.status, 404);
  });
});
