/**
 * The app's configuration: one validated object built from environment settings (app settings on
 * Azure, `local.settings.json` under `func start`, the process environment in tests).
 *
 * Guarantees: every setting the app reads is named in `SETTING_NAMES`, has its default in
 * `DEFAULTS`, and is checked here; a bad value fails `loadSettings` with a `ConfigError` that names
 * the setting and says what would be accepted. Nothing else in the app reads `process.env` for its
 * own settings (the development host and scripts read their own flags).
 *
 * Storage: the app's own blobs, queues and its job index table use the connection named by
 * `CoordinatorStorage` (a connection string, `UseDevelopmentStorage=true` included, or identity-based
 * `CoordinatorStorage__blobServiceUri` / `__queueServiceUri` / `__tableServiceUri` (default: the
 * blob URI with `.blob.` as `.table.`) / `__accountName`, with
 * `__credential` and `__clientId` for a user-assigned identity). When no `CoordinatorStorage*`
 * setting exists it falls back to `AzureWebJobsStorage`, read the same way, and the queue trigger
 * is bound to that connection name instead, so the fallback holds on the real host too.
 */
import { MAX_ENVELOPE_PARTS } from '../jobs/messageCodec';
import { checkLeaderTiming, type TimingKey, type TimingNames } from '../leader/leaderTiming';
import { ConfigError } from './ConfigError';

/** Every setting the app reads, by purpose. The settings-parity test walks this list. */
export const SETTING_NAMES = {
  storageConnection: 'CoordinatorStorage',
  hostStorageConnection: 'AzureWebJobsStorage',
  instanceId: 'COORDINATOR_INSTANCE_ID',
  leaseContainer: 'LEADER_LEASE_CONTAINER',
  leaseBlob: 'LEADER_LEASE_BLOB',
  leaseSeconds: 'LEADER_LEASE_SECONDS',
  renewDeadlineSeconds: 'LEADER_RENEW_DEADLINE_SECONDS',
  retryPeriodSeconds: 'LEADER_RETRY_PERIOD_SECONDS',
  requestTimeoutSeconds: 'LEADER_REQUEST_TIMEOUT_SECONDS',
  stallTimeoutSeconds: 'LEADER_STALL_TIMEOUT_SECONDS',
  drainTimeoutSeconds: 'LEADER_DRAIN_TIMEOUT_SECONDS',
  passIntervalSeconds: 'LEADER_PASS_INTERVAL_SECONDS',
  idlePassIntervalSeconds: 'LEADER_IDLE_PASS_INTERVAL_SECONDS',
  watchIntervalSeconds: 'LEADER_WATCH_INTERVAL_SECONDS',
  timerSchedule: 'LEADER_TIMER_SCHEDULE',
  jobsQueue: 'JOBS_QUEUE',
  workItemsQueue: 'WORK_ITEMS_QUEUE',
  resultsContainer: 'JOB_RESULTS_CONTAINER',
  indexTable: 'JOB_INDEX_TABLE',
  inputContainers: 'JOB_INPUT_CONTAINERS',
  retentionDays: 'JOB_RETENTION_DAYS',
  dispatchWindow: 'JOB_DISPATCH_WINDOW',
  chunksPerMessage: 'JOB_CHUNKS_PER_MESSAGE',
  replyQueues: 'JOB_REPLY_QUEUES',
  outcomesQueue: 'JOB_OUTCOMES_QUEUE',
  callbackHosts: 'JOB_CALLBACK_HOSTS',
  callbackSecret: 'JOB_CALLBACK_SECRET',
  callbackAllowLoopback: 'JOB_CALLBACK_ALLOW_LOOPBACK',
  taskHubName: 'TASK_HUB_NAME',
} as const;

