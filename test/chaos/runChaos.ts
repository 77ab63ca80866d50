/**
 * One chaos run: start the cluster, wait for a leader, then for the fault phase submit the plan's
 * jobs and inject its faults while watching everything (log lines, /api/leader of every instance,
 * the lease blob, the leaders' create-once writes); then end every fault, let the jobs finish,
 * stop the cluster gracefully and hand the record to the checker.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { BlobServiceClient } from '@azure/storage-blob';
import { QueueServiceClient } from '@azure/storage-queue';

import { type E2EHost, e2eHost } from '../e2e/support/appHost';
import { ChaosCluster, type ChaosInstance, TASK_HUB } from './ChaosCluster';
import { buildPlan, type ChaosPlan, JOB_OPTIONS, type JobPlan, type StepFault } from './chaosPlan';
import {
  type ChaosRecord,
  type FaultRecord,
  type JobOutcome,
  type JobView,
  type LeaderPoll,
  type LeaseRead,
  type LogEntry,
  type PlannedFault,
  type ProcessExit,
  type ProcessRef,
  type ReplySeen,
  type WorkingRun,
} from './ChaosRecord';
import { checkRun, type Failover, failovers, type Violation } from './checkRun';
import { formatSummary } from './formatSummary';
import { SeededRandom } from './SeededRandom';
import { StartPathWatcher, stepNeedsBody } from './StartPathWatcher';


/** What the chaos check reads of an instance's input: a job run's `run`, or a shared run's `runs`. */
interface JobInstanceInput {
  readonly run?: { readonly jobId?: string; readonly startId?: string };
  readonly runs?: ReadonlyArray<{ readonly run?: { readonly jobId?: string; readonly startId?: string } }>;
}
export interface ChaosOptions {
  /**
   * Which host runs the instances: the extensions host (exthost/, the real Durable, queue and timer
   * extensions), or the development host (`npm run chaos -- --host devhost`). Absent: as E2E_HOST
   * says for the end-to-end tests (test/e2e/support/appHost.ts: the extensions host by default).
   */
  readonly host?: E2EHost;
  readonly mode: 'short' | 'long';
  readonly seed: number;
  readonly instances: number;
  readonly separateApps: boolean;
  /**
   * Flex Consumption's shape (scripts/flexShape.ts): `timer-1`, `durable-1`, `http-1`, `worker-1`,
   * `worker-2`, each running one scale group's functions; `instances` and `separateApps` do not
   * apply. The harness's HTTP calls (submissions, status reads, /api/leader, the Durable status API)
   * go to the `http` group's instance, which is all the platform routes them to; the faults hit any.
   */
  readonly flex?: boolean;
  /** Long mode: length of the fault phase. */
  readonly faultPhaseMs?: number;
  /** Step faults instead of the mode's own (see PlanOptions.stepFaults). */
  readonly stepFaults?: readonly StepFault[];
  /** Where logs and the record go; a new temporary folder when absent. */
  readonly runDir?: string;
  /** Progress lines for a person watching (default: none). */
  readonly progress?: (line: string) => void;
}

export interface ChaosReport {
  readonly record: ChaosRecord;
  readonly plan: ChaosPlan;
  readonly violations: readonly Violation[];
  readonly failovers: readonly Failover[];
  readonly summary: string;
  readonly runDir: string;
}

const TERMINAL = new Set(['completed', 'completed_with_errors', 'failed', 'cancelled', 'rejected']);
const LEASE_CONTAINER = 'leader-election';
const LEASE_BLOB = 'coordinator';
const JOBS_QUEUE = 'jobs';
/** Every job names it as its `replyTo` (with its label as `correlationId`): the checker wants one reply per finished job. */
const REPLY_QUEUE = 'chaos-replies';
const RESULTS_CONTAINER = 'job-results';
/** Where items blobs go: a container of the harness, not one of the app's own. */
const INPUT_CONTAINER = 'chaos-inputs';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, Math.max(0, ms)));

