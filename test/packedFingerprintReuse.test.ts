import { describe, expect, it } from 'vitest';
import type { Command, NodeKey, NodeState, World } from '../model/index.ts';
import { alphabetFor, designs, initialWorld } from '../model/index.ts';
import { fingerprint } from '../model/fingerprint.ts';
import { fingerprintOptionsFor } from '../model/explore.ts';
import { encode, layoutFor } from '../model/packed.ts';
import { packedContext, packedFingerprint } from '../model/packedFingerprint.ts';
import { enabled, stepOrbits } from '../model/world.ts';

/**
 * The packed fingerprint reuses hashes within one state (model/packedFingerprint.ts): a node whose block equals an earlier
 * node's takes its hash, and where clients hash alike, a node whose hash read no client's place keeps it under the next
 * permutation (or the permutations are skipped). These states sit at the edges of that reuse: each must fingerprint as
 * the World's fingerprint (which reuses nothing) says.
 */
const design = designs.redlock({ nodes: 5 });
const alphabet: Command[] = alphabetFor(design, 'delay');

/** The World's fingerprint and the packed one of the same state, as strings. */
function both(w: World, a: readonly Command[] = alphabet): readonly [string, string] {
  const options = fingerprintOptionsFor(w, a);
  const layout = layoutFor(w, a)!;
  const packed = new Float64Array(layout.size);
  expect(encode(layout, w, packed)).toBe(true);
  const world = { hi: 0, lo: 0 };
  const out = { hi: 0, lo: 0 };
  fingerprint(w, world, options);
  packedFingerprint(packedContext(layout, w, options), packed, out);
  return [`${world.hi}:${world.lo}`, `${out.hi}:${out.lo}`];
}

const key = (w: World, client: number, attempt = 1): NodeKey => ({
  owner: { client, attempt },
  expiresAtMs: w.nowMs + 10,
  ttlMs: 10,
  count: 1,
  liveSinceTrueMs: w.nowMs,
});

const withNodes = (w: World, change: (n: NodeState, i: number) => NodeState): World => ({ ...w, nodes: w.nodes.map(change) });

/** Some states of the cell, a few steps deep (every first branch of every enabled command, two levels). */
function someStates(): World[] {
  const out: World[] = [];
  let level = [initialWorld({ design, store: 'strict', clients: 2 })];
  for (let d = 0; d < 2; d++) {
    const next: World[] = [];
    for (const w of level) for (const c of alphabet) if (enabled(w, c)) for (const b of stepOrbits(w, c, 1)) next.push(b.next);
    out.push(...next);
    level = next.filter((_w, i) => i % 5 === 0);
  }
  return out;
}

describe('the packed fingerprint reuses a hash only where the World fingerprint agrees', () => {
  it('gives a node that equals an earlier node but in one field its own hash', () => {
    const variants: Array<(n: NodeState, w: World) => NodeState> = [
      (n) => n,
      (n) => ({ ...n, up: !n.up }),
      (n, w) => ({ ...n, availableFromTrueMs: w.nowMs + 5 }),
      (n) => ({ ...n, wall: { ...n.wall, readingMs: n.wall.readingMs + 1 } }),
      (n) => ({ ...n, wall: { ...n.wall, driftPpm: n.wall.driftPpm + 100 } }),
      (n) => ({ ...n, mono: { ...n.mono, readingMs: n.mono.readingMs + 1 } }),
      (n) => ({ ...n, delay: 3 }),
      (n) => ({ ...n, counters: Object.fromEntries(Object.entries(n.counters).map(([c, v]) => [c, v + 1n])) }),
      (n, w): NodeState => ({ ...n, keys: 'r' in n.keys ? {} : { r: key(w, 0) } }),
      (n, w) => ({ ...n, keys: { r: { ...(n.keys.r ?? key(w, 0)), expiresAtMs: (n.keys.r?.expiresAtMs ?? w.nowMs) + 1 } } }),
      (n, w) => ({ ...n, keys: { r: { ...(n.keys.r ?? key(w, 0)), owner: { client: 1 - (n.keys.r?.owner.client ?? 1), attempt: 1 } } } }),
      (n, w) => ({ ...n, keys: { r: { ...(n.keys.r ?? key(w, 0)), count: 2 } } }),
      (n, w) => ({ ...n, keys: { r: { ...(n.keys.r ?? key(w, 0)), liveSinceTrueMs: w.nowMs - 3 } } }),
    ];
    let checked = 0;
    for (const w of someStates()) {
      for (const variant of variants) {
        // Node 2 a copy of node 1, then changed in one field; node 3 the unchanged copy.
        const v = withNodes(w, (n, i) => (i === 2 ? variant(w.nodes[1]!, w) : i === 3 ? w.nodes[1]! : n));
        const [world, packed] = both(v);
        expect(packed).toBe(world);
        checked++;
      }
      const cut = { ...withNodes(w, (n, i) => (i === 2 ? w.nodes[1]! : n)), partitions: [...w.partitions, '0:2'].sort() };
      const [world, packed] = both(cut);
      expect(packed).toBe(world);
    }
    expect(checked).toBeGreaterThan(1000);
  });

  it('hashes stale keys of clients that hash alike as one orbit, whichever client owns them', () => {
    const w0 = initialWorld({ design, store: 'strict', clients: 2 });
    const w = { ...w0, nowMs: 7 };
    // No leases: the two clients hash alike, and only the nodes' keys and cut links tell them apart.
    const owners: ReadonlyArray<readonly [number | null, number | null, string[]]> = [
      [0, null, []],
      [0, 0, []],
      [0, 1, []],
      [null, null, ['0:1']],
      [0, null, ['0:2']],
      [0, null, ['0:1']],
      [1, 0, ['1:3']],
    ];
    for (const [a, b, links] of owners) {
      const make = (swap: boolean): World => {
        const who = (c: number): number => (swap ? 1 - c : c);
        return {
          ...withNodes(w, (n, i) => (i === 1 && a !== null ? { ...n, keys: { r: key(w, who(a)) } } : i === 2 && b !== null ? { ...n, keys: { r: key(w, who(b)) } } : n)),
          partitions: links.map((l) => `${who(Number(l.split(':')[0]))}:${l.split(':')[1]}`).sort(),
        };
      };
      const [worldA, packedA] = both(make(false));
      const [worldB, packedB] = both(make(true));
      expect(worldB).toBe(worldA);
      expect(packedA).toBe(worldA);
      expect(packedB).toBe(worldB);
    }
  });

  it('tries every order of three clients of which two hash alike', () => {
    const w0 = initialWorld({ design, store: 'strict', clients: 3 });
    const three: Command[] = alphabetFor(design, 'delay', { clients: 3, resource: 'r', ttlMs: 10, advanceMs: [4, 12] });
    for (let odd = 0; odd < 3; odd++) {
      const w: World = { ...w0, clients: w0.clients.map((c, i) => (i === odd ? { ...c, mono: { ...c.mono, readingMs: c.mono.readingMs + 5 } } : c)) };
      const [world, packed] = both(w, three);
      expect(packed).toBe(world);
    }
  });
});