/** Every default, in one place. Seconds unless the name says otherwise. */
export const DEFAULTS = {
  leaseContainer: 'leader-election',
  leaseBlob: 'coordinator',
  /** L: the blob lease duration. Azure accepts 15..60 s for a finite lease. */
  leaseSeconds: 15,
  /** D = 2L/3: a leader that could not renew for this long steps down before the lease can expire. */
  renewDeadlineSeconds: 10,
  /** Followers campaign this often between timer ticks (with jitter); leaders retry a failed renewal this often. */
  retryPeriodSeconds: 2,
  /** Hard limit on one storage request of the elector; the SDK's own retry policy can take minutes. */
  requestTimeoutSeconds: 2,
  /** The watchdog: a leader whose work reported no progress for this long steps down. */
  stallTimeoutSeconds: 120,
  /** Graceful stop waits at most this long for leader work to finish before releasing the lease. */
  drainTimeoutSeconds: 2,
  /** While leading, run a coordination pass this often even when this instance's timer does not fire. */
  passIntervalSeconds: 1,
  /**
   * While passes find no work the leader's pass interval doubles up to this (an idle leader's jobs
   * queue reads and checks), and a submission by HTTP on the leader wakes it at once; a queue
   * submission (or one on a follower) waits up to this long after an idle spell. Kept below half the
   * stall timeout when that is set lower.
   */
  idlePassIntervalSeconds: 15,
  /**
   * An instance that does not campaign reads the lease this often and, when nobody holds it, rings
   * the work-items doorbell (shared/leader/LeaseWatch.ts); 0 turns the watch off.
   */
  watchIntervalSeconds: 2,
  /** A finished job's history, records and blobs are purged this many days after it ended; 0 keeps them. */
  retentionDays: 30,
  /**
   * Chunks of one job queued or running at once: enough to keep an instance or two busy with a queue
   * behind them while the step refills (each runs up to 24 messages at a time with host.json's
   * batchSize 16 + newBatchThreshold 8, of up to `chunksPerMessage` chunks each: 96 chunks; a window
   * of 256 is 64 messages, 40 queued behind one instance's 24: a 500,000-item job on one instance
   * took 8.6-9.8 s against 12.1-13.6 s at 128, docs/figures.md), few enough that other jobs' chunks
   * get through between a big job's.
   */
  dispatchWindow: 256,
  /**
   * Chunks sent together travel up to this many to a queue message (ChunkDispatcher CHUNKS_PER_MESSAGE):
   * a quarter of the queue transactions per chunk; 1 spreads a job's window over more instances
   * (a window of 256 chunks is 64 messages at 4).
   */
  chunksPerMessage: 4,
  /** NCRONTAB, six fields (with seconds), UTC: every 5 seconds. */
  timerSchedule: '*/5 * * * * *',
  jobsQueue: 'jobs',
  workItemsQueue: 'work-items',
  resultsContainer: 'job-results',
  /** The job index (one row per job, what the job list reads), a table in the same storage account. */
  indexTable: 'jobindex',
  /** Containers jobs may read (itemsBlob, wordcount items): comma-separated names or `prefix-*`. */
  inputContainers: 'job-inputs',
  /** Queues a submission's `replyTo` may name: comma-separated names or `prefix-*`. */
  replyQueues: 'job-replies',
  /** The app-wide outcome stream (every terminal outcome); empty: none. */
  outcomesQueue: '',
  /** Hosts a `callbackUrl` may name (exact, or `*.suffix`); empty: callbacks are refused (deny by default). */
  callbackHosts: '',
  /** The HMAC-SHA256 key callbacks are signed with; empty: callbacks are refused. */
  callbackSecret: '',
  taskHubName: 'CoordinatorHub',
} as const;

export type Env = Readonly<Record<string, string | undefined>>;

export type StorageConnection =
  | {
      readonly kind: 'connectionString';
      /** The setting the value came from (never the value itself: it may hold a key). */
      readonly settingName: string;
      readonly connectionString: string;
    }
  | {
      readonly kind: 'identity';
      readonly settingName: string;
      readonly blobServiceUri: string;
      readonly queueServiceUri: string;
      readonly tableServiceUri: string;
      /** `managedidentity` when set; otherwise DefaultAzureCredential's chain. */
      readonly credential?: string;
      /** Client id of a user-assigned managed identity. */
      readonly clientId?: string;
    };

export interface LeaderSettings {
  readonly container: string;
  readonly blob: string;
  readonly leaseSeconds: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly requestTimeoutMs: number;
  readonly stallTimeoutMs: number;
  readonly drainTimeoutMs: number;
  readonly passIntervalMs: number;
  /** The longest wait between the leader's own passes while they find no work. */
  readonly idlePassIntervalMs: number;
  /** How often an instance that does not campaign watches the lease (LeaseWatch); 0: never. */
  readonly watchIntervalMs: number;
  readonly timerSchedule: string;
}

