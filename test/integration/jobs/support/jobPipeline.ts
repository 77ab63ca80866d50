/**
 * A job pipeline for one test: its own results container and work-items queue in the run's
 * Azurite, the real JobStore / JobActivities / WorkItemProcessor, and helpers to move the
 * work-items queue's messages through the worker the way the host would (base64 decoded, with a
 * delivery count).
 */
import { BlobServiceClient } from '@azure/storage-blob';
import { type DequeuedMessageItem, QueueServiceClient } from '@azure/storage-queue';

import { ChunkDispatcher, DISPATCH_DEFAULTS, type StepOutcome } from '../../../../shared/jobs/dispatch/ChunkDispatcher';
import { type DispatchLedger } from '../../../../shared/jobs/dispatch/DispatchLedger';
import { QueueWorkQueue } from '../../../../shared/jobs/dispatch/QueueWorkQueue';
import { ChunkItemsReader } from '../../../../shared/jobs/input/ChunkItemsReader';
import { inputBlobs, InputContainers } from '../../../../shared/jobs/input/InputContainers';
import { stagedInput, stageInput } from '../../../../shared/jobs/input/InputStager';
import { BlobInputStore } from '../../../../shared/jobs/input/InputStore';
import { type JobRun } from '../../../../shared/jobs/JobRun';
import { decodeQueueMessage } from '../../../../shared/jobs/messageCodec';
import { dispatchJobOf, JobActivities, type JobPipelineDeps, type PlanOutcome } from '../../../../shared/jobs/run/JobActivities';
import { JobStore } from '../../../../shared/jobs/store/JobStore';
import { WorkItemProcessor, type WorkOutcome } from '../../../../shared/jobs/worker/WorkItemProcessor';
import { memoryLogger } from '../../../../shared/observability/log';
import { builtInWorkTypes, type WorkTypeRegistry } from '../../../../shared/worktypes/WorkTypeRegistry';
import { azuriteConnectionString, uniqueName } from '../../../support/env';

/**
 * `workerNow`: the worker's clock (claim and result times), for deadline tests; the real one by default.
 * `claimAfterMs`: how long a delivery works before it claims its chunk (2 s by default).
 * `window`: chunks of a job in flight (the shipped default unless a test needs fewer).
 * `chunksPerMessage`: one by default, as these tests move chunks one at a time (the app packs
 * CHUNKS_PER_MESSAGE; the envelope has tests of its own).
 */
export async function jobPipeline(
  prefix: string,
  registry: WorkTypeRegistry = builtInWorkTypes(),
  workerNow?: () => Date,
  window = DISPATCH_DEFAULTS.window,
  claimAfterMs?: number,
  chunksPerMessage = 1,
) {
  const conn = azuriteConnectionString();
  const blobs = BlobServiceClient.fromConnectionString(conn);
  const queues = QueueServiceClient.fromConnectionString(conn);
  const store = JobStore.onBlobs(blobs, uniqueName(`${prefix}-res`));
  await store.ensureContainer();
  const workItems = queues.getQueueClient(uniqueName(`${prefix}-wi`));
  await workItems.create();
  const logger = memoryLogger('jobs');
  // Tests put their inputs in containers named `inputs-...` and `texts-...` (uniqueName).
  const inputContainers = new InputContainers(['inputs-*', 'texts-*'], [store.containerName]);
  const inputStore = new BlobInputStore(blobs, store.containerName);
  const dispatcher = new ChunkDispatcher({
    chunks: store.chunks,
    queue: new QueueWorkQueue(workItems, chunksPerMessage),
    items: new ChunkItemsReader(inputStore),
    policy: { ...DISPATCH_DEFAULTS, window },
    logger,
    instanceId: 'test-instance',
    chunksPerMessage,
  });
  /**
   * The activities as the app wires them, with a test's own extras (a lease epoch, a clock). The plan
   * does not wait for first results here: these tests move the messages themselves, after it answers.
   */
  const makeActivities = (extra: Partial<JobPipelineDeps> = {}): JobActivities =>
    new JobActivities({
      store,
      dispatcher,
      stage: (run, signal, options) => stageInput({ store: inputStore, registry }, run, signal, options),
      staged: (run, signal) => stagedInput(inputStore, run, signal),
      registry,
      logger,
      planWaitMs: 0,
      ...extra,
    });
  const activities = makeActivities();
  /** The plan step at `at` (default now). */
  const plan = (run: JobRun, at: Date | string = new Date()): Promise<PlanOutcome> =>
    activities.plan({ run, at: typeof at === 'string' ? at : at.toISOString() });
  /** One pass of a dispatch step of `run` at `at` over `ledger` (the step activity repeats passes on the real clock). */
  const step = (run: JobRun, planned: { chunkCount: number; itemCount: number }, ledger: DispatchLedger, at: string): Promise<StepOutcome> =>
    dispatcher.pass({ job: dispatchJobOf(run), chunkCount: planned.chunkCount, itemCount: planned.itemCount, ledger, at });
  const worker = new WorkItemProcessor({
    store: store.chunks,
    inputs: inputBlobs(blobs, inputContainers),
    registry,
    logger,
    instanceId: 'test-instance',
    ...(workerNow === undefined ? {} : { now: workerNow }),
    ...(claimAfterMs === undefined ? {} : { claimAfterMs }),
  });

  /** Takes every visible message off the work-items queue (deleting them). */
  async function drainMessages(): Promise<DequeuedMessageItem[]> {
    const all: DequeuedMessageItem[] = [];
    for (;;) {
      const batch = await workItems.receiveMessages({ numberOfMessages: 32, visibilityTimeout: 30 });
      if (batch.receivedMessageItems.length === 0) return all;
      for (const m of batch.receivedMessageItems) {
        all.push(m);
        await workItems.deleteMessage(m.messageId, m.popReceipt);
      }
    }
  }

  async function deliver(message: DequeuedMessageItem, dequeueCount = 1): Promise<WorkOutcome> {
    return worker.handle(decodeQueueMessage(message.messageText), { dequeueCount, messageId: message.messageId });
  }

  return { blobs, queues, store, workItems, logger, activities, makeActivities, plan, step, worker, registry, drainMessages, deliver };
}

export function jobRun(jobId: string, workType: string, items: JobRun['source'], options: Partial<JobRun['options']> = {}): JobRun {
  return {
    jobId,
    workType,
    fingerprint: 'f'.repeat(64),
    options: { chunkSize: 10, attempts: 3, deadlineSeconds: 300, ...options },
    source: items,
    epoch: 3,
    holder: 'test-leader',
    submittedAt: new Date().toISOString(),
    via: 'queue',
    startId: 'start-1',
  };
}
