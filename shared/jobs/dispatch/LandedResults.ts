/**
 * Chunk results written in this process, by job: the worker says so when its create of a result
 * won (WorkItemProcessor), and a step or plan of the same job that waits in this process for its
 * last results (every chunk sent) looks again as soon as they have all landed here, instead of at its
 * next poll (up to a second later; a small job's plan waited 180-400 ms for its one chunk's result on
 * a loaded machine). The app knows this work is coming, so it does not wait for a poll to find it.
 *
 * And it need not read what it knows: a result created here is stored as written (results are
 * created once and never changed while their job runs), so a pass takes the entry of a chunk that
 * landed here (`resultEntryOf`, the same entry a read of the blob's metadata answers) and reads only
 * the chunks it has no word of. A small job whose chunks ran beside its plan then reads none of
 * their results to finish.
 *
 * Only a hint, never needed for correctness: a result written by another instance is seen at the
 * step's next pass, and a signal for a job no step watches here is dropped. Entries are kept only
 * while a step of the job watches (no growth with the jobs a process has seen).
 */
import { resultEntryOf } from '../store/ChunkBlobs';
import { type ChunkResult, type ChunkResultEntry } from '../store/JobStore';

export interface ResultWatch {
  /** Results of the job that landed here since the watch began. */
  count(): number;
  /** Their entries, as a read of each one's metadata would answer them. */
  results(): readonly ChunkResultEntry[];
  /** Resolves once `count()` reaches `target`, or after `ms`, whichever comes first. */
  until(target: number, ms: number): Promise<void>;
  close(): void;
}

interface Watched {
  readonly entries: ChunkResultEntry[];
  watchers: number;
  readonly waiters: Set<{ readonly target: number; readonly wake: () => void }>;
}

export class LandedResults {
  readonly #jobs = new Map<string, Watched>();

  /** A worker of this process created `result` (recorded as done or as failed): its create won. */
  landed(result: ChunkResult): void {
    const job = this.#jobs.get(result.jobId);
    if (job === undefined) return;
    job.entries.push(resultEntryOf(result));
    for (const waiter of [...job.waiters]) if (job.entries.length >= waiter.target) waiter.wake();
  }

  watch(jobId: string): ResultWatch {
    let job = this.#jobs.get(jobId);
    if (job === undefined) {
      job = { entries: [], watchers: 0, waiters: new Set() };
      this.#jobs.set(jobId, job);
    }
    const watched = job;
    watched.watchers += 1;
    const base = watched.entries.length;
    let closed = false;
    return {
      count: () => watched.entries.length - base,
      results: () => watched.entries.slice(base),
      until: (target, ms) =>
        new Promise<void>((resolve) => {
          if (watched.entries.length - base >= target) {
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
