/**
 * Outcomes delivered (docs/jobs.md, "Outcomes"): the whole app on the development host (the leader
 * timer's passes start the jobs, the worker runs the chunks, Durable replays the orchestrations),
 * Azurite queues read with the real SDK, and a real HTTP receiver on loopback for callbacks
 * (JOB_CALLBACK_ALLOW_LOOPBACK, development host only). Every end is replied to its `replyTo` queue
 * and the outcome stream with the job id and the correlation id: completed, completed_with_errors,
 * failed, cancelled and rejected by the intake; an invalid `replyTo` is refused by HTTP (400) and,
 * by queue, rejected without writing that queue; a callback that fails is retried by the leader's
 * pass, its state in the job's status, and its signature verifies with the snippet docs/jobs.md shows.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';
import { type QueueClient, QueueServiceClient } from '@azure/storage-queue';

import { main } from '../../../cli/coordinator';
import { type JobView } from '../../../shared/jobs/api/jobViews';
import { type JobOutcome } from '../../../shared/jobs/delivery/JobOutcome';
import { encodeQueueMessage } from '../../../shared/jobs/messageCodec';
import { workTypes } from '../../../shared/worktypes/WorkTypeRegistry';
import { azuriteConnectionString, uniqueName } from '../../support/env';
import { eventually, type JobsHost, MASTER_KEY, startJobsHost } from './support/jobsHost';

const SECRET = 'test-callback-secret-0123456789abcdef';
const REPO_ROOT = join(__dirname, '..', '..', '..', '..');

/** Every message a queue has received so far, by job id (read and deleted, as a consumer would). */
class QueueReader {
  readonly byJob = new Map<string, JobOutcome[]>();
  constructor(readonly queue: QueueClient) {}
  async drain(): Promise<void> {
    if (!(await this.queue.exists())) return;
    for (;;) {
      const got = await this.queue.receiveMessages({ numberOfMessages: 32 });
      if (got.receivedMessageItems.length === 0) return;
      for (const m of got.receivedMessageItems) {
        const outcome = JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as JobOutcome;
        this.byJob.set(outcome.jobId, [...(this.byJob.get(outcome.jobId) ?? []), outcome]);
        await this.queue.deleteMessage(m.messageId, m.popReceipt);
      }
    }
  }
  async outcomeOf(jobId: string, timeoutMs = 90_000): Promise<JobOutcome> {
    return eventually(
      async () => {
        await this.drain();
        return this.byJob.get(jobId)?.[0];
      },
      timeoutMs,
      `the outcome of ${jobId} on ${this.queue.name}`,
    );
  }
}

interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
  readonly at: number;
}

