/**
 * Lowe's memoisation: the set of (linearized operations, model state)
 * configurations already explored. A configuration seen before cannot lead
 * anywhere new, so the search backtracks instead of exploring it again.
 *
 * An open hash table with chaining over typed arrays: bitsets live in one
 * growing Uint32Array arena, so an insertion allocates nothing but the
 * occasional doubling.
 */
/** Per memoised configuration: the reference to its state and a small state object (an estimate). */
const STATE_BYTES = 8 + 32;

export class ConfigurationCache<S> {
  private readonly words: number;
  private mask: number;
  private slots: Int32Array;
  private chain: Int32Array;
  private hashes: Int32Array;
  /** 1 for configurations dropped because a later one covers them. */
  private dead: Uint8Array;
  private bits: Uint32Array;
  private states: S[] = [];
  private count = 0;

  /**
   * @param mandatory per word, the bits of operations that must be
   * linearized; the other bits are of pending operations, which may be left
   * out, and the hash given to `add` must not depend on them.
   */
  constructor(
    bitsetWords: number,
    private readonly mandatory: Uint32Array,
    private readonly equal: (a: S, b: S) => boolean,
  ) {
    this.words = bitsetWords;
    const capacity = 1024;
    this.mask = capacity - 1;
    this.slots = new Int32Array(capacity).fill(-1);
    this.chain = new Int32Array(capacity);
    this.hashes = new Int32Array(capacity);
    this.dead = new Uint8Array(capacity);
    this.bits = new Uint32Array(capacity * bitsetWords);
  }

  get size(): number {
    return this.count;
  }

  /**
   * An estimate of the bytes the table holds once `more` configurations are
   * added: its arrays at the capacity it will have then, the arrays they
   * are copied from while it grows (both are alive during the copy), and a
   * reference plus a small state per configuration.
   */
  bytesAfter(more: number): number {
    const perSlot = 4 * this.words + 4 + 4 + 4 + 1;
    const capacity = this.hashes.length;
    let grown = capacity;
    while (grown < this.count + more) grown *= 2;
    const arrays = grown === capacity ? capacity * perSlot : (grown + grown / 2) * perSlot;
    return arrays + (this.count + more) * STATE_BYTES;
  }

  /**
   * Adds the configuration; false when it is already covered: a known one
   * has the same state, the same mandatory operations linearized and only
   * some of its pending ones. That one can do everything this one can (a
   * pending operation left out can still be linearized later, or never), so
   * whatever this one could reach has been or will be explored from it.
   */
  add(hash: number, linearized: Uint32Array, state: S): boolean {
    const w = this.words;
    const bits = this.bits;
    const mandatory = this.mandatory;
    const slot = hash & this.mask;
    let before = -1;
    for (let i = this.slots[slot]!; i !== -1; i = this.chain[i]!) {
      if (this.hashes[i] !== hash) {
        before = i;
        continue;
      }
      // known ⊆ now (known covers this one) and now ⊆ known (this one covers known)
      let knownInNow = true;
      let nowInKnown = true;
      const base = i * w;
      for (let k = 0; k < w; k++) {
        const known = bits[base + k]!;
        const now = linearized[k]!;
        if (((known ^ now) & mandatory[k]!) !== 0) {
          knownInNow = nowInKnown = false;
          break;
        }
        if ((known & ~now) !== 0) knownInNow = false;
        if ((now & ~known) !== 0) nowInKnown = false;
        if (!knownInNow && !nowInKnown) break;
      }
      if ((knownInNow || nowInKnown) && this.equal(this.states[i]!, state)) {
        if (knownInNow) return false;
        // The new configuration covers this one: drop it from the chain (keeps chains short).
        const after = this.chain[i]!;
        if (before === -1) this.slots[slot] = after;
        else this.chain[before] = after;
        this.dead[i] = 1;
        continue;
      }
      before = i;
    }
    if (this.count === this.hashes.length) this.grow();
    const i = this.count++;
    this.hashes[i] = hash;
    this.bits.set(linearized, i * w);
    this.states.push(state);
    const at = hash & this.mask; // the table may have grown
    this.chain[i] = this.slots[at]!;
    this.slots[at] = i;
    return true;
  }

  private grow(): void {
    const capacity = this.hashes.length * 2;
    const hashes = new Int32Array(capacity);
    hashes.set(this.hashes);
    const bits = new Uint32Array(capacity * this.words);
    bits.set(this.bits);
    const dead = new Uint8Array(capacity);
    dead.set(this.dead);
    this.hashes = hashes;
    this.dead = dead;
    this.bits = bits;
    this.chain = new Int32Array(capacity);
    this.slots = new Int32Array(capacity).fill(-1);
    this.mask = capacity - 1;
    for (let i = 0; i < this.count; i++) {
      if (dead[i] === 1) continue;
      const slot = hashes[i]! & this.mask;
      this.chain[i] = this.slots[slot]!;
      this.slots[slot] = i;
    }
  }
}
