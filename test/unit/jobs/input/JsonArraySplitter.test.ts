/**
 * The JSON array splitter against JSON.parse, the oracle: generated arrays (any value, any
 * whitespace, escapes, multi-byte characters) fed in random pieces must give the parsed array's
 * elements; mutated and hostile inputs must get the verdict JSON.parse-then-inspect gives (not
 * JSON over not an array over too deep), including 100,000 levels of nesting without recursion.
 */
import assert from 'node:assert/strict';
import { StringDecoder } from 'node:string_decoder';
import { describe, it } from 'node:test';

import { JsonArraySplitter, JsonSplitError, type JsonSplitErrorKind } from '../../../../shared/jobs/input/JsonArraySplitter';
import { nestingDepthExceeds } from '../../../../shared/jobs/JobSubmission';

type Verdict = { ok: true; elements: unknown[] } | { ok: false; kind: JsonSplitErrorKind };

/** Feeds `text` in pieces chosen by `pieceSize` (a random size per piece, or fixed). */
function split(text: string, maxDepth: number, pieceSize: () => number = () => text.length || 1): { verdict: Verdict; texts: string[] } {
  const texts: string[] = [];
  const splitter = new JsonArraySplitter({ maxDepth, onElement: (json, index) => {
    assert.equal(index, texts.length, 'elements come in order');
    texts.push(json);
  } });
  try {
    for (let at = 0; at < text.length; ) {
      const size = Math.max(1, pieceSize());
      splitter.feed(text.slice(at, at + size));
      at += size;
    }
    splitter.end();
  } catch (err) {
    if (!(err instanceof JsonSplitError)) throw err;
    return { verdict: { ok: false, kind: err.kind }, texts };
  }
  return { verdict: { ok: true, elements: texts.map((t) => JSON.parse(t) as unknown) }, texts };
}

/** What JSON.parse and the planner's checks say about `text`. */
function oracle(text: string, maxDepth: number): Verdict {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { ok: false, kind: 'not-json' };
  }
  if (!Array.isArray(parsed)) return { ok: false, kind: 'not-array' };
  if (nestingDepthExceeds(parsed, maxDepth)) return { ok: false, kind: 'too-deep' };
  return { ok: true, elements: parsed };
}

/** A small seeded generator (mulberry32), so a failure is reproducible. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const STRING_PARTS = ['a', 'é', '€', '😀', '\u2028', '"', '\\', '/', '\n', '\t', '\u0001', ' ', 'x'.repeat(20), '\ud800'];
const NUMBERS = ['0', '-0', '12', '-7', '3.25', '1e5', '1E+2', '-2.5e-3', '0.0', '123456789012345678901234567890', '1e400'];
const WS = ['', '', '', ' ', '\n', '\t', '\r\n  '];

/** JSON text for a random value, with random whitespace and escapes written several ways. */
function genText(rand: () => number, depth: number): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)] as T;
  const ws = () => pick(WS);
  const r = rand();
  if (depth <= 0 || r < 0.45) {
    const s = rand();
    if (s < 0.3) return pick(NUMBERS);
    if (s < 0.4) return pick(['true', 'false', 'null']);
    let str = '';
    const n = Math.floor(rand() * 6);
    for (let i = 0; i < n; i++) str += pick(STRING_PARTS);
    let json = JSON.stringify(str);
    // Some \u escapes written out, upper and lower case hex.
    if (rand() < 0.3) json = json.replace(/a/g, '\\u0061').replace(/x/g, '\\u0078');
    if (rand() < 0.2) json = json.replace(/\//g, '\\/');
    return json;
  }
  const n = Math.floor(rand() * 5);
  const parts: string[] = [];
  if (r < 0.75) {
    for (let i = 0; i < n; i++) parts.push(ws() + genText(rand, depth - 1) + ws());
    return `[${parts.join(',') || ws()}]`;
  }
  for (let i = 0; i < n; i++) {
    // Keys unique within an object: with a duplicate, JSON.parse keeps the last value only (see the duplicate-key test).
    const key = JSON.stringify(`k${i}${pick(STRING_PARTS)}`);
    parts.push(`${ws()}${key}${ws()}:${ws()}${genText(rand, depth - 1)}${ws()}`);
  }
  return `{${parts.join(',') || ws()}}`;
}

function genArray(rand: () => number): string {
  const n = Math.floor(rand() * 8);
  const parts = Array.from({ length: n }, () => `${WS[Math.floor(rand() * WS.length)] ?? ''}${genText(rand, 5)}`);
  return `${rand() < 0.3 ? ' \n' : ''}[${parts.join(',')}]${rand() < 0.3 ? '\n' : ''}`;
}

