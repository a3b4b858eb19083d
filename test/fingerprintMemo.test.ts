import { describe, expect, it } from 'vitest';
import type { FaultClass, World } from '../model/index.ts';
import { alphabetFor, FAULT_CLASSES, initialWorld, MATRIX_ROWS } from '../model/index.ts';
import { fingerprintOptionsFor } from '../model/explore.ts';
import { fingerprint } from '../model/fingerprint.ts';
import { enabled, step, stepOrbits } from '../model/world.ts';

/**
 * The fingerprint reuses a node's hash, and the clients', while the objects
 * and what else they read are unchanged (model/fingerprint.ts). Checked on
 * the first levels of every row under every fault class, in the order the
 * exploration meets them (the branches of a step one after another, where
 * the reuse happens): each fingerprint equals that of a deep copy of the
 * same state, which shares no object with anything hashed before. (Made
 * to reuse a node's hash across a change of time, it fails.)
 */
const LEVELS = 3;

function copy(w: World): World {
  // structuredClone keeps bigints and makes every object anew; the configuration is shared on purpose (the exploration's own).
  return { ...structuredClone({ ...w, config: null }), config: w.config } as World;
}

describe('fingerprint reuse (spec 8.4)', () => {
  for (const fault of FAULT_CLASSES) {
    it(`every row under ${fault}: reused hashes give the fingerprint of a fresh copy, to depth ${LEVELS}`, () => {
      let compared = 0;
      for (const row of MATRIX_ROWS) {
        const alphabet = alphabetFor(row.design, fault as FaultClass);
        const initial = initialWorld({ design: row.design, store: row.stores[0]!, clients: 2 });
        const options = fingerprintOptionsFor(initial, alphabet);
        const fp = { hi: 0, lo: 0 };
        let frontier: World[] = [initial];
        for (let depth = 0; depth < LEVELS; depth++) {
          const next: World[] = [];
          for (const world of frontier) {
            // Every branch of every command of the state hashed one after another, as the exploration does (the reuse happens
            // between them), then each copy.
            const branches: Array<{ readonly command: string; readonly next: World }> = [];
            for (const command of alphabet) {
              if (!enabled(world, command)) continue;
              step(world, command);
              for (const b of stepOrbits(world, command, options.fixedNodes ?? 1)) branches.push({ command: JSON.stringify(command), next: b.next });
            }
            const got = branches.map((b) => {
              fingerprint(b.next, fp, options);
              return `${fp.hi}:${fp.lo}`;
            });
            branches.forEach((branch, b) => {
              fingerprint(copy(branch.next), fp, options);
              expect(got[b], `${row.label} / ${fault} / ${branch.command} / branch ${b}`).toBe(`${fp.hi}:${fp.lo}`);
              compared++;
              next.push(branch.next);
            });
          }
          // Keep the level small: every 7th state goes on (the check is about the order states are hashed in, not reach).
          frontier = next.filter((_w, i) => i % 7 === 0);
        }
      }
      expect(compared).toBeGreaterThan(100);
    });
  }
});
