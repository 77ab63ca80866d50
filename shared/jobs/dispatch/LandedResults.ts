/**
 * Chunk results written in this process, by job: the worker says so when it has written one
 * (WorkItemProcessor), and a step or plan of the same job that waits in this process for its last
 * results (every chunk sent) looks again as soon as they have all landed here, instead of at its next
 * poll (up to a second later; a small job's plan waited 180-400 ms for its one chunk's result on a
 * loaded machine). The app knows this work is coming, so it does not wait for a poll to find it.
 *
 * Only a hint, never needed for correctness: a result written by another instance is seen at the
 * step's next pass, and a signal for a job no step watches here is dropped. Counts are
 * kept only while a step of the job watches (no growth with the jobs a process has seen).
 */
export interface ResultWatch {
  /** Results of the job that landed here since the watch began. */
  count(): number;
  /** Resolves once `count()` reaches `target`, or after `ms`, whichever comes first. */
  until(target: number, ms: number): Promise<void>;
  close(): void;
}

interface Watched {
  count: number;
  watchers: number;
  readonly waiters: Set<{ readonly target: number; readonly wake: () => void }>;
}

export class LandedResults {
  readonly #jobs = new Map<string, Watched>();

  /** A worker of this process wrote a result of `jobId` (recorded as done or as failed). */
  landed(jobId: string): void {
    const job = this.#jobs.get(jobId);
    if (job === undefined) return;
    job.count += 1;
    for (const waiter of [...job.waiters]) if (job.count >= waiter.target) waiter.wake();
  }

  watch(jobId: string): ResultWatch {
    let job = this.#jobs.get(jobId);
    if (job === undefined) {
      job = { count: 0, watchers: 0, waiters: new Set() };
      this.#jobs.set(jobId, job);
    }
    const watched = job;
    watched.watchers += 1;
    const base = watched.count;
    let closed = false;
    return {
      count: () => watched.count - base,
      until: (target, ms) =>
        new Promise<void>((resolve) => {
          if (watched.count - base >= target) {
            resolve();
            return;
          }
          const waiter = {
            target: base + target,
            wake: () => {
              clearTimeout(timer);
              watched.waiters.delete(waiter);
              resolve();
            },
          };
          const timer = setTimeout(waiter.wake, ms);
          watched.waiters.add(waiter);
        }),
      close: () => {
        if (closed) return;
        closed = true;
        watched.watchers -= 1;
        if (watched.watchers === 0 && watched.waiters.size === 0 && this.#jobs.get(jobId) === watched) this.#jobs.delete(jobId);
      },
    };
  }
}