interface HttpAnswer {
  readonly status: number;
  readonly json: unknown;
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const runDir = options.runDir ?? mkdtempSync(join(tmpdir(), `chaos-${options.seed}-`));
  const say = options.progress ?? ((): void => undefined);
  const plan = buildPlan({
    mode: options.mode,
    seed: options.seed,
    ...(options.faultPhaseMs === undefined ? {} : { faultPhaseMs: options.faultPhaseMs }),
    ...(options.stepFaults === undefined ? {} : { stepFaults: options.stepFaults }),
  });
  // Runtime choices (which follower) come from their own stream, so they do not shift the plan.
  const choose = new SeededRandom(options.seed ^ 0x5eed);
  const startedAt = Date.now();

  const logs: LogEntry[] = [];
  const leaderPolls: LeaderPoll[] = [];
  const leaseReads: LeaseRead[] = [];
  const exits: ProcessExit[] = [];
  const faults: FaultRecord[] = [];
  const jobs = new Map<string, JobOutcome>();
  let leaderNow: { holder: string; epoch: number } | undefined;

  const host = options.host ?? e2eHost();
  const names = { taskHub: TASK_HUB, resultsContainer: RESULTS_CONTAINER, jobsQueue: JOBS_QUEUE, host };
  const watcher = new StartPathWatcher(names);
  const cluster: ChaosCluster = new ChaosCluster({
    host,
    instances: options.instances,
    separateApps: options.separateApps,
    ...(options.flex === true ? { flex: true } : {}),
    runDir,
    // The jobs' itemsBlob inputs live here: the app reads only the containers this setting allows.
    settings: { JOB_INPUT_CONTAINERS: INPUT_CONTAINER, JOB_REPLY_QUEUES: REPLY_QUEUE },
    onLog: (entry) => {
      logs.push(entry);
      const epoch = typeof entry.fields.epoch === 'number' ? entry.fields.epoch : undefined;
      if (entry.event === 'leader.acquired' && epoch !== undefined) {
        leaderNow = { holder: entry.holder, epoch };
        say(`${entry.holder} leads, epoch ${epoch}`);
      } else if (['leader.lost', 'leader.released', 'leader.stalled'].includes(entry.event) && leaderNow?.holder === entry.holder && leaderNow.epoch === epoch) {
        leaderNow = undefined;
      }
    },
    onExit: (exit) => {
      exits.push(exit);
      if (leaderNow?.holder === exit.holder) leaderNow = undefined;
      if (!exit.expected) say(`UNEXPECTED: ${exit.holder} (pid ${exit.pid}) exited (${exit.signal ?? `code ${String(exit.code)}`})`);
    },
    onRequest: (instance, service, request) => {
      const ref = instance.ref();
      return ref === undefined ? 'forward' : watcher.onRequest(ref, request, service);
    },
    wantsBody: (service, request) => stepNeedsBody(names, service, request),
    onResponse: (_instance, _service, response) => watcher.onResponse(response),
  });

  const instanceOf = (ref: ProcessRef): ChaosInstance | undefined => cluster.instances.find((i) => i.process?.holder === ref.holder);
  const leaderInstance = (): ChaosInstance | undefined => (leaderNow === undefined ? undefined : cluster.instances.find((i) => i.process?.holder === leaderNow?.holder));
  const busy = new Set<ChaosInstance>();
  const impaired = (): number => cluster.instances.filter((i) => !i.healthy || i.down || busy.has(i)).length;
  const flex = options.flex === true;
  /** How many instances the run has: the option, or the flex shape's. */
  const instanceCount = (): number => cluster.instances.length;

