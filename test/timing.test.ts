import { describe, expect, it } from 'vitest';
import { runLockstep, simLeaseBackend } from '../conformance/index.ts';
import { simSessionBackend } from '../conformance/sim/sessionBackend.ts';
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

  it('ends a round as soon as its decision holds, reading the replies of that same instant; undecided, it waits as before', () => {
    const twoYes = { yes: [true, true, true], decided: (t: { yes: number }) => t.yes >= 2 };
    expect(roundEnds([0, 5, 'never'], 20, 0, twoYes)).toEqual([{ endMs: 5, counted: [true, true, false] }]);
    expect(roundEnds([3, 3, 3], 20, 0, twoYes)).toEqual([{ endMs: 3, counted: [true, true, true] }]);
    expect(roundEnds([0, 'never', 'never'], 20, 0, twoYes)).toEqual([{ endMs: 20, counted: [true, false, false] }]);
    // A decision the replies before a pause's end would make is read at the resume.
    expect(roundEnds([2, 4, 'never'], 20, 10, twoYes)).toEqual([{ endMs: 10, counted: [true, true, false] }]);
    // No votes yet, but failures decide it (too many nodes unreachable).
    expect(roundEnds(['failed', 'failed', 'never'], 20, 0, { yes: [false, false, false], decided: (t) => t.failed > 1 })).toEqual([{ endMs: 0, counted: [false, false, false] }]);
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

  it('counts a reply later than the request timeout as no answer: a black hole is waited out only while the round is undecided, a partition never', () => {
    const holed = step(redlock(10), { kind: 'node-delay', node: 0, ms: 'never' })[0]!.next;
    const a = step(holed, acquire(0))[0]!;
    expect(a.outcome).toMatchObject({ kind: 'granted' });
    // Two grants are a quorum: the round ends with them, not at the deadline.
    expect(a.next.nowMs).toBe(0);
    expect(a.next.nodes[0]!.keys.r).toBeUndefined();
    const slowTwo = step(step(redlock(10), { kind: 'node-delay', node: 1, ms: 15 })[0]!.next, { kind: 'node-delay', node: 2, ms: 'never' })[0]!.next;
    const denied = step(slowTwo, acquire(0));
    expect(kinds(denied.map((b) => b.outcome))).toEqual(['denied:no-quorum']);
    // One grant and two silent nodes decide nothing: the votes round waits out its 10 ms; the undo goes on in the background.
    expect(denied[0]!.next.nowMs).toBe(10);
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

  it('a black-holed node costs nothing once a quorum answered; waited out to the request timeout while the round is undecided, a slow one counted against', async () => {
    expect(
      await run(redlock, [{ kind: 'node-delay', node: 1, ms: 'never' }, acquire(0), { kind: 'extend', client: 0, resource: 'r', ttlMs: 30 }, { kind: 'release', client: 0, resource: 'r' }, { kind: 'node-delay', node: 1, ms: 0 }, acquire(1)], 10),
    ).toEqual([
      ['node-delay', 0, 'ok'],
      // Nodes 0 and 2 are a quorum for every round: node 1's silence costs no time.
      ['acquire', 0, 'granted'],
      ['extend', 0, 'extended'],
      ['release', 0, 'released'],
      ['node-delay', 0, 'ok'],
      ['acquire', 0, 'granted'],
    ]);
    expect(await run(redlock, [{ kind: 'node-delay', node: 2, ms: 15 }, { kind: 'node-delay', node: 0, ms: 'never' }, acquire(0)], 10)).toEqual([
      ['node-delay', 0, 'ok'],
      ['node-delay', 0, 'ok'],
      // Undecided until the deadline (one grant, two silent); the undo is not waited for.
      ['acquire', 10, 'denied:no-quorum'],
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

describe('late statements on the PostgreSQL designs (spec 7.4)', () => {
  const pg = (design = designs.pgSession({ statementTimeoutMs: 50 })) => initialWorld({ design, store: design.kind === 'pg-xact' ? 'transactional' : 'strict', clients: 2 });
  const take = (client: number): Extract<Command, { kind: 'acquire' }> => ({ kind: 'acquire', client, resource: 'r' });
  const other = (client: number): Command => ({ kind: 'acquire', client, resource: 's' });

  it('a release later than the statement timeout ends the whole session (pg-session) or only the transaction, with its COMMIT in (pg-xact)', () => {
    const w = step(step(pg(), take(0))[0]!.next, other(0))[0]!.next;
    const late = step(w, { kind: 'release', client: 0, resource: 'r', latencyMs: 60 });
    expect(kinds(late.map((b) => b.outcome))).toEqual(['timed-out']);
    expect(late[0]!.next.clients[0]!.leases).toEqual({});
    expect(late[0]!.next.nodes[0]!.keys).toEqual({});
    expect(kinds(step(w, { kind: 'release', client: 0, resource: 'r', latencyMs: 50 }).map((b) => b.outcome))).toEqual(['released', 'timed-out']);
    const x = step(step(pg(designs.pgXact({ statementTimeoutMs: 50 })), take(0))[0]!.next, { kind: 'write', client: 0, resource: 'r', value: 'v' })[0]!.next;
    const commit = step(x, { kind: 'release', client: 0, resource: 'r', latencyMs: 60 });
    expect(kinds(commit.map((b) => b.outcome))).toEqual(['timed-out']);
    expect(commit[0]!.next.store.cells.r?.value).toBe('v');
    // A write into the transaction answered too late: the transaction is aborted, the lock free, the write lost.
    const write = step(x, { kind: 'write', client: 0, resource: 'r', value: 'w', latencyMs: 60 });
    expect(kinds(write.map((b) => b.outcome))).toEqual(['timed-out']);
    expect(write[0]!.next.nodes[0]!.keys.r).toBeUndefined();
  });

  it('a black-holed server is waited out to the statement timeout; a slow one is one slow round trip per operation', () => {
    const holed = step(pg(), { kind: 'node-delay', node: 0, ms: 'never' })[0]!.next;
    const a = step(holed, take(0));
    expect(kinds(a.map((b) => b.outcome))).toEqual(['timed-out', 'timed-out']);
    expect(a[0]!.next.nowMs).toBe(50);
    expect(a.every((b) => b.next.nodes[0]!.keys.r === undefined)).toBe(true);
    const slow = step(pg(), { kind: 'node-delay', node: 0, ms: 20 })[0]!.next;
    const b = step(slow, { ...take(0), latencyMs: 10 });
    expect(b.map((x) => [x.outcome.kind, x.next.nowMs])).toEqual([['granted', 30]]);
  });

  it('a statement in flight across a pause: resumed before its timeout the reply is read, at or after it the timer fires first', () => {
    const held = step(pg(), take(0))[0]!.next;
    const paused = step(held, { kind: 'pause', client: 0, inFlight: { kind: 'release', client: 0, resource: 'r' } })[0]!.next;
    const resumeAt = (ms: number) => step(step(paused, { kind: 'advance', ms })[0]!.next, { kind: 'resume', client: 0 });
    expect(kinds(resumeAt(49).map((b) => b.outcome))).toEqual(['released']);
    expect(kinds(resumeAt(50).map((b) => b.outcome))).toEqual(['released', 'timed-out']);
    expect(kinds(resumeAt(51).map((b) => b.outcome))).toEqual(['timed-out']);
    // A new lock's acquire in flight: its statement ran at once, or (a connect first) goes out only after the resume.
    const inFlight = step(pg(), { kind: 'pause', client: 0, inFlight: take(0) });
    expect(inFlight.map((b) => b.next.clients[0]!.inFlight?.kind)).toEqual(['reply', 'later']);
  });

  it('the in-memory pg-session backend agrees: a late release, a black hole, a statement in flight across a pause past its timeout', async () => {
    const r = await runLockstep(
      simSessionBackend('strict'),
      [
        take(0),
        { kind: 'release', client: 0, resource: 'r', latencyMs: 5001 },
        take(1),
        { kind: 'pause', client: 1, inFlight: { kind: 'release', client: 1, resource: 'r' } },
        { kind: 'advance', ms: 5000 },
        take(0),
        { kind: 'resume', client: 1 },
        { kind: 'node-delay', node: 0, ms: 'never' },
        take(1),
      ],
      { clients: 2, tokenBase: 0n, continueAfterViolation: true },
    );
    expect(r.verdict).toEqual({ kind: 'pass' });
    expect(r.steps.map((s) => [s.command.kind, s.endMs, s.actual.kind])).toEqual([
      ['acquire', 0, 'granted'],
      ['release', 5001, 'timed-out'],
      ['acquire', 5001, 'granted'],
      ['pause', 5001, 'ok'],
      ['advance', 10001, 'ok'],
      ['acquire', 10001, 'granted'],
      // Resumed at the timeout: the reply and the timer race; the in-memory client's timer fires first.
      ['resume', 10001, 'timed-out'],
      ['node-delay', 10001, 'ok'],
      ['acquire', 15001, 'timed-out'],
    ]);
  });
});
