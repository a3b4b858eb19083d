/**
 * The packed step's branches: a pool of reused buffers (grown, never
 * shrunk) and, per branch, the event properties its events break (a bit
 * per property, EVENT_BITS), so the explorer needs the reference step's
 * events only where a branch breaks one it has not found yet.
 */
import type { PropertyId } from './properties.ts';

export const EVENT_BITS: ReadonlyArray<readonly [PropertyId, number]> = [
  ['FENCE-1', 1],
  ['FENCE-2', 2],
  ['STORE-1', 4],
  ['OWN-1', 8],
  ['DUR-1', 16],
];
export const FENCE_1 = 1;
export const FENCE_2 = 2;
export const STORE_1 = 4;
export const OWN_1 = 8;

/** What a packed step returns where the reference step returns the very state it was given (the explorer skips it). */
export const UNCHANGED = -1;

export class PackedBranches {
  private readonly buffers: Float64Array[] = [];
  private masks = new Int32Array(16);
  count = 0;

  constructor(readonly size: number) {}

  /** Starts a step: no branches. */
  clear(): void {
    this.count = 0;
  }

  /** Adds a branch holding a copy of `from`, and returns its buffer to change. */
  push(from: Float64Array): Float64Array {
    if (this.count === this.buffers.length) this.buffers.push(new Float64Array(this.size));
    if (this.count === this.masks.length) {
      const grown = new Int32Array(this.masks.length * 2);
      grown.set(this.masks);
      this.masks = grown;
    }
    const b = this.buffers[this.count]!;
    b.set(from);
    this.masks[this.count++] = 0;
    return b;
  }

  /** The last branch pushed breaks these event properties. */
  mark(bits: number): void {
    this.masks[this.count - 1] = this.masks[this.count - 1]! | bits;
  }

  state(b: number): Float64Array {
    return this.buffers[b]!;
  }

  events(b: number): number {
    return this.masks[b]!;
  }
}
