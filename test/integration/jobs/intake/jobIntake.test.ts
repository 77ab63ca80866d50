/**
 * The leader's intake pass with the real Durable backend (development host) and Azurite: what
 * happens around failures, aborts and redeliveries. Faults are injected at the narrow seams
 * (OrchestrationClient, the jobs queue client), nothing else is faked.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';

import { BlobServiceClient } from '@azure/storage-blob';
import { type QueueClient, type QueueReceiveMessageResponse, QueueServiceClient } from '@azure/storage-queue';

import { appRoot } from '../../../../shared/app/appRoot';
import { DEFAULTS } from '../../../../shared/config/settings';
import { JobService } from '../../../../shared/jobs/api/JobService';
import { InputContainers } from '../../../../shared/jobs/input/InputContainers';
import { BlobInputStore } from '../../../../shared/jobs/input/InputStore';
import { type FirstWindow, INTAKE } from '../../../../shared/jobs/intake/intakeTerms';
import { type IntakeReport, JobIntake } from '../../../../shared/jobs/intake/JobIntake';
import { instanceIdFor } from '../../../../shared/jobs/jobIds';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { encodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { fence } from '../../../../shared/jobs/run/fence';
import { durableOrchestrationClient, type OrchestrationClient, runOf } from '../../../../shared/jobs/run/OrchestrationClient';
import { type JobStore, type StartRecord } from '../../../../shared/jobs/store/JobStore';
import { eventShapeProblems } from '../../../../shared/observability/events';
import { memoryLogger } from '../../../../shared/observability/log';
import { noopWorkType } from '../../../../shared/worktypes/noopWorkType';
import { builtInWorkTypes, type WorkTypeRegistry, workTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { azuriteConnectionString, uniqueName } from '../../../support/env';
import { type JobsHost, startJobsHost } from '../support/jobsHost';

describe('job intake pass (development host, Durable backend, Azurite)', () => {
  let h: JobsHost;
  let orchestrations: OrchestrationClient;
  let soloStarts: OrchestrationClient;
  const ctx = (signal = new AbortController().signal, onProgress: () => void = () => undefined) => ({ epoch: 11, holder: 'intake-test', signal, progress: onProgress });

  before(async () => {
    h = await startJobsHost('intake');
    orchestrations = durableOrchestrationClient(h.client);
    // The lanes' own starts, one instance a job: what these tests time and count (shared runs of
    // several small jobs, StartBatches, are covered in test/integration/jobs/run/sharedRuns.test.ts).
    soloStarts = { ...orchestrations, startBatch: undefined };
    await Promise.all([h.jobsQueue.createIfNotExists(), h.poisonQueue.createIfNotExists()]);
  });
  after(async () => {
    await h.stop();
  });

  interface IntakeOverrides {
    readonly jobsQueue?: QueueClient;
    readonly poisonQueue?: QueueClient;
    readonly registry?: WorkTypeRegistry;
    readonly logger?: ReturnType<typeof memoryLogger>;
    readonly now?: () => Date;
    readonly firstWindow?: FirstWindow;
    readonly store?: JobStore;
  }

  function intake(overrides: IntakeOverrides = {}): JobIntake {
    const c = appRoot().jobs;
    return new JobIntake({
      jobsQueue: overrides.jobsQueue ?? h.jobsQueue,
      poisonQueue: overrides.poisonQueue ?? h.poisonQueue,
      store: overrides.store ?? c.store,
      registry: overrides.registry ?? workTypes,
      inputContainers: new InputContainers(c.settings.jobs.inputContainers, [c.settings.jobs.resultsContainer]),
      logger: overrides.logger ?? memoryLogger('intake'),
      ...(overrides.now === undefined ? {} : { now: overrides.now }),
      ...(overrides.firstWindow === undefined ? {} : { firstWindow: overrides.firstWindow }),
    });
  }

  it('reports a jobs queue that holds messages no receive returns (a raw control character on Azurite), every 5 minutes', async () => {
    const fresh = QueueServiceClient.fromConnectionString(azuriteConnectionString()).getQueueClient(uniqueName('intake-cc'));
    await fresh.create();
    // Azure refuses this at send; Azurite keeps it and from then on answers every receive of the queue with nothing.
    await fresh.sendMessage('{"jobId":"bad\u0001id"}');
    await fresh.sendMessage(encodeQueueMessage({ jobId: 'behind-the-bad-one', workType: 'noop', items: [1] }));
    const base = Date.parse('2026-01-01T00:00:00.000Z');
    let now = base;
    const logger = memoryLogger('intake');
    const pass = intake({ jobsQueue: fresh, logger, now: () => new Date(now) });
    const reports = (): Array<Record<string, unknown>> => logger.lines.filter((l) => l.event === 'intake.queue_unreadable');
    for (let seconds = 0; seconds <= 80; seconds += 10) {
      now = base + seconds * 1000;
      assert.equal((await pass.runPass(ctx(), orchestrations)).received, 0);
    }
    assert.deepEqual(reports(), [], 'not while a dead leader could still be holding the messages (60 s)');
    now = base + 125_000;
    await pass.runPass(ctx(), orchestrations);
    assert.equal(reports().length, 1);
    const report = reports()[0] ?? {};
    assert.equal(report.level, 'error');
    assert.equal(report.code, 'JOBS_QUEUE_UNREADABLE');
    assert.equal(report.queue, fresh.name);
    assert.equal(report.messages, 2);
    assert.match(String(report.action), /control character/);
    assert.match(String(report.action), new RegExp(`az storage message clear --queue-name ${fresh.name}`));
    now = base + 200_000;
    await pass.runPass(ctx(), orchestrations);
    assert.equal(reports().length, 1, 'not repeated within 5 minutes');
    now = base + 430_000;
    await pass.runPass(ctx(), orchestrations);
    assert.equal(reports().length, 2, 'repeated while the state lasts');
    await fresh.delete();
  });

  it('reports nothing for a jobs queue that is empty or reads', async () => {
    const fresh = QueueServiceClient.fromConnectionString(azuriteConnectionString()).getQueueClient(uniqueName('intake-ok'));
    await fresh.create();
    const base = Date.parse('2026-01-01T00:00:00.000Z');
    let now = base;
    const logger = memoryLogger('intake');
    const pass = intake({ jobsQueue: fresh, logger, now: () => new Date(now) });
    for (let seconds = 0; seconds <= 400; seconds += 40) {
      now = base + seconds * 1000;
      if (seconds === 200) await fresh.sendMessage(encodeQueueMessage({ jobId: 'reads-fine', workType: 'noop', items: [1] }));
      await pass.runPass(ctx(), orchestrations);
    }
    assert.deepEqual(logger.lines.filter((l) => l.event === 'intake.queue_unreadable'), []);
    assert.ok(await orchestrations.getStatus(instanceIdFor('reads-fine')), 'the good message was taken');
    await fresh.delete();
  });

  it('starts one orchestration per job id, stamped with the epoch, and treats a redelivered submission as done', async () => {
    const message = encodeQueueMessage({ jobId: 'once', workType: 'noop', items: [1, 2] });
    await h.jobsQueue.sendMessage(message);
    await h.jobsQueue.sendMessage(message);
    let progressCalls = 0;
    const report = await intake().runPass(
      ctx(undefined, () => {
        progressCalls += 1;
      }),
      orchestrations,
    );
    assert.deepEqual(intakeCounts(report), { received: 2, started: 1, alreadyStarted: 1, rejected: 0, retryLater: 0 });
    assert.ok(progressCalls >= 3, 'progress reported per message and per batch');
    const status = await orchestrations.getStatus(instanceIdFor('once'));
    assert.equal((status?.input as { run: { epoch: number } }).run.epoch, 11);
    assert.equal((await h.jobsQueue.getProperties()).approximateMessagesCount, 0);
  });

  it('reads no instance for a job without a start record', async () => {
    const c = appRoot().jobs;
    // Each status read of the job's instance, and whether the job had its start record by then.
    const asked: Array<{ id: string; recorded: boolean }> = [];
    const watching = (store: JobStore, jobId: string): OrchestrationClient => ({
      ...orchestrations,
      getStatus: async (instanceId) => {
        if (instanceId === instanceIdFor(jobId)) asked.push({ id: instanceId, recorded: (await store.readStart(jobId)) !== undefined });
        return orchestrations.getStatus(instanceId);
      },
    });
    const body = { jobId: 'no-instance-read', workType: 'noop', items: [1, 2] };
    await h.jobsQueue.sendMessage(encodeQueueMessage(body));
    assert.equal((await intake().runPass(ctx(), watching(c.store, 'no-instance-read'))).started, 1);
    assert.deepEqual(asked.filter((a) => !a.recorded), [], 'read the instance of a job with no start record');
  });

  it('creates a new submission\'s start record without reading it first; a start already there is read then, and the submission judged against it', async () => {
    const c = appRoot().jobs;
    const jobsQueue = await freshQueue('create-first');
    const jobId = `create-first-${randomUUID()}`;
    // Each read of this job's start record, and whether its start record was there by then.
    const reads: boolean[] = [];
    const store = storeWith({
      readStart: async (id: string, signal?: AbortSignal) => {
        const found = await c.store.readStart(id, signal);
        if (id === jobId) reads.push(found !== undefined);
        return found;
      },
    });
    const pass = intake({ jobsQueue, store });
    await jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'noop', items: [1, 2] }));
    assert.deepEqual(intakeCounts(await pass.runPass(ctx(), orchestrations)), { received: 1, started: 1, alreadyStarted: 0, rejected: 0, retryLater: 0 });
    assert.deepEqual(reads, [], 'the intake read the start record of a new submission');
    const first = (await c.store.readStart(jobId))?.value;
    assert.equal(first?.state, 'active');

    // The same submission again: its start record is found at the create, read once, and seen through.
    await jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'noop', items: [1, 2] }));
    assert.deepEqual(intakeCounts(await pass.runPass(ctx(), orchestrations)), { received: 1, started: 0, alreadyStarted: 1, rejected: 0, retryLater: 0 });
    assert.deepEqual(reads, [true]);
    // A different submission under the same job id: refused as a duplicate, the job left as it was.
    const logger = memoryLogger('intake');
    await jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'noop', items: [3] }));
    // (Its marks left unlisted: a new intake's first listing would check this job's mark at once, a read of its own.)
    const report = await intake({ jobsQueue, store, logger }).runPass(ctx(), orchestrations, { listMarks: false });
    assert.deepEqual(intakeCounts(report), { received: 1, started: 0, alreadyStarted: 0, rejected: 1, retryLater: 0 });
    assert.deepEqual(reads, [true, true]);
    const rejected = logger.lines.filter((l) => l.event === 'intake.rejected');
    assert.deepEqual(rejected.map((l) => [l.submittedJobId, l.code]), [[jobId, 'DUPLICATE_JOB_ID']]);
    // (Its own run may have finished meanwhile and copied its outcome in: that is not the rejection's doing.)
    const withoutOutcome = (start: StartRecord | undefined): Omit<StartRecord, 'outcome'> | undefined => {
      if (start === undefined) return undefined;
      const { outcome: _outcome, ...rest } = start;
      return rest;
    };
    assert.deepEqual(withoutOutcome((await c.store.readStart(jobId))?.value), withoutOutcome(first), 'the job\'s start record is left as it was');
    assert.equal((await jobsQueue.peekMessages()).peekedMessageItems.length, 0);
    await clearMarks();
    await jobsQueue.delete();
  });

  it('a POST with its own job id reads no instance while its start record is active', async () => {
    const c = appRoot().jobs;
    const jobsQueue = await freshQueue('post');
    const reads: string[] = [];
    const watching: OrchestrationClient = {
      ...orchestrations,
      getStatus: (instanceId) => {
        reads.push(instanceId);
        return orchestrations.getStatus(instanceId);
      },
    };
    const service = new JobService({
      jobsQueue,
      store: c.store,
      registry: workTypes,
      inputContainers: new InputContainers([], [c.store.containerName]),
      logger: memoryLogger('submit'),
      statusPath: (jobId) => `/api/jobs/${jobId}`,
    });
    const bytes = (value: unknown): Uint8Array => new TextEncoder().encode(JSON.stringify(value));

    const body = { jobId: 'posted-own-id', workType: 'noop', items: [1, 2] };
    const first = await service.submit(bytes(body), watching);
    assert.deepEqual(first, { jobId: 'posted-own-id', location: '/api/jobs/posted-own-id', enqueued: true });
    assert.deepEqual(reads, [], 'a POST read the instance of a job without a start record');
    // Started (start record, then the run): the same POST again is answered from the start record alone.
    assert.equal((await intake({ jobsQueue }).runPass(ctx(), orchestrations)).started, 1);
    assert.deepEqual(await service.submit(bytes(body), watching), { ...first, enqueued: false });
    await assert.rejects(service.submit(bytes({ ...body, items: [3] }), watching), { code: 'DUPLICATE_JOB_ID' });
    assert.deepEqual(reads, [], 'the POSTs of a started job read no instance');
    // A start record no longer active (its start given up after its run began): the instance is read then.
    const current = await c.store.readStart('posted-own-id');
    assert.ok(current !== undefined);
    assert.notEqual(await c.store.replaceStart({ ...current.value, state: 'rejected' }, current.etag), 'conflict');
    assert.deepEqual(await service.submit(bytes(body), watching), { ...first, enqueued: false });
    assert.deepEqual(reads.splice(0), [instanceIdFor('posted-own-id')], 'the instance read behind a start record no longer active');
    const left = await jobsQueue.receiveMessages({ numberOfMessages: 32 });
    assert.equal(left.receivedMessageItems.length, 0, 'enqueued again for a job already started');
  });

  it('sends a small job\'s first window itself once the run is started, from the run\'s own items; leaves a bigger items blob to the plan', async () => {
    const c = appRoot().jobs;
    const calls: { prestaged: string[]; sent: Array<[string, number]> } = { prestaged: [], sent: [] };
    const firstWindow: FirstWindow = {
      prestage: (run, signal) => (calls.prestaged.push(run.jobId), c.activities.prestage(run, signal)),
      send: async (run, staged, signal) => {
        const sent = await c.activities.sendFirstWindow(run, staged, signal);
        calls.sent.push([run.jobId, sent]);
        return sent;
      },
    };
    const manifests = new BlobInputStore(BlobServiceClient.fromConnectionString(azuriteConnectionString()), c.settings.jobs.resultsContainer);
    const items = Array.from({ length: 30 }, (_, i) => i + 1);
    await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'first-window', workType: 'sum', items, options: { chunkSize: 10 } }));
    const passStarted = Date.now();
    assert.equal((await intake({ firstWindow }).runPass(ctx(), orchestrations)).started, 1);
    assert.deepEqual(calls.sent, [['first-window', 3]], 'the pass ends once its first windows are sent');
    // Its three chunks fit the first window: sent from the run's own items, nothing staged (the plan
    // stages them only if its wait ends with the job unfinished).
    assert.equal(await manifests.readManifest('first-window'), undefined, 'a job that fits its first window was staged at intake');
    const started = await orchestrations.getStatus(instanceIdFor('first-window'));
    const prestaged = (started?.input as { prestaged?: { firstWindowAt?: string; unstaged?: boolean } } | undefined)?.prestaged;
    assert.equal(prestaged?.unstaged, true, JSON.stringify(prestaged));
    assert.ok(Date.parse(prestaged.firstWindowAt ?? '') >= passStarted - 5_000, JSON.stringify(prestaged));
    const view = await eventuallyFinished('first-window');
    assert.equal(view.status, 'completed');
    assert.deepEqual(view.result, { count: 30, sum: 465, min: 1, max: 30 });

    // Over INTAKE.firstWindowMaxBytes: the intake stages nothing; the plan does it all.
    const inputs = BlobServiceClient.fromConnectionString(azuriteConnectionString()).getContainerClient(uniqueName('e2e-inputs'));
    await inputs.createIfNotExists();
    const big = JSON.stringify(Array.from({ length: 200_000 }, (_, i) => i));
    assert.ok(Buffer.byteLength(big) > INTAKE.firstWindowMaxBytes);
    await inputs.getBlockBlobClient('big.json').upload(big, Buffer.byteLength(big));
    await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'no-first-window', workType: 'noop', itemsBlob: `${inputs.containerName}/big.json` }));
    assert.equal((await intake({ firstWindow }).runPass(ctx(), orchestrations)).started, 1);
    assert.deepEqual(calls.prestaged, ['first-window'], 'the big input was staged at intake');
    assert.equal((await eventuallyFinished('no-first-window')).status, 'completed');
    assert.equal((await manifests.readManifest('no-first-window'))?.firstWindowAt, undefined, 'the plan staged it');
  });

  it('a first window the leader failed to send goes out from the plan once its chunks are unclaimed (15 s), and the job completes exactly', async () => {
    const c = appRoot().jobs;
    const logger = memoryLogger('intake');
    const firstWindow: FirstWindow = {
      prestage: (run, signal) => c.activities.prestage(run, signal),
      send: () => Promise.reject(new Error('queue unreachable')),
    };
    await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'window-lost', workType: 'sum', items: [5, 6, 7], options: { chunkSize: 1 } }));
    const posted = Date.now();
    assert.equal((await intake({ logger, firstWindow }).runPass(ctx(), orchestrations)).started, 1);
    const failed = logger.lines.filter((l) => l.event === 'intake.first_window_failed');
    assert.deepEqual(failed.map((l) => [l.level, l.jobId, l.stage]), [['warn', 'window-lost', 'sending']]);
    const view = await eventuallyFinished('window-lost');
    assert.equal(view.status, 'completed');
    assert.deepEqual(view.result, { count: 3, sum: 18, min: 5, max: 7 });
    assert.ok(Date.now() - posted >= 14_000, 'the chunks went out before they were unclaimed for 15 s (a duplicate send)');
  });

  it('starts a burst of submissions a few at once, the messages naming one job id one after another', async () => {
    const fresh = await freshQueue('burst');
    for (let i = 0; i < 8; i++) await fresh.sendMessage(encodeQueueMessage({ jobId: `burst-${i}`, workType: 'noop', items: [i] }));
    const twin = encodeQueueMessage({ jobId: 'burst-twin', workType: 'noop', items: [1] });
    await fresh.sendMessage(twin);
    await fresh.sendMessage(twin);
    let inFlight = 0;
    let most = 0;
    const counting: OrchestrationClient = {
      ...soloStarts,
      start: async (instanceId, input) => {
        most = Math.max(most, ++inFlight);
        try {
          // Long enough for the others of the batch to reach their starts meanwhile.
          await new Promise((r) => setTimeout(r, 100));
          return await orchestrations.start(instanceId, input);
        } finally {
          inFlight -= 1;
        }
      },
    };
    const report = await intake({ jobsQueue: fresh }).runPass(ctx(), counting);
    assert.deepEqual(intakeCounts(report), { received: 10, started: 9, alreadyStarted: 1, rejected: 0, retryLater: 0 }, 'the twin found its start');
    assert.ok(most > 1 && most <= INTAKE.messageConcurrency, `starts in flight at once: ${most}`);
    assert.equal((await fresh.getProperties()).approximateMessagesCount, 0);
  });

  it('stops taking submissions at the pass budget: the ones no lane began go to the next pass, which takes them first', async () => {
    await clearMarks();
    const fresh = await freshQueue('carry');
    const n = INTAKE.messageConcurrency * 2;
    for (let i = 0; i < n; i++) await fresh.sendMessage(encodeQueueMessage({ jobId: `carry-${i}`, workType: 'noop', items: [i] }));
    // Messages handed out by receives (an empty receive, the pass looking ahead, hands out none).
    let received = 0;
    const counted = new Proxy(fresh, {
      get(target, key, receiver) {
        const value: unknown = Reflect.get(target, key, receiver);
        if (key !== 'receiveMessages' || typeof value !== 'function') return value;
        return async (...args: unknown[]): Promise<unknown> => {
          const answer = (await (value as (...a: unknown[]) => Promise<QueueReceiveMessageResponse>).apply(target, args));
          received += answer.receivedMessageItems.length;
          return answer;
        };
      },
    });
    // Each start outlasts the whole budget (a loaded backend): one round of lanes spends it.
    const slowMs = INTAKE.passBudgetMs + 500;
    const slow: OrchestrationClient = {
      ...soloStarts,
      start: async (instanceId, input) => {
        await new Promise((r) => setTimeout(r, slowMs));
        return orchestrations.start(instanceId, input);
      },
    };
    const pass = intake({ jobsQueue: counted });
    let again = 0;
    const passCtx = { ...ctx(), again: () => void (again += 1) };
    // Passes until every submission is taken (a loaded machine may spend a pass's budget before its
    // receive: what is asserted is the split, not when it falls).
    const reports: IntakeReport[] = [];
    // (More passes than the split needs: the admission bound, INTAKE.maxStartsUnderWay, waits for plans.)
    while (reports.reduce((sum, r) => sum + r.received, 0) < n && reports.length < 20) reports.push(await pass.runPass(passCtx, slow));
    const taken = reports.map((r) => r.received).filter((received) => received > 0);
    assert.equal(taken.reduce((sum, k) => sum + k, 0), n);
    assert.ok(taken.length >= 2 && taken.every((k) => k <= INTAKE.messageConcurrency), `taken per pass: ${taken.join(', ')} (at most a round of lanes each)`);
    assert.equal(received, n, 'each received once: the kept submissions were taken without receiving them again (their receipts hold)');
    assert.ok(again >= 1, 'the next pass is asked for at once');
    // Later passes find nothing kept and an empty queue; a start still under way when its pass ended
    // (past INTAKE.settleGraceMs) counts in the pass it ends in.
    const later: IntakeReport[] = [];
    const startedSoFar = (): number => [...reports, ...later].reduce((sum, r) => sum + r.started, 0);
    for (let i = 0; i < 5 && (later.length === 0 || startedSoFar() < n); i++) later.push(await pass.runPass(passCtx, soloStarts));
    assert.deepEqual(later.map((r) => r.received), later.map(() => 0));
    assert.equal(startedSoFar(), n);
    assert.equal((await fresh.getProperties()).approximateMessagesCount, 0);
    const started = await Promise.all(Array.from({ length: n }, (_, i) => orchestrations.getStatus(instanceIdFor(`carry-${i}`))));
    assert.equal(started.filter((s) => s !== undefined).length, n, 'every job started once');
    await fresh.delete();
  });

  it('stages inputs at intake for at most firstWindowBudgetMs per pass: the rest of a burst is staged by its plans; a job that needs no staging is prepared whatever the budget', async () => {
    const c = appRoot().jobs;
    const fresh = await freshQueue('budget');
    // One-item chunks, more than the first window (JOB_DISPATCH_WINDOW's default), so staged; then jobs that fit it, left unstaged.
    const wide = Array.from({ length: DEFAULTS.dispatchWindow + 2 }, (_, i) => i);
    for (let i = 0; i < 8; i++) await fresh.sendMessage(encodeQueueMessage({ jobId: `budget-${i}`, workType: 'noop', items: wide, options: { chunkSize: 1 } }));
    for (let i = 0; i < 8; i++) await fresh.sendMessage(encodeQueueMessage({ jobId: `budget-small-${i}`, workType: 'noop', items: [i] }));
    const staging: string[] = [];
    const firstWindow: FirstWindow = {
      // Each staging takes longer than the whole budget (a loaded storage account).
      prestage: async (run, signal, mayStage) => {
        const prepared = await c.activities.prestage(run, signal, mayStage);
        if (prepared !== undefined && prepared.unstaged !== true) {
          staging.push(run.jobId);
          await new Promise((r) => setTimeout(r, INTAKE.firstWindowBudgetMs + 50));
        }
        return prepared;
      },
      send: (run, staged, signal) => c.activities.sendFirstWindow(run, staged, signal),
    };
    const report = await intake({ jobsQueue: fresh, firstWindow }).runPass(ctx(), soloStarts);
    assert.equal(report.started, 16);
    // The first few start staging together, before any time is spent; once it is, the others skip it
    // (here all 16 start at once: the bound on the rest is JobActivities' `mayStage`, tested there).
    assert.ok(staging.length >= 1 && staging.length <= 8, `staged at intake: ${staging.join(', ')}`);
    const prepared = async (jobId: string): Promise<{ unstaged?: boolean } | undefined> =>
      ((await orchestrations.getStatus(instanceIdFor(jobId)))?.input as { prestaged?: { unstaged?: boolean } } | undefined)?.prestaged;
    for (let i = 0; i < 8; i++) {
      assert.equal((await prepared(`budget-small-${i}`))?.unstaged, true, `budget-small-${i} was not prepared at intake`);
      assert.equal((await prepared(`budget-${i}`)) !== undefined, staging.includes(`budget-${i}`), `budget-${i}`);
    }
  });

  it('the run\'s plan removes its start\'s mark once past its fence: no intake pass has to read the start again', async () => {
    const c = appRoot().jobs;
    const jobsQueue = await freshQueue('confirm');
    await jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'plan-confirms', workType: 'sum', items: [1, 2, 3] }));
    const marked = async (): Promise<boolean> => (await c.store.listUnconfirmed()).some((m) => m.jobId === 'plan-confirms');
    // Whether the start was marked when its Durable start was made (after it, the run may remove the mark at once).
    let markedWhenMade: boolean | undefined;
    const checking: OrchestrationClient = {
      ...soloStarts,
      start: async (instanceId, input) => {
        markedWhenMade = await marked();
        return soloStarts.start(instanceId, input);
      },
    };
    assert.equal((await intake({ jobsQueue }).runPass(ctx(), checking)).started, 1);
    assert.equal(markedWhenMade, true, 'the intake marks the start before making it');
    // No intake pass runs from here on: only the run itself can remove the mark.
    assert.equal((await eventuallyFinished('plan-confirms')).status, 'completed');
    assert.equal(await marked(), false, 'the plan removed the mark');
  });

  /**
   * A marked start whose gen-1 instance Durable shows Pending whenever asked (created at `createdAt`
   * of the held clock), run through passes every second up to `untilS`: the times (s) its instance was read.
   */
  async function checkTimes(jobId: string, createdAt: 'fresh' | 'at-start', untilS: number): Promise<number[]> {
    const c = appRoot().jobs;
    const run = await recordStart(jobId);
    await clearMarks();
    // A mark's age is the intake's own: from the listing that first shows it (t0). A listing of this
    // term comes first (at -2 s), so the mark is not one the term found at its start (checked at once).
    const t0 = Date.now();
    let offset = -INTAKE.checkEveryMs;
    const now = (): Date => new Date(t0 + offset);
    const checkedAt: number[] = [];
    const pendingForever: OrchestrationClient = {
      ...orchestrations,
      getStatus: (instanceId) => {
        if (instanceId !== instanceIdFor(jobId)) return orchestrations.getStatus(instanceId);
        checkedAt.push(offset / 1000);
        const created = createdAt === 'fresh' ? now() : new Date(t0);
        return Promise.resolve({ instanceId, runtimeStatus: 'Pending', input: { run }, output: null, customStatus: null, createdTime: created, lastUpdatedTime: created });
      },
    };
    const pass = intake({ jobsQueue: await freshQueue('backoff'), now });
    await pass.runPass(ctx(), pendingForever);
    await c.store.markUnconfirmed(jobId, run.startId);
    for (offset = 0; offset <= untilS * 1000; offset += 1_000) await pass.runPass(ctx(), pendingForever);
    return checkedAt;
  }

  it('under a lag the marks show (starts confirmed 18 s after their marks), waits that long to check and twice it to take a Pending start for stuck', async () => {
    const c = appRoot().jobs;
    await clearMarks();
    const run = await recordStart('lag-pending');
    // The other start: on its way (freshly Pending whenever checked) until its plan removes its mark.
    const other = await recordStart('lag-confirmed');
    // Marked after this term's first listing (at -2 s), first seen by the listing at 0 s (t0).
    const t0 = Date.now();
    let offset = -INTAKE.checkEveryMs;
    const now = (): Date => new Date(t0 + offset);
    const checkedAt: number[] = [];
    const pendingSinceT0: OrchestrationClient = {
      ...orchestrations,
      getStatus: (instanceId) => {
        if (instanceId === instanceIdFor('lag-confirmed')) {
          const fresh = now();
          const input = { run: other };
          return Promise.resolve({ instanceId, runtimeStatus: 'Pending', input, output: null, customStatus: null, createdTime: fresh, lastUpdatedTime: fresh });
        }
        if (instanceId !== instanceIdFor('lag-pending')) return orchestrations.getStatus(instanceId);
        checkedAt.push(offset / 1000);
        return Promise.resolve({ instanceId, runtimeStatus: 'Pending', input: { run }, output: null, customStatus: null, createdTime: new Date(t0), lastUpdatedTime: new Date(t0) });
      },
    };
    const pass = intake({ jobsQueue: await freshQueue('lag'), now });
    await pass.runPass(ctx(), pendingSinceT0);
    await Promise.all([c.store.markUnconfirmed('lag-pending', run.startId), c.store.markUnconfirmed('lag-confirmed', other.startId)]);
    const generation = async (): Promise<number | undefined> => (await c.store.readStart('lag-pending'))?.value.generation;
    for (offset = 0; offset <= 33_000; offset += 1_000) {
      // The other start's plan confirms it at 19 s: listed (fresh) from 0 s, last seen at 18 s.
      if (offset === 19_000) await unmark('lag-confirmed');
      await pass.runPass(ctx(), pendingSinceT0);
    }
    // Before the lag was seen: checked at 4, 8 and 14 s (3, 6 s back-off); from 20 s on, a check is due
    // only once the mark is as old as the lag (it is), and stuck only past 36 s, not 30 s.
    assert.deepEqual(checkedAt.slice(0, 3), [4, 8, 14], `checked at ${checkedAt.join(', ')} s`);
    assert.equal(await generation(), 1, `not taken for stuck at 30-33 s (checked at ${checkedAt.join(', ')} s)`);
    // (Until the first start again: the new start's real instance is not on the held clock.)
    for (offset = 34_000; offset <= 40_000 && (await generation()) === 1; offset += 1_000) await pass.runPass(ctx(), pendingSinceT0);
    assert.equal(await generation(), 2, `started again once past twice the lag (checked at ${checkedAt.join(', ')} s)`);
    assert.ok((checkedAt.at(-1) ?? 0) >= 36, `at ${checkedAt.at(-1)} s, past 36 s`);
    await unmark('lag-pending');
  });

  it('past maxStartsUnderWay, receives no submission (the burst waits on the jobs queue) and takes them as room opens', async () => {
    const c = appRoot().jobs;
    await clearMarks();
    const jobsQueue = await freshQueue('admit');
    const ids = [`admit-${randomUUID()}`, `admit-${randomUUID()}`];
    let offset = 0;
    const now = (): Date => new Date(Date.now() + offset);
    const logger = memoryLogger('intake', 'info');
    const pass = intake({ jobsQueue, now, logger });
    // This term's first listing comes before the starts under way (a term checks the marks it finds at once).
    await pass.runPass(ctx(), orchestrations);
    const underWay = await fillAdmissionBound('admit');
    for (const jobId of ids) await jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'noop', items: [1] }));
    offset += INTAKE.checkEveryMs;
    const first = await pass.runPass(ctx(), orchestrations);
    assert.equal(first.received, 0, 'none received while the starts under way fill the bound');
    assert.equal(first.heldBack, true, 'the report says the bound held submissions back (the leader stays busy)');
    assert.equal((await jobsQueue.peekMessages({ numberOfMessages: 32 })).peekedMessageItems.length, 2, 'the burst waits on the queue');
    for (const jobId of ids) assert.equal(await c.store.readStart(jobId), undefined, 'nothing recorded for them yet');
    // One plan ran (its mark goes): the next listing (2 s on) sees room for one start.
    await unmark(underWay[0] ?? '');
    const started = async (): Promise<number> => {
      offset += INTAKE.checkEveryMs;
      return (await pass.runPass(ctx(), orchestrations)).started;
    };
    assert.equal(await started(), 1, 'room for one: one begun, the other left for later');
    await Promise.all(underWay.map((jobId) => unmark(jobId)));
    let more = 0;
    for (let i = 0; i < 3 && more === 0; i++) more += await started();
    assert.equal(more, 1);
    for (const jobId of ids) assert.equal(runOf(await orchestrations.getStatus(instanceIdFor(jobId)))?.startId, (await c.store.readStart(jobId))?.value.startId);
    const startedLines = logger.lines.filter((l) => l.event === 'intake.started').map((l) => l.jobId);
    assert.deepEqual([...startedLines].sort(), [...ids].sort(), 'started once each');
    assert.deepEqual(logger.lines.filter((l) => l.event === 'intake.start_repaired'), [], 'made by the intake, not repaired');
    await jobsQueue.delete();
  });

  it('a start a plan of this process confirmed frees its room at once, without waiting for the next listing of the marks', async () => {
    await clearMarks();
    const jobsQueue = await freshQueue('confirmed-here');
    const ids = [`confirmed-here-${randomUUID()}`, `confirmed-here-${randomUUID()}`];
    for (const jobId of ids) await jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'noop', items: [1] }));
    const underWay = await fillAdmissionBound('confirmed-here');
    // The clock stands still: the marks stay fresh and no second listing comes due.
    const t0 = Date.now();
    const now = (): Date => new Date(t0);
    const pass = intake({ jobsQueue, now });
    const first = await pass.runPass(ctx(), orchestrations);
    assert.deepEqual([first.received, first.started, first.heldBack], [0, 0, true], 'the bound is full');
    // A plan here removed one start's mark and said so.
    await unmark(underWay[0] ?? '');
    pass.startConfirmed(underWay[0] ?? '');
    assert.equal((await pass.runPass(ctx(), orchestrations)).started, 1, 'room for one, at once');
    // Told again (a plan run again), or of a start it never counted: no more room.
    pass.startConfirmed(underWay[0] ?? '');
    pass.startConfirmed('never-under-way');
    assert.equal((await pass.runPass(ctx(), orchestrations)).started, 0);
    await clearMarks();
    await jobsQueue.delete();
  });

  it('a check that read a stale mark of a job id leaves it alone when the intake marks that id meanwhile: the start being made keeps its mark', async () => {
    const c = appRoot().jobs;
    await clearMarks();
    const jobsQueue = await freshQueue('mark-race');
    const jobId = `mark-race-${randomUUID()}`;
    // A mark left by an earlier try whose start record was never written.
    await c.store.markUnconfirmed(jobId, 'an-earlier-try');
    // The check's read of the start record (the first read of this id: the intake creates without reading) is held until released.
    let release = (): void => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let held = false;
    const cleared: string[] = [];
    const store = storeWith({
      readStart: async (id: string, signal?: AbortSignal) => {
        const found = await c.store.readStart(id, signal);
        if (id === jobId && !held) {
          held = true;
          await gate;
        }
        return found;
      },
      clearUnconfirmed: (id: string, startId: string, signal?: AbortSignal) => {
        cleared.push(id);
        return c.store.clearUnconfirmed(id, startId, signal);
      },
    });
    // The intake's Durable start of the job is slow: it is still being made when the check answers.
    let startNow = (): void => undefined;
    const slowStart = new Promise<void>((resolve) => (startNow = resolve));
    const slow: OrchestrationClient = { ...soloStarts, start: async (id, input) => (await slowStart, soloStarts.start(id, input)) };
    let offset = 0;
    const now = (): Date => new Date(Date.now() + offset);
    const pass = intake({ jobsQueue, now, store });
    // The mark is first seen by this pass's listing; the next listing finds it due for a check.
    await pass.runPass(ctx(), slow);
    await jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'noop', items: [1] }));
    offset = INTAKE.checkEveryMs + INTAKE.checkAfterMs;
    const first = await pass.runPass(ctx(), slow);
    assert.ok(held, 'the check read the stale mark\'s (missing) start record');
    assert.equal(first.received, 1, 'the intake took the job meanwhile');
    assert.equal(first.started, 0, 'its start is still being made');
    release();
    offset += INTAKE.checkEveryMs;
    await pass.runPass(ctx(), slow);
    assert.deepEqual(cleared.filter((id) => id === jobId), [], 'the check did not clear the mark the intake wrote');
    assert.ok((await c.store.listUnconfirmed()).some((m) => m.jobId === jobId), 'marked while its start is made');
    startNow();
    for (let i = 0; i < 20 && (await orchestrations.getStatus(instanceIdFor(jobId))) === undefined; i++) await new Promise((r) => setTimeout(r, 100));
    assert.notEqual(await orchestrations.getStatus(instanceIdFor(jobId)), undefined, 'then started');
    offset += INTAKE.checkEveryMs;
    await pass.runPass(ctx(), slow);
    await clearMarks();
    await jobsQueue.delete();
  });

  it('a take-over\'s start keeps its mark when the plan of the start it replaced, past its fence first, confirms late', async () => {
    const c = appRoot().jobs;
    await clearMarks();
    const jobId = `held-take-over-${randomUUID()}`;
    const run = await recordStart(jobId);
    const first = run.startId ?? assert.fail('a start id');
    await c.store.markUnconfirmed(jobId, first);
    // The plan of that start passes its fence (its record names it; a prestaged plan reads no lease)
    // and is held there, before it removes its start's mark.
    assert.equal(await fence({ store: c.store, now: () => new Date() }, run, Promise.resolve(false), false), undefined);
    // Meanwhile a newer leader (epoch 12) finds the start Pending under the older epoch and takes it
    // over; the new start is on its way (its Durable start is taken, and nothing runs it here).
    const pending: OrchestrationClient = {
      ...orchestrations,
      start: () => Promise.resolve(),
      getStatus: (instanceId) => {
        if (instanceId !== instanceIdFor(jobId)) return orchestrations.getStatus(instanceId);
        const at = new Date();
        return Promise.resolve({ instanceId, runtimeStatus: 'Pending', input: { run }, output: null, customStatus: null, createdTime: at, lastUpdatedTime: at });
      },
    };
    const logger = memoryLogger('intake', 'info');
    // What is marked at the moment the take-over writes the record that names its new start.
    let markedAtTakeOver: string[] | undefined;
    const store = storeWith({
      replaceStart: async (record: StartRecord, ifMatch: string, signal?: AbortSignal) => {
        if (record.jobId === jobId) markedAtTakeOver = (await c.store.listUnconfirmed()).filter((m) => m.jobId === jobId).map((m) => m.startId);
        return c.store.replaceStart(record, ifMatch, signal);
      },
    });
    const pass = intake({ jobsQueue: await freshQueue('held-take-over'), logger, store });
    for (let i = 0; i < 5 && (await c.store.readStart(jobId))?.value.generation === 1; i++) {
      await pass.runPass({ ...ctx(), epoch: 12 }, pending);
      await new Promise((resolve) => setTimeout(resolve, INTAKE.checkEveryMs));
    }
    const taken = (await c.store.readStart(jobId))?.value;
    assert.equal(taken?.generation, 2, 'taken over');
    assert.notEqual(taken.startId, first);
    // Marked before its record named it: a leader that stops between the two leaves the job marked,
    // even once the held plan has removed the earlier start's mark.
    assert.ok(markedAtTakeOver?.includes(taken.startId), `marked at the take-over's write: ${JSON.stringify(markedAtTakeOver)}`);
    const repaired = logger.lines.filter((l) => l.event === 'intake.start_repaired' && l.jobId === jobId);
    assert.deepEqual(repaired.map((l) => [l.reason, l.previousStartId, l.startId]), [['Pending under an older epoch', first, taken.startId]]);
    for (const line of repaired) assert.deepEqual(eventShapeProblems(line), [], 'the catalogued shape (OPERATOR_EVENTS)');
    // The held plan goes on: it removes its own start's mark, and only that.
    await c.store.confirmStart(run);
    const marks = (await c.store.listUnconfirmed()).filter((m) => m.jobId === jobId);
    assert.deepEqual(marks, [{ jobId, startId: taken.startId }], 'the new start is still marked: whoever leads next checks it');
    await unmark(jobId);
  });

  it('tells the stall check which starts are still on their way: the marks listed, and the ones it made since', async () => {
    const c = appRoot().jobs;
    await clearMarks();
    await c.store.markUnconfirmed('listed-mark', 'a-start');
    const jobsQueue = await freshQueue('unconfirmed');
    let offset = 0;
    const pass = intake({ jobsQueue, now: () => new Date(Date.now() + offset) });
    // The first pass lists the marks before it takes the submission it finds.
    await jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'made-here', workType: 'noop', items: [1] }));
    // Its Durable start is slow: the assertions fall while the start is on its way.
    let release = (): void => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const held: OrchestrationClient = { ...orchestrations, start: async (id, input) => (await released, orchestrations.start(id, input)) };
    const first = pass.runPass(ctx(), held);
    for (let i = 0; i < 200 && !(await c.store.listUnconfirmed()).some((m) => m.jobId === 'made-here'); i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(pass.startUnconfirmed('listed-mark'), true, 'listed');
    assert.equal(pass.startUnconfirmed('made-here'), true, 'marked by this intake after the listing');
    assert.equal(pass.startUnconfirmed('never-marked'), false);
    release();
    // Counted by the first pass, or by the next when it ended first (INTAKE.settleGraceMs past its budget).
    const startedFirst = (await first).started;
    offset = 10 * INTAKE.checkEveryMs;
    await unmark('listed-mark');
    assert.equal(startedFirst + (await pass.runPass(ctx(), orchestrations)).started, 1);
    assert.equal(pass.startUnconfirmed('listed-mark'), false, 'gone from the next listing: its plan began');
    assert.equal(pass.startUnconfirmed('made-here'), true, 'in the next listing');
    await unmark('made-here');
    await jobsQueue.delete();
  });

  /** An active start record of a one-item noop job under epoch 11, made by this test (no mark, no instance): its run. */
  async function recordStart(jobId: string): Promise<JobRun> {
    const startId = randomUUID();
    const run: JobRun = {
      jobId,
      workType: 'noop',
      fingerprint: 'f',
      options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300 },
      source: { kind: 'inline', items: [1] },
      epoch: 11,
      holder: 'intake-test',
      submittedAt: new Date().toISOString(),
      via: 'queue',
      startId,
    };
    const record = { v: 1 as const, jobId, fingerprint: 'f', state: 'active' as const, startId, generation: 1, epoch: 11, holder: 'intake-test', at: run.submittedAt, run };
    assert.notEqual(await appRoot().jobs.store.createStart(record), 'exists');
    return run;
  }

  /** Marks other tests left (their runs confirmed or not): a lag test counts only its own. */
  /** Marks as many made-up starts (no start record, fresh) as the admission bound holds: the bound is full. */
  async function fillAdmissionBound(prefix: string): Promise<string[]> {
    const underWay = Array.from({ length: INTAKE.maxStartsUnderWay }, (_, i) => `${prefix}-under-way-${i}`);
    await Promise.all(underWay.map((jobId) => appRoot().jobs.store.markUnconfirmed(jobId, 'made-up')));
    return underWay;
  }

  async function clearMarks(): Promise<void> {
    const c = appRoot().jobs;
    for (const m of await c.store.listUnconfirmed()) await c.store.clearUnconfirmed(m.jobId, m.startId);
  }

  /** The app's store with some of its methods replaced (a read held or counted); the rest are its own. */
  function storeWith(overrides: Partial<Pick<JobStore, 'readStart' | 'clearUnconfirmed' | 'replaceStart'>>): JobStore {
    const target = appRoot().jobs.store;
    return new Proxy(target, {
      get(t, key) {
        const replaced: unknown = Reflect.get(overrides, key);
        if (replaced !== undefined) return replaced;
        const value: unknown = Reflect.get(t, key, t);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(t) : value;
      },
    });
  }

  /** Clears every mark of the job, whichever start made it. */
  async function unmark(jobId: string, store = appRoot().jobs.store): Promise<void> {
    for (const m of await store.listUnconfirmed()) if (m.jobId === jobId) await store.clearUnconfirmed(m.jobId, m.startId);
  }

  it('checks a marked start that is still on its way 3 s after its mark, then 3, 6, 12 and every 15 s later: not on every pass', async () => {
    // Durable shows the run freshly Pending whenever asked (never stuck): the intake waits on it.
    const checkedAt = await checkTimes('check-backoff', 'fresh', 45);
    // Passes every second, the marks listed every 2 s (INTAKE.checkEveryMs): marked at t0, checked at
    // the first listing once due (3 s), then at the first listing 3, 6, 12 and 15 s later.
    assert.equal(INTAKE.checkEveryMs, 2_000);
    assert.deepEqual(checkedAt, [4, 8, 14, 26, 42], `checked at ${checkedAt.join(', ')} s`);
    await unmark('check-backoff');
  });

  it('checks a Pending start again once it counts as stuck (30 s), whatever its back-off, and starts it again then', async () => {
    // Created at t0 and never started: stuck from 30 s; its back-off alone would have waited until 41 s.
    // (The passes stop at 33 s: the real instance of the new start is not on the held clock.)
    const checkedAt = await checkTimes('check-stuck', 'at-start', 33);
    assert.deepEqual(checkedAt, [4, 8, 14, 26, 32], `checked at ${checkedAt.join(', ')} s`);
    assert.equal((await appRoot().jobs.store.readStart('check-stuck'))?.value.generation, 2, 'started again under the next instance id');
  });

  it('leaves a message whose start failed on the queue for the next pass', async () => {
    await h.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'flaky-start', workType: 'noop', items: [1] }));
    const failingStart: OrchestrationClient = { ...orchestrations, start: () => Promise.reject(new Error('extension unreachable')) };
    const report = await intake().runPass(ctx(), failingStart);
    assert.equal(report.retryLater, 1);
    assert.equal(await orchestrations.getStatus(instanceIdFor('flaky-start')), undefined);
    // The message is invisible for the visibility timeout, not gone: make it visible again and retry.
    const peek = await h.jobsQueue.getProperties();
    assert.equal(peek.approximateMessagesCount, 1);
  });

  it('rejects a valid submission with START_FAILED once its start has failed on its tenth delivery', async () => {
    const fresh = await freshQueue('startfail');
    const text = encodeQueueMessage({ jobId: 'never-starts', workType: 'noop', items: [1] });
    await fresh.sendMessage(text);
    // Nine earlier deliveries whose starts failed, as if nine passes had tried.
    for (let i = 0; i < INTAKE.maxStartAttempts - 1; i++) {
      const got = (await fresh.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 })).receivedMessageItems[0];
      assert.ok(got !== undefined);
      await fresh.updateMessage(got.messageId, got.popReceipt, undefined, 0);
    }
    const failingStart: OrchestrationClient = { ...orchestrations, start: () => Promise.reject(new Error('extension unreachable')) };
    const report = await intake({ jobsQueue: fresh }).runPass(ctx(), failingStart);
    assert.equal(report.rejected, 1);
    // Recorded under the job's own id (nothing else has it), so the submitter finds it there.
    const view = await appRoot().jobs.service.get('never-starts', orchestrations);
    assert.equal(view.status, 'rejected');
    assert.equal(view.error?.code, 'START_FAILED');
    assert.match(view.error?.message ?? '', /extension unreachable/);
    assert.equal((await fresh.getProperties()).approximateMessagesCount, 0);
    const poison = await h.poisonQueue.peekMessages({ numberOfMessages: 32 });
    assert.ok(poison.peekedMessageItems.some((m) => m.messageText === text));
  });

  it('on a tenth delivery, a stale leader leaves a start recorded by a newer leader alone instead of giving it up', async () => {
    // The stale leader's read of Durable fails; the start record alone sends the copy the way of an accepted job.
    const { store } = appRoot().jobs;
    const text = encodeQueueMessage({ jobId: 'newer-start', workType: 'noop', items: [1] });
    // The newer leader (epoch 12) records the start; its Durable start fails, so no instance exists yet.
    const first = await freshQueue('giveup-newer');
    await first.sendMessage(text);
    const failingStart: OrchestrationClient = { ...orchestrations, start: () => Promise.reject(new Error('extension unreachable')) };
    assert.equal((await intake({ jobsQueue: first, store }).runPass({ ...ctx(), epoch: 12 }, failingStart)).retryLater, 1);
    assert.equal((await store.readStart('newer-start'))?.value.epoch, 12);
    // Its mark goes, so no start check of the stale leader reads Durable beside the submission: the
    // read that fails below is the submission's (a check due under a loaded run took it before).
    await unmark('newer-start', store);
    // A copy at its tenth delivery reaches a stale leader (epoch 11) whose first Durable read fails.
    const stale = await freshQueue('giveup-stale');
    await stale.sendMessage(text);
    for (let i = 0; i < INTAKE.maxStartAttempts - 1; i++) {
      const got = (await stale.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 })).receivedMessageItems[0];
      assert.ok(got !== undefined);
      await stale.updateMessage(got.messageId, got.popReceipt, undefined, 0);
    }
    let reads = 0;
    const flaky: OrchestrationClient = {
      ...orchestrations,
      getStatus: (id) => (++reads === 1 ? Promise.reject(new Error('storage hiccup')) : orchestrations.getStatus(id)),
    };
    const report = await intake({ jobsQueue: stale, store }).runPass(ctx(), flaky);
    assert.deepEqual(intakeCounts(report), { received: 1, started: 0, alreadyStarted: 1, rejected: 0, retryLater: 0 });
    const kept = await store.readStart('newer-start');
    assert.equal(kept?.value.state, 'active', 'the newer leader\'s start is not retired');
    assert.equal(kept?.value.epoch, 12);
    assert.ok((await store.listUnconfirmed()).some((m) => m.jobId === 'newer-start'), 'the copy marked the start for its checks again');
    await Promise.all([first.delete(), stale.delete()]);
  });

  it('leaves a submission whose check throws unexpectedly for later, goes on with the pass, and records VALIDATION_FAILED on its tenth delivery', async () => {
    const fresh = await freshQueue('boom');
    const registry = builtInWorkTypes().register({
      ...noopWorkType,
      name: 'explodes',
      validateItem: () => {
        throw new Error('plug-in bug');
      },
    });
    const bad = encodeQueueMessage({ jobId: 'explodes-1', workType: 'explodes', items: [1] });
    await fresh.sendMessage(bad);
    await fresh.sendMessage(encodeQueueMessage({ jobId: 'after-explodes', workType: 'noop', items: [1] }));
    const first = await intake({ jobsQueue: fresh, registry }).runPass(ctx(), orchestrations);
    const counts = { received: 2, started: 1, alreadyStarted: 0, rejected: 0, retryLater: 1 };
    assert.deepEqual(intakeCounts(first), counts, 'the pass went on past the failure');
    assert.ok((await orchestrations.getStatus(instanceIdFor('after-explodes'))) !== undefined);

    // Its tenth delivery (the first pass left the original invisible, so a copy on a queue of its own).
    const again = await freshQueue('boom10');
    await again.sendMessage(bad);
    for (let i = 0; i < INTAKE.maxStartAttempts - 1; i++) {
      const got = (await again.receiveMessages({ numberOfMessages: 1, visibilityTimeout: 30 })).receivedMessageItems[0];
      assert.ok(got !== undefined && got.messageText === bad);
      await again.updateMessage(got.messageId, got.popReceipt, undefined, 0);
    }
    const tenth = await intake({ jobsQueue: again, registry }).runPass(ctx(), orchestrations);
    assert.deepEqual(intakeCounts(tenth), { received: 1, started: 0, alreadyStarted: 0, rejected: 1, retryLater: 0 });
    const view = await appRoot().jobs.service.get('explodes-1', orchestrations);
    assert.equal(view.status, 'rejected');
    assert.equal(view.error?.code, 'VALIDATION_FAILED');
    assert.match(view.error?.message ?? '', /plug-in bug/);
    const poison = await h.poisonQueue.peekMessages({ numberOfMessages: 32 });
    assert.ok(poison.peekedMessageItems.some((m) => m.messageText === bad), 'the original is kept in the poison queue');
  });

  it('rejects a submission nested too deep for the recursive code after validation, without crashing the pass', async () => {
    const fresh = await freshQueue('deep');
    let items: unknown = 1;
    for (let i = 0; i < 3_000; i++) items = [items];
    const text = encodeQueueMessage({ jobId: 'too-deep', workType: 'noop', items: [items] });
    await fresh.sendMessage(text);
    const report = await intake({ jobsQueue: fresh }).runPass(ctx(), orchestrations);
    assert.equal(report.rejected, 1);
    const view = await appRoot().jobs.service.get('too-deep', orchestrations);
    assert.equal(view.error?.code, 'NESTING_TOO_DEEP');
    assert.equal((await fresh.getProperties()).approximateMessagesCount, 0);
  });

  it('counts a started job as done when its pop receipt went stale before the delete (a slow batch)', async () => {
    const fresh = await freshQueue('gone');
    await fresh.sendMessage(encodeQueueMessage({ jobId: 'receipt-expired', workType: 'noop', items: [1] }));
    // Someone else touches the message after the pass received it and before its delete (as a receive
    // after the pass's visibility lapsed would): the pass's receipt is stale by then.
    const touched = Object.create(fresh) as QueueClient;
    touched.deleteMessage = async (...args: Parameters<QueueClient['deleteMessage']>) => {
      const [messageId, popReceipt] = args;
      await fresh.updateMessage(messageId, popReceipt, undefined, 30);
      return fresh.deleteMessage(...args);
    };
    const logger = memoryLogger('intake', 'info');
    const report = await intake({ jobsQueue: touched, logger }).runPass(ctx(), orchestrations);
    assert.deepEqual(intakeCounts(report), { received: 1, started: 1, alreadyStarted: 0, rejected: 0, retryLater: 0 });
    assert.ok(logger.lines.some((l) => l.event === 'intake.delete_missed'), 'the delete did not meet the stale receipt');
    assert.ok((await orchestrations.getStatus(instanceIdFor('receipt-expired'))) !== undefined);
    const rejected = await appRoot().jobs.service.get('receipt-expired', orchestrations);
    assert.notEqual(rejected.status, 'rejected');
  });

  it('handles nothing once the leader\'s signal has aborted', async () => {
    const fresh = await freshQueue('abort');
    await fresh.sendMessage(encodeQueueMessage({ jobId: 'not-yet', workType: 'noop', items: [1] }));
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(intake({ jobsQueue: fresh }).runPass(ctx(controller.signal), orchestrations));
    assert.equal(await orchestrations.getStatus(instanceIdFor('not-yet')), undefined);
    assert.equal((await fresh.getProperties()).approximateMessagesCount, 1, 'the submission is still queued');
  });

  it('copies a rejected message to the poison queue once, even when its delete failed and it came back', async () => {
    const fresh = await freshQueue('crash');
    const text = encodeQueueMessage({ jobId: 'c-crash', workType: 'sum', items: ['x'] });
    await fresh.sendMessage(text);
    // The first delete fails, as if the leader died between recording the rejection and deleting; the
    // message comes back once its visibility lapses (1 s here, not the intake's 60 s).
    let deletes = 0;
    const flakyDelete = Object.create(fresh) as QueueClient;
    flakyDelete.deleteMessage = (...args: Parameters<QueueClient['deleteMessage']>) => (deletes++ === 0 ? Promise.reject(new Error('connection reset')) : fresh.deleteMessage(...args));
    flakyDelete.receiveMessages = (options?: Parameters<QueueClient['receiveMessages']>[0]) => fresh.receiveMessages({ ...options, visibilityTimeout: 1 });
    const logger = memoryLogger('intake');
    const first = await intake({ jobsQueue: flakyDelete, logger }).runPass(ctx(), orchestrations);
    assert.deepEqual(intakeCounts(first), { received: 1, started: 0, alreadyStarted: 0, rejected: 0, retryLater: 0 });
    const failed = logger.lines.filter((l) => l.event === 'intake.start_failed').map((l) => (l.error instanceof Error ? l.error.message : String(l.error)));
    assert.deepEqual(failed, ['connection reset']);
    await new Promise((r) => setTimeout(r, 1_200));
    const again = await intake({ jobsQueue: flakyDelete }).runPass(ctx(), orchestrations);
    assert.deepEqual(intakeCounts(again), { received: 1, started: 0, alreadyStarted: 0, rejected: 1, retryLater: 0 });
    assert.equal(deletes, 2);
    const poison = await h.poisonQueue.peekMessages({ numberOfMessages: 32 });
    assert.equal(poison.peekedMessageItems.filter((m) => m.messageText === text).length, 1);
    const view = await appRoot().jobs.service.get('c-crash', orchestrations);
    assert.equal(view.status, 'rejected');
    assert.equal(view.error?.code, 'ITEM_REJECTED');
  });

  it('keeps one poison copy when a stale leader\'s copy lands after another leader recorded its own', async () => {
    const fresh = await freshQueue('twocopies');
    const poison = await freshQueue('twocopies-poison');
    const text = encodeQueueMessage({ jobId: 'copied-once', workType: 'sum', items: ['not a number'] });
    await fresh.sendMessage(text);
    const { store } = appRoot().jobs;
    // This leader's copy lands late: meanwhile a newer leader handled the same message and recorded its own copy.
    const late = Object.create(poison) as QueueClient;
    late.sendMessage = async (...args: Parameters<QueueClient['sendMessage']>) => {
      const mine = await poison.sendMessage(...args);
      const theirs = await poison.sendMessage(text, { messageTimeToLive: -1 });
      const record = await store.readRecordVersioned('copied-once');
      assert.ok(record !== undefined);
      assert.notEqual(await store.replaceRecordIf({ ...record.value, poisonMessageId: theirs.messageId, epoch: 12 }, record.etag), 'conflict');
      return mine;
    };
    const logger = memoryLogger('intake');
    assert.equal((await intake({ jobsQueue: fresh, poisonQueue: late, logger }).runPass(ctx(), orchestrations)).rejected, 1);
    const copies = (await poison.peekMessages({ numberOfMessages: 32 })).peekedMessageItems;
    assert.equal(copies.filter((m) => m.messageText === text).length, 1, 'the stale leader\'s copy stayed');
    assert.equal((await store.readRecord('copied-once'))?.poisonMessageId, copies[0]?.messageId);
    assert.ok(logger.lines.some((l) => l.event === 'intake.poison_copy_undone'));
  });

  /** The counts of the queue messages a pass handled (the check of unconfirmed starts depends on earlier tests). */
  function intakeCounts(report: IntakeReport): Pick<IntakeReport, 'received' | 'started' | 'alreadyStarted' | 'rejected' | 'retryLater'> {
    const { received, started, alreadyStarted, rejected, retryLater } = report;
    return { received, started, alreadyStarted, rejected, retryLater };
  }

  /** The job's view once it is finished (completed, failed, ...), within 60 s. */
  async function eventuallyFinished(jobId: string): Promise<Awaited<ReturnType<JobService['get']>>> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const view = await appRoot().jobs.service.get(jobId, orchestrations);
      if (view.status !== 'pending' && view.status !== 'running') return view;
      if (Date.now() > deadline) assert.fail(`job ${jobId} still ${view.status}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  async function freshQueue(prefix: string): Promise<QueueClient> {
    const client = QueueServiceClient.fromConnectionString(azuriteConnectionString()).getQueueClient(uniqueName(`intake-${prefix}`));
    await client.create();
    return client;
  }
});
