/**
 * The development host's error: every failure it raises on purpose carries a stable `code`
 * (`DEVHOST_*` for the host, `DURABLE_*` for its Durable backend) and says whether the fault is the
 * app's or its configuration's (`isUserError`) rather than the host's own. Anything else thrown is
 * normalized once, where the host reports it, with `toDevHostError`.
 */
export class DevHostError extends Error {
  override readonly name: string = 'DevHostError';
  constructor(
    readonly code: string,
    message: string,
    readonly isUserError = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** Normalizes anything thrown into a DevHostError, keeping the original as `cause`. */
export function toDevHostError(err: unknown, fallbackCode = 'DEVHOST_INTERNAL'): DevHostError {
  if (err instanceof DevHostError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new DevHostError(fallbackCode, message, false, { cause: err });
}
