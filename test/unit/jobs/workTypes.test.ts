/**
 * The built-in work types as plug-ins: registration, exact and associative `sum`, `wordcount`
 * counting, and item validation.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { SUM_MAX_DIGITS, sumWorkType } from '../../../shared/worktypes/sumWorkType';
import { countText, mergeSortedPairs, wordcountWorkType } from '../../../shared/worktypes/wordcountWorkType';
import { type Json, type WorkType } from '../../../shared/worktypes/WorkType';
import { builtInWorkTypes, WorkTypeRegistry } from '../../../shared/worktypes/WorkTypeRegistry';

async function fold<P extends Json, R extends Json>(type: WorkType<P, R>, items: unknown[]): Promise<P> {
  let acc = type.empty();
  for (const item of items) acc = type.combine(acc, await type.process(item, undefined as never));
  return acc;
}

describe('work types', () => {
  it('registers sum, wordcount and noop, and refuses a duplicate or a bad name', () => {
    const registry = builtInWorkTypes();
    assert.deepEqual(registry.names(), ['noop', 'sum', 'wordcount']);
    assert.throws(() => registry.register(sumWorkType), /already registered/);
    assert.throws(() => new WorkTypeRegistry().register({ ...sumWorkType, name: 'Bad Name' }), /must match/);
  });

  it('sums exactly, beyond the safe integer range, as a decimal string there', async () => {
    const big = '9007199254740993';
    const total = await fold(sumWorkType, [big, big, -1, '0']);
    assert.deepEqual(sumWorkType.finish(total), { count: 4, sum: '18014398509481985', min: -1, max: '9007199254740993' });
    assert.deepEqual(sumWorkType.finish(await fold(sumWorkType, [1, 2, 3])), { count: 3, sum: 6, min: 1, max: 3 });
    assert.deepEqual(sumWorkType.finish(sumWorkType.empty()), { count: 0, sum: 0, min: null, max: null });
  });

  it('sums 150-digit decimal strings exactly', async () => {
    const a = `1${'0'.repeat(149)}`;
    const b = `2${'3'.repeat(149)}`;
    assert.equal(SUM_MAX_DIGITS >= 150, true);
    const result = sumWorkType.finish(await fold(sumWorkType, [a, b, -1]));
    assert.deepEqual(result, { count: 3, sum: (BigInt(a) + BigInt(b) - 1n).toString(), min: -1, max: b });
  });

  it('combines sum partials associatively, in any grouping', async () => {
    const items = Array.from({ length: 30 }, (_, i) => (i % 7) * 1_000_000_007 - 3);
    const whole = await fold(sumWorkType, items);
    const left = sumWorkType.combine(sumWorkType.combine(await fold(sumWorkType, items.slice(0, 10)), await fold(sumWorkType, items.slice(10, 20))), await fold(sumWorkType, items.slice(20)));
    const right = sumWorkType.combine(await fold(sumWorkType, items.slice(0, 10)), sumWorkType.combine(await fold(sumWorkType, items.slice(10, 20)), await fold(sumWorkType, items.slice(20))));
    assert.deepEqual(left, whole);
    assert.deepEqual(right, whole);
  });

  it('validates sum items', () => {
    assert.equal(sumWorkType.validateItem(5), undefined);
    assert.equal(sumWorkType.validateItem('-123456789012345678901234567890'), undefined);
    assert.match(sumWorkType.validateItem(1.5) ?? '', /not an integer/);
    assert.match(sumWorkType.validateItem(2 ** 54) ?? '', /decimal string/);
    assert.match(sumWorkType.validateItem('01') ?? '', /not a decimal integer/);
    assert.match(sumWorkType.validateItem(null) ?? '', /null/);
    // The documented bound: decimal strings of up to SUM_MAX_DIGITS digits (a sign aside).
    assert.equal(sumWorkType.validateItem(`-${'9'.repeat(SUM_MAX_DIGITS)}`), undefined);
    assert.match(sumWorkType.validateItem('1'.repeat(SUM_MAX_DIGITS + 1)) ?? '', new RegExp(`${SUM_MAX_DIGITS + 1} digits; at most ${SUM_MAX_DIGITS}`));
    assert.match(sumWorkType.validateItem([1]) ?? '', /array/);
  });

  it('counts words, lines and characters, and ranks the top words', () => {
    const partial = countText('The cat and the hat.\nThe END\n');
    assert.equal(partial.words, 7);
    assert.equal(partial.lines, 2);
    const merged = wordcountWorkType.combine(partial, countText("__proto__ the constructor isn't"));
    const result = wordcountWorkType.finish(merged);
    assert.equal(result.words, 11);
    assert.equal(result.blobs, 2);
    assert.deepEqual(result.topWords[0], { word: 'the', count: 4 });
    assert.ok(result.topWords.some((w) => w.word === '__proto__') === false, "'_' is not a word character");
    assert.ok(result.topWords.some((w) => w.word === "isn't"));
    assert.equal(result.distinctWords, 8, 'the, cat, and, hat, end, proto, constructor, isn\'t');
  });

  it('merges wordcount partials exactly and associatively, keeping words sorted and once', () => {
    const texts = ['b a a c', 'a d', '', 'zeta b b', "c c c isn't d", 'é a z'];
    const parts = texts.map(countText);
    const reference = new Map<string, number>();
    for (const text of texts) for (const [word, n] of countText(text).counts) reference.set(word, (reference.get(word) ?? 0) + n);
    const expected = [...reference.entries()].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0));
    const c = (x: (typeof parts)[number], y: (typeof parts)[number]) => wordcountWorkType.combine(x, y);
    const left = parts.reduce(c, wordcountWorkType.empty());
    const right = parts.reduceRight((acc, p) => c(p, acc), wordcountWorkType.empty());
    const grouped = c(c(parts[0] ?? assert.fail(), c(parts[1] ?? assert.fail(), parts[2] ?? assert.fail())), c(c(parts[3] ?? assert.fail(), parts[4] ?? assert.fail()), parts[5] ?? assert.fail()));
    for (const total of [left, right, grouped]) {
      assert.deepEqual(total.counts, expected);
      assert.equal(total.words, 17);
    }
    assert.deepEqual(wordcountWorkType.finish(left).topWords.slice(0, 3), [
      { word: 'a', count: 4 },
      { word: 'c', count: 4 },
      { word: 'b', count: 3 },
    ]);
    const a: Array<[string, number]> = [['x', 1]];
    const merged = mergeSortedPairs(a, []);
    merged[0]?.splice(1, 1, 99);
    assert.deepEqual(a, [['x', 1]], 'the merge does not share pairs with its inputs');
  });

  it('validates wordcount items as blob references', () => {
    assert.equal(wordcountWorkType.validateItem('texts/a/b.txt'), undefined);
    assert.match(wordcountWorkType.validateItem('texts/../b.txt') ?? '', /\.\./);
    assert.match(wordcountWorkType.validateItem('b.txt') ?? '', /no "\/"/);
    assert.match(wordcountWorkType.validateItem(3) ?? '', /string/);
  });
});
