/**
 * The app's error base: every error we raise on purpose carries a stable `code` (what clients and
 * operators match on) and says whether the fault is the caller's (`isUserError`: bad input, bad
 * configuration) or the system's. Anything else thrown is normalized once, at the boundary that
 * answers (HTTP handler, queue trigger, activity), with `toCoordinatorError`.
 */
export class CoordinatorError extends Error {
  override readonly name: string = 'CoordinatorError';
  constructor(
    readonly code: string,
    message: string,
    readonly isUserError = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Normalize anything thrown into a CoordinatorError without losing the original as `cause`. */
export function toCoordinatorError(err: unknown, fallbackCode = 'INTERNAL'): CoordinatorError {
  if (err instanceof CoordinatorError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new CoordinatorError(fallbackCode, message, false, { cause: err });
}

/**
 * The part of an error's text that may reach a client or a job's recorded error: the message only,
 * never a stack trace or a server path (they tell an attacker about the deployment). Durable hands an
 * orchestrator an activity's failure as "Result: Failure\nException: <message>\nStack: <stack>".
 */
export function publicMessage(text: string, max = 300): string {
  const exception = /(?:^|\n)\s*Exception:\s*([^\n]*)/.exec(text)?.[1];
  const first = exception ?? text.split('\n').find((line) => line.trim() !== '' && !/^\s*Result:/.test(line)) ?? '';
  return first
    .replace(/\s*\bStack:.*$/s, '')
    .replace(/(?:[A-Za-z]:)?(?:[\\/][\w.@-]+)+\.[cm]?[jt]s(?::\d+)*/g, '<path>')
    .replace(/\s+at\s+\S+\s+\(<path>\).*$/s, '')
    .trim()
    .slice(0, max);
}