export interface JobSettings {
  readonly jobsQueue: string;
  readonly workItemsQueue: string;
  readonly resultsContainer: string;
  /** The table of the job index (JobIndex). */
  readonly indexTable: string;
  /** The allow-list of containers a job may read: names, or prefixes written `prefix-*`. */
  readonly inputContainers: readonly string[];
  /** Days a finished job is kept before the leader purges it; 0: never. */
  readonly retentionDays: number;
  /** Chunks of one job in flight at most. */
  readonly dispatchWindow: number;
  /** Chunks to a work-items message at most. */
  readonly chunksPerMessage: number;
  readonly taskHubName: string;
  /** Where a job's outcome may be delivered (shared/jobs/delivery). */
  readonly delivery: DeliverySettings;
}

export interface DeliverySettings {
  /** The allow-list of reply queues: names, or prefixes written `prefix-*`. */
  readonly replyQueues: readonly string[];
  /** The app-wide outcome stream, when set. */
  readonly outcomesQueue?: string;
  /** The allow-list of callback hosts: exact names, or `*.suffix`. Empty: no callbacks. */
  readonly callbackHosts: readonly string[];
  /** The signing key (never logged nor shown); empty when callbacks are off. */
  readonly callbackSecret: string;
  /** Plain `http:` callbacks are refused (set when the app runs on Azure: WEBSITE_INSTANCE_ID or WEBSITE_SITE_NAME). */
  readonly httpsOnly: boolean;
  /** Callbacks to loopback addresses (development host tests only; refused on Azure). */
  readonly allowLoopback: boolean;
}

export interface Settings {
  /** The app's own blob and queue connection. */
  readonly storage: StorageConnection;
  /** The connection name to put in bindings (`CoordinatorStorage`, or `AzureWebJobsStorage` as fallback). */
  readonly storageConnectionName: string;
  /** This process's identity in logs and in the lease metadata (`holder`). */
  readonly instanceId: string;
  readonly leader: LeaderSettings;
  readonly jobs: JobSettings;
}

