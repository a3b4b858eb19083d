import { describe, expect, it } from 'vitest';
import { runLockstep } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import type { Command, World } from '../model/index.ts';
import { designs, initialWorld } from '../model/index.ts';
import { fingerprintOptionsFor } from '../model/explore.ts';
import { encode, layoutFor } from '../model/packed.ts';
import { PackedBranches } from '../model/packedBranches.ts';
import { packedContext } from '../model/packedFingerprint.ts';
import { packedStep } from '../model/packedStep.ts';
import { stepOrbits } from '../model/world.ts';

/**
 * A Redlock grant whose token write-back (a second round trip, spec 7.3)
 * ends past the lease's validity is no grant: the client denies it
 * validity-exhausted, as lockcheck's LeaseLock does. The model judged the
 * validity only when the votes were in, so it allowed the grant alone, and
 * a correct lock failed conformance (found by the engine audit, h36).
 */
const redlock = designs.redlock({ nodes: 5 });

/** Counters out of step (n0, n1 at 1; n2..n4 at 2), then client 0 cut from n3, n4 and n0 slow: its quorum n0..n2 needs a write-back to n0 and n1, done 5 ms after the votes. */
const SCHEDULE: readonly Command[] = [
  { kind: 'acquire', client: 1, resource: 'r', ttlMs: 5 },
  { kind: 'advance', ms: 6 },
  { kind: 'partition', client: 1, node: 0 },
  { kind: 'partition', client: 1, node: 1 },
  { kind: 'acquire', client: 1, resource: 'r', ttlMs: 5 },
  { kind: 'advance', ms: 6 },
  { kind: 'partition', client: 0, node: 3 },
  { kind: 'partition', client: 0, node: 4 },
  { kind: 'node-delay', node: 0, ms: 5 },
  { kind: 'acquire', client: 0, resource: 'r', ttlMs: 9 },
];

describe('a write-back that ends past the validity is no grant (spec 7.3)', () => {
  it('the model denies it validity-exhausted, only that, and undoes the keys', () => {
    let w: World = initialWorld({ design: redlock, store: 'strict', clients: 2 });
    for (const c of SCHEDULE.slice(0, -1)) {
      const branches = stepOrbits(w, c, 1);
      expect(branches.length, JSON.stringify(c)).toBe(1);
      w = branches[0]!.next;
    }
    const last = stepOrbits(w, SCHEDULE.at(-1)!, 1);
    expect(last.map((b) => b.outcome)).toEqual([{ kind: 'denied', reason: 'validity-exhausted' }]);
    const after = last[0]!.next;
    expect(after.clients[0]!.leases).toEqual({});
    // The token went out to n0 and n1 (their counters raised), and no key of client 0 is left on a node it reaches.
    expect(JSON.stringify(after.nodes.slice(0, 3), (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))).not.toMatch(/"client":0/);
  });

  it('the packed engine steps every command of it as the reference does, word for word', () => {
    const initial = initialWorld({ design: redlock, store: 'strict', clients: 2 });
    const layout = layoutFor(initial, SCHEDULE);
    expect(layout).not.toBeNull();
    const options = fingerprintOptionsFor(initial, SCHEDULE, {});
    const ctx = packedContext(layout!, initial, options);
    const packed = new Float64Array(layout!.size);
    const expected = new Float64Array(layout!.size);
    const out = new PackedBranches(layout!.size);
    let w = initial;
    for (const command of SCHEDULE) {
      expect(encode(layout!, w, packed)).toBe(true);
      const reference = stepOrbits(w, command, ctx.fixedNodes);
      const n = packedStep(ctx, packed, command, out);
      expect(n, JSON.stringify(command)).toBe(reference.length);
      reference.forEach((branch, b) => {
        expect(encode(layout!, branch.next, expected)).toBe(true);
        expect(Array.from(out.state(b)), JSON.stringify(command)).toEqual(Array.from(expected));
      });
      w = reference[0]!.next;
    }
  });

  it.each(['monotonic', 'strict'] as const)("lockcheck's own Redlock client agrees with the model step by step (%s store)", async (store) => {
    const run = await runLockstep(simLeaseBackend(redlock, store), SCHEDULE, { clients: 2, tokenBase: 0n });
    expect(run.verdict).toEqual({ kind: 'pass' });
    expect(run.steps.at(-1)!.actual).toEqual({ kind: 'denied', reason: 'validity-exhausted' });
  });
});
