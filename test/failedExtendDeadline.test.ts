import { describe, expect, it } from 'vitest';
import type { Command, Design, World } from '../model/index.ts';
import { alphabetFor, designs, initialWorld } from '../model/index.ts';
import { explore } from '../model/explore.ts';
import { step } from '../model/world.ts';
import { contractDesign } from '../conformance/consequence.ts';
import { redlockContract } from '../conformance/adapters/contracts.ts';

/**
 * A refused extension to a shorter ttl, judged by the deadline the client's
 * terms keep (spec 7.11 failedExtend): lockcheck's client lowers its deadline
 * at the send ('kept', spec 4.1); a library whose Lock keeps the deadline it
 * had ('unchanged', redlock 5's contract) was judged by that lowered bound
 * until h38, which read its untouched expiration as 'the client may act on a
 * lease longer than allowed' where a quorum still held its key.
 */

const redlock = (lease: 'kept' | 'unchanged'): Design => ({ ...(designs.redlock() as Extract<Design, { kind: 'redlock' }>), failedExtend: { lease, keys: 'kept' } });

/** The only branch of a step (the schedules below leave the model no choice). */
const only = (w: World, c: Command): World => {
  const branches = step(w, c);
  expect(branches.map((b) => b.outcome.kind), JSON.stringify(c)).toHaveLength(1);
  return branches[0]!.next;
};

/** Granted on all five nodes for 200 ms, then cut from nodes 2, 3 and 4: an extension reaches 0 and 1 only. */
const cutAfterGrant = (design: Design): World =>
  [2, 3, 4].reduce(
    (w, node) => only(w, { kind: 'partition', client: 0, node }),
    only(initialWorld({ design, store: 'unfenced', clients: 2 }), { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 200 }),
  );

const validUntil = (w: World): number | null => w.clients[0]!.leases['r0']!.validUntilMs;

describe("a refused extension to a shorter ttl keeps the deadline the client's terms say", () => {
  it("'unchanged' keeps the old deadline after the refusal and while the round is out; 'kept' lowers it at the send", () => {
    for (const [lease, lowered] of [['unchanged', false], ['kept', true]] as const) {
      const w = cutAfterGrant(redlock(lease));
      const before = validUntil(w)!;
      const refused = step(w, { kind: 'extend', client: 0, resource: 'r0', ttlMs: 20 });
      expect(refused.map((b) => b.outcome)).toEqual([{ kind: 'not-extended', reason: 'no-quorum' }]);
      expect(validUntil(refused[0]!.next)! < before, lease).toBe(lowered);
      const held = step(w, { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r0', ttlMs: 20 } });
      expect(held.map((b) => validUntil(b.next)! < before), lease).toEqual(held.map(() => lowered));
    }
  });

  it("redlock 5's contract declares 'unchanged': its model keeps the Lock's expiration", () => {
    const design = contractDesign(designs.redlock(), redlockContract(0.01), false);
    expect(design).toMatchObject({ failedExtend: { lease: 'unchanged', keys: 'kept' } });
    const w = cutAfterGrant(design);
    expect(validUntil(only(w, { kind: 'extend', client: 0, resource: 'r0', ttlMs: 20 }))).toBe(validUntil(w));
  });

  it('the packed engine explores an unchanged-deadline design as the reference does', () => {
    const design = redlock('unchanged');
    for (const [fault, depth] of [['timing', 4], ['crash-restart', 4]] as const) {
      const initial = initialWorld({ design, store: 'unfenced', clients: 2 });
      const alphabet = alphabetFor(design, fault);
      const shape = (r: ReturnType<typeof explore>): unknown => ({
        states: r.states,
        transitions: r.transitions,
        found: r.counterexamples.map((x) => [x.property, x.steps.length, x.violation.message]),
      });
      expect(shape(explore(initial, alphabet, { maxDepth: depth })), fault).toEqual(shape(explore(initial, alphabet, { maxDepth: depth, packed: false })));
    }
  });

  it("a client with a deadline and no request timeout ('clientTimeout: none') reads an extension's late replies: still refused, but when they come", () => {
    for (const [timeout, endMs] of [[true, 20], [false, 40]] as const) {
      const design: Design = { ...(designs.redlock() as Extract<Design, { kind: 'redlock' }>), ...(timeout ? {} : { clientTimeout: 'none' as const }) };
      const w = only(initialWorld({ design, store: 'unfenced', clients: 2 }), { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 200 });
      const late = step(w, { kind: 'extend', client: 0, resource: 'r0', ttlMs: 20, latencyMs: 40 });
      expect(late.map((b) => [b.outcome, b.next.nowMs])).toEqual([[{ kind: 'not-extended', reason: 'no-quorum' }, endMs]]);
    }
    const design = contractDesign(designs.redlock(), redlockContract(0.01), false);
    expect(design).toMatchObject({ clientTimeout: 'none' });
    for (const fault of ['timing', 'delay'] as const) {
      const initial = initialWorld({ design, store: 'unfenced', clients: 2 });
      const alphabet = alphabetFor(design, fault);
      const shape = (r: ReturnType<typeof explore>): unknown => ({ states: r.states, transitions: r.transitions, found: r.counterexamples.map((x) => [x.property, x.steps.length]) });
      expect(shape(explore(initial, alphabet, { maxDepth: 4 })), fault).toEqual(shape(explore(initial, alphabet, { maxDepth: 4, packed: false })));
    }
  });
});