  const request = async (instance: ChaosInstance, method: string, path: string, body?: string, timeoutMs = 8_000): Promise<HttpAnswer> => {
    const response = await fetch(`${instance.baseUrl}${path}`, {
      method,
      headers: { 'x-functions-key': cluster.masterKey, 'content-type': 'application/json' },
      signal: AbortSignal.timeout(timeoutMs),
      ...(body === undefined ? {} : { body }),
    });
    const text = await response.text();
    let json: unknown;
    try {
      json = text === '' ? undefined : JSON.parse(text);
    } catch {
      json = text;
    }
    return { status: response.status, json };
  };
  /** The instances that answer the app's HTTP API and are up (every instance, except in the flex shape). */
  const healthyInstances = (): ChaosInstance[] => cluster.instances.filter((i) => i.servesApi && i.healthy && !i.down);
  const apiInstances = (): ChaosInstance[] => cluster.instances.filter((i) => i.servesApi);

  say(`run folder ${runDir}`);
  // Stopped (SIGSTOP) processes ignore Ctrl-C: stop the cluster ourselves, then go.
  const interrupted = (signal: NodeJS.Signals): void => {
    say(`${signal}: stopping the cluster`);
    void cluster.stop().finally(() => process.exit(130));
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    return await run();
  } catch (err) {
    await cluster.stop().catch(() => undefined);
    throw err;
  } finally {
    process.removeListener('SIGINT', interrupted);
    process.removeListener('SIGTERM', interrupted);
  }

