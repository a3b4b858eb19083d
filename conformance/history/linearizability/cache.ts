/**
 * Lowe's memoisation: the set of (linearized operations, model state)
 * configurations already explored. A configuration seen before cannot lead
 * anywhere new, so the search backtracks instead of exploring it again.
 *
 * An open hash table with chaining over typed arrays: bitsets live in one
 * growing Uint32Array arena, so an insertion allocates nothing but the
 * occasional doubling.
 */
export class ConfigurationCache<S> {
  private readonly words: number;
  private mask: number;
  private slots: Int32Array;
  private chain: Int32Array;
  private hashes: Int32Array;
  private bits: Uint32Array;
  private states: S[] = [];
  private count = 0;

  constructor(
    bitsetWords: number,
    private readonly equal: (a: S, b: S) => boolean,
  ) {
    this.words = bitsetWords;
    const capacity = 1024;
    this.mask = capacity - 1;
    this.slots = new Int32Array(capacity).fill(-1);
    this.chain = new Int32Array(capacity);
    this.hashes = new Int32Array(capacity);
    this.bits = new Uint32Array(capacity * bitsetWords);
  }

  get size(): number {
    return this.count;
  }

  /** Adds the configuration; false when it was already there. */
  add(hash: number, linearized: Uint32Array, state: S): boolean {
    const w = this.words;
    const bits = this.bits;
    for (let i = this.slots[hash & this.mask]!; i !== -1; i = this.chain[i]!) {
      if (this.hashes[i] !== hash) continue;
      let same = true;
      const base = i * w;
      for (let k = 0; k < w; k++) {
        if (bits[base + k] !== linearized[k]) {
          same = false;
          break;
        }
      }
      if (same && this.equal(this.states[i]!, state)) return false;
    }
    if (this.count === this.hashes.length) this.grow();
    const i = this.count++;
    this.hashes[i] = hash;
    this.bits.set(linearized, i * w);
    this.states.push(state);
    const slot = hash & this.mask;
    this.chain[i] = this.slots[slot]!;
    this.slots[slot] = i;
    return true;
  }

  private grow(): void {
    const capacity = this.hashes.length * 2;
    const hashes = new Int32Array(capacity);
    hashes.set(this.hashes);
    const bits = new Uint32Array(capacity * this.words);
    bits.set(this.bits);
    this.hashes = hashes;
    this.bits = bits;
    this.chain = new Int32Array(capacity);
    this.slots = new Int32Array(capacity).fill(-1);
    this.mask = capacity - 1;
    for (let i = 0; i < this.count; i++) {
      const slot = hashes[i]! & this.mask;
      this.chain[i] = this.slots[slot]!;
      this.slots[slot] = i;
    }
  }
}
