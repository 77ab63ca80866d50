/**
 * A job run's lifecycle end to end on the development host against Azurite: a stalled run resumed
 * on the real backend, a recorded outcome shown before Durable finishes the run, the bad-input corpus
 * (every bad submission, by queue or HTTP, gets a clear recorded error: status API and poison queue
 * for the queue, the answer for HTTP; the good jobs among them complete exactly), purge on request
 * and the retention sweep. Split from endToEnd.test.ts so that neither file nears the runner's
 * per-file limit on a loaded two-core machine.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';

import { appRoot } from '../../../shared/app/appRoot';
import { jobStatusPath } from '../../../shared/app/jobComponents';
import { JobService } from '../../../shared/jobs/api/JobService';
import { type JobView } from '../../../shared/jobs/api/jobViews';
import { Retention } from '../../../shared/jobs/api/Retention';
import { InputContainers } from '../../../shared/jobs/input/InputContainers';
import { instanceIdFor } from '../../../shared/jobs/jobIds';
import { encodeQueueMessage } from '../../../shared/jobs/messageCodec';
import { durableOrchestrationClient } from '../../../shared/jobs/run/OrchestrationClient';
import { StalledJobs } from '../../../shared/jobs/run/StalledJobs';
import { type JobStore } from '../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../shared/observability/log';
import { workTypes } from '../../../shared/worktypes/WorkTypeRegistry';
import { azuriteConnectionString, uniqueName } from '../../support/env';
import { eventually, type JobsHost, startJobsHost } from './support/jobsHost';
import { jobsScenario } from './support/jobsScenario';


describe('job lifecycle end to end (development host, Durable backend, Azurite)', () => {
  let h: JobsHost;
  const blobs = () => BlobServiceClient.fromConnectionString(azuriteConnectionString());
  const { passUntilQueueEmpty, finished, startHeldRun, epoch } = jobsScenario(() => h);

  before(async () => {
    h = await startJobsHost('life');
    // The bad-input corpus writes to the jobs queue directly, before any submission made it.
    await h.jobsQueue.createIfNotExists();
  });
  after(async () => {
    await h.stop();
  });

  it('resumes a run the leader finds stalled: the run takes the resume on the real backend and still completes exactly', async () => {
    const orchestrations = durableOrchestrationClient(h.client);
    let listings = 0;
    const reads: string[] = [];
    const counted = {
      ...orchestrations,
      listActive: () => ((listings += 1), orchestrations.listActive()),
      getStatus: (id: string) => (reads.push(id), orchestrations.getStatus(id)),
    };
    // The leader's check listed before this run started (its first check), and follows the run from its start on.
    const logger = memoryLogger();
    const stalls = new StalledJobs({ logger, stalledAfterMs: 0, intervalMs: 0 });
    await stalls.check(counted, 98);
    // Items wait until the test lets them go: the run is mid-step when the resume arrives.
    const { run, instanceId, release } = await startHeldRun('e2e-resume', { jobId: 'resumed', epoch: 98, items: [1, 2, 3, 4, 5, 6, 7, 8], chunkSize: 2 });
    stalls.started(instanceId);
    const custom = async (): Promise<{ wait?: number } | null> => (await h.client.getStatus(instanceId)).customStatus as { wait?: number } | null;

    const listed = (await orchestrations.listActive()).find((s) => s.instanceId === instanceId);
    assert.equal(listed?.runtimeStatus, 'Running');
    assert.equal((listed?.customStatus as { wait?: unknown } | undefined)?.wait, (await custom())?.wait, 'the listing shows the call it waits on');
    // Found by a read of its status (that instance alone), not by another listing.
    const raised = (await stalls.check(counted, 98)).filter((r) => r.jobId === run.jobId);
    assert.equal(raised.length, 1);
    assert.equal(raised[0]?.generation, 1);
    assert.deepEqual({ listings, reads: reads.filter((id) => id === instanceId).length }, { listings: 1, reads: 1 });
    await eventually(
      async () => {
        // The status API's history (the durable-functions client drops it from its answer).
        const status = await h.request('GET', `/runtime/webhooks/durabletask/instances/${instanceId}?showHistory=true`);
        const history = (status.json as { historyEvents?: Array<{ EventType?: string; Name?: string }> }).historyEvents ?? [];
        return history.some((e) => e.EventType === 'EventRaised' && e.Name === 'resume') ? true : undefined;
      },
      30_000,
      'the run to take the resume event',
    );
    release();
    const view = await finished(run.jobId, 60_000);
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, { n: 36 });
    assert.deepEqual(view.progress?.chunks, { total: 4, done: 4, failed: 0 });
  });

  it('shows a running job\'s recorded outcome at once, before its run finishes in Durable', async () => {
    // The activity that aggregates records final.json before the run hears of it (a Durable hop, or
    // a minute when that answer is held by a dead instance): the status answers the record.
    const { instanceId, release } = await startHeldRun('e2e-recorded', { jobId: 'recorded', epoch: 97, items: [1, 2, 3, 4], chunkSize: 1 });
    // Recorded as the aggregating activity records it; the run itself is still stepping.
    const progress = { chunks: { total: 4, done: 4, failed: 0 }, items: { total: 4, done: 4, failed: 0 } };
    // Recorded by an instance whose clock runs 10 minutes ahead: Durable's own times stay before it.
    const finishedAt = new Date(Date.now() + 600_000).toISOString();
    await appRoot().jobs.store.writeFinal({ jobId: 'recorded', workType: 'e2e-recorded', status: 'completed', progress, result: { n: 10 }, epoch: 97, finishedAt });
    const view = (await h.request('GET', '/api/jobs/recorded')).json as JobView;
    assert.equal(view.status, 'completed', JSON.stringify(view));
    assert.deepEqual(view.result, { n: 10 });
    assert.equal(view.phase, 'done');
    assert.equal(view.updatedAt, finishedAt, 'its last change is when its outcome was recorded');
    assert.equal((await h.client.getStatus(instanceId)).runtimeStatus, 'Running', 'the run has not heard yet');
    // With the record unreadable (an injected storage fault), Durable's own view stands: no failed read.
    const c = appRoot().jobs;
    const unreadable = Object.assign(Object.create(c.store) as JobStore, { readFinal: () => Promise.reject(new Error('storage hiccup')) });
    const degraded = new JobService({
      jobsQueue: h.jobsQueue,
      store: unreadable,
      registry: workTypes,
      inputContainers: new InputContainers(c.settings.jobs.inputContainers, [c.settings.jobs.resultsContainer]),
      logger: memoryLogger('degraded'),
      statusPath: jobStatusPath,
    });
    assert.equal((await degraded.get('recorded', durableOrchestrationClient(h.client))).status, 'running');
    // Started straight through Durable (no start record), so no index row names it until the leader's
    // walk of the index finds it: a job shows in the list once it is indexed.
    await c.indexUpkeep.walkIndex(durableOrchestrationClient(h.client));
    const listed = (await h.request('GET', '/api/jobs')).json as { jobs: Array<{ jobId: string; status: string }> };
    assert.deepEqual(listed.jobs.filter((j) => j.jobId === 'recorded').map((j) => j.status), ['completed']);
    const cancel = await h.request('DELETE', '/api/jobs/recorded');
    assert.equal(cancel.status, 409, cancel.text);
    release();
    // The run ends with the recorded outcome (recorded once: the first record wins).
    const output = await eventually(async () => {
      const status = await h.client.getStatus(instanceId);
      return String(status.runtimeStatus) === 'Completed' ? (status.output as { result?: unknown }) : undefined;
    }, 60_000, 'the run to complete');
    assert.deepEqual(output.result, { n: 10 });
    // Finished in Durable (whose status times are whole seconds): the job last changed when its outcome was recorded.
    const done = (await h.request('GET', '/api/jobs/recorded')).json as JobView;
    assert.equal(done.updatedAt, finishedAt, JSON.stringify(done));
  });

  it('records every bad submission with a clear error, keeps the queue ones in the poison queue, and still completes the good jobs exactly', async () => {
    const inputs = blobs().getContainerClient(uniqueName('corpus-inputs'));
    await inputs.create();
    const put = async (name: string, body: string) => inputs.getBlockBlobClient(name).upload(body, Buffer.byteLength(body));
    await put('object.json', '{"not":"an array"}');
    await put('floats.json', '[1, 2.5, 3]');
    // One item nested 100,000 levels: the nesting rule holds for blob items as for inline ones, and no stack overflows.
    await put('deep.json', `[${'['.repeat(100_000)}${']'.repeat(100_000)}]`);
    // 64 levels from the array, like an inline item 64 levels below the submission: refused too (the limit counts the submission).
    await put('deep64.json', `[${'['.repeat(63)}1${']'.repeat(63)}]`);
    const good = Array.from({ length: 1_000 }, (_, i) => i + 1);
    const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
    const json = (value: unknown) => encodeQueueMessage(value);

    // Bad queue submissions: [raw message text, job id the rejection is recorded under (undefined: m-<message id>), code].
    const queueCorpus: Array<[string, string | undefined, string]> = [
      [JSON.stringify({ workType: 'sum', items: [1] }), undefined, 'NOT_BASE64'],
      ['%%% not base64 %%%', undefined, 'NOT_BASE64'],
      [b64('hello, world'), undefined, 'INVALID_JSON'],
      [Buffer.from([0xc3, 0x28, 0xa0]).toString('base64'), undefined, 'INVALID_JSON'],
      [json([1, 2, 3]), undefined, 'NOT_AN_OBJECT'],
      [json(null), undefined, 'NOT_AN_OBJECT'],
      [json({ jobId: 'c-no-type', items: [1] }), 'c-no-type', 'SCHEMA_VIOLATION'],
      [json({ jobId: 'c-num-type', workType: 42, items: [1] }), 'c-num-type', 'SCHEMA_VIOLATION'],
      [json({ jobId: 'c-unknown', workType: 'fft', items: [1] }), 'c-unknown', 'UNKNOWN_WORK_TYPE'],
      [json({ jobId: 'c-empty', workType: 'sum', items: [] }), 'c-empty', 'ITEMS_EMPTY'],
      [json({ jobId: 'c-neither', workType: 'sum' }), 'c-neither', 'ITEMS_MISSING'],
      [json({ jobId: 'c-both', workType: 'sum', items: [1], itemsBlob: `${inputs.containerName}/object.json` }), 'c-both', 'ITEMS_AMBIGUOUS'],
      [json({ jobId: 'a/b', workType: 'sum', items: [1] }), undefined, 'INVALID_JOB_ID'],
      [json({ jobId: '..', workType: 'sum', items: [1] }), undefined, 'INVALID_JOB_ID'],
      [json({ jobId: 'a%2Fb', workType: 'sum', items: [1] }), undefined, 'INVALID_JOB_ID'],
      [json({ jobId: 'x'.repeat(65), workType: 'sum', items: [1] }), undefined, 'INVALID_JOB_ID'],
      [json({ jobId: 'c-float', workType: 'sum', items: [1, 1.5] }), 'c-float', 'ITEM_REJECTED'],
      [json({ jobId: 'c-word', workType: 'sum', items: ['12abc'] }), 'c-word', 'ITEM_REJECTED'],
      [json({ jobId: 'c-wc-dots', workType: 'wordcount', items: ['texts/../etc/passwd'] }), 'c-wc-dots', 'ITEM_REJECTED'],
      [json({ jobId: 'c-noblob', workType: 'sum', itemsBlob: `${inputs.containerName}/missing.json` }), 'c-noblob', 'ITEMS_BLOB_NOT_FOUND'],
      [json({ jobId: 'c-blobdots', workType: 'sum', itemsBlob: 'inputs/../x.json' }), 'c-blobdots', 'INVALID_ITEMS_BLOB'],
      [json({ jobId: 'c-ownblob', workType: 'sum', itemsBlob: `${h.env.JOB_RESULTS_CONTAINER}/records/x.json` }), 'c-ownblob', 'INVALID_ITEMS_BLOB'],
      [json({ jobId: 'c-chunk0', workType: 'sum', items: [1], options: { chunkSize: 0 } }), 'c-chunk0', 'OPTION_OUT_OF_RANGE'],
      [json({ jobId: 'c-attempts', workType: 'sum', items: [1], options: { attempts: 9 } }), 'c-attempts', 'OPTION_OUT_OF_RANGE'],
      [json({ jobId: 'c-extra', workType: 'sum', items: [1], priority: 'high' }), 'c-extra', 'SCHEMA_VIOLATION'],
      [json({ jobId: 'c-chunks', workType: 'noop', items: new Array(10_001).fill(0), options: { chunkSize: 1 } }), 'c-chunks', 'ITEMS_TOO_MANY'],
    ];
    const goodMessage = json({ jobId: 'corpus-good', workType: 'sum', items: good, options: { chunkSize: 100 } });
    const sentBad: Array<{ text: string; id: string; code: string }> = [];
    // The good job first, so the later different submission under its id is the duplicate.
    await h.jobsQueue.sendMessage(goodMessage);
    await passUntilQueueEmpty();
    for (const [text, jobId, code] of queueCorpus) {
      const sent = await h.jobsQueue.sendMessage(text);
      sentBad.push({ text, id: jobId ?? `m-${sent.messageId}`, code });
    }
    const dup = await h.jobsQueue.sendMessage(json({ jobId: 'corpus-good', workType: 'sum', items: [666] }));
    sentBad.push({ text: json({ jobId: 'corpus-good', workType: 'sum', items: [666] }), id: `m-${dup.messageId}`, code: 'DUPLICATE_JOB_ID' });
    // The same good submission delivered again is a no-op, not a rejection.
    await h.jobsQueue.sendMessage(goodMessage);
    // Accepted by the pass, refused by the planner: reported as failed jobs with the reason.
    await h.jobsQueue.sendMessage(json({ jobId: 'c-blob-object', workType: 'sum', itemsBlob: `${inputs.containerName}/object.json` }));
    await h.jobsQueue.sendMessage(json({ jobId: 'c-blob-floats', workType: 'sum', itemsBlob: `${inputs.containerName}/floats.json` }));
    await h.jobsQueue.sendMessage(json({ jobId: 'c-blob-deep', workType: 'noop', itemsBlob: `${inputs.containerName}/deep.json` }));
    await h.jobsQueue.sendMessage(json({ jobId: 'c-blob-deep64', workType: 'noop', itemsBlob: `${inputs.containerName}/deep64.json` }));

    // HTTP submissions of bad input are refused at once with the code (the answer is the record).
    const httpCorpus: Array<[string, number, string]> = [
      ['{"workType": "sum", "items": [1,', 400, 'INVALID_JSON'],
      ['"just a string"', 400, 'NOT_AN_OBJECT'],
      [JSON.stringify({ jobId: 'a/../b', workType: 'sum', items: [1] }), 400, 'INVALID_JOB_ID'],
      [JSON.stringify({ workType: 'matrix', items: [1] }), 400, 'UNKNOWN_WORK_TYPE'],
      [JSON.stringify({ workType: 'sum', items: [] }), 400, 'ITEMS_EMPTY'],
      [JSON.stringify({ workType: 'sum', items: [true] }), 400, 'ITEM_REJECTED'],
      [JSON.stringify({ workType: 'sum', itemsBlob: `${inputs.containerName}/nothing.json` }), 400, 'ITEMS_BLOB_NOT_FOUND'],
      [JSON.stringify({ workType: 'sum', items: [1], options: { deadlineSeconds: 1 } }), 400, 'OPTION_OUT_OF_RANGE'],
      [JSON.stringify({ workType: 'noop', items: new Array(20_000).fill('abc') }), 413, 'PAYLOAD_TOO_LARGE'],
      [JSON.stringify({ jobId: 'corpus-good', workType: 'sum', items: [1] }), 409, 'DUPLICATE_JOB_ID'],
    ];
    for (const [body, status, code] of httpCorpus) {
      const res = await h.request('POST', '/api/jobs', body);
      assert.equal(res.status, status, `${body.slice(0, 60)}: ${res.text}`);
      assert.equal((res.json as { code: string }).code, code, body.slice(0, 60));
    }
    assert.ok(queueCorpus.length + 1 + httpCorpus.length >= 25);

    await passUntilQueueEmpty();

    for (const bad of sentBad) {
      const res = await h.request('GET', `/api/jobs/${bad.id}`);
      assert.equal(res.status, 200, `${bad.code}: ${res.text}`);
      const view = res.json as JobView;
      assert.equal(view.status, 'rejected', `${bad.code}: ${res.text}`);
      assert.equal(view.error?.code, bad.code, `${bad.text.slice(0, 60)}: ${res.text}`);
      assert.ok((view.error?.message ?? '').length > 10);
      assert.equal(view.epoch, epoch());
    }
    const rejected = await h.request('GET', '/api/jobs?status=rejected');
    const rejectedIds = new Set((rejected.json as { jobs: Array<{ jobId: string }> }).jobs.map((j) => j.jobId));
    for (const bad of sentBad) assert.ok(rejectedIds.has(bad.id), `${bad.id} listed as rejected`);

    // The poison queue keeps every original message, byte for byte, once.
    const poisoned: string[] = [];
    for (;;) {
      const got = await h.poisonQueue.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 60 });
      if (got.receivedMessageItems.length === 0) break;
      poisoned.push(...got.receivedMessageItems.map((m) => m.messageText));
    }
    assert.deepEqual([...poisoned].sort(), sentBad.map((b) => b.text).sort());

    const goodView = await finished('corpus-good');
    assert.equal(goodView.status, 'completed');
    assert.deepEqual(goodView.result, { count: 1_000, sum: 500_500, min: 1, max: 1_000 });
    for (const [jobId, code] of [
      ['c-blob-object', 'ITEMS_BLOB_INVALID'],
      ['c-blob-floats', 'ITEM_REJECTED'],
      ['c-blob-deep', 'NESTING_TOO_DEEP'],
      ['c-blob-deep64', 'NESTING_TOO_DEEP'],
    ]) {
      const view = await finished(jobId ?? '');
      assert.equal(view.status, 'failed', JSON.stringify(view));
      assert.equal(view.error?.code, code);
      // A public record: the message only, never a stack or a server path.
      assert.doesNotMatch(view.error?.message ?? '', /\bat \/|\/dist\/|node:internal|Stack:/, view.error?.message);
    }
  });

  async function storedBlobs(jobId: string): Promise<string[]> {
    const container = blobs().getContainerClient(appRoot().jobs.settings.jobs.resultsContainer);
    const names: string[] = [];
    for await (const b of container.listBlobsFlat({ prefix: `jobs/${jobId}/` })) names.push(b.name);
    if (await container.getBlobClient(`records/${jobId}.json`).exists()) names.push(`records/${jobId}.json`);
    return names;
  }

  it('purges a finished job on request (history, records, blobs; the id is free again) and refuses a pending one', async () => {
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'purge-me', workType: 'sum', items: [1, 2, 3], options: { chunkSize: 2 } }))).status, 202);
    await passUntilQueueEmpty();
    assert.equal((await finished('purge-me')).status, 'completed');
    assert.ok((await storedBlobs('purge-me')).length >= 3, 'the job stored its chunks, results and summary');

    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'still-pending', workType: 'noop', items: [1] }))).status, 202);
    const refused = await h.request('DELETE', '/api/jobs/still-pending?purge=true');
    assert.equal(refused.status, 409);
    assert.equal((refused.json as { code: string }).code, 'JOB_NOT_FINISHED');
    assert.equal((await h.request('GET', '/api/jobs/still-pending')).status, 200, 'a refused purge changes nothing');

    const purged = await h.request('DELETE', '/api/jobs/purge-me?purge=true');
    assert.equal(purged.status, 200, purged.text);
    const answer = purged.json as { jobId: string; purged: boolean; instances: number; blobs: number };
    assert.equal(answer.purged, true);
    assert.equal(answer.instances, 1);
    assert.ok(answer.blobs >= 3);
    assert.equal((await h.request('GET', '/api/jobs/purge-me')).status, 404);
    assert.deepEqual(await storedBlobs('purge-me'), []);
    assert.equal(await durableOrchestrationClient(h.client).getStatus(instanceIdFor('purge-me')), undefined, 'its Durable history is gone');
    // The id is free: a different job may use it now.
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'purge-me', workType: 'noop', items: [7] }))).status, 202);
    await passUntilQueueEmpty();
    assert.equal((await finished('purge-me')).status, 'completed');
  });

  it('the retention sweep purges finished jobs older than the retention period, and nothing else', async () => {
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'old-enough', workType: 'noop', items: [1, 2] }))).status, 202);
    await passUntilQueueEmpty();
    assert.equal((await finished('old-enough')).status, 'completed');
    assert.equal((await h.request('POST', '/api/jobs', JSON.stringify({ jobId: 'pending-forever', workType: 'noop', items: [1] }))).status, 202);
    const c = appRoot().jobs;
    const orchestrations = durableOrchestrationClient(h.client);
    const at = (days: number): Retention =>
      new Retention({
        store: c.store,
        logger: memoryLogger('retention'),
        statusPath: jobStatusPath,
        now: () => new Date(Date.now() + days * 86_400_000),
      });
    assert.deepEqual(await at(0).purgeExpired(orchestrations, 30), [], 'nothing is 30 days old yet');
    assert.deepEqual(await at(29).purgeExpired(orchestrations, 0), [], 'retention 0 keeps everything');
    const purged = await at(31).purgeExpired(orchestrations, 30);
    assert.ok(purged.includes('old-enough'), JSON.stringify(purged));
    assert.ok(!purged.includes('pending-forever'), 'a pending job is never purged');
    assert.equal((await h.request('GET', '/api/jobs/old-enough')).status, 404);
    assert.deepEqual(await storedBlobs('old-enough'), []);
    assert.equal((await h.request('GET', '/api/jobs/pending-forever')).status, 200);
  });
});
