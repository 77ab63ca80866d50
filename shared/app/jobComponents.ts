/**
 * The job pipeline's parts wired from the app's settings: with appRoot.ts the one place the app's
 * parts are put together, once per process (tests build the parts themselves with their own names
 * and clients). Route: docs/architecture.md, both routes (the clients, the fence's lease read).
 * The storage clients are the app's (`CoordinatorStorage`, else `AzureWebJobsStorage`); the job
 * index is a table there (JOB_INDEX_TABLE), written by the store (JobStore), read by the list (JobList)
 * and kept true by the leader's upkeep (IndexUpkeep).
 */
import { type Settings } from '../config/settings';
import { IndexUpkeep } from '../jobs/api/IndexUpkeep';
import { JobList } from '../jobs/api/JobList';
import { JobService } from '../jobs/api/JobService';
import { Retention } from '../jobs/api/Retention';
import { callbackSender } from '../jobs/delivery/CallbackSender';
import { DeliveryTargets } from '../jobs/delivery/DeliveryTargets';
import { OutcomeDelivery } from '../jobs/delivery/OutcomeDelivery';
import { ChunkDispatcher, DISPATCH_DEFAULTS } from '../jobs/dispatch/ChunkDispatcher';
import { LandedResults } from '../jobs/dispatch/LandedResults';
import { QueueWorkQueue } from '../jobs/dispatch/QueueWorkQueue';
import { ChunkItemsReader } from '../jobs/input/ChunkItemsReader';
import { inputBlobs, InputContainers, reservedContainers } from '../jobs/input/InputContainers';
import { stagedInput, stageInput } from '../jobs/input/InputStager';
import { BlobInputStore } from '../jobs/input/InputStore';
import { JobIntake } from '../jobs/intake/JobIntake';
import { JOB_LIMITS } from '../jobs/jobLimits';
import { encodeQueueMessage, LEASE_FREE_MESSAGE } from '../jobs/messageCodec';
import { onceUntilSuccess } from '../jobs/onceUntilSuccess';
import { BlobCallClaimStore, CallClaims } from '../jobs/run/CallClaims';
import { JobActivities } from '../jobs/run/JobActivities';
import { JobIndex } from '../jobs/store/JobIndex';
import { JobStore } from '../jobs/store/JobStore';
import { sharedRead } from '../jobs/store/sharedRead';
import { WorkItemProcessor } from '../jobs/worker/WorkItemProcessor';
import { BlobLeaseStore } from '../leader/BlobLeaseStore';
import { createLogger, type Logger } from '../observability/log';
import { blobServiceClient, queueServiceClient, tableClient } from '../storage/clients';
import { type WorkTypeRegistry,workTypes } from '../worktypes/WorkTypeRegistry';

export interface JobComponents {
  readonly settings: Settings;
  readonly store: JobStore;
  readonly activities: JobActivities;
  /** The job's call lease: one running call of its activities (CallClaims). */
  readonly calls: CallClaims;
  readonly worker: WorkItemProcessor;
  readonly intake: JobIntake;
  /** One job through the HTTP API: submit, status, cancel, its submission and result. */
  readonly service: JobService;
  /** The job list, a page of the index at a time. */
  readonly jobList: JobList;
  /** The leader's upkeep of the job index (jobCoordinationPass). */
  readonly indexUpkeep: IndexUpkeep;
  /** Purges: one finished job on request, and the leader's retention sweep. */
  readonly retention: Retention;
  readonly logger: Logger;
  /**
   * Creates the queues (jobs, its poison queue, work-items), the results container and the index
   * table, once per process (again after a failure): the app calls it when it loads, so the queue
   * trigger finds its queue from the start instead of asking whether it exists at every poll.
   */
  readonly ensureStorage: (signal?: AbortSignal) => Promise<void>;
  /**
   * Rings the work-items doorbell that says the lease is free (messageCodec LEASE_FREE_MESSAGE):
   * whichever instance's worker takes it is handed a Durable client by that invocation and makes a
   * campaign attempt at once (AppRoot.offer). A leader that stops gracefully rings it after its
   * release, so that another instance takes over when its worker next polls the queue (at once while
   * chunks flow) rather than at its next campaign period, and in an app where no other instance has
   * been handed a client (nothing but the timer ran) rather than when the host moves the timer's
   * listener lock.
   */
  readonly ringWorkers: (signal?: AbortSignal) => Promise<void>;
  /** Where a client puts a job's items as a blob (GET /api/job-inputs; `coordinator submit` above the inline limit). */
  readonly inputTarget: InputTarget;
  /** Outcome delivery: reply queues, the outcome stream, callbacks (shared/jobs/delivery). */
  readonly delivery: OutcomeDelivery;
}

