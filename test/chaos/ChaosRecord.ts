/**
 * Everything a chaos run records, in one plain shape: what the harness did (faults, submissions),
 * what it saw (log lines of every process, /api/leader answers, lease blob reads, storage writes
 * through the proxies, process exits) and the jobs' final status. The checker reads only this, so
 * it can be tested on made-up records, and a run's record can be kept and read again.
 * Times are `Date.now()` milliseconds of this machine (the processes log with the same clock).
 */

/** One process of one instance: `gen` counts its starts, `holder` is its COORDINATOR_INSTANCE_ID. */
export interface ProcessRef {
  readonly instance: string;
  readonly gen: number;
  readonly pid: number;
  readonly holder: string;
}

export interface LogEntry extends ProcessRef {
  readonly at: number;
  readonly event: string;
  readonly fields: Readonly<Record<string, unknown>>;
}

/** One GET /api/leader answer (or failure) from one process. */
export interface LeaderPoll extends ProcessRef {
  readonly sentAt: number;
  readonly receivedAt: number;
  readonly httpStatus?: number;
  readonly error?: string;
  /** This process's own role and epoch (`instance.role`, `instance.epoch`). */
  readonly role?: string;
  readonly epoch?: number | null;
  /** What the process read from the lease blob (`epoch`, `holder`). */
  readonly leaseEpoch?: number | null;
  readonly leaseHolder?: string | null;
}

/** The harness's own read of the lease blob's metadata (not through any proxy). */
export interface LeaseRead {
  readonly sentAt: number;
  readonly receivedAt: number;
  readonly epoch?: number;
  readonly holder?: string;
  readonly leaseState?: string;
  readonly error?: string;
}

/**
 * A create-once write a leader makes, seen at the instance's storage proxy: a job record, or the
 * write that makes its Durable instance exist (the development host's instance blob, written with
 * If-None-Match: *; on the extensions host the insert of its Instances row).
 */
export interface StorageWrite extends ProcessRef {
  readonly kind: 'instance-create' | 'record-create';
  readonly jobId: string;
  /** When its first byte left the proxy for storage: it cannot have landed earlier. */
  readonly forwardedAt: number;
  readonly status?: number;
  readonly answeredAt?: number;
}

export interface ProcessExit extends ProcessRef {
  readonly at: number;
  readonly code: number | null;
  readonly signal: string | null;
  /** The harness sent the signal that ended it (a fault, or the final shutdown). */
  readonly expected: boolean;
  readonly cause?: string;
  /**
   * On the extensions host, the error its WebJobs host stopped itself on (exit code 1), from its
   * `exthost: unhandled error, stopping the host: ...` line, when it printed one.
   */
  readonly hostError?: string;
  readonly lastLines: readonly string[];
}

export type FaultKind = 'kill' | 'pause' | 'term' | 'restart' | 'blackhole' | 'reset';

/** A step of a leader starting one job, as its storage requests show it. */
export type StartStep = 'status-read' | 'record-read' | 'start-read' | 'instance-write' | 'start-message' | 'queue-delete';

export const START_STEPS: readonly StartStep[] = ['status-read', 'record-read', 'start-read', 'start-message', 'instance-write', 'queue-delete'];

export interface PlannedFault {
  readonly id: string;
  /** Milliseconds after the fault phase began. */
  readonly at: number;
  readonly kind: FaultKind;
  /** Who it hits; a `step` fault hits whichever process reaches that step of starting its job. */
  readonly target: 'leader' | 'follower' | 'any';
  /** Pause, blackhole, reset: how long. Kill, term: how long the instance stays down before its restart. */
  readonly durationMs: number;
  readonly step?: StartStep;
}

