/**
 * The intake's shared runs in the making (run/batchOrchestration.ts): small jobs whose starts are
 * made at the same moment of a burst share one Durable instance. A start reserves its place before
 * its start record is written (the record names the shared instance: recorded before made), then
 * joins with its run once staged, or releases its place when it is not started after all. A shared
 * run is started once it is full (`INTAKE.jobsPerSharedRun`) or no place is open any more, and all
 * its reserved places have joined or been released: no timer, so a lone job never waits for company.
 *
 * Guaranteed: every place reserved is settled exactly once by its start (joined or released), so
 * every shared run is started or, empty, dropped; each joiner learns whether its run was started.
 * Not guaranteed: a full run. A shared run that fails to start fails every joiner's start, which
 * then goes the way of any failed start (the message's next delivery, or the start checks).
 */
import { randomUUID } from 'node:crypto';

import { batchInstanceId } from '../jobIds';
import { type JobRun } from '../JobRun';
import { type BatchState } from '../run/batchOrchestration';
import { type StagedCounts } from '../run/JobActivities';

interface Shared {
  readonly id: string;
  reserved: number;
  settled: number;
  /** No further place is given out. */
  closed: boolean;
  readonly runs: Array<BatchState['runs'][number]>;
  readonly started: Promise<void>;
  resolve(): void;
  reject(err: unknown): void;
}

export class StartBatches {
  readonly #runs = new Map<string, Shared>();
  #open: Shared | undefined;

  constructor(
    private readonly size: number,
    /** Starts a full shared run; each of its joiners' starts succeed or fail with it. */
    private readonly startShared: (instanceId: string, input: BatchState) => Promise<void>,
  ) {}

  /** A place in the open shared run (opening one), for a start about to be recorded: the instance id its record names. */
  reserve(): string {
    let open = this.#open;
    if (open === undefined || open.closed) {
      let resolve: () => void = () => undefined;
      let reject: (err: unknown) => void = () => undefined;
      const started = new Promise<void>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      // A run nobody joins (all released) is never awaited.
      started.catch(() => undefined);
      open = { id: batchInstanceId(randomUUID()), reserved: 0, settled: 0, closed: false, runs: [], started, resolve, reject };
      this.#open = open;
      this.#runs.set(open.id, open);
    }
    open.reserved += 1;
    if (open.reserved >= this.size) open.closed = true;
    return open.id;
  }

  /** The reserved place taken by its run (staged as `prestaged`, when it was): resolves once the shared run is started. */
  join(instanceId: string, run: JobRun, prestaged: StagedCounts | undefined): Promise<void> {
    const shared = this.#runs.get(instanceId);
    if (shared === undefined) return Promise.reject(new Error(`No shared run ${instanceId} is being made here.`));
    shared.runs.push({ run, ...(prestaged === undefined ? {} : { prestaged }) });
    this.#settle(shared);
    return shared.started;
  }

  /** The reserved place given up (the start was not made here: its record existed, or the start failed before it joined). */
  release(instanceId: string): void {
    const shared = this.#runs.get(instanceId);
    if (shared !== undefined) this.#settle(shared);
  }

  #settle(shared: Shared): void {
    shared.settled += 1;
    if (shared.settled < shared.reserved) return;
    // Every place settled: no more are given out, and the run starts with those that joined.
    shared.closed = true;
    if (this.#open === shared) this.#open = undefined;
    this.#runs.delete(shared.id);
    if (shared.runs.length === 0) {
      shared.resolve();
      return;
    }
    this.startShared(shared.id, { runs: shared.runs }).then(
      () => shared.resolve(),
      (err: unknown) => shared.reject(err),
    );
  }
}