/** The answer of GET /api/job-inputs: an endpoint and names, never a credential. */
export interface InputTarget {
  /** The blob service of the app's storage account, without any query (a SAS in a connection string stays out). */
  readonly blobServiceUrl: string;
  /** JOB_INPUT_CONTAINERS as set: exact names, or prefixes written `name-*`. */
  readonly containers: readonly string[];
  /** An itemsBlob's size limit, in bytes. */
  readonly maxBytes: number;
  /** The most JSON a submission with inline items may hold, in bytes. */
  readonly inlineMaxBytes: number;
  /** The queue service of the app's storage account (without any query), where reply queues are read. */
  readonly queueServiceUrl: string;
  /** JOB_REPLY_QUEUES as set: the queues a submission's `replyTo` may name (exact names, or prefixes written `name-*`). */
  readonly replyQueues: readonly string[];
}

/** The blob service URL without its query string or trailing slash. */
export function publicServiceUrl(url: string): string {
  const parsed = new URL(url);
  return `${parsed.origin}${parsed.pathname}`.replace(/\/+$/, '');
}

/** Where the HTTP API serves a job's status (the host's route prefix is `api`, see host.json). */
export function jobStatusPath(jobId: string): string {
  return `/api/jobs/${jobId}`;
}

/** The fence's read of the lease blob gives up after this (the app's client retries within it). */
export const FENCE_READ_TIMEOUT_MS = 10_000;

export function poisonQueueName(queue: string): string {
  return `${queue}-poison`;
}

