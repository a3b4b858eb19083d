import { describe, expect, it } from 'vitest';
import type { FaultClass, StorePolicy, World } from '../model/index.ts';
import { alphabetFor, DEFAULT_ALPHABET, initialWorld, MATRIX_ROWS } from '../model/index.ts';
import { fingerprintOptionsFor } from '../model/explore.ts';
import type { FingerprintOptions } from '../model/fingerprint.ts';
import { fingerprint } from '../model/fingerprint.ts';
import { checkProperties } from '../model/properties.ts';
import type { Branch } from '../model/world.ts';
import { enabled, step, stepOrbits } from '../model/world.ts';

/**
 * Orbit branching (spec 8.4): the exploration steps with stepOrbits, which
 * leaves out a branch that differs from a kept one only by which of several
 * equal, interchangeable nodes answered which way. Checked on every state
 * of the first levels of the cells where nodes branch together: each
 * dropped branch reaches a state with the fingerprint of a kept one, with
 * the same outcome kind and properties broken, and the kept branches are a
 * subsequence of step's, in step's order (so breadth first meets the same
 * states in the same order, and finds the same counterexamples).
 */
function summary(branches: readonly Branch[], options: FingerprintOptions): string[] {
  const fp = { hi: 0, lo: 0 };
  return [
    ...new Set(
      branches.map((b) => {
        fingerprint(b.next, fp, options);
        const broken = [...new Set(checkProperties(b.events, b.next).map((v) => v.property))].sort().join('+');
        return `${fp.hi}:${fp.lo}/${b.outcome.kind}/${broken}`;
      }),
    ),
  ].sort();
}

/** Whether `sub` is `all` with some entries left out, order kept (compared by outcome and fingerprint). */
function isSubsequence(sub: readonly string[], all: readonly string[]): boolean {
  let i = 0;
  for (const x of all) if (i < sub.length && sub[i] === x) i++;
  return i === sub.length;
}

/** Cell, depth, and whether branches must have been left out there (acquires at an expiry instant on five equal nodes: delay). */
const CELLS: ReadonlyArray<readonly [string, StorePolicy, FaultClass, number, boolean]> = [
  ['redlock(5 nodes, none)', 'unfenced', 'delay', 3, true],
  ['redlock(5 nodes, none)', 'strict', 'clock-step', 4, false],
];

describe('orbit branching leaves out only renamings of kept branches (spec 8.4)', () => {
  it.each(CELLS)('%s / %s / %s to depth %i', (label, store, fault, depth, drops) => {
    const row = MATRIX_ROWS.find((r) => r.label === label)!;
    const initial = initialWorld({ design: row.design, store, clients: DEFAULT_ALPHABET.clients });
    const alphabet = alphabetFor(row.design, fault);
    const options = fingerprintOptionsFor(initial, alphabet);
    const fixed = options.fixedNodes ?? 1;
    const seen = new Set<string>();
    const fp = { hi: 0, lo: 0 };
    let frontier: World[] = [initial];
    let dropped = 0;
    for (let d = 0; d < depth; d++) {
      const next: World[] = [];
      for (const w of frontier) {
        for (const c of alphabet) {
          if (!enabled(w, c)) continue;
          const all = step(w, c);
          const kept = stepOrbits(w, c, fixed);
          dropped += all.length - kept.length;
          expect(summary(kept, options)).toEqual(summary(all, options));
          const key = (b: Branch): string => {
            fingerprint(b.next, fp, options);
            return `${b.outcome.kind}:${fp.hi}:${fp.lo}`;
          };
          expect(isSubsequence(kept.map(key), all.map(key))).toBe(true);
          for (const b of kept) {
            fingerprint(b.next, fp, options);
            const k = `${fp.hi}:${fp.lo}`;
            if (seen.has(k)) continue;
            seen.add(k);
            next.push(b.next);
          }
        }
      }
      frontier = next;
    }
    // Where nodes branch together, the check must have had something to check: branches were left out.
    if (drops) expect(dropped).toBeGreaterThan(0);
  });
});
