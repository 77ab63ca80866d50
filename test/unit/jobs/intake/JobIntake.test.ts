/**
 * The intake's rules on the in-memory twins of its storage (the jobs and poison queues, the job
 * store's container) and a stand-in for Durable, in milliseconds instead of the Azurite integration
 * test's minutes: a start is recorded and marked before the run is started and the message deleted
 * after; a submission seen again is done once; a refused one is recorded with its code and its
 * original kept in the poison queue; a start that keeps failing is retried on redelivery and given up
 * with START_FAILED. The twins are held to Azure's behavior by documents.test.ts and
 * submissionQueue.test.ts; test/integration/jobs/intake/jobIntake.test.ts runs the intake on Azurite
 * and the development host's Durable.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { InputContainers } from '../../../../shared/jobs/input/InputContainers';
import { INTAKE } from '../../../../shared/jobs/intake/intakeTerms';
import { type IntakeReport, JobIntake } from '../../../../shared/jobs/intake/JobIntake';
import { instanceIdFor } from '../../../../shared/jobs/jobIds';
import { encodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { memoryLogger } from '../../../../shared/observability/log';
import { workTypes } from '../../../../shared/worktypes/WorkTypeRegistry';
import { MemoryDocuments } from '../support/MemoryDocuments';
import { MemoryOrchestrations } from '../support/MemoryOrchestrations';
import { MemoryQueue } from '../support/MemoryQueue';

function setup() {
  let now = Date.parse('2026-03-01T12:00:00.000Z');
  const clock = (): number => now;
  const jobsQueue = new MemoryQueue('jobs', clock);
  const poisonQueue = new MemoryQueue('jobs-poison', clock);
  const docs = new MemoryDocuments(clock);
  const store = new JobStore(docs, 'job-results', () => Promise.resolve(undefined));
  const logger = memoryLogger('intake', 'debug');
  const intake = new JobIntake({
    jobsQueue,
    poisonQueue,
    store,
    registry: workTypes,
    inputContainers: new InputContainers(['inputs'], ['job-results']),
    logger,
    now: () => new Date(now),
  });
  const orchestrations = new MemoryOrchestrations(clock);
  const pass = (): Promise<IntakeReport> =>
    intake.runPass({ epoch: 7, holder: 'leader-a', signal: new AbortController().signal, progress: () => undefined }, orchestrations);
  return { jobsQueue, poisonQueue, docs, store, logger, orchestrations, intake, pass, advance: (ms: number) => (now += ms) };
}

function counts(r: IntakeReport): [number, number, number, number, number] {
  return [r.received, r.started, r.alreadyStarted, r.rejected, r.retryLater];
}

describe('job intake on its storage twins', () => {
  it('records and marks a start before it starts the run, and deletes the message only after', async () => {
    const t = setup();
    const text = encodeQueueMessage({ jobId: 'j1', workType: 'sum', items: [1, 2, 3] });
    await t.jobsQueue.sendMessage(text);
    const seenAtStart: Array<[boolean, boolean, string[]]> = [];
    t.orchestrations.onStart = async (instanceId, input) => {
      assert.equal(instanceId, instanceIdFor('j1'));
      const start = await t.store.readStart('j1');
      const marks = (await t.store.listUnconfirmed()).map((m) => m.jobId);
      seenAtStart.push([start?.value.startId === input.run.startId, marks.includes('j1'), t.jobsQueue.texts]);
    };
    assert.deepEqual(counts(await t.pass()), [1, 1, 0, 0, 0]);
    assert.deepEqual(seenAtStart, [[true, true, [text]]], 'the start record names this start and the mark is listed, the message still queued');
    assert.deepEqual(t.jobsQueue.texts, [], 'deleted once started');
    const run = (await t.orchestrations.getStatus(instanceIdFor('j1')))?.input as { run: { epoch: number; holder: string; via: string } };
    assert.deepEqual([run.run.epoch, run.run.holder, run.run.via], [7, 'leader-a', 'queue'], 'stamped with the epoch that started it');
  });

  it('a submission seen again is done once: one run, the copy deleted', async () => {
    const t = setup();
    const text = encodeQueueMessage({ jobId: 'twice', workType: 'sum', items: [1] });
    await t.jobsQueue.sendMessage(text);
    await t.jobsQueue.sendMessage(text);
    assert.deepEqual(counts(await t.pass()), [2, 1, 1, 0, 0]);
    await t.jobsQueue.sendMessage(text);
    assert.deepEqual(counts(await t.pass()), [1, 0, 1, 0, 0]);
    assert.deepEqual(t.orchestrations.started, [instanceIdFor('twice')]);
    assert.deepEqual(t.jobsQueue.texts, []);
  });

  it('refuses what it cannot run: its record says why, its original waits in the poison queue, the others go on', async () => {
    const t = setup();
    const original = encodeQueueMessage({ jobId: 'taken', workType: 'sum', items: [1] });
    const other = encodeQueueMessage({ jobId: 'taken', workType: 'sum', items: [2] });
    const unknown = encodeQueueMessage({ jobId: 'odd', workType: 'no-such-type', items: [1] });
    const notJson = Buffer.from('{"jobId": "x", ', 'utf8').toString('base64');
    await t.jobsQueue.sendMessage(original);
    await t.pass();
    for (const text of [other, unknown, notJson]) await t.jobsQueue.sendMessage(text);
    assert.deepEqual(counts(await t.pass()), [3, 0, 0, 3, 0]);
    assert.deepEqual(t.orchestrations.started, [instanceIdFor('taken')], 'nothing else started');
    assert.deepEqual([...t.poisonQueue.texts].sort(), [other, unknown, notJson].sort(), 'each original, as sent');
    assert.deepEqual(t.jobsQueue.texts, []);
    assert.equal((await t.store.readRecord('odd'))?.error?.code, 'UNKNOWN_WORK_TYPE');
    const rejected = await t.store.listRecords();
    const codes = await Promise.all(rejected.map(async (r) => (await t.store.readRecord(r.jobId))?.error?.code));
    assert.deepEqual(codes.sort(), ['DUPLICATE_JOB_ID', 'INVALID_JSON', 'UNKNOWN_WORK_TYPE']);
    assert.equal((await t.store.readStart('taken'))?.value.run.fingerprint !== undefined, true, 'the first job keeps its id');
    const events = t.logger.lines.filter((l) => l.event === 'intake.rejected').map((l) => l.code);
    assert.deepEqual([...events].sort(), ['DUPLICATE_JOB_ID', 'INVALID_JSON', 'UNKNOWN_WORK_TYPE'], 'each refusal logged with its code');
  });

  it('a recorded start that fails: the message stays for a retry, and its next delivery leaves it to the start checks', async () => {
    const t = setup();
    const text = encodeQueueMessage({ jobId: 'flaky', workType: 'sum', items: [1] });
    await t.jobsQueue.sendMessage(text);
    t.orchestrations.onStart = () => {
      throw new Error('extension unreachable');
    };
    assert.deepEqual(counts(await t.pass()), [1, 0, 0, 0, 1]);
    assert.deepEqual(t.jobsQueue.texts, [text], 'kept for a retry');
    assert.equal((await t.store.readStart('flaky'))?.value.state, 'active', 'its start stays recorded');
    assert.deepEqual((await t.store.listUnconfirmed()).map((m) => m.jobId), ['flaky'], 'and marked for the start checks');
    t.advance(INTAKE.visibilityTimeoutSeconds * 1000 + 1);
    t.orchestrations.onStart = () => undefined;
    const again = await t.pass();
    assert.equal(again.alreadyStarted, 1, 'the next delivery finds the recorded start');
    assert.deepEqual(t.jobsQueue.texts, []);
  });

  it('a pass told not to list the start marks (the leader\'s quiet side reads) neither lists nor checks them; one that lists says how many', async () => {
    const t = setup();
    await t.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'marked', workType: 'sum', items: [1] }));
    t.orchestrations.onStart = () => {
      throw new Error('extension unreachable');
    };
    const first = await t.pass();
    assert.equal(first.marks, 0, 'listed before the start marked it');
    t.orchestrations.onStart = () => undefined;
    t.advance(INTAKE.checkAfterMs + INTAKE.checkEveryMs);
    const ctx = { epoch: 7, holder: 'leader-a', signal: new AbortController().signal, progress: () => undefined };
    const skipped = await t.intake.runPass(ctx, t.orchestrations, { listMarks: false });
    assert.equal(skipped.marks, undefined, 'not listed');
    assert.equal(skipped.checked, 0, 'so not checked');
    assert.deepEqual(t.orchestrations.started, []);
    const listed = await t.pass();
    assert.equal(listed.marks, 1);
    assert.equal(listed.checked, 1, 'the next pass that lists checks it');
  });

  it('a submission whose start cannot be recorded is retried on each delivery and given up with START_FAILED at the last', async () => {
    const t = setup();
    const text = encodeQueueMessage({ jobId: 'stuck', workType: 'sum', items: [1] });
    await t.jobsQueue.sendMessage(text);
    const put = t.docs.putVersioned.bind(t.docs);
    t.docs.putVersioned = (name, value, options) =>
      name === JobStore.startBlob('stuck') && options?.ifNoneMatch === true ? Promise.reject(new Error('storage refused')) : put(name, value, options);
    const outcomes: Array<[number, number, number, number, number]> = [];
    for (let delivery = 1; delivery <= INTAKE.maxStartAttempts; delivery++) {
      outcomes.push(counts(await t.pass()));
      if (delivery < INTAKE.maxStartAttempts) {
        assert.deepEqual(t.jobsQueue.texts, [text], `kept for a retry after delivery ${delivery}`);
        assert.equal((await t.pass()).received, 0, 'invisible until its visibility ends');
        t.advance(INTAKE.visibilityTimeoutSeconds * 1000 + 1);
      }
    }
    assert.deepEqual(outcomes.slice(0, -1), Array.from({ length: INTAKE.maxStartAttempts - 1 }, () => [1, 0, 0, 0, 1]));
    assert.deepEqual(outcomes.at(-1), [1, 0, 0, 1, 0]);
    assert.deepEqual(t.jobsQueue.texts, []);
    assert.deepEqual(t.poisonQueue.texts, [text], 'the original kept for people');
    assert.equal((await t.store.readRecord('stuck'))?.error?.code, 'START_FAILED');
    assert.deepEqual(t.orchestrations.started, []);
  });
});

describe('job intake: a start still being made is not taken for an interrupted one', () => {
  it('starts under way into the next pass (a burst, their start calls slower than the checks wait) are left alone: one run each', async () => {
    const t = setup();
    const lanes = INTAKE.messageConcurrency;
    const jobs = Array.from({ length: lanes + 12 }, (_, i) => `burst-${i}`);
    for (const jobId of jobs) await t.jobsQueue.sendMessage(encodeQueueMessage({ jobId, workType: 'sum', items: [1] }));
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    // Every Durable start call hangs until the gate opens: the first pass fills its lanes and ends at
    // its budget with submissions still waiting, so its starts run on into the next pass.
    t.orchestrations.onStart = () => gate;
    const first = await t.pass();
    assert.equal(first.started, 0, 'no start call has answered yet');
    // Later than the checks' first look at a mark (checkAfterMs) and than the listing interval: every mark is due.
    t.advance(INTAKE.checkAfterMs + INTAKE.checkEveryMs + 1_000);
    setTimeout(open, 1_000);
    const second = await t.pass();
    let restarted = second.restarted;
    for (let pass = 0; pass < 8 && t.orchestrations.started.length < jobs.length; pass++) {
      t.advance(1_000);
      restarted += (await t.pass()).restarted;
    }
    assert.equal(restarted, 0, 'no start taken over');
    assert.equal(second.checked, 0, 'the starts under way are not checked');
    assert.deepEqual([...t.orchestrations.started].sort(), jobs.map((j) => instanceIdFor(j)).sort(), 'one run each, under its first start');
    const generations = await Promise.all(jobs.map(async (j) => (await t.store.readStart(j))?.value.generation));
    assert.deepEqual(new Set(generations), new Set([1]));
    assert.equal(t.logger.lines.filter((l) => l.event === 'intake.start_repaired').length, 0);
  });

  it('tells the stall check the start -> plan lag of the last 30 s only: once a burst is over it stops counting', async () => {
    const t = setup();
    await t.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'lagging', workType: 'sum', items: [1] }));
    await t.pass(); // Started and marked now; its instance stays Pending (nobody runs it here).
    t.advance(INTAKE.checkEveryMs + 100);
    await t.pass(); // The listing shows the fresh mark.
    t.advance(17_000 - INTAKE.checkEveryMs - 100);
    await t.pass(); // Still marked 17 s after its start: its plan has not begun.
    // What its plan does once it begins.
    for (const m of await t.store.listUnconfirmed()) if (m.jobId === 'lagging') await t.store.clearUnconfirmed(m.jobId, m.startId);
    t.advance(INTAKE.checkEveryMs + 100);
    await t.pass(); // Gone from this listing: its start waited at least 17 s.
    assert.ok(t.intake.startLagMs() >= 17_000, `lag ${t.intake.startLagMs()} ms`);
    t.advance(INTAKE.recentLagMs + 1_000);
    await t.pass(); // A listing with nothing new: the lag seen 31 s ago no longer counts.
    assert.equal(t.intake.startLagMs(), 0);
  });

  it('a pass waits for a slow start only until its budget and grace: the start runs on and counts in the pass it ends in', async () => {
    const t = setup();
    await t.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'slow-start', workType: 'sum', items: [1] }));
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    t.orchestrations.onStart = () => gate;
    const bound = INTAKE.passBudgetMs + INTAKE.settleGraceMs;
    const began = performance.now();
    const first = await t.pass();
    const tookMs = performance.now() - began;
    assert.equal(first.started, 0, 'its start call has not answered');
    // Not before the bound (the pass waited for it that long), and not much after it (timers on a loaded machine).
    assert.ok(tookMs >= bound - 50 && tookMs < bound + 1_500, `the pass took ${Math.round(tookMs)} ms; bound ${bound} ms`);
    const line = t.logger.lines.find((l) => l.event === 'intake.pass');
    assert.equal(line?.underWay, 1, 'the pass says a start is still under way');
    assert.deepEqual(t.jobsQueue.texts.length, 1, 'the message stays until its start is made');
    open();
    const second = await t.pass();
    assert.equal(second.started, 1, 'counted by the pass it ended in');
    assert.equal(second.received, 0, 'not received again');
    assert.deepEqual(t.orchestrations.started, [instanceIdFor('slow-start')], 'started once');
    assert.deepEqual(t.jobsQueue.texts, [], 'deleted once started');
  });
  it('a pass waits for a slow receive only until its budget and grace: the batch it brings later is taken by the next pass', async () => {
    const t = setup();
    await t.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'before-receive', workType: 'sum', items: [1] }));
    // The pass's second receive (issued while the first batch's start runs) lands only once released: 6 s at most.
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
      setTimeout(resolve, 6_000);
    });
    const receive = t.jobsQueue.receiveMessages.bind(t.jobsQueue);
    let receives = 0;
    t.jobsQueue.receiveMessages = async (options) => {
      receives += 1;
      if (receives === 2) await gate;
      return receive(options);
    };
    const bound = INTAKE.passBudgetMs + INTAKE.settleGraceMs;
    const began = performance.now();
    const first = await t.pass();
    const tookMs = performance.now() - began;
    assert.equal(first.started, 1, 'the first batch was started');
    // Not much past the bound (timers on a loaded machine); waiting out the receive took 6 s.
    assert.ok(tookMs < bound + 1_500, `the pass took ${Math.round(tookMs)} ms; bound ${bound} ms`);
    // A submission that arrives meanwhile comes back with the held receive, after the pass ended.
    await t.jobsQueue.sendMessage(encodeQueueMessage({ jobId: 'late-batch', workType: 'sum', items: [2] }));
    open();
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = await t.pass();
    assert.equal(second.started, 1, 'the late batch was started by the next pass, not left invisible for 60 s');
    assert.deepEqual(t.orchestrations.started.sort(), [instanceIdFor('before-receive'), instanceIdFor('late-batch')].sort());
    assert.deepEqual(t.jobsQueue.texts, [], 'both deleted once started');
  });
});