export function buildJobComponents(
  settings: Settings,
  registry: WorkTypeRegistry = workTypes,
  logger: Logger = createLogger('jobs'),
): JobComponents {
  const blobs = blobServiceClient(settings.storage);
  const queues = queueServiceClient(settings.storage);
  const index = new JobIndex(() => tableClient(settings.storage, settings.jobs.indexTable), logger.child('index'));
  const store = JobStore.onBlobs(blobs, settings.jobs.resultsContainer, index);
  const inputContainers = new InputContainers(
    settings.jobs.inputContainers,
    reservedContainers(settings.jobs.resultsContainer, settings.leader.container, settings.jobs.taskHubName),
  );
  const jobsQueue = queues.getQueueClient(settings.jobs.jobsQueue);
  // The lease blob's epoch, read without a lease (anyone may) through the elector's own store: the
  // plan step's fence against runs of older epochs. Bounded like the elector's reads: a read that
  // hangs fails the call (Durable calls it again) instead of holding the plan. Concurrent fences
  // share one read (sharedRead says why that is safe).
  const leaseStore = new BlobLeaseStore(blobs, settings.leader.container, settings.leader.blob);
  const leaseEpoch = sharedRead(async (): Promise<number | undefined> =>
    (await leaseStore.read(AbortSignal.timeout(FENCE_READ_TIMEOUT_MS))).record?.epoch);
  const workItemsQueue = queues.getQueueClient(settings.jobs.workItemsQueue);
  const poisonQueue = queues.getQueueClient(poisonQueueName(settings.jobs.jobsQueue));
  const ensureStorage = onceUntilSuccess((signal) =>
    Promise.all(
      [
        () => jobsQueue.createIfNotExists({ abortSignal: signal }),
        () => poisonQueue.createIfNotExists({ abortSignal: signal }),
        () => workItemsQueue.createIfNotExists({ abortSignal: signal }),
        () => store.ensureContainer(signal),
        // Builds the table client first: a connection without a table endpoint throws here, and only this part fails.
        () => index.ensureTable(signal),
      ].map((create: () => Promise<unknown>) => Promise.resolve().then(create)),
    ),
  );
  const inputs = new BlobInputStore(blobs, settings.jobs.resultsContainer);
  // Results this process's workers write wake the steps of their jobs waiting here for them.
  const landed = new LandedResults();
  const dispatcher = new ChunkDispatcher({
    chunks: store.chunks,
    queue: new QueueWorkQueue(workItemsQueue, settings.jobs.chunksPerMessage),
    items: new ChunkItemsReader(inputs),
    policy: { ...DISPATCH_DEFAULTS, window: settings.jobs.dispatchWindow },
    logger: logger.child('dispatch'),
    instanceId: settings.instanceId,
    chunksPerMessage: settings.jobs.chunksPerMessage,
    landed,
  });
  const delivery = new OutcomeDelivery({
    queues,
    store,
    outcomesQueue: settings.jobs.delivery.outcomesQueue,
    sendCallback: callbackSender({ secret: settings.jobs.delivery.callbackSecret, allowLoopback: settings.jobs.delivery.allowLoopback }),
    logger: logger.child('delivery'),
  });
  const targets = new DeliveryTargets(settings.jobs.delivery);
  const callClaimStore = new BlobCallClaimStore(blobs.getContainerClient(settings.jobs.resultsContainer));
  const calls = new CallClaims({ store: callClaimStore, logger: logger.child('calls') });
  // The API's parts (one job, the list, the index upkeep, purges) log under one component, `api`.
  const api = { store, logger: logger.child('api'), statusPath: jobStatusPath };
  // This process's plans tell its intake (when it leads) that their starts got past their fences.
  let startConfirmed: (jobId: string) => void = () => undefined;
  const activities = new JobActivities({
    store,
    calls,
    dispatcher,
    stage: (run, signal, options) => stageInput({ store: inputs, registry }, run, signal, options),
    staged: (run, signal) => stagedInput(inputs, run, signal),
    registry,
    logger: logger.child('activities'),
    leaseEpoch,
    delivery,
    startConfirmed: (jobId) => startConfirmed(jobId),
  });
  const intake = new JobIntake({
    jobsQueue,
    poisonQueue,
    store,
    registry,
    inputContainers,
    logger: logger.child('intake'),
    firstWindow: {
      prestage: (run, signal, mayStage) => activities.prestage(run, signal, mayStage),
      send: (run, staged, signal) => activities.sendFirstWindow(run, staged, signal),
    },
    delivery: { targets, outcomes: delivery },
  });
  startConfirmed = (jobId) => intake.startConfirmed(jobId);
  return {
    settings,
    store,
    logger,
    ensureStorage,
    ringWorkers: async (signal) => {
      await workItemsQueue.sendMessage(encodeQueueMessage(LEASE_FREE_MESSAGE), { abortSignal: signal });
    },
    activities,
    calls,
    delivery,
    worker: new WorkItemProcessor({
      store: store.chunks,
      inputs: inputBlobs(blobs, inputContainers),
      registry,
      logger: logger.child('worker'),
      instanceId: settings.instanceId,
      landed,
    }),
    intake,
    service: new JobService({ ...api, jobsQueue, registry, inputContainers, delivery: targets }),
    jobList: new JobList(api),
    indexUpkeep: new IndexUpkeep(api),
    retention: new Retention(api),
    inputTarget: {
      blobServiceUrl: publicServiceUrl(blobs.url),
      containers: settings.jobs.inputContainers,
      maxBytes: JOB_LIMITS.maxItemsBlobBytes,
      inlineMaxBytes: JOB_LIMITS.maxMessageJsonBytes,
      queueServiceUrl: publicServiceUrl(queues.url),
      replyQueues: settings.jobs.delivery.replyQueues,
    },
  };
}
