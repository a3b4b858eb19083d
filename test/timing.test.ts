import { describe, expect, it } from 'vitest';
import { runLockstep, simLeaseBackend } from '../conformance/index.ts';
import { designs, initialWorld, step } from '../model/index.ts';
import type { Command, Outcome } from '../model/index.ts';
import { roundEnds } from '../model/round.ts';

/** Timing faults (issue 11, class 2): rounds timed against the request timeout, late replies, slow and silent nodes, rounds in flight across a pause. */
const acquire = (client: number, extra: Partial<Extract<Command, { kind: 'acquire' }>> = {}): Command => ({ kind: 'acquire', client, resource: 'r', ttlMs: 30, ...extra });
const kinds = (outcomes: readonly Outcome[]): string[] => outcomes.map((o) => (o.kind === 'denied' || o.kind === 'not-extended' ? `${o.kind}:${o.reason}` : o.kind));

describe('a round in time', () => {
  it('waits for every reply that can come, no longer than the deadline; a reply at the deadline races it', () => {
    expect(roundEnds([5, 'failed', 8], 20, 0)).toEqual([{ endMs: 8, counted: [true, false, true] }]);
    expect(roundEnds([5, 'never'], 20, 0)).toEqual([{ endMs: 20, counted: [true, false] }]);
    expect(roundEnds([5, 20], 20, 0)).toEqual([
      { endMs: 20, counted: [true, false] },
      { endMs: 20, counted: [true, true] },
    ]);
    // Nothing to wait for: refused at once.
    expect(roundEnds(['failed', 'failed'], 20, 0)).toEqual([{ endMs: 0, counted: [false, false] }]);
    // Paused until 30: the deadline fired first, nothing counts.
    expect(roundEnds([5, 8], 20, 30)).toEqual([{ endMs: 30, counted: [false, false] }]);
    // Paused until 10: the replies are read then.
    expect(roundEnds([5, 8], 20, 10)).toEqual([{ endMs: 10, counted: [true, true] }]);
  });
});