/** Build and validate the settings; throws `ConfigError` naming the first bad setting. */
export function loadSettings(env: Env = process.env): Settings {
  const connectionName = hasConnection(env, SETTING_NAMES.storageConnection)
    ? SETTING_NAMES.storageConnection
    : SETTING_NAMES.hostStorageConnection;
  const storage = readConnection(env, connectionName);

  // Each value's own sanity range here; the rules between them (D < L, ...) in checkLeaderTiming below.
  const leaseSeconds = readNumber(env, SETTING_NAMES.leaseSeconds, DEFAULTS.leaseSeconds);
  const renewDeadlineSeconds = readNumber(env, SETTING_NAMES.renewDeadlineSeconds, defaultRenewDeadline(leaseSeconds), { min: 0.1 });
  const retryPeriodSeconds = readNumber(env, SETTING_NAMES.retryPeriodSeconds, DEFAULTS.retryPeriodSeconds, { min: 0.05 });
  const requestTimeoutDefault = Math.min(DEFAULTS.requestTimeoutSeconds, renewDeadlineSeconds / 2);
  const requestTimeoutSeconds = readNumber(env, SETTING_NAMES.requestTimeoutSeconds, requestTimeoutDefault, { min: 0.05 });
  const stallTimeoutSeconds = readNumber(env, SETTING_NAMES.stallTimeoutSeconds, DEFAULTS.stallTimeoutSeconds, { min: 1, max: 24 * 3600 });
  const drainTimeoutSeconds = readNumber(env, SETTING_NAMES.drainTimeoutSeconds, DEFAULTS.drainTimeoutSeconds, { min: 0, max: 600 });
  const passIntervalSeconds = readNumber(env, SETTING_NAMES.passIntervalSeconds, DEFAULTS.passIntervalSeconds, { min: 0.1, max: 3600 });
  const timing = {
    leaseSeconds,
    renewDeadlineMs: Math.round(renewDeadlineSeconds * 1000),
    retryPeriodMs: Math.round(retryPeriodSeconds * 1000),
    requestTimeoutMs: Math.round(requestTimeoutSeconds * 1000),
    stallTimeoutMs: Math.round(stallTimeoutSeconds * 1000),
    drainTimeoutMs: Math.round(drainTimeoutSeconds * 1000),
    passIntervalMs: Math.round(passIntervalSeconds * 1000),
  };
  const idleDefault = Math.max(passIntervalSeconds, Math.min(DEFAULTS.idlePassIntervalSeconds, stallTimeoutSeconds / 2));
  const idlePassIntervalSeconds = readNumber(env, SETTING_NAMES.idlePassIntervalSeconds, idleDefault, {
    min: passIntervalSeconds,
    max: 3600,
    hint: `at least ${SETTING_NAMES.passIntervalSeconds}`,
  });
  // The same check the elector and the runtime make at construction, in the settings' names and units.
  checkLeaderTiming({ ...timing, idlePassIntervalMs: Math.round(idlePassIntervalSeconds * 1000) }, TIMING_SETTINGS);
  const timerSchedule = readSchedule(env);
  const watchIntervalSeconds = readNumber(env, SETTING_NAMES.watchIntervalSeconds, DEFAULTS.watchIntervalSeconds, {
    min: 0,
    max: 60,
    hint: '0 turns the watch off',
  });
  const leaseContainer = readName(env, SETTING_NAMES.leaseContainer, DEFAULTS.leaseContainer, CONTAINER_NAME);
  const resultsContainer = readName(env, SETTING_NAMES.resultsContainer, DEFAULTS.resultsContainer, CONTAINER_NAME);
  const taskHubName = readName(env, SETTING_NAMES.taskHubName, DEFAULTS.taskHubName, TASK_HUB_NAME);
  const jobsQueue = readName(env, SETTING_NAMES.jobsQueue, DEFAULTS.jobsQueue, QUEUE_NAME);
  const workItemsQueue = readName(env, SETTING_NAMES.workItemsQueue, DEFAULTS.workItemsQueue, QUEUE_NAME);

  return {
    storage,
    storageConnectionName: connectionName,
    instanceId: readInstanceId(env),
    leader: {
      container: leaseContainer,
      blob: readName(env, SETTING_NAMES.leaseBlob, DEFAULTS.leaseBlob, BLOB_NAME),
      ...timing,
      idlePassIntervalMs: Math.round(idlePassIntervalSeconds * 1000),
      watchIntervalMs: Math.round(watchIntervalSeconds * 1000),
      timerSchedule,
    },
    jobs: {
      jobsQueue,
      workItemsQueue,
      resultsContainer,
      indexTable: readName(env, SETTING_NAMES.indexTable, DEFAULTS.indexTable, TABLE_NAME),
      inputContainers: readInputContainers(env, [resultsContainer, leaseContainer], [`${taskHubName.toLowerCase()}-`, 'azure-webjobs-']),
      retentionDays: readNumber(env, SETTING_NAMES.retentionDays, DEFAULTS.retentionDays, {
        min: 0,
        max: 3650,
        integer: true,
        hint: '0 keeps finished jobs forever',
      }),
      dispatchWindow: readNumber(env, SETTING_NAMES.dispatchWindow, DEFAULTS.dispatchWindow, {
        min: 1,
        max: 1000,
        integer: true,
        hint: 'chunks of one job in flight',
      }),
      chunksPerMessage: readNumber(env, SETTING_NAMES.chunksPerMessage, DEFAULTS.chunksPerMessage, {
        min: 1,
        max: MAX_ENVELOPE_PARTS,
        integer: true,
        hint: 'chunks to a work-items message',
      }),
      taskHubName,
      delivery: readDelivery(env, { queues: [jobsQueue, `${jobsQueue}-poison`, workItemsQueue, `${workItemsQueue}-poison`], taskHubName }),
    },
  };
}

/** Set by the platform on Azure (App Service, Functions): the app runs there, not on a developer's machine. */
function onAzure(env: Env): boolean {
  return readRaw(env, 'WEBSITE_INSTANCE_ID') !== undefined || readRaw(env, 'WEBSITE_SITE_NAME') !== undefined;
}

/**
 * Where outcomes may go. Reply queues: names or `prefix-*`, never the app's own queues (jobs,
 * work items, their poison queues), the task hub's `<hub>-*` or the host's `azure-webjobs-*`.
 * Callback hosts: exact host names or `*.suffix`. Loopback callbacks only off Azure.
 */
