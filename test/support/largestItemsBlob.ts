/**
 * The largest itemsBlob the contract allows, or close to it: `JOB_LIMITS.maxItems` short strings
 * (`["item-0000000-…",…]`, about 66 MB), written straight into one buffer with no array or string of
 * it in memory. The staging test and the input-staging bench read it.
 */
import { JOB_LIMITS } from '../../shared/jobs/jobLimits';

export const LARGEST_ITEMS = JOB_LIMITS.maxItems;

export function largestItem(i: number): string {
  return `item-${String(i).padStart(7, '0')}-${'abcdefghij'.repeat(5)}`;
}

export function largestItemsBlobBody(): Buffer {
  const itemBytes = largestItem(0).length;
  const body = Buffer.allocUnsafe(LARGEST_ITEMS * (itemBytes + 3) + 1);
  let at = 0;
  body[at++] = 0x5b;
  for (let i = 0; i < LARGEST_ITEMS; i++) {
    if (i > 0) body[at++] = 0x2c;
    body[at++] = 0x22;
    at += body.write(largestItem(i), at, 'latin1');
    body[at++] = 0x22;
  }
  body[at++] = 0x5d;
  if (at !== body.length) throw new Error(`items blob body: wrote ${at} of ${body.length} bytes`);
  return body;
}
