/**
 * `wordcount`: items are `"<container>/<blob name>"` references to UTF-8 text blobs in the app's
 * storage; the result has the totals (blobs, lines, words, characters, distinct words) and the top
 * 10 words. Words are maximal runs of Unicode letters, digits and apostrophes, lower-cased. A
 * missing or oversized blob is an item error (recorded, the job goes on), not a chunk failure.
 *
 * The partial keeps every word's count (needed for an exact top list), as sorted `[word, count]`
 * pairs: a JSON object keyed by arbitrary words would trip on `__proto__`.
 */
import { RestError } from '@azure/storage-blob';

import { isBlobRef, parseBlobRef } from '../jobs/input/BlobRef';
import { ItemError, type WorkType } from './WorkType';

export interface WordcountPartial {
  [key: string]: number | Array<[string, number]>;
  blobs: number;
  lines: number;
  words: number;
  characters: number;
  counts: Array<[string, number]>;
}

export interface WordcountResult {
  [key: string]: number | Array<{ word: string; count: number }>;
  blobs: number;
  lines: number;
  words: number;
  characters: number;
  distinctWords: number;
  topWords: Array<{ word: string; count: number }>;
}

/** One text blob larger than this is refused (an item error): a chunk's memory stays bounded. */
export const WORDCOUNT_MAX_BLOB_BYTES = 8 * 1024 * 1024;
const TOP_WORDS = 10;
const WORD = /[\p{L}\p{N}']+/gu;

function sortedPairs(counts: Map<string, number>): Array<[string, number]> {
  return [...counts.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
}

/**
 * Both lists sorted by word, each word once: one linear merge, no map and no re-sort, so folding
 * thousands of chunk partials costs their total size, not a sort per chunk.
 */
export function mergeSortedPairs(a: ReadonlyArray<[string, number]>, b: ReadonlyArray<[string, number]>): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const x = a[i] as [string, number];
    const y = b[j] as [string, number];
    if (x[0] === y[0]) {
      out.push([x[0], x[1] + y[1]]);
      i += 1;
      j += 1;
    } else if (x[0] < y[0]) {
      out.push([x[0], x[1]]);
      i += 1;
    } else {
      out.push([y[0], y[1]]);
      j += 1;
    }
  }
  // The rest of whichever list is left, copied so the result shares no pair with its inputs.
  for (const [word, n] of a.slice(i)) out.push([word, n]);
  for (const [word, n] of b.slice(j)) out.push([word, n]);
  return out;
}

export function countText(text: string): WordcountPartial {
  const counts = new Map<string, number>();
  let words = 0;
  for (const match of text.matchAll(WORD)) {
    const word = match[0].toLowerCase();
    counts.set(word, (counts.get(word) ?? 0) + 1);
    words += 1;
  }
  const lines = text.length === 0 ? 0 : text.split(/\r\n|\r|\n/).length - (/(\r\n|\r|\n)$/.test(text) ? 1 : 0);
  return { blobs: 1, lines, words, characters: [...text].length, counts: sortedPairs(counts) };
}

export const wordcountWorkType: WorkType<WordcountPartial, WordcountResult> = {
  name: 'wordcount',
  description: 'Items are "<container>/<blob>" names of UTF-8 text blobs; result totals and the top 10 words.',
  validateItem(item) {
    const ref = parseBlobRef(item);
    return isBlobRef(ref) ? undefined : ref.reason;
  },
  async process(item, ctx) {
    const ref = parseBlobRef(item);
    if (!isBlobRef(ref)) throw new ItemError('ITEM_REJECTED', ref.reason);
    const blob = ctx.inputs.blob(ref);
    let buffer: Buffer;
    try {
      const props = await blob.getProperties({ abortSignal: ctx.signal });
      if ((props.contentLength ?? 0) > WORDCOUNT_MAX_BLOB_BYTES) {
        throw new ItemError(
          'ITEM_TOO_LARGE',
          `${ref.container}/${ref.blob} is ${props.contentLength} bytes; the limit is ${WORDCOUNT_MAX_BLOB_BYTES}`,
        );
      }
      buffer = await blob.downloadToBuffer(undefined, undefined, { abortSignal: ctx.signal });
    } catch (err) {
      if (err instanceof RestError && err.statusCode === 404) {
        throw new ItemError('BLOB_NOT_FOUND', `${ref.container}/${ref.blob} does not exist`);
      }
      throw err;
    }
    return countText(buffer.toString('utf8'));
  },
  empty() {
    return { blobs: 0, lines: 0, words: 0, characters: 0, counts: [] };
  },
  combine(a, b) {
    return {
      blobs: a.blobs + b.blobs,
      lines: a.lines + b.lines,
      words: a.words + b.words,
      characters: a.characters + b.characters,
      counts: mergeSortedPairs(a.counts, b.counts),
    };
  },
  finish(total) {
    const topWords = [...total.counts]
      .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .slice(0, TOP_WORDS)
      .map(([word, count]) => ({ word, count }));
    return {
      blobs: total.blobs,
      lines: total.lines,
      words: total.words,
      characters: total.characters,
      distinctWords: total.counts.length,
      topWords,
    };
  },
};
