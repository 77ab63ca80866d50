/**
 * An in-memory `LeaseStore` for deterministic unit tests: the blob lease rules as the service
 * applies them (checked against Azurite by the integration tests), time from a ManualClock, and
 * fault injection per operation (hang until the caller's timeout, fail, or answer "lease lost").
 */
import { LeaseLostError } from '../../../shared/leader/errors';
import { type LeaseSnapshot, type LeaseStore, parseRecord } from '../../../shared/leader/LeaseStore';
import { type ManualClock } from './ManualClock';

export type Operation = 'acquire' | 'renew' | 'release' | 'read' | 'write';
export type Fault = 'hang' | 'fail' | 'lost';

export class MemoryLeaseStore implements LeaseStore {
  readonly description = 'memory/lease';
  /** Faults by operation; a function decides per call. */
  fault: (op: Operation, leaseId: string | undefined) => Fault | undefined = () => undefined;
  readonly calls: Array<{ op: Operation; leaseId: string | undefined; at: number }> = [];
  /** When each hung call was aborted by its caller. */
  readonly aborts: Array<{ op: Operation; at: number }> = [];
  private leaseId: string | undefined;
  private expiresAt = 0;
  private broken = false;
  private metadata: Record<string, string> = {};
  private etagCounter = 1;

  constructor(private readonly clock: ManualClock) {}

  get etag(): string {
    return `"${this.etagCounter}"`;
  }

  /** The lease state the service would report now. */
  get leaseState(): 'available' | 'leased' | 'expired' | 'broken' {
    if (this.broken) return 'broken';
    if (this.leaseId === undefined) return 'available';
    return this.clock.now() < this.expiresAt ? 'leased' : 'expired';
  }

  get holderLeaseId(): string | undefined {
    return this.leaseState === 'leased' ? this.leaseId : undefined;
  }

  breakLease(): void {
    this.broken = true;
  }

  changeLease(newLeaseId: string): void {
    this.leaseId = newLeaseId;
  }

  async acquire(leaseId: string, leaseSeconds: number, signal: AbortSignal): Promise<boolean> {
    await this.enter('acquire', leaseId, signal);
    if (this.leaseState === 'leased' && this.leaseId !== leaseId) return false;
    this.leaseId = leaseId;
    this.broken = false;
    this.expiresAt = this.clock.now() + leaseSeconds * 1000;
    this.duration = leaseSeconds;
    return true;
  }

  private duration = 15;

  async renew(leaseId: string, signal: AbortSignal): Promise<{ etag: string }> {
    await this.enter('renew', leaseId, signal);
    if (this.broken) throw new LeaseLostError('LeaseIsBrokenAndCannotBeRenewed');
    // The service renews an expired lease as long as nobody else has leased the blob since.
    if (this.leaseId !== leaseId) throw new LeaseLostError('LeaseIdMismatchWithLeaseOperation');
    this.expiresAt = this.clock.now() + this.duration * 1000;
    return { etag: this.etag };
  }

  async release(leaseId: string, signal: AbortSignal): Promise<void> {
    await this.enter('release', leaseId, signal);
    if (this.broken || this.leaseId !== leaseId) throw new LeaseLostError('LeaseIdMismatchWithLeaseOperation');
    this.leaseId = undefined;
  }

  async read(signal: AbortSignal): Promise<LeaseSnapshot> {
    await this.enter('read', undefined, signal);
    const { record, extra } = parseRecord(this.metadata);
    const state = this.leaseState;
    return { record, extra, leaseState: state, leaseStatus: state === 'leased' ? 'locked' : 'unlocked', etag: this.etag };
  }

  async write(leaseId: string, metadata: Readonly<Record<string, string>>, ifMatch: string, signal: AbortSignal): Promise<{ etag: string }> {
    await this.enter('write', leaseId, signal);
    if (this.leaseState !== 'leased') throw new LeaseLostError('LeaseNotPresentWithBlobOperation');
    if (this.leaseId !== leaseId) throw new LeaseLostError('LeaseIdMismatchWithBlobOperation');
    if (ifMatch !== this.etag) throw new LeaseLostError('ConditionNotMet');
    this.metadata = { ...metadata };
    this.etagCounter += 1;
    return { etag: this.etag };
  }

  private async enter(op: Operation, leaseId: string | undefined, signal: AbortSignal): Promise<void> {
    this.calls.push({ op, leaseId, at: this.clock.now() });
    const fault = this.fault(op, leaseId);
    if (fault === 'fail') throw new Error(`injected: ${op} failed (storage unreachable)`);
    if (fault === 'lost') throw new LeaseLostError('LeaseLost');
    if (fault === 'hang') {
      await new Promise<never>((_resolve, reject) => {
        const onAbort = (): void => {
          this.aborts.push({ op, at: this.clock.now() });
          reject(new Error(`injected: ${op} hung until aborted`));
        };
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    await Promise.resolve();
  }
}