export interface FaultRecord {
  readonly planned: PlannedFault;
  readonly outcome: 'injected' | 'skipped' | 'not-fired';
  readonly note?: string;
  readonly at?: number;
  readonly endedAt?: number;
  readonly target?: ProcessRef;
  /** The target's role when it was hit, by the harness's latest knowledge, and the epoch it led. */
  readonly role?: 'leader' | 'follower';
  readonly epoch?: number;
  /** For a `step` fault: the job whose start it interrupted. */
  readonly jobId?: string;
}

export type JobVia = 'http' | 'queue';
export type JobSource = 'inline' | 'blob';

export interface SumResult {
  readonly count: number;
  readonly sum: number | string;
  readonly min: number | string | null;
  readonly max: number | string | null;
}

export type JobExpectation = { readonly status: 'completed'; readonly result: SumResult } | { readonly status: 'rejected'; readonly code: string };

/** What GET /api/jobs/{id} answered (the fields the checker reads). */
export interface JobView {
  readonly jobId: string;
  readonly status: string;
  readonly result?: unknown;
  readonly error?: { readonly code?: string; readonly message?: string } | null;
  readonly progress?: { readonly items?: { readonly total: number; readonly done: number; readonly failed: number } } | null;
  readonly epoch?: number | null;
  readonly createdAt?: string | null;
}

export interface JobOutcome {
  readonly label: string;
  readonly jobId: string;
  readonly via: JobVia;
  readonly source: JobSource;
  readonly itemCount: number;
  readonly chunkSize: number;
  readonly expect: JobExpectation;
  readonly submittedAt: number;
  /** Accepted by the API (202) or the queue; a submission every instance refused is not checked. */
  readonly accepted: boolean;
  readonly submitNote?: string;
  /** The fault whose trigger this job carried. */
  readonly faultId?: string;
  readonly final?: JobView;
  readonly finishedAt?: number;
  readonly lastSeen?: JobView;
  /** For a job that never finished: what the Durable backend says about its orchestration. */
  readonly durableStatus?: unknown;
  /** For a finished, accepted job: the start its start record names, and what that start's instance shows. */
  readonly workingRun?: WorkingRun;
  /** The outcome messages its reply queue got (every job is submitted with `replyTo` and its label as `correlationId`). */
  readonly replies?: readonly ReplySeen[];
}

/** One message of the run's reply queue, as far as the checker needs it. */
export interface ReplySeen {
  readonly jobId: string;
  readonly status: string;
  readonly correlationId: string | null;
}

/** The instance a finished job's start record names, as Durable shows it at the end of the run. */
export interface WorkingRun {
  readonly startId: string;
  readonly generation: number;
  readonly instanceId: string;
  /** The start id in that instance's input (another start's, if a late start replaced its history). */
  readonly instanceStartId?: string | null;
  readonly runtimeStatus?: string;
  /** Its output is a stand-down (`superseded`): it did none of the work. */
  readonly stoodDown?: boolean;
  /** The instance could not be read (HTTP status or error). */
  readonly unreadable?: string;
}

export interface ChaosRecord {
  readonly seed: number;
  readonly mode: 'short' | 'long';
  /** Which host ran the instances (absent in records from before the switch: the development host). */
  readonly host?: 'devhost' | 'extensions';
  readonly separateApps: boolean;
  readonly instances: number;
  /** Run in Flex Consumption's shape (one instance per scale group: ChaosOptions.flex). */
  readonly flex?: boolean;
  /** The `npm run chaos` options that repeat this run's plan. */
  readonly repeatArgs: string;
  readonly startedAt: number;
  readonly faultPhaseStartedAt: number;
  readonly faultPhaseEndedAt: number;
  readonly endedAt: number;
  readonly logs: readonly LogEntry[];
  readonly leaderPolls: readonly LeaderPoll[];
  readonly leaseReads: readonly LeaseRead[];
  readonly writes: readonly StorageWrite[];
  readonly exits: readonly ProcessExit[];
  readonly faults: readonly FaultRecord[];
  readonly jobs: readonly JobOutcome[];
}
