/**
 * The 64-bit hash both fingerprints feed (fingerprint.ts over a World,
 * packedFingerprint.ts over a packed state): the same words in, the same
 * numbers out, so the two may share one set of visited states.
 */

// Two 32-bit lanes with different constants, each finalised by murmur3's fmix: together one 64-bit hash.
let h1 = 0;
let h2 = 0;

/** Starts a hash with the two lanes' seeds. */
export function start(seed1: number, seed2: number): void {
  h1 = seed1;
  h2 = seed2;
}

/** The hash so far, first lane, finalised. */
export function finishHi(): number {
  return fmix(h1);
}

/** The hash so far, second lane, finalised. */
export function finishLo(): number {
  return fmix(h2);
}

/**
 * Mixes one 32-bit word into both lanes: the word premixed once (a multiply and an xorshift, a bijection, so distinct
 * words stay distinct and nearby small integers differ in many bits), then each lane a multiply and an xorshift of its
 * own (3 multiplications a word; murmur3's two lanes took 6, and their chain was twice as long). bench/explore.md
 * (session h13) counts each lane's collisions over the real distinct states against the birthday figure.
 */
export function word(k: number): void {
  let a = Math.imul(k, 0xcc9e2d51);
  a ^= a >>> 16;
  h1 = Math.imul(h1 ^ a, 0x9e3779b1);
  h1 ^= h1 >>> 15;
  h2 = Math.imul(h2 ^ a, 0xc2b2ae3d);
  h2 ^= h2 >>> 13;
}

const WIDE = -0x80000000;

/** An integer up to 2^53 in magnitude: one word if it fits 32 bits, else a marker and two words. */
export function num(n: number): void {
  if ((n | 0) === n && n !== WIDE) word(n);
  else {
    word(WIDE);
    word(n | 0);
    word(Math.floor(n / 4294967296) | 0);
  }
}

const NULL_TOKEN = -7;

/** A token or null. */
export function big(t: bigint | null): void {
  if (t === null) {
    word(NULL_TOKEN);
    return;
  }
  const n = Number(t);
  if (Number.isSafeInteger(n)) {
    word(1);
    num(n);
  } else {
    word(2);
    word(Number(BigInt.asIntN(32, t)));
    word(Number(BigInt.asIntN(32, t >> 32n)));
  }
}

/** A token held as a safe integer, or NaN for null: the words big() writes for the same token. */
export function bigSafe(n: number): void {
  if (Number.isNaN(n)) word(NULL_TOKEN);
  else {
    word(1);
    num(n);
  }
}

// A string's own 64-bit hash (nameHash), in two words: set by nameHash, read at once.
let nameHi = 0;
let nameLo = 0;

/**
 * Hashes `s` apart from the running hash (the same two lanes and mix as word(), from seeds of its own, each finalised),
 * into nameHi and nameLo. A name the packed fingerprint hashes (a resource's, a counter's) is hashed once per
 * exploration (packedContext) and mixed in as its two words, not a word per character.
 */
function nameHash(s: string): void {
  let a = 0x6a09e667 ^ s.length;
  let b = 0x3c6ef372 ^ s.length;
  for (let i = 0; i < s.length; i++) {
    let k = Math.imul(s.charCodeAt(i), 0xcc9e2d51);
    k ^= k >>> 16;
    a = Math.imul(a ^ k, 0x9e3779b1);
    a ^= a >>> 15;
    b = Math.imul(b ^ k, 0xc2b2ae3d);
    b ^= b >>> 13;
  }
  nameHi = fmix(a);
  nameLo = fmix(b);
}

/** A string: its own hash's two words (the words the packed fingerprint mixes for a name it knows, with `name`). */
export function str(s: string): void {
  nameHash(s);
  word(nameHi);
  word(nameLo);
}

/** The two words str(s) mixes, computed once: [hi, lo]. */
export function nameWords(s: string): readonly [number, number] {
  nameHash(s);
  return [nameHi, nameLo];
}

/** A name by its two words (nameWords): what str() of it mixes. */
export function name(hi: number, lo: number): void {
  word(hi);
  word(lo);
}

export function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * Places member `i` (its hash in hi/lo) among the interchangeable members, those from `fixed` on, by
 * an insertion sort of their hashes into `order` (n <= 15, no allocation): the canonical order of a
 * symmetric set, the same for both fingerprints.
 */
export function orderByHash(hi: readonly number[], lo: readonly number[], order: number[], i: number, fixed: number): void {
  const h = hi[i]!;
  const l = lo[i]!;
  let j = i;
  if (i >= fixed) for (; j > fixed && (hi[order[j - 1]!]! > h || (hi[order[j - 1]!] === h && lo[order[j - 1]!]! > l)); j--) order[j] = order[j - 1]!;
  order[j] = i;
}

/** Hashes the count, then each member's hash in `order` (or the members 0..n-1 through `order` as an index map). */
export function wordsInOrder(hi: readonly number[], lo: readonly number[], order: readonly number[], n: number): void {
  word(n);
  for (let k = 0; k < n; k++) {
    word(hi[order[k]!]!);
    word(lo[order[k]!]!);
  }
}
