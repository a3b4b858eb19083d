/**
 * A set of 64-bit fingerprints (two 32-bit halves) in one typed array, open
 * addressing with linear probing, grown at half load: 16 to 32 bytes per
 * fingerprint, no object per entry. (0, 0) marks an empty slot, so that
 * fingerprint is stored as (0, 1).
 */
export class FingerprintSet {
  private slots: Uint32Array;
  private mask: number;
  size = 0;

  constructor(capacity = 1 << 10) {
    let c = 1 << 4;
    while (c < capacity) c <<= 1;
    this.slots = new Uint32Array(2 * c);
    this.mask = c - 1;
  }

  /** Adds the fingerprint; true if it was not there before. */
  add(hi: number, lo: number): boolean {
    if (hi === 0 && lo === 0) lo = 1;
    const slots = this.slots;
    const mask = this.mask;
    for (let i = (hi ^ Math.imul(lo, 0x9e3779b1)) & mask; ; i = (i + 1) & mask) {
      const h = slots[2 * i]!;
      const l = slots[2 * i + 1]!;
      if (h === 0 && l === 0) {
        slots[2 * i] = hi;
        slots[2 * i + 1] = lo;
        if (++this.size * 2 > mask + 1) this.grow();
        return true;
      }
      if (h === hi >>> 0 && l === lo >>> 0) return false;
    }
  }

  /** Bytes held by the table. */
  get bytes(): number {
    return this.slots.byteLength;
  }

  private grow(): void {
    const old = this.slots;
    this.slots = new Uint32Array(old.length * 2);
    this.mask = this.slots.length / 2 - 1;
    this.size = 0;
    for (let i = 0; i < old.length; i += 2) {
      const hi = old[i]!;
      const lo = old[i + 1]!;
      if (hi !== 0 || lo !== 0) this.add(hi, lo);
    }
  }
}
