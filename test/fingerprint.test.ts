import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { ClientState, Command, NodeState, World } from '../model/index.ts';
import { alphabetFor, canonicalKey, FAULT_CLASSES, initialWorld, MATRIX_ROWS, step } from '../model/index.ts';
import { fingerprint } from '../model/fingerprint.ts';
import { nodeSymmetric } from '../model/explore.ts';
import { designs, nodeCount } from '../model/index.ts';
import { enabled } from '../model/world.ts';

const seed = Number(process.env.LOCKCHECK_SEED ?? 20161010);
const runs = Number(process.env.LOCKCHECK_RUNS ?? 100);

const fp = (w: World, clientSymmetry = true): string => {
  const out = { hi: 0, lo: 0 };
  fingerprint(w, out, { clientSymmetry });
  return `${out.hi}:${out.lo}`;
};

/** The same state with clients 0 and 1 swapped everywhere (their state, key owners on nodes and replicas, links). */
function swapClients(w: World): World {
  const other = (c: number): number => (c === 0 ? 1 : c === 1 ? 0 : c);
  const swapped = (keys: NodeState['keys']): NodeState['keys'] =>
    Object.fromEntries(Object.entries(keys).map(([r, k]) => [r, { ...k, owner: { ...k.owner, client: other(k.owner.client) } }]));
  // The clients' own records name their client too (lease owners, an acquire's or lease's owner, a later's client): a world with
  // a lease owned by another client than its holder is no state of the model (the world check refuses it).
  const renamed = (c: ClientState): ClientState => ({
    ...c,
    leases: Object.fromEntries(Object.entries(c.leases).map(([r, l]) => [r, { ...l, owner: { ...l.owner, client: other(l.owner.client) } }])),
    inFlight:
      c.inFlight === null
        ? null
        : c.inFlight.kind === 'acquire' || c.inFlight.kind === 'lease'
          ? { ...c.inFlight, owner: { ...c.inFlight.owner, client: other(c.inFlight.owner.client) } }
          : c.inFlight.kind === 'later'
            ? { ...c.inFlight, client: other(c.inFlight.client) }
            : c.inFlight,
  });
  return {
    ...w,
    clients: w.clients.map((_c, i) => renamed(w.clients[other(i)]!)),
    nodes: w.nodes.map((n) => ({
      ...n,
      keys: swapped(n.keys),
      ...(n.replica === undefined ? {} : { replica: { ...n.replica, keys: swapped(n.replica.keys) } }),
    })),
    partitions: w.partitions.map((l) => `${other(Number(l.split(':')[0]))}:${l.split(':')[1]}`).sort(),
  };
}

/** canonicalKey without the written values, which the fingerprint abstracts (spec 8.4). */
const keyWithoutValues = (w: World): string =>
  canonicalKey({
    ...w,
    store: { ...w.store, cells: Object.fromEntries(Object.entries(w.store.cells).map(([r, c]) => [r, { ...c, value: c.value === null ? null : '' }])) },
    clients: w.clients.map((c) => ({
      ...c,
      pendingWrite: c.pendingWrite && { ...c.pendingWrite, value: '' },
      leases: Object.fromEntries(Object.entries(c.leases).map(([r, l]) => [r, { ...l, buffered: l.buffered.map(() => '') }])),
    })),
  });

/** A state reached by a random schedule of a random cell's alphabet, taking a random branch each step. */
const reached = fc
  .record({
    cell: fc.nat(MATRIX_ROWS.length * FAULT_CLASSES.length - 1),
    picks: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 10 }),
  })
  .map(({ cell, picks }) => {
    const row = MATRIX_ROWS[cell % MATRIX_ROWS.length]!;
    const alphabet: Command[] = alphabetFor(row.design, FAULT_CLASSES[Math.floor(cell / MATRIX_ROWS.length)]!);
    let w = initialWorld({ design: row.design, store: row.stores[0]!, clients: 2 });
    for (const [c, b] of picks) {
      const on = alphabet.filter((cmd) => enabled(w, cmd));
      const branches = step(w, on[c % on.length]!);
      w = branches[b % branches.length]!.next;
    }
    return w;
  });

describe('fingerprints of orbits (spec 8.4)', () => {
  it('are equal for a state and the same state with its clients renumbered', () => {
    fc.assert(
      fc.property(reached, (w) => fp(swapClients(w)) === fp(w)),
      { seed, numRuns: runs },
    );
  });

  // The fingerprint may merge more than the key (the abstractions of spec 8.4; test/exploreReduction checks those merges are sound), never less.
  it('are equal for states the canonical key does not tell apart, up to client renumbering and values', () => {
    fc.assert(
      fc.property(reached, reached, (a, b) => {
        if (a.config.design !== b.config.design) return true;
        const sameKey = keyWithoutValues(a) === keyWithoutValues(b) || keyWithoutValues(swapClients(a)) === keyWithoutValues(b);
        if (sameKey) expect(fp(a)).toBe(fp(b));
      }),
      { seed, numRuns: runs * 5 },
    );
  });

  it('without client symmetry, renumbered clients give another fingerprint once the clients differ', () => {
    const row = MATRIX_ROWS[0]!;
    const w = step(initialWorld({ design: row.design, store: 'strict', clients: 2 }), { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 })[0]!.next;
    expect(fp(swapClients(w), false)).not.toBe(fp(w, false));
    expect(fp(swapClients(w))).toBe(fp(w));
  });

  it('permute node 0 with the others only where the alphabet addresses every node alike', () => {
    const redlock = designs.redlock({ nodes: 5 });
    const symmetric = FAULT_CLASSES.filter((f) => nodeSymmetric(alphabetFor(redlock, f), nodeCount(redlock)));
    expect(symmetric).toEqual(['none', 'partition', 'delay', 'client-pause', 'clock-drift', 'connection-loss']);
    // Client 0 cut from node 0, or from node 1: one orbit when node 0 is permuted too, two when it keeps its place.
    const w = initialWorld({ design: redlock, store: 'strict', clients: 2 });
    const cut = (node: number): World => step(w, { kind: 'partition', client: 0, node })[0]!.next;
    const print = (x: World, fixedNodes: number): string => {
      const out = { hi: 0, lo: 0 };
      fingerprint(x, out, { fixedNodes });
      return `${out.hi}:${out.lo}`;
    };
    expect(print(cut(0), 0)).toBe(print(cut(1), 0));
    expect(print(cut(0), 1)).not.toBe(print(cut(1), 1));
    expect(print(cut(1), 1)).toBe(print(cut(4), 1));
  });
});