function readDelivery(env: Env, own: { readonly queues: readonly string[]; readonly taskHubName: string }): DeliverySettings {
  const families = [`${own.taskHubName.toLowerCase()}-`, 'azure-webjobs-'];
  const replyQueues = readNameList(env, {
    name: SETTING_NAMES.replyQueues,
    fallback: DEFAULTS.replyQueues,
    rule: QUEUE_NAME,
    kind: 'queue',
    example: 'replies-*',
    access: 'let submissions write',
    own: own.queues,
    families,
  });
  const outcomesRaw = readRaw(env, SETTING_NAMES.outcomesQueue);
  const outcomesQueue = outcomesRaw === undefined ? undefined : readName(env, SETTING_NAMES.outcomesQueue, '', QUEUE_NAME);
  if (outcomesQueue !== undefined && (own.queues.includes(outcomesQueue) || families.some((f) => outcomesQueue.startsWith(f)))) {
    throw new ConfigError(SETTING_NAMES.outcomesQueue, `"${outcomesQueue}" is one of the app's or the host's own queues.`);
  }
  const hostsName = SETTING_NAMES.callbackHosts;
  const callbackHosts = (readRaw(env, hostsName) ?? DEFAULTS.callbackHosts)
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter((e) => e !== '');
  for (const entry of callbackHosts) {
    if (!CALLBACK_HOST.test(entry)) {
      throw new ConfigError(
        hostsName,
        `"${entry}" is neither a host name nor a suffix written like "*.example.com" (no scheme, port or path).`,
      );
    }
  }
  const callbackSecret = readRaw(env, SETTING_NAMES.callbackSecret) ?? DEFAULTS.callbackSecret;
  if (callbackHosts.length > 0 && callbackSecret.length < 32) {
    // The value itself is never shown: it is a secret.
    throw new ConfigError(
      SETTING_NAMES.callbackSecret,
      `must be set, at least 32 characters, when ${hostsName} names hosts (callbacks are signed with it).`,
    );
  }
  const loopbackRaw = readRaw(env, SETTING_NAMES.callbackAllowLoopback);
  if (loopbackRaw !== undefined && loopbackRaw !== 'true' && loopbackRaw !== 'false') {
    throw new ConfigError(SETTING_NAMES.callbackAllowLoopback, `"${loopbackRaw}" is not true or false.`);
  }
  const azure = onAzure(env);
  if (loopbackRaw === 'true' && azure) {
    throw new ConfigError(SETTING_NAMES.callbackAllowLoopback, 'is for the development host only and is refused on Azure.');
  }
  return {
    replyQueues,
    ...(outcomesQueue === undefined ? {} : { outcomesQueue }),
    callbackHosts,
    callbackSecret,
    httpsOnly: azure,
    allowLoopback: loopbackRaw === 'true',
  };
}

/** A host name (letters, digits, hyphens, dots), or `*.` and a suffix of at least two labels. */
const CALLBACK_HOST = /^(\*\.)?(?=.{1,253}$)[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)+$|^localhost$/;

/** The app setting behind each leader timing option: timing errors name the setting and show seconds. */
const TIMING_SETTING_NAMES: Readonly<Partial<Record<TimingKey, string>>> = {
  leaseSeconds: SETTING_NAMES.leaseSeconds,
  renewDeadlineMs: SETTING_NAMES.renewDeadlineSeconds,
  retryPeriodMs: SETTING_NAMES.retryPeriodSeconds,
  requestTimeoutMs: SETTING_NAMES.requestTimeoutSeconds,
  stallTimeoutMs: SETTING_NAMES.stallTimeoutSeconds,
  drainTimeoutMs: SETTING_NAMES.drainTimeoutSeconds,
  passIntervalMs: SETTING_NAMES.passIntervalSeconds,
  idlePassIntervalMs: SETTING_NAMES.idlePassIntervalSeconds,
};

const TIMING_SETTINGS: TimingNames = {
  name: (key) => TIMING_SETTING_NAMES[key] ?? key,
  show: (key, value) => String(key === 'leaseSeconds' || key === 'jitter' ? value : value / 1000),
  error: (name, detail) => new ConfigError(name, detail),
};

/** D defaults to 2L/3, rounded to whole milliseconds. */
function defaultRenewDeadline(leaseSeconds: number): number {
  return Math.round((leaseSeconds * 2000) / 3) / 1000;
}

