import { describe, expect, it } from 'vitest';
import { finishHi, finishLo, start, word } from '../model/fingerprintHash.ts';

/**
 * The 64-bit hash both fingerprints feed (model/fingerprintHash.ts). The explorer keeps fingerprints only, and the CLI
 * prints a collision probability that assumes a uniform 64-bit hash: each 32-bit lane must collide no more than a
 * uniform one would (the birthday figure), also on inputs built to cancel in a lane that mixes the raw word (a flip of
 * a word's top bit followed by the flip it causes in the lane, in the next word).
 */
function hashOf(words: readonly number[]): readonly [number, number] {
  start(0x3c6ef372, 0x510e527f);
  for (const k of words) word(k);
  return [finishHi(), finishLo()];
}

/** Small integers, and a few with the top bit flipped alone or with the bit a lane's xorshift copies it to. */
const values: number[] = [];
for (let v = -8; v < 24; v++) values.push(v);
for (let v = 0; v < 8; v++) values.push((v ^ 0x80000000) | 0, (v ^ 0x80010000) | 0, (v ^ 0x80040000) | 0, (v ^ 0x80008000) | 0);

/** Every sequence of up to three of `values`, each after its length (as the fingerprints write lists). */
function sequences(): number[][] {
  const out: number[][] = [[0]];
  for (const a of values) {
    out.push([1, a]);
    for (const b of values) {
      out.push([2, a, b]);
      for (const c of values) out.push([3, a, b, c]);
    }
  }
  return out;
}

/** How many of `xs` repeat an earlier one. */
function repeats(xs: readonly (number | string)[]): number {
  return xs.length - new Set(xs).size;
}

describe('the fingerprint hash', () => {
  it('collides in each 32-bit lane no more than a uniform hash, and never in 64 bits, over structured word sequences', () => {
    const all = sequences();
    const n = all.length;
    expect(n).toBe(1 + values.length + values.length ** 2 + values.length ** 3);
    const hashes = all.map(hashOf);
    // Birthday: about n^2 / 2^33 repeats in a uniform 32-bit lane (7.0 here); allow five standard deviations above.
    const expected = (n * n) / 2 ** 33;
    const bound = expected + 5 * Math.sqrt(expected);
    const hi = repeats(hashes.map(([h]) => h));
    const lo = repeats(hashes.map(([, l]) => l));
    expect(hi, `first lane repeats (${expected.toFixed(1)} expected)`).toBeLessThanOrEqual(bound);
    expect(lo, `second lane repeats (${expected.toFixed(1)} expected)`).toBeLessThanOrEqual(bound);
    expect(repeats(hashes.map(([h, l]) => `${h}:${l}`))).toBe(0);
  });

  it('sets about half the bits of each lane for a one-bit change of any word', () => {
    // Avalanche: a flip of one bit of one word of a short sequence flips each output bit with probability about 1/2.
    let flips = 0;
    let trials = 0;
    for (let s = 0; s < 64; s++) {
      const base = [3, s, (s * 7) | 0, s - 5];
      const [h, l] = hashOf(base);
      for (let at = 0; at < base.length; at++) {
        for (let bit = 0; bit < 32; bit++) {
          const changed = base.slice();
          changed[at] = (changed[at]! ^ (1 << bit)) | 0;
          const [h2, l2] = hashOf(changed);
          flips += popcount(h ^ h2) + popcount(l ^ l2);
          trials += 64;
        }
      }
    }
    expect(flips / trials).toBeGreaterThan(0.48);
    expect(flips / trials).toBeLessThan(0.52);
  });

  it('gives the numbers it gave when the stored figures were measured (bench/explore.md, session h13)', () => {
    expect(hashOf([])).toEqual([KNOWN[0], KNOWN[1]]);
    expect(hashOf([0])).toEqual([KNOWN[2], KNOWN[3]]);
    expect(hashOf([1, 2, 3, -1, 0x7fffffff, -0x80000000])).toEqual([KNOWN[4], KNOWN[5]]);
  });
});

function popcount(x: number): number {
  let c = 0;
  for (let v = x >>> 0; v !== 0; v >>>= 1) c += v & 1;
  return c;
}

// Pinned: a change of the hash changes every fingerprint and must be measured again (collisions per lane, bench/explore.md).
const KNOWN = [1020716019, 680643730, 1244063200, 1700343545, 3716194409, 2012179571];