describe('JsonArraySplitter', () => {
  it('gives exactly the parsed elements of generated arrays, fed in random pieces', () => {
    const rand = random(1);
    for (let round = 0; round < 2_000; round++) {
      const text = genArray(rand);
      const expected = oracle(text, 1_000);
      assert.ok(expected.ok, text);
      const { verdict, texts } = split(text, 1_000, () => 1 + Math.floor(rand() * 9));
      assert.deepEqual(verdict, expected, text);
      // Each element's text is its source, whitespace around it aside.
      for (const t of texts) assert.ok(text.includes(t) && t.trim() === t, t);
    }
  });

  it('agrees with JSON.parse on mutated inputs: every verdict, including too deep at a small limit', () => {
    const rand = random(2);
    const noise = ['[', ']', '{', '}', ',', ':', '"', '\\', '-', '.', 'e', '0', '1', ' ', 't', 'n', '\u0000', 'x', 'u'];
    const seen = new Set<string>();
    for (let round = 0; round < 5_000; round++) {
      let text = rand() < 0.8 ? genArray(rand) : genText(rand, 4);
      const edits = 1 + Math.floor(rand() * 3);
      for (let e = 0; e < edits; e++) {
        const at = Math.floor(rand() * (text.length + 1));
        const op = rand();
        const ch = noise[Math.floor(rand() * noise.length)] ?? '';
        const head = text.slice(0, at);
        // Insert, delete or replace one character.
        text = op < 0.4 ? head + ch + text.slice(at) : op < 0.7 ? head + text.slice(at + 1) : head + ch + text.slice(at + 1);
      }
      const maxDepth = 1 + Math.floor(rand() * 4);
      const expected = oracle(text, maxDepth);
      const { verdict } = split(text, maxDepth, () => 1 + Math.floor(rand() * 5));
      assert.deepEqual(verdict, expected, `${JSON.stringify(text)} at depth ${maxDepth}`);
      seen.add(verdict.ok ? 'ok' : verdict.kind);
    }
    assert.deepEqual([...seen].sort(), ['not-array', 'not-json', 'ok', 'too-deep'], 'the fuzz reaches every verdict');
  });

  it('decides 100,000 levels of nesting without recursion, in the order JSON.parse-then-check would', () => {
    const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
    assert.deepEqual(split(`[${deep}]`, 63).verdict, { ok: false, kind: 'too-deep' });
    assert.deepEqual(split(`[${deep}]`, 63, () => 1000).verdict, { ok: false, kind: 'too-deep' });
    // Unclosed, or followed by garbage: not JSON wins.
    assert.deepEqual(split(`[${'['.repeat(100_000)}`, 63).verdict, { ok: false, kind: 'not-json' });
    assert.deepEqual(split(`[${deep}] x`, 63).verdict, { ok: false, kind: 'not-json' });
    assert.deepEqual(split(`[${'['.repeat(100_000)}${']'.repeat(99_999)}}]`, 63).verdict, { ok: false, kind: 'not-json' });
    // Deep inside an object: not an array wins (the planner checks depth only for arrays).
    assert.deepEqual(split(`{"a":${deep}}`, 63).verdict, { ok: false, kind: 'not-array' });
    const objects = `${'{"a":'.repeat(50_000)}1${'}'.repeat(50_000)}`;
    assert.deepEqual(split(`[1, ${objects}, 2]`, 63).verdict, { ok: false, kind: 'too-deep' });
  });

  it('counts the array as level 1: 63 levels pass, 64 do not; elements before the deep one are emitted, none after', () => {
    const levels = (n: number) => `${'['.repeat(n - 1)}1${']'.repeat(n - 1)}`;
    const ok = split(`[${levels(63)}]`, 63);
    assert.equal(ok.verdict.ok, true);
    const emitted: number[] = [];
    const splitter = new JsonArraySplitter({ maxDepth: 63, onElement: (_json, index) => emitted.push(index) });
    splitter.feed(`[0, 1, ${levels(64)}, 3, "four"]`);
    assert.equal(splitter.tooDeep, true);
    assert.throws(() => splitter.end(), (err: unknown) => err instanceof JsonSplitError && err.kind === 'too-deep' && err.element === 2);
    assert.deepEqual(emitted, [0, 1]);
  });

  it('judges depth on the text: a deep value under a key a later duplicate replaces is still too deep', () => {
    const deep = `${'['.repeat(100)}${']'.repeat(100)}`;
    const text = `[{"a": ${deep}, "a": 1}]`;
    // JSON.parse keeps only the last "a", so a parse-then-check would pass it; the splitter never builds the value.
    assert.deepEqual(oracle(text, 63), { ok: true, elements: [{ a: 1 }] });
    assert.deepEqual(split(text, 63).verdict, { ok: false, kind: 'too-deep' });
  });

  it('refuses hostile text: unterminated strings, bad escapes, control characters, trailing data, non-arrays, empty input', () => {
    const cases: Array<[string, JsonSplitErrorKind]> = [
      ['', 'not-json'],
      ['   \n', 'not-json'],
      ['[', 'not-json'],
      ['["abc', 'not-json'],
      ['["abc\\"]', 'not-json'],
      ['["\\x"]', 'not-json'],
      ['["\\u12G4"]', 'not-json'],
      ['["\\u12"]', 'not-json'],
      ['["a\u0000b"]', 'not-json'],
      ['["tab\there"]', 'not-json'],
      ['[1,]', 'not-json'],
      ['[,1]', 'not-json'],
      ['[1 2]', 'not-json'],
      ['[01]', 'not-json'],
      ['[1.]', 'not-json'],
      ['[.5]', 'not-json'],
      ['[1e]', 'not-json'],
      ['[+1]', 'not-json'],
      ['[-]', 'not-json'],
      ['[NaN]', 'not-json'],
      ['[tru]', 'not-json'],
      ['[nulll]', 'not-json'],
      ['[{"a" 1}]', 'not-json'],
      ['[{"a":1,}]', 'not-json'],
      ['[{1:2}]', 'not-json'],
      ['[1]]', 'not-json'],
      ['[1] [2]', 'not-json'],
      ['[1] x', 'not-json'],
      ['\ufeff[1]', 'not-json'],
      ["['a']", 'not-json'],
      ['{"not":"an array"}', 'not-array'],
      ['"just a string"', 'not-array'],
      ['42', 'not-array'],
      [' -0.5e3 ', 'not-array'],
      ['null', 'not-array'],
      ['true', 'not-array'],
      ['{"a":', 'not-json'],
      ['12x', 'not-json'],
    ];
    for (const [text, kind] of cases) {
      assert.deepEqual(oracle(text, 63), { ok: false, kind }, `the oracle agrees on ${JSON.stringify(text)}`);
      assert.deepEqual(split(text, 63).verdict, { ok: false, kind }, JSON.stringify(text));
      assert.deepEqual(split(text, 63, () => 1).verdict, { ok: false, kind }, `${JSON.stringify(text)} one character at a time`);
    }
  });

  it('takes multi-byte UTF-8 split at every byte boundary when the bytes pass through a StringDecoder', () => {
    const items = ['é', '€uro', '😀 and 𝄞', 'naïve "quoted" \\ back', '\u2028\u2029', { 'clé': ['ü', 1, null] }];
    const bytes = Buffer.from(JSON.stringify(items), 'utf8');
    for (let cut = 1; cut < bytes.length; cut++) {
      const texts: string[] = [];
      const splitter = new JsonArraySplitter({ maxDepth: 63, onElement: (json) => texts.push(json) });
      const decoder = new StringDecoder('utf8');
      splitter.feed(decoder.write(bytes.subarray(0, cut)));
      splitter.feed(decoder.write(bytes.subarray(cut)));
      splitter.feed(decoder.end());
      splitter.end();
      assert.deepEqual(texts.map((t) => JSON.parse(t) as unknown), items, `cut at byte ${cut}`);
    }
  });

  it('emits elements as they complete, holding only the one in progress', () => {
    const texts: string[] = [];
    const splitter = new JsonArraySplitter({ maxDepth: 63, onElement: (json) => texts.push(json) });
    splitter.feed('[1, "tw');
    assert.deepEqual(texts, ['1']);
    splitter.feed('o", {"three"');
    assert.deepEqual(texts, ['1', '"two"']);
    splitter.feed(': 3}, 4');
    assert.deepEqual(texts, ['1', '"two"', '{"three": 3}']);
    // A number's end is only known at the next character.
    splitter.feed('2');
    assert.equal(texts.length, 3);
    splitter.feed(']');
    assert.deepEqual(texts, ['1', '"two"', '{"three": 3}', '42']);
    splitter.end();
    assert.equal(splitter.count, 4);
    assert.throws(() => splitter.feed('x'), /after end/);
  });
});