interface NameRule {
  readonly pattern: RegExp;
  readonly description: string;
}

// Azure naming rules (containers and queues: 3-63 lowercase letters, digits, single hyphens).
const CONTAINER_NAME: NameRule = {
  pattern: /^(?=.{3,63}$)[a-z0-9]+(-[a-z0-9]+)*$/,
  description: '3-63 lowercase letters, digits and single hyphens, starting and ending with a letter or digit',
};
const QUEUE_NAME = CONTAINER_NAME;
const BLOB_NAME: NameRule = {
  pattern: /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/,
  description: '1-255 letters, digits, dots, underscores and hyphens, starting with a letter or digit',
};
// Azure table names: 3-63 letters and digits, starting with a letter ("tables" is reserved).
const TABLE_NAME: NameRule = {
  pattern: /^(?!tables$)[A-Za-z][A-Za-z0-9]{2,62}$/i,
  description: '3-63 letters and digits, starting with a letter (not "tables")',
};
// Durable task hub names: 3-45 alphanumeric characters, starting with a letter.
const TASK_HUB_NAME: NameRule = {
  pattern: /^[A-Za-z][A-Za-z0-9]{2,44}$/,
  description: '3-45 letters and digits, starting with a letter',
};

function readRaw(env: Env, name: string): string | undefined {
  const value = env[name];
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  return trimmed === '' ? undefined : trimmed;
}

/**
 * The job input containers: names, or `prefix-*` for every container whose name starts with
 * `prefix-`. An entry that could reach the app's own containers or a reserved family (the task hub's
 * `<hub>-*`, the host's `azure-webjobs-*`) is refused at start rather than silently ignored.
 */
function readInputContainers(env: Env, own: readonly string[], families: readonly string[]): string[] {
  const name = SETTING_NAMES.inputContainers;
  const entries = readNameList(env, {
    name,
    fallback: DEFAULTS.inputContainers,
    rule: CONTAINER_NAME,
    kind: 'container',
    example: 'inputs-*',
    access: 'let jobs read',
    own,
    families,
  });
  if (entries.length === 0) {
    throw new ConfigError(name, `is empty: name at least one container jobs may read (default "${DEFAULTS.inputContainers}").`);
  }
  return entries;
}

/**
 * An allow-list setting of storage names (input containers, reply queues): comma-separated names, or
 * `prefix-*` for every name that starts with `prefix-`. An entry that could reach one of the app's
 * own names or a reserved family is refused at start rather than silently ignored.
 */
function readNameList(
  env: Env,
  list: {
    readonly name: string;
    readonly fallback: string;
    readonly rule: NameRule;
    /** What the names are, in messages: `container`, `queue`. */
    readonly kind: string;
    readonly example: string;
    /** What an entry grants, in messages: `let jobs read`. */
    readonly access: string;
    readonly own: readonly string[];
    readonly families: readonly string[];
  },
): string[] {
  const { name, kind } = list;
  const entries = (readRaw(env, name) ?? list.fallback).split(',').map((e) => e.trim()).filter((e) => e !== '');
  for (const entry of entries) {
    const prefix = entry.endsWith('*') ? entry.slice(0, -1) : undefined;
    if (prefix !== undefined ? !/^[a-z0-9]+(-[a-z0-9]+)*-$/.test(prefix) || prefix.length > 62 : !list.rule.pattern.test(entry)) {
      const rule = `a ${kind} name (${list.rule.description})`;
      throw new ConfigError(name, `"${entry}" is neither ${rule} nor a prefix written like "${list.example}".`);
    }
    const ownHit = list.own.find((own) => allowListed([entry], own));
    if (ownHit !== undefined) throw new ConfigError(name, `"${entry}" would ${list.access} the app's own ${kind} "${ownHit}".`);
    const family = list.families.find((f) => (prefix === undefined ? entry.startsWith(f) : prefix.startsWith(f) || f.startsWith(prefix)));
    if (family !== undefined) throw new ConfigError(name, `"${entry}" would ${list.access} the reserved ${kind}s "${family}*".`);
  }
  return entries;
}

/** Whether `name` is on an allow-list of names and `prefix-*` entries (JOB_INPUT_CONTAINERS, JOB_REPLY_QUEUES). */
export function allowListed(entries: readonly string[], name: string): boolean {
  return entries.some((entry) => (entry.endsWith('*') ? name.startsWith(entry.slice(0, -1)) : name === entry));
}