  async function run(): Promise<ChaosReport> {
    await cluster.start();
    const blobs = BlobServiceClient.fromConnectionString(cluster.connectionString);
    const queues = QueueServiceClient.fromConnectionString(cluster.connectionString);
    const inputs = blobs.getContainerClient(INPUT_CONTAINER);
    await inputs.createIfNotExists();
    const jobsQueue = queues.getQueueClient(JOBS_QUEUE);
    await jobsQueue.createIfNotExists();
    const hostName = host === 'extensions' ? 'extensions host' : 'development host';
    const shape = flex ? "Flex Consumption's shape, one app" : options.separateApps ? 'separate apps' : 'one app';
    say(`${instanceCount()} instances up on the ${hostName} (${shape}): ${cluster.instances.map((i) => `${i.process?.holder} pid ${i.process?.pid} ${i.baseUrl}`).join(', ')}`);

    // Watchers: the lease blob (sequential reads, so their order is time order) and every instance's view.
    let watching = true;
    const leaseBlob = blobs.getContainerClient(LEASE_CONTAINER).getBlobClient(LEASE_BLOB);
    const leaseWatch = (async () => {
      while (watching) {
        const sentAt = Date.now();
        try {
          const props = await leaseBlob.getProperties({ abortSignal: AbortSignal.timeout(5_000) });
          const epoch = Number(props.metadata?.epoch);
          leaseReads.push({
            sentAt,
            receivedAt: Date.now(),
            ...(Number.isSafeInteger(epoch) && props.metadata?.epoch !== undefined ? { epoch } : {}),
            ...(props.metadata?.holder === undefined ? {} : { holder: props.metadata.holder }),
            ...(props.leaseState === undefined ? {} : { leaseState: props.leaseState }),
          });
        } catch (err) {
          leaseReads.push({ sentAt, receivedAt: Date.now(), error: err instanceof Error ? err.message : String(err) });
        }
        await sleep(500);
      }
    })();
    // GET /api/leader shows the answering instance's role today; where it does not, the keyed /api/cluster does.
    let leaderPath = '/api/leader';
    const polling = new Set<ChaosInstance>();
    const pollLeaders = (): void => {
      // The app's HTTP API only: in the flex shape the other groups' instances have no /api routes.
      for (const instance of apiInstances()) {
        const ref = instance.ref();
        if (ref === undefined || instance.paused || polling.has(instance)) continue;
        polling.add(instance);
        const sentAt = Date.now();
        void request(instance, 'GET', leaderPath, undefined, 4_000)
          .then(({ status, json }) => {
            const view = json as { holder?: string | null; epoch?: number | null; instance?: { role?: string; epoch?: number | null } } | undefined;
            if (status === 200 && view?.instance === undefined && leaderPath === '/api/leader') leaderPath = '/api/cluster';
            leaderPolls.push({
              ...ref,
              sentAt,
              receivedAt: Date.now(),
              httpStatus: status,
              ...(view?.instance?.role === undefined ? {} : { role: view.instance.role, epoch: view.instance.epoch ?? null }),
              ...(status === 200 ? { leaseEpoch: view?.epoch ?? null, leaseHolder: view?.holder ?? null } : {}),
            });
          })
          .catch((err: unknown) => leaderPolls.push({ ...ref, sentAt, receivedAt: Date.now(), error: err instanceof Error ? err.message : String(err) }))
          .finally(() => polling.delete(instance));
      }
    };
    const leaderTimer = setInterval(pollLeaders, 1_000);

    const waitFor = async (what: string, check: () => boolean, timeoutMs: number): Promise<boolean> => {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > deadline) {
          say(`gave up waiting for ${what}`);
          return false;
        }
        await sleep(200);
      }
      return true;
    };
    await waitFor('a first leader', () => leaderInstance() !== undefined, 90_000);

    // ---- submissions and status --------------------------------------------------------------
    const submit = async (job: JobPlan, faultId?: string): Promise<void> => {
      const submittedAt = Date.now();
      const body: Record<string, unknown> = {
        ...(job.jobId === undefined ? {} : { jobId: job.jobId }),
        workType: 'sum',
        options: { chunkSize: job.chunkSize, ...JOB_OPTIONS },
        replyTo: REPLY_QUEUE,
        correlationId: job.label,
      };
      if (job.source === 'blob') {
        const name = `${job.label}.json`;
        const text = JSON.stringify(job.items);
        await inputs.getBlockBlobClient(name).upload(text, Buffer.byteLength(text));
        body.itemsBlob = `${INPUT_CONTAINER}/${name}`;
      } else {
        body.items = job.items;
      }
      const base = { label: job.label, via: job.via, source: job.source, itemCount: job.items.length, chunkSize: job.chunkSize, expect: job.expect, submittedAt, ...(faultId === undefined ? {} : { faultId }) };
      if (job.via === 'queue') {
        const sent = await jobsQueue.sendMessage(Buffer.from(JSON.stringify(body), 'utf8').toString('base64'));
        const jobId = job.jobId ?? `q-${sent.messageId}`;
        jobs.set(jobId, { ...base, jobId, accepted: true });
        return;
      }
      const jobId = job.jobId as string;
      const notes: string[] = [];
      const deadline = submittedAt + 90_000;
      for (let attempt = 0; Date.now() < deadline; attempt++) {
        const target = choose.pick(healthyInstances().length > 0 ? healthyInstances() : apiInstances());
        try {
          const answer = await request(target, 'POST', '/api/jobs', JSON.stringify(body), 10_000);
          if (answer.status === 202) {
            jobs.set(jobId, { ...base, jobId, accepted: true, ...(notes.length === 0 ? {} : { submitNote: notes.join('; ') }) });
            return;
          }
          notes.push(`${target.name}: ${answer.status} ${JSON.stringify(answer.json).slice(0, 200)}`);
        } catch (err) {
          notes.push(`${target.name}: ${err instanceof Error ? err.message : String(err)}`);
        }
        await sleep(1_000);
      }
      // Never accepted (every try met a fault): an earlier try may still have queued it, so it is watched but not required.
      jobs.set(jobId, { ...base, jobId, accepted: false, submitNote: notes.join('; ') });
    };

    const refreshJob = async (job: JobOutcome): Promise<void> => {
      const target = healthyInstances()[0] ?? apiInstances().find((i) => i.running && !i.paused);
      if (target === undefined) return;
      try {
        const answer = await request(target, 'GET', `/api/jobs/${encodeURIComponent(job.jobId)}`);
        if (answer.status !== 200) return;
        const view = answer.json as JobView;
        const current = jobs.get(job.jobId) ?? job;
        jobs.set(job.jobId, { ...current, lastSeen: view, ...(TERMINAL.has(view.status) ? { final: view, finishedAt: Date.now() } : {}) });
        if (TERMINAL.has(view.status)) say(`job ${job.jobId} ${view.status}`);
      } catch {
        // The instance went down under us; the next round asks another.
      }
    };
    const unfinished = (): JobOutcome[] => [...jobs.values()].filter((j) => j.final === undefined && !watcher.armed(j.jobId));
    let statusRunning = true;
    const statusLoop = (async () => {
      while (statusRunning) {
        for (const job of unfinished()) {
          if (!statusRunning) break;
          await refreshJob(job);
        }
        await sleep(2_000);
      }
    })();

    // ---- faults ---------------------------------------------------------------------------------
    const roleOf = (instance: ChaosInstance): { role: 'leader' | 'follower'; epoch?: number } =>
      leaderNow !== undefined && instance.process?.holder === leaderNow.holder ? { role: 'leader', epoch: leaderNow.epoch } : { role: 'follower' };

    const pickTarget = async (target: PlannedFault['target']): Promise<ChaosInstance | string> => {
      if (target === 'leader') {
        // A failover may be under way: give it a moment.
        await waitFor('a leader to hit', () => {
          const leader = leaderInstance();
          return leader !== undefined && leader.healthy && !busy.has(leader);
        }, 20_000);
        const leader = leaderInstance();
        if (leader === undefined || !leader.healthy || busy.has(leader)) return 'no healthy leader to hit';
        return impaired() + 1 > instanceCount() - 1 ? 'every other instance is already impaired' : leader;
      }
      const pool = cluster.instances.filter((i) => i.healthy && !i.down && !busy.has(i) && (target === 'any' || i !== leaderInstance()));
      if (pool.length === 0) return `no healthy ${target} to hit`;
      if (impaired() + 1 > instanceCount() - 1) return 'every other instance is already impaired';
      return choose.pick(pool);
    };

    /** Holds an instance down or impaired for the fault's duration, then brings it back. */
    const recover = async (instance: ChaosInstance, fault: PlannedFault, process: ProcessRef): Promise<number> => {
      if (fault.kind === 'kill' || fault.kind === 'term' || fault.kind === 'restart') {
        await cluster.waitForExit(instance);
        await sleep(fault.durationMs);
        if (!instance.running) {
          try {
            await cluster.startInstance(instance);
          } catch (err) {
            say(`restart of ${instance.name} failed: ${err instanceof Error ? err.message : String(err)}`);
          }
        }
      } else if (fault.kind === 'pause') {
        await sleep(fault.durationMs);
        if (instance.process?.holder === process.holder) cluster.signal(instance, 'SIGCONT', fault.id);
      } else {
        await sleep(fault.durationMs);
        cluster.restoreStorage(instance);
      }
      return Date.now();
    };

    /** Injects the fault on `instance` at once (synchronously: a step fault runs inside the proxy's callback). */
    const inject = (instance: ChaosInstance, fault: PlannedFault): void => {
      if (fault.kind === 'kill') {
        instance.down = true;
        cluster.signal(instance, 'SIGKILL', fault.id);
      } else if (fault.kind === 'term' || fault.kind === 'restart') {
        instance.down = true;
        cluster.signal(instance, 'SIGTERM', fault.id);
      } else if (fault.kind === 'pause') {
        cluster.signal(instance, 'SIGSTOP', fault.id);
      } else {
        cluster.cutStorage(instance, fault.kind);
      }
    };

    const faultTasks: Array<Promise<void>> = [];
    const runFault = async (fault: PlannedFault): Promise<void> => {
      if (fault.step !== undefined) {
        await runStepFault(fault);
        return;
      }
      const picked = await pickTarget(fault.target);
      if (typeof picked === 'string') {
        faults.push({ planned: fault, outcome: 'skipped', note: picked });
        say(`${fault.id} ${fault.kind} ${fault.target}: skipped (${picked})`);
        return;
      }
      const process = picked.ref() as ProcessRef;
      const role = roleOf(picked);
      busy.add(picked);
      const at = Date.now();
      inject(picked, fault);
      const length = fault.kind === 'restart' ? '' : ` for ${(fault.durationMs / 1000).toFixed(1)} s`;
    say(`${fault.id} ${fault.kind} ${process.holder} (${role.role}${role.epoch === undefined ? '' : ` epoch ${role.epoch}`})${length}`);
      const record: FaultRecord = { planned: fault, outcome: 'injected', at, target: process, ...role };
      faults.push(record);
      const endedAt = await recover(picked, fault, process);
      busy.delete(picked);
      faults[faults.indexOf(record)] = { ...record, endedAt };
    };

    const runStepFault = async (fault: PlannedFault): Promise<void> => {
      const job = plan.triggerJobs[fault.id];
      if (job === undefined || job.jobId === undefined) throw new Error(`step fault ${fault.id} has no trigger job`);
      const jobId = job.jobId;
      let fired: ((value: void) => void) | undefined;
      const firedPromise = new Promise<void>((r) => (fired = r));
      let record: FaultRecord | undefined;
      let victim: ChaosInstance | undefined;
      let victimRef: ProcessRef | undefined;
      watcher.arm({
        faultId: fault.id,
        jobId,
        step: fault.step as NonNullable<PlannedFault['step']>,
        fire: (process) => {
          const instance = instanceOf(process);
          if (instance === undefined) return 'forward';
          victim = instance;
          victimRef = process;
          busy.add(instance);
          record = { planned: fault, outcome: 'injected', at: Date.now(), target: process, jobId, ...roleOf(instance) };
          inject(instance, fault);
          fired?.();
          return fault.kind === 'pause' ? 'forward' : 'drop';
        },
      });
      say(`${fault.id} armed: ${fault.kind} whoever reaches ${fault.step} of ${jobId}`);
      await submit(job, fault.id);
      const window = sleep(plan.stepWindowMs).then(() => 'timeout' as const);
      const outcome = await Promise.race([firedPromise.then(() => 'fired' as const), window]);
      if (outcome === 'timeout' && watcher.disarm(fault.id)) {
        const seen = watcher.seen(jobId);
        const saw = seen.length === 0 ? 'saw none of its start steps' : `saw ${seen.join(', ')}`;
        const note = `no process reached ${fault.step} of ${jobId} within ${plan.stepWindowMs / 1000} s; ${saw}`;
        faults.push({ planned: fault, outcome: 'not-fired', jobId, note });
        say(`${fault.id} did not fire`);
        return;
      }
      await firedPromise;
      const fireRecord = record as FaultRecord;
      faults.push(fireRecord);
      say(`${fault.id} fired: ${fault.kind} ${fireRecord.target?.holder} (${fireRecord.role}${fireRecord.epoch === undefined ? '' : ` epoch ${fireRecord.epoch}`}) at ${fault.step} of ${jobId}`);
      const endedAt = await recover(victim as ChaosInstance, fault, victimRef as ProcessRef);
      busy.delete(victim as ChaosInstance);
      faults[faults.indexOf(fireRecord)] = { ...fireRecord, endedAt };
    };

    // ---- the fault phase --------------------------------------------------------------------------
    const faultPhaseStartedAt = Date.now();
    say(`fault phase: ${plan.faults.length} faults and ${plan.jobs.length + Object.keys(plan.triggerJobs).length} jobs over ${Math.round(plan.faultPhaseMs / 1000)} s`);
    const submissions: Array<Promise<void>> = [];
    const timers: NodeJS.Timeout[] = [];
    for (const job of plan.jobs) {
      timers.push(setTimeout(() => submissions.push(submit(job).catch((err: unknown) => say(`submitting ${job.label} failed: ${String(err)}`))), job.at));
    }
    for (const fault of plan.faults) {
      timers.push(setTimeout(() => faultTasks.push(runFault(fault).catch((err: unknown) => say(`fault ${fault.id} failed: ${String(err)}`))), fault.at));
    }
    await sleep(plan.faultPhaseMs);
    await Promise.all(faultTasks);
    await Promise.all(submissions);
    // Every fault ends: resumed, reconnected, restarted.
    for (const instance of cluster.instances) {
      cluster.restoreStorage(instance);
      if (instance.paused) cluster.signal(instance, 'SIGCONT', 'heal');
    }
    await Promise.all(cluster.instances.filter((i) => !i.running).map((i) => cluster.startInstance(i).catch(() => undefined)));
    const faultPhaseEndedAt = Date.now();
    say(`all faults over after ${Math.round((faultPhaseEndedAt - faultPhaseStartedAt) / 1000)} s; waiting up to ${Math.round(plan.settleMs / 1000)} s for ${unfinished().length} unfinished jobs`);

    // ---- settle ------------------------------------------------------------------------------------
    await waitFor('every job to finish', () => [...jobs.values()].every((j) => j.final !== undefined || !j.accepted), plan.settleMs);
    statusRunning = false;
    await statusLoop;
    for (const job of [...jobs.values()].filter((j) => j.final === undefined)) {
      await refreshJob(job);
      const still = jobs.get(job.jobId) as JobOutcome;
      if (still.final !== undefined) continue;
      const target = healthyInstances()[0];
      if (target === undefined) continue;
      try {
        const answer = await request(target, 'GET', `/runtime/webhooks/durabletask/instances/job-${encodeURIComponent(job.jobId)}?showHistory=false&code=${cluster.masterKey}`);
        jobs.set(job.jobId, { ...still, durableStatus: answer.status === 200 || answer.status === 202 ? answer.json : { httpStatus: answer.status, body: answer.json } });
      } catch (err) {
        jobs.set(job.jobId, { ...still, durableStatus: { error: err instanceof Error ? err.message : String(err) } });
      }
    }
    // Every finished job's outcome on its reply queue: sent after the outcome was recorded, so it may
    // follow the status by a Durable hop, or by a redelivery of the deliver activity (10 s) after a kill.
    const replies = new Map<string, ReplySeen[]>();
    const replyQueue = queues.getQueueClient(REPLY_QUEUE);
    const drainReplies = async (): Promise<void> => {
      if (!(await replyQueue.exists())) return;
      for (;;) {
        const got = await replyQueue.receiveMessages({ numberOfMessages: 32 });
        if (got.receivedMessageItems.length === 0) return;
        for (const m of got.receivedMessageItems) {
          const outcome = JSON.parse(Buffer.from(m.messageText, 'base64').toString('utf8')) as ReplySeen;
          const seen: ReplySeen = { jobId: outcome.jobId, status: outcome.status, correlationId: outcome.correlationId };
          replies.set(seen.correlationId ?? '', [...(replies.get(seen.correlationId ?? '') ?? []), seen]);
          await replyQueue.deleteMessage(m.messageId, m.popReceipt);
        }
      }
    };
    const replied = (j: JobOutcome): boolean => (replies.get(j.label) ?? []).some((r) => r.status === j.final?.status);
    for (const deadline = Date.now() + 60_000; ; await sleep(500)) {
      await drainReplies().catch((err: unknown) => say(`reading ${REPLY_QUEUE} failed: ${String(err)}`));
      if ([...jobs.values()].every((j) => j.final === undefined || replied(j))) break;
      if (Date.now() > deadline) {
        say("gave up waiting for every finished job's reply");
        break;
      }
    }
    for (const job of jobs.values()) jobs.set(job.jobId, { ...job, replies: replies.get(job.label) ?? [] });
    // Every finished job's history must be the run that did its work: the start its record names.
    for (const job of [...jobs.values()].filter((j) => j.final !== undefined && j.final.status !== 'rejected')) {
      const workingRun = await readWorkingRun(job.jobId);
      if (workingRun !== undefined) jobs.set(job.jobId, { ...(jobs.get(job.jobId) as JobOutcome), workingRun });
    }
    // A last look at every instance's answer with all of them up.
    pollLeaders();
    await sleep(2_000);
    for (const timer of timers) clearTimeout(timer);
    clearInterval(leaderTimer);
    watching = false;
    await leaseWatch;
    say('stopping the cluster');
    await cluster.stop();
    const endedAt = Date.now();

    async function readWorkingRun(jobId: string): Promise<WorkingRun | undefined> {
      const body = await blobs.getContainerClient(RESULTS_CONTAINER).getBlobClient(`jobs/${jobId}/start.json`).downloadToBuffer().catch(() => undefined);
      if (body === undefined) return undefined;
      const start = JSON.parse(body.toString('utf8')) as { startId?: string; generation?: number; state?: string; instance?: string };
      if (start.state !== 'active' || typeof start.startId !== 'string' || typeof start.generation !== 'number') return undefined;
      // A shared run's (`instance`, run/batchOrchestration.ts), else the job's own generation's.
      const instanceId = start.instance ?? (start.generation === 1 ? `job-${jobId}` : `job-${jobId}.${start.generation}`);
      const named = { startId: start.startId, generation: start.generation, instanceId };
      const target = healthyInstances()[0];
      if (target === undefined) return { ...named, unreadable: 'no healthy instance to ask' };
      try {
        const answer = await request(target, 'GET', `/runtime/webhooks/durabletask/instances/${encodeURIComponent(instanceId)}?showHistory=false&showInput=true&code=${cluster.masterKey}`);
        // 404: no such instance (the check names it); 202 and the rest: Durable answered, but not its state.
        if (answer.status === 404) return named;
        if (answer.status !== 200 && answer.status !== 202) return { ...named, unreadable: `HTTP ${answer.status}` };
        const status = answer.json as { runtimeStatus?: string; input?: JobInstanceInput | null; output?: unknown };
        // A shared run holds several jobs' runs and outcomes: this job's are read from it.
        const shared = status.input?.runs !== undefined;
        const run = shared ? status.input?.runs?.find((r) => r.run?.jobId === jobId)?.run : status.input?.run;
        const output = (shared ? (status.output as Record<string, unknown> | null | undefined)?.[jobId] : status.output) as { superseded?: unknown } | null | undefined;
        return {
          ...named,
          instanceStartId: run?.startId ?? null,
          ...(status.runtimeStatus === undefined ? {} : { runtimeStatus: status.runtimeStatus }),
          stoodDown: output !== null && output !== undefined && output.superseded !== undefined,
        };
      } catch (err) {
        return { ...named, unreadable: err instanceof Error ? err.message : String(err) };
      }
    }

    const record: ChaosRecord = {
      seed: options.seed,
      mode: options.mode,
      host,
      separateApps: options.separateApps,
      instances: instanceCount(),
      ...(flex ? { flex: true } : {}),
      repeatArgs: [
        options.mode === 'short' ? '--short' : `--minutes ${plan.faultPhaseMs / 60_000}`,
        `--seed ${options.seed}`,
        ...(flex ? ['--flex'] : [`--instances ${options.instances}`]),
        ...(options.separateApps && !flex ? ['--separate-apps'] : []),
        ...(host === 'extensions' ? ['--host extensions'] : []),
        ...(options.stepFaults === undefined ? [] : [`--step-faults ${options.stepFaults.map((f) => `${f.kind}@${f.step}`).join(',')}`]),
      ].join(' '),
      startedAt,
      faultPhaseStartedAt,
      faultPhaseEndedAt,
      endedAt,
      logs,
      leaderPolls,
      leaseReads,
      writes: watcher.writes,
      exits,
      faults: faults.sort((a, b) => (a.at ?? faultPhaseStartedAt + a.planned.at) - (b.at ?? faultPhaseStartedAt + b.planned.at)),
      jobs: [...jobs.values()].sort((a, b) => a.submittedAt - b.submittedAt),
    };
    const violations = checkRun(record);
    const changes = failovers(record);
    const summary = formatSummary(record, violations, changes, runDir);
    writeFileSync(join(runDir, 'record.json'), JSON.stringify(record));
    writeFileSync(join(runDir, 'summary.txt'), summary);
    return { record, plan, violations, failovers: changes, summary, runDir };
  }
}
