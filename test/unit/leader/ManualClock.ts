/**
 * A clock that moves only when a test says so. `advance` fires due sleepers in time order and lets
 * every promise chain they start settle before moving on, so elector logic runs deterministically.
 */
import { type Clock } from '../../../shared/leader/Clock';

interface Sleeper {
  readonly at: number;
  readonly seq: number;
  readonly fire: () => void;
}

export class ManualClock implements Clock {
  private t = 0;
  private seq = 0;
  private readonly wallOrigin = Date.parse('2026-01-01T00:00:00.000Z');
  private sleepers: Sleeper[] = [];

  now(): number {
    return this.t;
  }

  wallNow(): Date {
    return new Date(this.wallOrigin + this.t);
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      if (signal?.aborted === true) {
        resolve();
        return;
      }
      const sleeper: Sleeper = {
        at: this.t + Math.max(0, ms),
        seq: this.seq++,
        fire: () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          signal?.removeEventListener('abort', sleeper.fire);
          resolve();
        },
      };
      this.sleepers.push(sleeper);
      signal?.addEventListener('abort', sleeper.fire, { once: true });
    });
  }

  /** Moves time forward by `ms`, firing every sleeper that falls due on the way. */
  async advance(ms: number): Promise<void> {
    const target = this.t + ms;
    await settle();
    for (;;) {
      const next = this.sleepers.filter((s) => s.at <= target).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (next === undefined) break;
      this.t = Math.max(this.t, next.at);
      next.fire();
      await settle();
    }
    this.t = target;
    await settle();
  }

  /**
   * Moves time without firing anything, as a paused process experiences it: its timers are all
   * late when it resumes. The next `advance` fires them.
   */
  jump(ms: number): void {
    this.t += ms;
  }

  /** Advances in steps until `predicate` holds; returns the time it first held. */
  async advanceUntil(predicate: () => boolean, limitMs: number, stepMs = 10): Promise<number> {
    const limit = this.t + limitMs;
    while (!predicate()) {
      if (this.t >= limit) throw new Error(`condition not reached within ${limitMs} ms of manual time`);
      await this.advance(stepMs);
    }
    return this.t;
  }
}

/** Lets every pending promise chain (and setImmediate callback) run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((resolve) => setImmediate(resolve));
}