function readName(env: Env, name: string, fallback: string, rule: NameRule): string {
  const value = readRaw(env, name) ?? fallback;
  if (!rule.pattern.test(value)) {
    throw new ConfigError(name, `"${value}" is not a valid name: use ${rule.description}.`);
  }
  return value;
}

interface NumberRule {
  readonly min?: number;
  readonly max?: number;
  readonly integer?: boolean;
  readonly hint?: string;
}

function readNumber(env: Env, name: string, fallback: number, rule: NumberRule = {}): number {
  const raw = readRaw(env, name);
  const value = raw === undefined ? fallback : Number(raw);
  const shown = raw ?? String(fallback);
  if (!Number.isFinite(value)) {
    throw new ConfigError(name, `"${shown}" is not a number.`);
  }
  if (rule.integer === true && !Number.isInteger(value)) {
    throw new ConfigError(name, `"${shown}" must be a whole number.`);
  }
  const min = rule.min ?? -Infinity;
  const max = rule.max ?? Infinity;
  if (value < min || value > max) {
    const range = rule.max === undefined ? `${min} or more` : `${min} to ${formatBound(max)}`;
    throw new ConfigError(name, `${shown} is out of range: use ${range}${rule.hint === undefined ? '' : ` (${rule.hint})`}.`);
  }
  return value;
}

function formatBound(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(3);
}

function readInstanceId(env: Env): string {
  const explicit = readRaw(env, SETTING_NAMES.instanceId);
  // WEBSITE_INSTANCE_ID is set by App Service / Functions on Azure; it is long, so keep a prefix.
  const azure = readRaw(env, 'WEBSITE_INSTANCE_ID');
  const value = explicit ?? (azure === undefined ? `${hostName()}-${process.pid}` : azure.slice(0, 16));
  if (!/^[A-Za-z0-9._:-]{1,128}$/.test(value)) {
    throw new ConfigError(SETTING_NAMES.instanceId, `"${value}" must be 1-128 letters, digits, '.', '_', ':' or '-'.`);
  }
  return value;
}

function hostName(): string {
  const name = (readRaw(process.env, 'HOSTNAME') ?? readRaw(process.env, 'COMPUTERNAME') ?? 'local').replace(/[^A-Za-z0-9._-]/g, '-');
  return name.slice(0, 64);
}

// Six-field NCRONTAB (seconds first) or a TimeSpan "hh:mm:ss"; the host parses it fully, this catches typos.
function readSchedule(env: Env): string {
  const value = readRaw(env, SETTING_NAMES.timerSchedule) ?? DEFAULTS.timerSchedule;
  const fields = value.split(/\s+/);
  const isTimeSpan = /^\d{1,2}:\d{2}:\d{2}$/.test(value);
  if (!isTimeSpan && (fields.length !== 6 || !fields.every((f) => /^[0-9A-Za-z*,/-]+$/.test(f)))) {
    throw new ConfigError(
      SETTING_NAMES.timerSchedule,
      `"${value}" is not a six-field NCRONTAB expression ({second} {minute} {hour} {day} {month} {day-of-week}), ` +
        `e.g. "${DEFAULTS.timerSchedule}".`,
    );
  }
  return value;
}

const IDENTITY_SUFFIXES = ['blobServiceUri', 'queueServiceUri', 'tableServiceUri', 'serviceUri', 'accountName'] as const;

function hasConnection(env: Env, name: string): boolean {
  return readRaw(env, name) !== undefined || IDENTITY_SUFFIXES.some((s) => readRaw(env, `${name}__${s}`) !== undefined);
}

/**
 * Reads the storage connection named by a binding's `connection` property (a connection string or
 * identity-based `<name>__*` settings), with the same validation as the app's own. Used by the
 * development host for trigger and output bindings.
 */
export function readStorageConnection(env: Env, name: string): StorageConnection {
  return readConnection(env, name);
}