describe('the model under timing faults', () => {
  const single = (requestTimeoutMs?: number) => initialWorld({ design: designs.redisSingle(), store: 'strict', clients: 2, ...(requestTimeoutMs ? { requestTimeoutMs } : {}) });
  const redlock = (requestTimeoutMs?: number) => initialWorld({ design: designs.redlock({ nodes: 3 }), store: 'strict', clients: 2, ...(requestTimeoutMs ? { requestTimeoutMs } : {}) });

  it('times a late extension from before its requests, and refuses one whose replies come after the deadline they bring', () => {
    const w = step(single(), acquire(0))[0]!.next;
    const late = step(w, { kind: 'extend', client: 0, resource: 'r', ttlMs: 30, latencyMs: 20 })[0]!;
    expect(late.outcome).toEqual({ kind: 'extended', validUntilMs: 27 });
    expect(late.next.nowMs).toBe(20);
    expect(kinds(step(w, { kind: 'extend', client: 0, resource: 'r', ttlMs: 30, latencyMs: 28 }).map((b) => b.outcome))).toEqual(['not-extended:no-quorum']);
  });

  it('counts a reply later than the request timeout as no answer: a black hole is waited out, a partition is not', () => {
    const holed = step(redlock(10), { kind: 'node-delay', node: 0, ms: 'never' })[0]!.next;
    const a = step(holed, acquire(0))[0]!;
    expect(a.outcome).toMatchObject({ kind: 'granted' });
    expect(a.next.nowMs).toBe(10);
    expect(a.next.nodes[0]!.keys.r).toBeUndefined();
    const slowTwo = step(step(redlock(10), { kind: 'node-delay', node: 1, ms: 15 })[0]!.next, { kind: 'node-delay', node: 2, ms: 'never' })[0]!.next;
    const denied = step(slowTwo, acquire(0));
    expect(kinds(denied.map((b) => b.outcome))).toEqual(['denied:no-quorum']);
    // The votes round waits 10 ms, and so does the undo (node 2 never answers it).
    expect(denied[0]!.next.nowMs).toBe(20);
    const cut = step(step(redlock(10), { kind: 'partition', client: 0, node: 1 })[0]!.next, { kind: 'partition', client: 0, node: 2 })[0]!.next;
    expect(step(cut, acquire(0))[0]!.next.nowMs).toBe(0);
  });

  it("judges an acquire in flight across a pause at the resume, with other clients' commands between its rounds", () => {
    let w = step(single(), { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r', ttlMs: 30 } })[0]!.next;
    expect(w.nodes[0]!.keys.r?.owner.client).toBe(0);
    w = step(w, { kind: 'clock-step', node: 0, deltaMs: 40 })[0]!.next;
    const other = step(w, acquire(1));
    expect(other.map((b) => b.outcome)).toContainEqual({ kind: 'granted', token: 2n, validUntilMs: 27 });
    w = other.find((b) => b.outcome.kind === 'granted')!.next;
    // Client 0's clock says its lease is fresh: granted with the token its SET minted, older than client 1's.
    expect(step(w, { kind: 'resume', client: 0 }).map((b) => b.outcome)).toEqual([{ kind: 'granted', token: 1n, validUntilMs: 27 }]);
    // A pause past the request timeout: the deadline fired first, no vote counts.
    let p = step(redlock(10), { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r', ttlMs: 30 } })[0]!.next;
    p = step(p, { kind: 'advance', ms: 15 })[0]!.next;
    expect(kinds(step(p, { kind: 'resume', client: 0 }).map((b) => b.outcome))).toEqual(['denied:no-quorum']);
    // A new clock rate mid-round is not modelled: not enabled.
    expect(() => step(p, { kind: 'clock-drift', target: { client: 0 }, driftPpm: 10_000 })).toThrow(/round in flight/);
  });
});

describe('the in-memory backend follows the model under timing faults', () => {
  const single = simLeaseBackend(designs.redisSingle(), 'strict');
  const redlock = simLeaseBackend(designs.redlock({ nodes: 3 }), 'strict');
  const run = async (backend: typeof single, commands: Command[], requestTimeoutMs?: number) => {
    const r = await runLockstep(backend, commands, { clients: 2, tokenBase: 0n, continueAfterViolation: true, ...(requestTimeoutMs ? { requestTimeoutMs } : {}) });
    expect(r.verdict).toEqual({ kind: 'pass' });
    return r.steps.map((s) => [s.command.kind, s.endMs, s.actual.kind === 'denied' ? `denied:${s.actual.reason}` : s.actual.kind] as const);
  };

  it('late extend, release and write', async () => {
    expect(
      await run(single, [acquire(0), { kind: 'extend', client: 0, resource: 'r', ttlMs: 30, latencyMs: 20 }, { kind: 'release', client: 0, resource: 'r', latencyMs: 5 }, acquire(1), { kind: 'write', client: 1, resource: 'r', value: 'x', latencyMs: 7 }]),
    ).toEqual([
      ['acquire', 0, 'granted'],
      ['extend', 20, 'extended'],
      ['release', 25, 'released'],
      ['acquire', 25, 'granted'],
      ['write', 32, 'accepted'],
    ]);
  });

  it('a black-holed node waited out to the request timeout, a slow one counted against', async () => {
    expect(
      await run(redlock, [{ kind: 'node-delay', node: 1, ms: 'never' }, acquire(0), { kind: 'extend', client: 0, resource: 'r', ttlMs: 30 }, { kind: 'release', client: 0, resource: 'r' }, { kind: 'node-delay', node: 1, ms: 0 }, acquire(1)], 10),
    ).toEqual([
      ['node-delay', 0, 'ok'],
      ['acquire', 10, 'granted'],
      ['extend', 20, 'extended'],
      ['release', 30, 'released'],
      ['node-delay', 30, 'ok'],
      ['acquire', 30, 'granted'],
    ]);
    expect(await run(redlock, [{ kind: 'node-delay', node: 2, ms: 15 }, { kind: 'node-delay', node: 0, ms: 'never' }, acquire(0)], 10)).toEqual([
      ['node-delay', 0, 'ok'],
      ['node-delay', 0, 'ok'],
      ['acquire', 20, 'denied:no-quorum'],
    ]);
  });

  it('an acquire and an extend in flight across a pause', async () => {
    const interleaved = await run(single, [
      { kind: 'pause', client: 0, inFlight: { kind: 'acquire', client: 0, resource: 'r', ttlMs: 30 } },
      { kind: 'clock-step', node: 0, deltaMs: 40 },
      acquire(1),
      { kind: 'resume', client: 0 },
    ]);
    expect(interleaved.map((s) => s[2])).toEqual(['ok', 'ok', 'granted', 'granted']);
    const extend = await run(single, [acquire(0), { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r', ttlMs: 30, latencyMs: 3 } }, { kind: 'advance', ms: 28 }, { kind: 'resume', client: 0 }]);
    expect(extend.at(-1)).toEqual(['resume', 28, 'not-extended']);
  });
});
