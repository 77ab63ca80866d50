/**
 * The HTTP API's rules (api/JobService.ts) on the in-memory twins of its storage (the jobs queue,
 * the job store's container) and a stand-in for Durable: a submission enqueued exactly as the queue
 * path would send it, after its pending record; an identical one answered without a second message;
 * a different one under the same id refused; bad input refused with its code and nothing written; a
 * failed send undone; the status of an accepted job never JOB_NOT_FOUND; cancel of a pending job.
 * test/integration/jobs/api/jobsApi.test.ts runs the same routes over HTTP on Azurite.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { JobService } from '../../../../shared/jobs/api/JobService';
import { InputContainers } from '../../../../shared/jobs/input/InputContainers';
import { JobError } from '../../../../shared/jobs/JobError';
import { validateSubmission } from '../../../../shared/jobs/JobSubmission';
import { decodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../../shared/observability/log';
import { workTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { MemoryDocuments } from '../support/MemoryDocuments';
import { MemoryOrchestrations } from '../support/MemoryOrchestrations';
import { MemoryQueue } from '../support/MemoryQueue';

function setup() {
  const now = Date.parse('2026-03-01T12:00:00.000Z');
  const jobsQueue = new MemoryQueue('jobs', () => now);
  const docs = new MemoryDocuments(() => now);
  const store = new JobStore(docs, 'job-results', () => Promise.resolve(undefined));
  const service = new JobService({
    jobsQueue,
    store,
    registry: workTypes,
    inputContainers: new InputContainers(['inputs'], ['job-results']),
    logger: memoryLogger('api'),
    statusPath: (jobId) => `/api/jobs/${jobId}`,
    now: () => new Date(now),
  });
  return { jobsQueue, docs, store, service, orchestrations: new MemoryOrchestrations(() => now) };
}

const body = (value: unknown): Uint8Array => Buffer.from(JSON.stringify(value), 'utf8');
const code = (expected: string) => (err: unknown) => err instanceof JobError && err.code === expected;

describe('JobService on its storage twins', () => {
  it('records a submission as pending, then enqueues it exactly as sent with its job id, once per identical submission', async () => {
    const t = setup();
    const submission = { jobId: 'p1', workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } };
    const first = await t.service.submit(body(submission), t.orchestrations);
    assert.deepEqual(first, { jobId: 'p1', location: '/api/jobs/p1', enqueued: true });
    assert.deepEqual(t.jobsQueue.sent.map(decodeQueueMessage), [submission]);
    assert.equal((await t.store.readRecord('p1'))?.status, 'pending');
    assert.equal((await t.service.get('p1', t.orchestrations)).status, 'pending', 'accepted: never JOB_NOT_FOUND');

    const again = await t.service.submit(body(submission), t.orchestrations);
    assert.equal(again.enqueued, true, 'a pending identical submission is sent again (its first send may be lost)');
    await assert.rejects(t.service.submit(body({ ...submission, items: [9] }), t.orchestrations), code('DUPLICATE_JOB_ID'));
    assert.equal(t.jobsQueue.sent.length, 2, 'nothing sent for the refused one');
  });

  it('generates a job id when none is given, and the message carries it; a fresh id costs no reads of what it names', async () => {
    const t = setup();
    let statusReads = 0;
    const getStatus = t.orchestrations.getStatus.bind(t.orchestrations);
    t.orchestrations.getStatus = (instanceId) => ((statusReads += 1), getStatus(instanceId));
    const { jobId } = await t.service.submit(body({ workType: 'sum', items: [1] }), t.orchestrations);
    assert.match(jobId, /^j-[0-9a-f-]{36}$/);
    assert.deepEqual(t.jobsQueue.sent.map(decodeQueueMessage), [{ workType: 'sum', items: [1], jobId }]);
    assert.deepEqual([statusReads, t.docs.calls.get('get') ?? 0], [0, 0], 'no Durable status read, no document read');
    await t.service.submit(body({ jobId: 'named', workType: 'sum', items: [1] }), t.orchestrations);
    assert.deepEqual([statusReads, t.docs.calls.get('get') ?? 0], [0, 1], 'a job id the client chose is checked: its start record, not its instance');
  });

  it('refuses bad input with its code and writes nothing', async () => {
    const t = setup();
    await assert.rejects(t.service.submit(Buffer.from('{"workType":', 'utf8'), t.orchestrations), code('INVALID_JSON'));
    await assert.rejects(t.service.submit(body({ workType: 'nope', items: [1] }), t.orchestrations), code('UNKNOWN_WORK_TYPE'));
    await assert.rejects(t.service.submit(body({ jobId: '../x', workType: 'sum', items: [1] }), t.orchestrations), code('INVALID_JOB_ID'));
    await assert.rejects(t.service.submit(body({ workType: 'sum', itemsBlob: 'inputs/missing.json' }), t.orchestrations), code('ITEMS_BLOB_NOT_FOUND'));
    assert.deepEqual(t.jobsQueue.sent, []);
    assert.deepEqual([...t.docs.blobs.keys()], []);
  });

  it('a send that fails is undone: SERVICE_UNAVAILABLE and no pending record left', async () => {
    const t = setup();
    t.jobsQueue.sendMessage = () => Promise.reject(new Error('queue unreachable'));
    await assert.rejects(t.service.submit(body({ jobId: 'lost', workType: 'sum', items: [1] }), t.orchestrations), code('SERVICE_UNAVAILABLE'));
    assert.equal(await t.store.readRecord('lost'), undefined);
    await assert.rejects(t.service.get('lost', t.orchestrations), code('JOB_NOT_FOUND'));
  });

  it('a POST of an id a queue submission already started leaves no pending record: the same job answers 202 unsent, another 409', async () => {
    const t = setup();
    const submission = { jobId: 'q1', workType: 'sum', items: [1, 2] };
    // Read and created at once (JobService.submit): the record made beside the read goes when the id is taken.
    const job = validateSubmission(submission, { registry: workTypes, generateJobId: () => 'unused', inputContainers: new InputContainers(['inputs'], ['job-results']) });
    const run = { jobId: 'q1', workType: 'sum', fingerprint: job.fingerprint, options: job.options, source: job.source, epoch: 2, holder: 'leader',
      submittedAt: '2026-03-01T11:59:00.000Z', via: 'queue' as const, startId: 's1' };
    await t.store.createStart({ v: 1, jobId: 'q1', fingerprint: job.fingerprint, state: 'active', startId: 's1', generation: 1, epoch: 2, holder: 'leader', at: run.submittedAt, run });
    const same = await t.service.submit(body(submission), t.orchestrations);
    assert.deepEqual(same, { jobId: 'q1', location: '/api/jobs/q1', enqueued: false });
    assert.equal(await t.store.readRecord('q1'), undefined, 'no pending record for a job already started');
    await assert.rejects(t.service.submit(body({ ...submission, items: [9] }), t.orchestrations), code('DUPLICATE_JOB_ID'));
    assert.equal(await t.store.readRecord('q1'), undefined, 'nor for a different job refused');
    assert.equal(t.jobsQueue.sent.length, 0, 'nothing sent');
  });

  it('a job of a shared run shows its recorded outcome, not the shared run\'s stand-in for it', async () => {
    const t = setup();
    const shared = 'batch-0b6f1d6e-6a9e-4a57-9a59-5b1f1b3f5e21';
    const run = { jobId: 'sh1', workType: 'sum', fingerprint: 'f'.repeat(64), options: { chunkSize: 100, attempts: 3, deadlineSeconds: 300 },
      source: { kind: 'inline' as const, items: [1, 2] }, epoch: 2, holder: 'leader', submittedAt: '2026-03-01T11:59:00.000Z', via: 'queue' as const, startId: 's1' };
    await t.store.createStart({ v: 1, jobId: 'sh1', fingerprint: run.fingerprint, state: 'active', startId: 's1', generation: 1, instance: shared, epoch: 2, holder: 'leader', at: run.submittedAt, run });
    const progress = { chunks: { total: 1, done: 1, failed: 0 }, items: { total: 2, done: 2, failed: 0 } };
    const at = new Date('2026-03-01T12:00:00.000Z');
    // The shared run ended while the job's finish was still out: its output for the job is a stand-in.
    const standIn = { jobId: 'sh1', workType: 'sum', status: 'failed', progress, error: { code: 'INTERNAL', message: 'Its failure could not be recorded.' }, epoch: 2, finishedAt: at.toISOString() };
    t.orchestrations.instances.set(shared, { instanceId: shared, runtimeStatus: 'Completed', input: { runs: [{ run }] }, output: { sh1: standIn }, customStatus: { phase: 'done' }, createdTime: at, lastUpdatedTime: at });
    await t.store.writeFinal({ jobId: 'sh1', workType: 'sum', status: 'completed', progress, result: { sum: 3 }, epoch: 2, finishedAt: at.toISOString() });
    const view = await t.service.get('sh1', t.orchestrations);
    assert.equal(view.status, 'completed');
    assert.deepEqual(view.result, { sum: 3 });
  });

  it('cancels a pending job (its marker), and refuses to cancel one that is not there', async () => {
    const t = setup();
    await t.service.submit(body({ jobId: 'c1', workType: 'sum', items: [1] }), t.orchestrations);
    assert.equal((await t.service.cancel('c1', t.orchestrations)).status, 'pending');
    assert.equal(await t.store.isCancelled('c1'), true);
    await assert.rejects(t.service.cancel('none', t.orchestrations), code('JOB_NOT_FOUND'));
  });
});