function readConnection(env: Env, name: string): StorageConnection {
  const connectionString = readRaw(env, name);
  if (connectionString !== undefined) {
    if (
      connectionString !== 'UseDevelopmentStorage=true' &&
      !/(^|;)\s*(AccountName|BlobEndpoint|QueueEndpoint)\s*=/i.test(connectionString)
    ) {
      // Never echo the value: it may contain an account key.
      throw new ConfigError(
        name,
        'is not a storage connection string (expected AccountName=... or BlobEndpoint=..., or UseDevelopmentStorage=true).',
      );
    }
    checkConnectionString(name, connectionString);
    return { kind: 'connectionString', settingName: name, connectionString };
  }
  const accountName = readRaw(env, `${name}__accountName`);
  if (accountName !== undefined && !/^[a-z0-9]{3,24}$/.test(accountName)) {
    throw new ConfigError(`${name}__accountName`, `"${accountName}" is not a storage account name (3-24 lowercase letters and digits).`);
  }
  const fromAccount = (service: string): string | undefined =>
    accountName === undefined ? undefined : `https://${accountName}.${service}.core.windows.net`;
  const blobServiceUri = readRaw(env, `${name}__blobServiceUri`) ?? readRaw(env, `${name}__serviceUri`) ?? fromAccount('blob');
  const queueServiceUri = readRaw(env, `${name}__queueServiceUri`) ?? fromAccount('queue');
  const tableServiceUri = readRaw(env, `${name}__tableServiceUri`) ?? fromAccount('table');
  if (blobServiceUri === undefined && queueServiceUri === undefined) {
    throw new ConfigError(
      name,
      `is not set: give a connection string (UseDevelopmentStorage=true for Azurite), or identity-based settings ` +
        `${name}__blobServiceUri and ${name}__queueServiceUri (or ${name}__accountName).`,
    );
  }
  if (blobServiceUri === undefined) {
    throw new ConfigError(
      `${name}__blobServiceUri`,
      `is missing: the app needs blob access for leases and results (or set ${name}__accountName).`,
    );
  }
  if (queueServiceUri === undefined) {
    throw new ConfigError(
      `${name}__queueServiceUri`,
      `is missing: the app needs queue access for jobs and work items (or set ${name}__accountName).`,
    );
  }
  for (const [suffix, uri] of [
    ['blobServiceUri', blobServiceUri],
    ['queueServiceUri', queueServiceUri],
    ['tableServiceUri', tableServiceUri ?? blobServiceUri],
  ] as const) {
    if (!isHttpUrl(uri)) throw new ConfigError(`${name}__${suffix}`, `"${uri}" is not an http(s) URL.`);
  }
  const credential = readRaw(env, `${name}__credential`);
  if (credential !== undefined && credential.toLowerCase() !== 'managedidentity') {
    throw new ConfigError(
      `${name}__credential`,
      `"${credential}" is not supported: use "managedidentity" or leave it unset for DefaultAzureCredential.`,
    );
  }
  const clientId = readRaw(env, `${name}__clientId`);
  return {
    kind: 'identity',
    settingName: name,
    blobServiceUri,
    queueServiceUri,
    tableServiceUri: tableServiceUri ?? blobServiceUri.replace('.blob.', '.table.'),
    ...(credential === undefined ? {} : { credential: credential.toLowerCase() }),
    ...(clientId === undefined ? {} : { clientId }),
  };
}

/** The parts the SDK would otherwise refuse only when the first client is built, without naming the setting. */
function checkConnectionString(name: string, connectionString: string): void {
  if (connectionString === 'UseDevelopmentStorage=true') return;
  const parts = new Map<string, string>();
  for (const pair of connectionString.split(';')) {
    const at = pair.indexOf('=');
    if (at > 0) parts.set(pair.slice(0, at).trim().toLowerCase(), pair.slice(at + 1).trim());
  }
  for (const key of ['BlobEndpoint', 'QueueEndpoint', 'TableEndpoint']) {
    const value = parts.get(key.toLowerCase());
    if (value !== undefined && !isHttpUrl(value)) throw new ConfigError(name, `${key} in the connection string is not an http(s) URL.`);
  }
  const hasCredential = parts.has('accountkey') || parts.has('sharedaccesssignature');
  if (!hasCredential) {
    throw new ConfigError(name, 'the connection string has neither AccountKey nor SharedAccessSignature (or use identity-based settings).');
  }
}

function isHttpUrl(value: string): boolean {
  try {
    const url = new URL(value);
    return url.protocol === 'https:' || url.protocol === 'http:';
  } catch {
    return false;
  }
}
