/**
 * Growable typed arrays of parent links: parent state, command index, branch index. The branch index takes a byte
 * while every step so far had at most 256 branches (every built-in cell: 1 byte a state), and is widened to 32 bits
 * the first time one has more (which replies arrive, node by node: a cluster of many nodes that faults set apart),
 * so no step is too wide to link and the common case keeps its byte.
 */
export class Links {
  parent = new Int32Array(1 << 12);
  command = new Uint16Array(1 << 12);
  branch: Uint8Array | Uint32Array = new Uint8Array(1 << 12);
  size = 0;

  push(parent: number, command: number, branch: number): number {
    if (this.size === this.parent.length) {
      const grow = <T extends Int32Array | Uint16Array | Uint8Array | Uint32Array>(a: T, make: (n: number) => T): T => {
        const b = make(a.length * 2);
        b.set(a);
        return b;
      };
      this.parent = grow(this.parent, (n) => new Int32Array(n));
      this.command = grow(this.command, (n) => new Uint16Array(n));
      this.branch = this.branch instanceof Uint8Array ? grow(this.branch, (n) => new Uint8Array(n)) : grow(this.branch, (n) => new Uint32Array(n));
    }
    if (branch > 0xff && this.branch instanceof Uint8Array) {
      const wide = new Uint32Array(this.branch.length);
      wide.set(this.branch);
      this.branch = wide;
    }
    this.parent[this.size] = parent;
    this.command[this.size] = command;
    this.branch[this.size] = branch;
    return this.size++;
  }

  get bytes(): number {
    return this.parent.byteLength + this.command.byteLength + this.branch.byteLength;
  }
}
