/**
 * The elector's errors, each with a stable code. `LeaseLostError` is what the storage boundary
 * raises when the service says the lease is not ours (mismatch, broken, expired for a write);
 * everything else it lets through is a transient fault to retry until the renew deadline.
 */
import { CoordinatorError } from '../errors';

/** An elector option is wrong; the message names the option. Raised at construction. */
export class ElectorConfigError extends CoordinatorError {
  override readonly name = 'ElectorConfigError';
  constructor(
    readonly option: string,
    detail: string,
  ) {
    super('LEADER_CONFIG_INVALID', `Leader election option ${option}: ${detail}`, true);
  }
}

/** The service answered that this lease id does not hold the lease (any more). */
export class LeaseLostError extends CoordinatorError {
  override readonly name = 'LeaseLostError';
  constructor(
    readonly serviceCode: string,
    options?: { cause?: unknown },
  ) {
    super('LEADER_LEASE_LOST', `The lease is no longer held by this instance (${serviceCode}).`, false, options);
  }
}

/** Leader-only work was attempted by an instance that is not (or no longer) the leader. */
export class NotLeaderError extends CoordinatorError {
  override readonly name = 'NotLeaderError';
  constructor(detail: string, options?: { cause?: unknown }) {
    super('LEADER_NOT_LEADING', detail, false, options);
  }
}

/** One storage request of the elector took longer than its per-try timeout. */
export class LeaseRequestTimeoutError extends CoordinatorError {
  override readonly name = 'LeaseRequestTimeoutError';
  constructor(operation: string, timeoutMs: number) {
    super('LEADER_REQUEST_TIMEOUT', `Lease ${operation} did not answer within ${Math.round(timeoutMs)} ms.`);
  }
}