describe('outcomes delivered: reply queues, the outcome stream, signed callbacks (whole app, development host)', () => {
  let h: JobsHost;
  let replies: QueueReader;
  let otherReplies: QueueReader;
  let stream: QueueReader;
  let receiver: Server;
  let receiverPort = 0;
  const received: Received[] = [];
  /** Answers for the callback receiver, in order (then 200). */
  const answers: number[] = [];
  const replyQueue = uniqueName('replies');
  const streamQueue = uniqueName('outcomes');

  before(async () => {
    receiver = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ headers: req.headers, body: Buffer.concat(chunks), at: Date.now() });
        res.statusCode = answers.shift() ?? 200;
        res.end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    receiverPort = (receiver.address() as AddressInfo).port;
    h = await startJobsHost('reply', ['*'], {
      LEADER_TIMER_SCHEDULE: '*/1 * * * * *',
      LEADER_PASS_INTERVAL_SECONDS: '1',
      JOB_REPLY_QUEUES: `${replyQueue},reply-other-*`,
      JOB_OUTCOMES_QUEUE: streamQueue,
      JOB_CALLBACK_HOSTS: '127.0.0.1',
      JOB_CALLBACK_SECRET: SECRET,
      JOB_CALLBACK_ALLOW_LOOPBACK: 'true',
    });
    const queues = QueueServiceClient.fromConnectionString(azuriteConnectionString());
    replies = new QueueReader(queues.getQueueClient(replyQueue));
    otherReplies = new QueueReader(queues.getQueueClient('reply-other-one'));
    stream = new QueueReader(queues.getQueueClient(streamQueue));
    await h.jobsQueue.createIfNotExists();
  });
  after(async () => {
    await h.stop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  });

  const submitByQueue = async (job: Record<string, unknown>): Promise<void> => {
    await h.jobsQueue.sendMessage(encodeQueueMessage(job));
  };
  const view = async (jobId: string): Promise<JobView> => {
    const res = await h.request('GET', `/api/jobs/${jobId}`);
    assert.equal(res.status, 200, res.text);
    return res.json as JobView;
  };

  it('a queue submission with replyTo and correlationId gets its completed outcome on that queue and on the stream', async () => {
    await submitByQueue({ jobId: 'rq-done', workType: 'sum', items: [1, 2, 3, 4], options: { chunkSize: 2 }, replyTo: replyQueue, correlationId: 'c-1' });
    const reply = await replies.outcomeOf('rq-done');
    assert.equal(reply.status, 'completed');
    assert.equal(reply.correlationId, 'c-1');
    assert.deepEqual(reply.result, { count: 4, sum: 10, min: 1, max: 4 });
    assert.deepEqual(reply.progress?.items, { total: 4, done: 4, failed: 0 });
    assert.equal(reply.error, null);
    assert.ok(reply.createdAt !== null && Date.parse(reply.finishedAt) >= Date.parse(reply.createdAt));
    // Sent after the outcome was recorded: the status already says completed, and shows the delivery.
    const status = await view('rq-done');
    assert.equal(status.status, 'completed');
    assert.equal(status.correlationId, 'c-1');
    assert.equal(status.delivery?.replyTo?.state, 'sent', JSON.stringify(status));
    assert.equal(status.delivery?.replyTo?.queue, replyQueue);
    assert.deepEqual(await stream.outcomeOf('rq-done'), reply);
  });

  it('a result over the status\'s 4 KiB goes inline in the outcome when it fits a message, a bigger one as its URL', async () => {
    const padded = (name: string, bytes: number): void => {
      workTypes.register({
        name,
        description: 'a result of a given size',
        validateItem: () => undefined,
        process: (item) => ({ n: Number(item) }),
        empty: () => ({ n: 0 }),
        combine: (a, b) => ({ n: Number(a.n) + Number(b.n) }),
        finish: (total) => ({ n: total.n, padding: 'x'.repeat(bytes) }),
      });
    };
    padded('reply-result-10k', 10_000);
    padded('reply-result-60k', 60_000);
    await submitByQueue({ jobId: 'rq-10k', workType: 'reply-result-10k', items: [1, 2], replyTo: replyQueue, correlationId: 'c-10k' });
    await submitByQueue({ jobId: 'rq-60k', workType: 'reply-result-60k', items: [1, 2], replyTo: replyQueue, correlationId: 'c-60k' });
    const inline = await replies.outcomeOf('rq-10k');
    assert.deepEqual(inline.result, { n: 3, padding: 'x'.repeat(10_000) });
    assert.equal(inline.resultUrl, undefined);
    assert.equal((await view('rq-10k')).result, undefined, 'the status itself keeps it out (over 4 KiB)');
    const pointer = await replies.outcomeOf('rq-60k');
    assert.equal(pointer.result, undefined);
    assert.match(pointer.resultUrl ?? '', /\/api\/jobs\/rq-60k\/result$/);
  });

  it('completed_with_errors, failed and cancelled are replied too', async () => {
    const blobs = BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient('inputs');
    await blobs.createIfNotExists();
    await blobs.getBlockBlobClient('reply/not-an-array.json').upload('{"not":"an array"}', 18);
    await blobs.getBlockBlobClient('reply/text.txt').upload('one two', 7);
    await submitByQueue({ jobId: 'rq-errors', workType: 'wordcount', items: ['inputs/reply/text.txt', 'inputs/reply/missing.txt'], replyTo: replyQueue, correlationId: 'c-2' });
    await submitByQueue({ jobId: 'rq-failed', workType: 'sum', itemsBlob: 'inputs/reply/not-an-array.json', replyTo: replyQueue, correlationId: 'c-3' });
    const posted = await h.request(
      'POST',
      '/api/jobs',
      JSON.stringify({ jobId: 'rq-cancelled', workType: 'sum', items: Array.from({ length: 4_000 }, () => 1), options: { chunkSize: 1 }, replyTo: replyQueue, correlationId: 'c-4' }),
    );
    assert.equal(posted.status, 202, posted.text);
    const cancelled = await h.request('DELETE', '/api/jobs/rq-cancelled');
    assert.equal(cancelled.status, 202, cancelled.text);

    const errors = await replies.outcomeOf('rq-errors');
    assert.equal(errors.status, 'completed_with_errors');
    assert.equal(errors.correlationId, 'c-2');
    assert.equal(errors.errors?.[0]?.code, 'BLOB_NOT_FOUND', JSON.stringify(errors));
    // A result with errors keeps its blob: every item error is there, the summary has the first few.
    const document = await h.request('GET', '/api/jobs/rq-errors/result');
    assert.equal(document.status, 200, document.text);
    assert.deepEqual(
      (document.json as { itemErrors: Array<{ index: number; code: string }> }).itemErrors.map((e) => [e.index, e.code]),
      [[1, 'BLOB_NOT_FOUND']],
    );
    const failed = await replies.outcomeOf('rq-failed');
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.code, 'ITEMS_BLOB_INVALID');
    assert.equal(failed.correlationId, 'c-3');
    const stopped = await replies.outcomeOf('rq-cancelled');
    assert.equal(stopped.status, 'cancelled');
    assert.equal(stopped.correlationId, 'c-4');
    for (const jobId of ['rq-errors', 'rq-failed', 'rq-cancelled']) {
      assert.equal((await stream.outcomeOf(jobId)).status, (replies.byJob.get(jobId) ?? [])[0]?.status);
    }
  });

  it('a rejected queue submission gets its rejected outcome; an invalid replyTo is rejected and that queue is never written', async () => {
    await submitByQueue({ jobId: 'rq-rejected', workType: 'no-such-type', items: [1], replyTo: 'reply-other-one', correlationId: 'c-5' });
    await submitByQueue({ jobId: 'rq-bad-reply', workType: 'sum', items: [1], replyTo: h.env.WORK_ITEMS_QUEUE, correlationId: 'c-6' });
    const rejected = await otherReplies.outcomeOf('rq-rejected');
    assert.equal(rejected.status, 'rejected');
    assert.equal(rejected.correlationId, 'c-5');
    assert.equal(rejected.error?.code, 'UNKNOWN_WORK_TYPE');
    assert.equal(rejected.progress, null);
    assert.equal((await view('rq-rejected')).delivery?.replyTo?.state, 'sent');

    // Not to the queue it named (the work-items queue here): the rejection is recorded and streamed.
    const badReply = await stream.outcomeOf('rq-bad-reply');
    assert.equal(badReply.status, 'rejected');
    assert.equal(badReply.error?.code, 'INVALID_REPLY_TO');
    assert.equal(badReply.correlationId, null);
    const recorded = await view('rq-bad-reply');
    assert.equal(recorded.status, 'rejected');
    assert.equal(recorded.error?.code, 'INVALID_REPLY_TO');
    assert.equal(recorded.delivery, undefined);
    const peeked = await h.workItemsQueue.peekMessages({ numberOfMessages: 32 });
    assert.ok(!peeked.peekedMessageItems.some((m) => Buffer.from(m.messageText, 'base64').toString('utf8').includes('rq-bad-reply')));
  });

  it('the CLI submits with --reply-to and --wait, and prints the outcome read from the reply queue', async () => {
    let stdout = '';
    let stderr = '';
    const io = {
      stdout: { write: (t: string) => (stdout += t) },
      stderr: { write: (t: string) => (stderr += t) },
      env: {},
      readStdin: () => Promise.resolve('[7, 8, 9]'),
    };
    const base = ['--url', h.baseUrl, '--key', MASTER_KEY];
    const code = await main(['submit', '-', '--work-type', 'sum', '--reply-to', 'reply-other-cli', '--wait', '--timeout', '90', ...base], io);
    assert.equal(code, 0, stderr);
    assert.deepEqual(JSON.parse(stdout), { count: 3, sum: 24, min: 7, max: 9 });
    assert.match(stderr, /: completed \(correlationId cli-[0-9a-f]{16}\)/);
    // Its own message was taken off the queue; a queue off the allow-list is refused before anything is submitted.
    await assert.rejects(main(['submit', '-', '--work-type', 'sum', '--reply-to', 'not-allowed', '--wait', ...base], io), (err: unknown) => {
      const e = err as { exitCode?: number; message?: string };
      return e.exitCode === 2 && /not a reply queue of this app/.test(e.message ?? '');
    });
  });

  it('HTTP refuses a replyTo or callbackUrl off the allow-lists with 400 and a code', async () => {
    const post = (extra: Record<string, unknown>) => h.request('POST', '/api/jobs', JSON.stringify({ workType: 'sum', items: [1], ...extra }));
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ replyTo: h.env.JOBS_QUEUE }, 'INVALID_REPLY_TO'],
      [{ replyTo: 'Not_A_Queue' }, 'INVALID_REPLY_TO'],
      [{ replyTo: 'job-replies' }, 'INVALID_REPLY_TO'],
      [{ callbackUrl: 'http://example.com/hook' }, 'INVALID_CALLBACK_URL'],
      [{ callbackUrl: 'ftp://127.0.0.1/hook' }, 'INVALID_CALLBACK_URL'],
      [{ callbackUrl: 'http://user:pw@127.0.0.1/hook' }, 'INVALID_CALLBACK_URL'],
      [{ callbackUrl: 'not a url' }, 'INVALID_CALLBACK_URL'],
    ];
    for (const [extra, code] of cases) {
      const res = await post(extra);
      assert.equal(res.status, 400, `${JSON.stringify(extra)}: ${res.text}`);
      assert.equal((res.json as { code: string }).code, code, JSON.stringify(extra));
    }
  });

  it('a callback that fails is retried by the leader, shows its state, and its signature verifies with the documented snippet', async () => {
    answers.push(503);
    const callbackUrl = `http://127.0.0.1:${receiverPort}/hooks/job?token=abc`;
    const posted = await h.request(
      'POST',
      '/api/jobs',
      JSON.stringify({ jobId: 'rq-callback', workType: 'sum', items: [5, 6], replyTo: replyQueue, correlationId: 'c-7', callbackUrl }),
    );
    assert.equal(posted.status, 202, posted.text);
    const reply = await replies.outcomeOf('rq-callback');
    const retrying = await eventually(async () => {
      const v = await view('rq-callback');
      return v.delivery?.callback?.state === 'retrying' ? v : undefined;
    }, 30_000, 'the failed callback recorded as retrying');
    assert.equal(retrying.delivery?.callback?.lastError?.code, 'CALLBACK_HTTP_ERROR');
    assert.equal(retrying.delivery?.callback?.host, `127.0.0.1:${receiverPort}`);
    assert.ok(!JSON.stringify(retrying).includes('token=abc'), 'the callback URL (its token) is never shown');
    const delivered = await eventually(async () => {
      const v = await view('rq-callback');
      return v.delivery?.callback?.state === 'delivered' ? v : undefined;
    }, 60_000, 'the callback delivered on its retry');
    assert.equal(delivered.delivery?.callback?.attempts, 2);
    assert.equal(received.length, 2);
    const [first, second] = received as [Received, Received];
    assert.ok(second.at - first.at >= 9_000, `retried ${second.at - first.at} ms after the first try (back-off 10 s)`);
    // The body is the outcome the reply queue got, byte for byte the JSON that was signed.
    assert.deepEqual(JSON.parse(second.body.toString('utf8')), reply);
    assert.equal(second.headers['x-coordinator-job-id'], 'rq-callback');
    // A resubmit sends the outcome where the first run's went; the callback URL (its token) is not handed out.
    const submission = await h.request('GET', '/api/jobs/rq-callback/submission');
    assert.equal(submission.status, 200, submission.text);
    assert.deepEqual(
      { replyTo: (submission.json as Record<string, unknown>).replyTo, correlationId: (submission.json as Record<string, unknown>).correlationId },
      { replyTo: replyQueue, correlationId: 'c-7' },
    );
    assert.ok(!submission.text.includes('token=abc') && !('callbackUrl' in (submission.json as object)), submission.text);

    const docs = readFileSync(join(REPO_ROOT, 'docs', 'jobs.md'), 'utf8');
    const snippet = /<!-- callback-verification-snippet -->\n```js\n([\s\S]*?)```/.exec(docs)?.[1];
    assert.ok(snippet !== undefined, 'docs/jobs.md shows the verification snippet');
    type Verify = (secret: string, headers: IncomingHttpHeaders, rawBody: Buffer, tolerance?: number) => boolean;
    // eslint-disable-next-line @typescript-eslint/no-implied-eval
    const make = new Function('require', `${snippet}\nreturn verifyCoordinatorSignature;`) as (req: NodeJS.Require) => Verify;
    const verify = make(require);
    assert.equal(verify(SECRET, second.headers, second.body), true);
    assert.equal(verify(SECRET, first.headers, first.body), true);
    assert.equal(verify('another-secret-0123456789abcdef0123', second.headers, second.body), false);
    assert.equal(verify(SECRET, second.headers, Buffer.concat([second.body, Buffer.from(' ')])), false);
    assert.equal(verify(SECRET, { ...second.headers, 'x-coordinator-timestamp': String(Number(second.headers['x-coordinator-timestamp']) - 1) }, second.body), false);
  });
});
