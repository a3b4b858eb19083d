import { describe, expect, it } from 'vitest';
import type { Command, Design, World } from '../model/index.ts';
import { alphabetFor, designs, initialWorld } from '../model/index.ts';
import { explore } from '../model/explore.ts';
import { step } from '../model/world.ts';
import { contractDesign } from '../conformance/consequence.ts';
import { IOREDIS_LOCK_CONTRACT, REDIS_SEMAPHORE_CONTRACT, redlockContract } from '../conformance/adapters/contracts.ts';

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

/**
 * A library that drops its lock only when the node answered that the key is
 * gone (ioredis-lock's extend: `_locked = false` when `pexpireifequal`
 * answers 0; redis-semaphore's `_processRefresh` when `_refresh` returns
 * false), and keeps it when the call failed for want of an answer (a Redis
 * error: a cut link, a node down). Its contract declares failedExtend.lease
 * 'dropped-if-denied'; with 'dropped' the model dropped the lease on a cut
 * link too, and the library's kept lock read as "the client may act on a
 * lease longer than allowed" (MUTEX-1, the ioredis-lock partition-delay
 * cell, audit h39).
 */
describe("a failed extension that drops the lease only when the nodes' answers denied it ('dropped-if-denied')", () => {
  type Lease = 'dropped' | 'dropped-if-denied';
  const single = (lease: Lease): Design => ({ ...(designs.redisSingle() as Extract<Design, { kind: 'redis-single' }>), clientDeadline: 'none', failedExtend: { lease, keys: 'kept' } });
  const held = (w: World): boolean => w.clients[0]!.leases['r0'] !== undefined;
  const granted = (design: Design): World => only(initialWorld({ design, store: 'unfenced', clients: 2 }), { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 20 });
  const extendOutcomes = (w: World): Array<[string, boolean]> => step(w, { kind: 'extend', client: 0, resource: 'r0', ttlMs: 20 }).map((b) => [b.outcome.kind, held(b.next)]);

  it('a cut link (no answer) keeps the lease; a node that answered the key is gone drops it; plain dropped drops both', () => {
    for (const [lease, keptOnCut] of [['dropped-if-denied', true], ['dropped', false]] as const) {
      const cut = only(granted(single(lease)), { kind: 'partition', client: 0, node: 0 });
      expect(extendOutcomes(cut), lease).toEqual([['not-extended', keptOnCut]]);
      const gone = only(granted(single(lease)), { kind: 'advance', ms: 30 });
      expect(extendOutcomes(gone), lease).toEqual([['not-extended', false]]);
    }
  });

  it('on five nodes: dropped when the answers alone leave no quorum, kept when the missing answers are the cut links', () => {
    const design: Design = { ...(designs.redlock() as Extract<Design, { kind: 'redlock' }>), failedExtend: { lease: 'dropped-if-denied', keys: 'kept' } };
    const w = only(initialWorld({ design, store: 'unfenced', clients: 2 }), { kind: 'acquire', client: 0, resource: 'r0', ttlMs: 200 });
    const cut = [2, 3, 4].reduce((x, node) => only(x, { kind: 'partition', client: 0, node }), w);
    expect(extendOutcomes(cut)).toEqual([['not-extended', true]]);
    // Nodes 2, 3 and 4 lose the key (a restart without persistence) and answer no: three noes, no quorum possible.
    const lost = [2, 3, 4].reduce((x, node) => only(only(x, { kind: 'crash', node }), { kind: 'restart', node }), w);
    expect(extendOutcomes(lost)).toEqual([['not-extended', false]]);
  });

  it('the packed engine explores it as the reference does', () => {
    for (const design of [single('dropped-if-denied'), { ...(designs.redlock({ nodes: 3 }) as Extract<Design, { kind: 'redlock' }>), failedExtend: { lease: 'dropped-if-denied' as const, keys: 'kept' as const } }]) {
      for (const fault of ['partition', 'timing'] as const) {
        const initial = initialWorld({ design, store: 'unfenced', clients: 2 });
        const alphabet = alphabetFor(design, fault);
        const shape = (r: ReturnType<typeof explore>): unknown => ({ states: r.states, transitions: r.transitions, found: r.counterexamples.map((x) => [x.property, x.steps.length, x.violation.message]) });
        expect(shape(explore(initial, alphabet, { maxDepth: 4 })), `${design.kind} ${fault}`).toEqual(shape(explore(initial, alphabet, { maxDepth: 4, packed: false })));
      }
    }
  });

  it('the contracts of ioredis-lock and redis-semaphore Mutex declare it (their source keeps the lock on a Redis error)', () => {
    expect(IOREDIS_LOCK_CONTRACT.failedExtend).toEqual({ lease: 'dropped-if-denied', keys: 'kept' });
    expect(REDIS_SEMAPHORE_CONTRACT.failedExtend).toEqual({ lease: 'dropped-if-denied', keys: 'kept' });
  });
});
