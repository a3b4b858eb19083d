import { describe, expect, it } from 'vitest';
import type { Command, FaultClass, StorePolicy, World } from '../model/index.ts';
import { alphabetFor, DEFAULT_ALPHABET, initialWorld, MATRIX_ROWS } from '../model/index.ts';
import { fingerprintOptionsFor } from '../model/explore.ts';
import type { FingerprintOptions } from '../model/fingerprint.ts';
import { fingerprint } from '../model/fingerprint.ts';
import { checkProperties } from '../model/properties.ts';
import { enabled, step } from '../model/world.ts';

/**
 * The exploration stores one state per fingerprint, so two states with one
 * fingerprint must have the same futures (spec 8.4: every symmetry and
 * abstraction is a bisimulation). Checked one step deep on every pair the
 * exploration merges: breadth first to a small depth, each state whose
 * fingerprint was already seen is stepped with every enabled command, as
 * is the first state of that fingerprint, and the two must reach the same
 * set of (fingerprint, properties violated) pairs. By induction over the
 * levels this is the whole bisimulation for the states explored. A
 * reduction that merges states a step can tell apart fails here.
 */
function successors(world: World, alphabet: readonly Command[], options: FingerprintOptions): string[] {
  const out = new Set<string>();
  const fp = { hi: 0, lo: 0 };
  for (const c of alphabet) {
    if (!enabled(world, c)) continue;
    for (const b of step(world, c)) {
      fingerprint(b.next, fp, options);
      const broken = [...new Set(checkProperties(b.events, b.next).map((v) => v.property))].sort().join('+');
      out.add(`${fp.hi}:${fp.lo}/${broken}`);
    }
  }
  return [...out].sort();
}

const MAX_CHECKS = 150;

/** Cell, depth, and how many merged pairs to check (fewer where a 5-node expansion is dear). */
const CELLS: ReadonlyArray<readonly [string, StorePolicy, FaultClass, number, number]> = [
  ['redlock(5 nodes, none)', 'unfenced', 'delay', 3, 30],
  ['redlock(5 nodes, none)', 'strict', 'crash-restart', 3, 60],
  ['redlock(5 nodes, none)', 'unfenced', 'clock-step', 4, MAX_CHECKS],
  ['redis-single(none)', 'unfenced', 'clock-step', 5, MAX_CHECKS],
  ['redis-single(none)', 'strict', 'client-pause', 5, MAX_CHECKS],
  ['redis-single(aof-always)', 'unfenced', 'connection-loss', 5, MAX_CHECKS],
  ['redis-replicated(async)', 'unfenced', 'crash-restart', 5, MAX_CHECKS],
  ['pg-session', 'strict', 'connection-loss', 5, MAX_CHECKS],
  ['pg-xact', 'transactional', 'partition', 5, MAX_CHECKS],
  ['etcd-lease', 'strict', 'crash-restart', 5, MAX_CHECKS],
  ['etcd-lease', 'unfenced', 'clock-drift', 5, MAX_CHECKS],
];

describe('states the exploration merges have the same next steps (spec 8.4)', () => {
  it.each(CELLS)('%s / %s / %s to depth %i', (label, store, fault, depth, maxChecks) => {
    const row = MATRIX_ROWS.find((r) => r.label === label)!;
    const initial = initialWorld({ design: row.design, store, clients: DEFAULT_ALPHABET.clients });
    const alphabet = alphabetFor(row.design, fault);
    const options = fingerprintOptionsFor(initial, alphabet);
    const first = new Map<string, World>();
    const fp = { hi: 0, lo: 0 };
    let frontier: World[] = [initial];
    let checked = 0;
    for (let d = 0; d < depth; d++) {
      const next: World[] = [];
      for (const w of frontier) {
        for (const c of alphabet) {
          if (!enabled(w, c)) continue;
          for (const b of step(w, c)) {
            fingerprint(b.next, fp, options);
            const key = `${fp.hi}:${fp.lo}`;
            const seen = first.get(key);
            if (seen === undefined) {
              first.set(key, b.next);
              next.push(b.next);
            } else if (seen !== b.next && checked++ < maxChecks) {
              // The first maxChecks merged pairs, shallowest first: a check costs two full expansions.
              expect(successors(b.next, alphabet, options), `merged with ${key} at depth ${d + 1}`).toEqual(successors(seen, alphabet, options));
            }
          }
        }
      }
      frontier = next;
    }
    // The check must have had something to check.
    expect(checked).toBeGreaterThan(10);
  });
});
