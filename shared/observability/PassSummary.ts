/**
 * Coordination passes as a metric: a leader runs one every few seconds, which as a log line each
 * would be 17,000 lines a day saying "nothing happened". Instead, passes are counted per window
 * (60 s) and one `leader.passes` line per window says how many ran, how many failed, and their mean
 * and longest duration. Failures are also logged one by one (`leader.pass_failed`) where they occur.
 */
import { type Logger } from './log';

export const PASS_SUMMARY_WINDOW_MS = 60_000;

export class PassSummary {
  private passes = 0;
  private failed = 0;
  private totalMs = 0;
  private maxMs = 0;
  private epoch: number | undefined;
  private windowStartedAt: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly logger: Logger,
    private readonly windowMs = PASS_SUMMARY_WINDOW_MS,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.windowStartedAt = now();
  }

  /** Emits on a timer that does not keep the process alive. */
  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.flush(), this.windowMs);
    this.timer.unref();
  }

  add(pass: { readonly epoch: number; readonly durationMs: number; readonly failed: boolean }): void {
    this.passes += 1;
    if (pass.failed) this.failed += 1;
    this.totalMs += pass.durationMs;
    this.maxMs = Math.max(this.maxMs, pass.durationMs);
    this.epoch = pass.epoch;
  }

  /** Logs the window's counts (nothing when no pass ran) and starts a new window. */
  flush(): void {
    const now = this.now();
    if (this.passes > 0) {
      this.logger.info('leader.passes', {
        epoch: this.epoch,
        passes: this.passes,
        failed: this.failed,
        meanMs: Math.round(this.totalMs / this.passes),
        maxMs: Math.round(this.maxMs),
        windowSeconds: Math.round((now - this.windowStartedAt) / 1000),
      });
    }
    this.passes = 0;
    this.failed = 0;
    this.totalMs = 0;
    this.maxMs = 0;
    this.windowStartedAt = now;
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    this.flush();
  }
}
