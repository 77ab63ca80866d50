/**
 * The one item validation for every path that takes a job's items (inline items in JobSubmission,
 * an itemsBlob's items in the stager): each item goes through its work type's `validateItem`, every
 * rejection is counted, the first five problems are kept, and ITEM_REJECTED says how many of how
 * many items failed and why. It checks items one at a time, so a stream never has to be held whole.
 */
import { type AnyWorkType, type Json } from '../../worktypes/WorkType';
import { JobError } from '../JobError';

const PROBLEMS_SHOWN = 5;

export class ItemRejections {
  private rejected = 0;
  private readonly problems: string[] = [];

  constructor(private readonly type: Pick<AnyWorkType, 'name' | 'validateItem'>) {}

  /** Validates one item (its index in the job); false when the work type rejects it. */
  check(item: Json, index: number): boolean {
    const reason = this.type.validateItem(item);
    if (reason === undefined) return true;
    this.rejected += 1;
    if (this.problems.length < PROBLEMS_SHOWN) this.problems.push(`item ${index}: ${reason}`);
    return false;
  }

  /** Throws ITEM_REJECTED when any of the `total` items was rejected; `where` names the blob they came from. */
  throwIfAny(total: number | string, where?: string): void {
    if (this.rejected === 0) return;
    const from = where === undefined ? '' : ` in ${where}`;
    const more = this.rejected > this.problems.length ? '; ...' : '';
    throw new JobError(
      'ITEM_REJECTED',
      `${this.rejected} of ${total} items${from} rejected by work type "${this.type.name}": ${this.problems.join('; ')}${more}.`,
    );
  }
}
