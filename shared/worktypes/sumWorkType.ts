/**
 * `sum`: items are integers (JSON numbers within the safe integer range, or decimal strings of up to
 * `SUM_MAX_DIGITS` digits); the result is `{ count, sum, min, max }`, exact. Arithmetic is BigInt throughout; numbers
 * leave as JSON numbers while they are safe integers and as decimal strings otherwise, so nothing is
 * rounded. This is the type the tests use to prove no item is lost or counted twice.
 */
import { type WorkType } from './WorkType';

export interface SumPartial {
  [key: string]: number | string | null;
  count: number;
  /** Decimal strings: partials travel as JSON, which has no BigInt. */
  sum: string;
  min: string | null;
  max: string | null;
}

export interface SumResult {
  [key: string]: number | string | null;
  count: number;
  sum: number | string;
  min: number | string | null;
  max: number | string | null;
}

/**
 * Digits of one decimal-string item. BigInt has no practical limit; this bound keeps one item's cost
 * (parse, add, and a partial that rides in 6 KiB of blob metadata) small and predictable.
 */
export const SUM_MAX_DIGITS = 1000;
const DECIMAL = /^-?(0|[1-9][0-9]*)$/;

function isDecimal(text: string): boolean {
  return DECIMAL.test(text) && text.replace('-', '').length <= SUM_MAX_DIGITS;
}

function toBigInt(item: unknown): bigint | undefined {
  if (typeof item === 'number') return Number.isSafeInteger(item) ? BigInt(item) : undefined;
  if (typeof item === 'string' && isDecimal(item)) return BigInt(item);
  return undefined;
}

/** A BigInt as a JSON number when that is exact, else as a decimal string. */
export function exactNumber(value: bigint): number | string {
  return value >= BigInt(Number.MIN_SAFE_INTEGER) && value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value.toString();
}

function pick(a: string | null, b: string | null, smaller: boolean): string | null {
  if (a === null) return b;
  if (b === null) return a;
  const x = BigInt(a);
  const y = BigInt(b);
  return (smaller ? x <= y : x >= y) ? a : b;
}

export const sumWorkType: WorkType<SumPartial, SumResult> = {
  name: 'sum',
  description:
    `Items are integers (safe-range JSON numbers or decimal strings of up to ${SUM_MAX_DIGITS} digits); ` +
    `result { count, sum, min, max }, exact.`,
  validateItem(item) {
    if (typeof item === 'number') {
      if (!Number.isInteger(item)) return `${item} is not an integer`;
      if (!Number.isSafeInteger(item)) return `${item} is outside the safe integer range: send it as a decimal string`;
      return undefined;
    }
    if (typeof item === 'string') {
      if (!DECIMAL.test(item)) return `"${item.slice(0, 40)}" is not a decimal integer`;
      const digits = item.replace('-', '').length;
      return digits <= SUM_MAX_DIGITS ? undefined : `a decimal string of ${digits} digits; at most ${SUM_MAX_DIGITS}`;
    }
    return `expected an integer, got ${item === null ? 'null' : Array.isArray(item) ? 'an array' : typeof item}`;
  },
  process(item) {
    const value = toBigInt(item);
    // validateItem ran at submission; this guards items that reached a worker some other way.
    if (value === undefined) throw new Error(`sum: not an integer: ${JSON.stringify(item)?.slice(0, 40)}`);
    const text = value.toString();
    return { count: 1, sum: text, min: text, max: text };
  },
  empty() {
    return { count: 0, sum: '0', min: null, max: null };
  },
  combine(a, b) {
    return {
      count: a.count + b.count,
      sum: (BigInt(a.sum) + BigInt(b.sum)).toString(),
      min: pick(a.min, b.min, true),
      max: pick(a.max, b.max, false),
    };
  },
  finish(total) {
    return {
      count: total.count,
      sum: exactNumber(BigInt(total.sum)),
      min: total.min === null ? null : exactNumber(BigInt(total.min)),
      max: total.max === null ? null : exactNumber(BigInt(total.max)),
    };
  },
};
