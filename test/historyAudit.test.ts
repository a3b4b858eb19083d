import { describe, expect, it } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import { operations } from '../conformance/history/operations.ts';
import { HistoryFormatError, parseHistory, validateHistory } from '../conformance/history/parse.ts';
import { tokenOrder } from '../conformance/history/tokens.ts';
import { Budget, OutOfTime, type CheckProgress } from '../conformance/history/budget.ts';
import { lockHistories } from '../conformance/history/linearizability/index.ts';

/**
 * The history checker's answers to an audit (defects of LIN-1, FENCE-1, MUTEX-1, the parser and the API), each on
 * the smallest history that showed it, with the safe histories next to them that must stay safe.
 */
type Fields = Record<string, unknown>;
const ev = (type: string, process: number, time: number, op: string, fields: Fields = {}) => ({ type, process, time, op, resource: 'r', ...fields });
const inv = (p: number, t: number, op: string, f: Fields = {}) => ev('invoke', p, t, op, f);
const ok = (p: number, t: number, op: string, f: Fields = {}) => ev('ok', p, t, op, f);
const fail = (p: number, t: number, op: string, f: Fields = {}) => ev('fail', p, t, op, f);
const info = (p: number, t: number, op: string, f: Fields = {}) => ev('info', p, t, op, f);

function history(...events: (object | object[])[]): History {
  const h = validateHistory(events.flat());
  if (h instanceof HistoryFormatError) throw h;
  return h;
}
const verdictOf = (h: History, check: string) => checkHistory(h).checks.find((c) => c.check === check)!.verdict;

describe('LIN-1: an unknown acquire followed by its owner release', () => {
  /** y holds r (a session lock, or a lease until `yUntil`); its release fails; x's acquire times out and x releases; z is granted r. */
  const masked = (yUntil: number | undefined) =>
    history(
      inv(0, 0, 'acquire', yUntil === undefined ? {} : { ttlMs: 1000 }),
      ok(0, 1, 'acquire', { owner: 'y', token: '1', ...(yUntil === undefined ? {} : { validUntil: yUntil }) }),
      inv(0, 10, 'release', { owner: 'y', token: '1' }),
      fail(0, 11, 'release', { owner: 'y', reason: 'connection-refused' }),
      inv(1, 20, 'acquire'),
      info(1, 25, 'acquire', { owner: 'x', reason: 'timeout' }),
      inv(1, 30, 'release', { owner: 'x' }),
      ok(1, 31, 'release', { owner: 'x' }),
      inv(2, 40, 'acquire'),
      ok(2, 41, 'acquire', { owner: 'z', token: '2' }),
    );

  it('a lost acquire never takes a lock held with no deadline (a session lock): z granted while y holds it is a violation', () => {
    expect(verdictOf(masked(undefined), 'lock-linearizable')).toBe('violation');
  });

  it('a lost acquire that took over a lease took effect after its deadline: a release of its owner returning before it cannot follow it', () => {
    // y holds until 1000; x's acquire, had it taken the lock, did so at 1000 or later, after x's release returned (31).
    expect(verdictOf(masked(1000), 'lock-linearizable')).toBe('violation');
  });

  it('stays safe when the lease ran out before the lost acquire of x and its release (x may have taken it over, then freed it)', () => {
    // y's lease ends at 5: x may have been granted r at 20..30 and released it at 30..31; z's grant at 40..41 follows.
    expect(verdictOf(masked(5), 'lock-linearizable')).toBe('safe');
    // And with no release by x, z's grant after y's deadline is safe whatever x's acquire did.
    const h = history(inv(0, 0, 'acquire', { ttlMs: 10 }), ok(0, 1, 'acquire', { owner: 'y', token: '1', validUntil: 10 }), inv(1, 2, 'acquire'), info(1, 3, 'acquire', { reason: 'timeout' }), inv(2, 20, 'acquire'), ok(2, 21, 'acquire', { owner: 'z', token: '2', validUntil: 40 }));
    expect(checkHistory(h).verdict).toBe('safe');
  });
});

describe('LIN-1: a lost acquire that took a lease over, then a lost release of it', () => {
  // x holds r until 100; y's acquire and y's release are lost; z is granted r at 10..11, x's lease still running.
  const h = (xUntil: number) =>
    history(
      inv(0, 0, 'acquire', { ttlMs: 100 }),
      ok(0, 1, 'acquire', { owner: 'x', token: '1', validUntil: xUntil }),
      inv(1, 2, 'acquire', { ttlMs: 100 }),
      info(1, 3, 'acquire', { owner: 'y', reason: 'timeout' }),
      inv(1, 4, 'release', { owner: 'y' }),
      info(1, 5, 'release', { owner: 'y', reason: 'timeout' }),
      inv(2, 10, 'acquire', { ttlMs: 100 }),
      ok(2, 11, 'acquire', { owner: 'z', token: '2', validUntil: 111 }),
    );

  it("is a violation: y's grant, had it happened, came after x's deadline, and so did y's release and z's grant after it", () => {
    expect(verdictOf(h(100), 'lock-linearizable')).toBe('violation');
  });

  it("is safe when x's lease ran out before z's grant returned", () => {
    expect(verdictOf(h(8), 'lock-linearizable')).toBe('safe');
  });
});

describe('LIN-1: loss signals are matched to their grants in one pass', () => {
  it('10,000 connection-lost signals matching no grant, after 20,000 operations: decided safe within the budget (a backward scan per signal took minutes)', () => {
    const n = 10_000;
    const events: object[] = [];
    let t = 0;
    for (let i = 0; i < n; i++) {
      events.push(inv(0, t++, 'acquire', { ttlMs: 10 }), ok(0, t++, 'acquire', { owner: `a${i}`, token: String(i + 1), validUntil: t + 5 }));
      events.push(inv(0, t++, 'release', { owner: `a${i}` }), ok(0, t++, 'release', { owner: `a${i}` }));
    }
    for (let i = 0; i < n; i++) events.push({ type: 'signal', process: 1, time: t++, resource: 'r', owner: 'ghost', reason: 'connection-lost' });
    // The budget on this process's CPU time (checkHistory's clock option): wall time on a loaded machine is many times the
    // work's, and a budget on it could end the check undecided however linear the pass.
    const cpu = {
      now: (): number => {
        const { user, system } = process.cpuUsage();
        return (user + system) / 1000;
      },
    };
    const report = checkHistory(history(events), { timeoutMs: 10_000, clock: cpu });
    expect(report.checks.find((c) => c.check === 'lock-linearizable')!.verdict).toBe('safe');
  }, 60_000);

  it('a session-ending signal frees the latest grant of its process and owner whose token does not differ from its own', () => {
    // y holds a session lock (token 1); a connection-lost signal of y names token 1 (or none, or a token y never held); z is granted.
    const h = (signalToken: string | undefined) =>
      history(
        inv(0, 0, 'acquire'),
        ok(0, 1, 'acquire', { owner: 'y', token: '1' }),
        { type: 'signal', process: 0, time: 5, resource: 'r', owner: 'y', reason: 'connection-lost', ...(signalToken === undefined ? {} : { token: signalToken }) },
        inv(1, 10, 'acquire'),
        ok(1, 11, 'acquire', { owner: 'z', token: '2' }),
      );
    expect(verdictOf(h('1'), 'lock-linearizable')).toBe('safe');
    expect(verdictOf(h(undefined), 'lock-linearizable')).toBe('safe');
    expect(verdictOf(h('7'), 'lock-linearizable')).toBe('violation');
  });
});

describe('MUTEX-1: a failed re-acquire does not end the hold', () => {
  // Process 0 holds r until 100; at 20 it asks for r again; process 1 is granted r at 31 until 130.
  const reacquired = (outcome: typeof ok) =>
    history(
      inv(0, 0, 'acquire', { ttlMs: 100 }),
      ok(0, 1, 'acquire', { owner: 'a', token: '1', validUntil: 100 }),
      inv(0, 20, 'acquire', { ttlMs: 100 }),
      outcome(0, 21, 'acquire', outcome === ok ? { owner: 'a', token: '3', validUntil: 121 } : { reason: 'contended' }),
      inv(1, 30, 'acquire', { ttlMs: 100 }),
      ok(1, 31, 'acquire', { owner: 'b', token: '2', validUntil: 130 }),
    );

  it('a failed re-acquire took no effect: the lease held before it still overlaps the other grant', () => {
    const report = checkHistory(reacquired(fail));
    expect(report.checks.find((c) => c.check === 'overlapping-holds')!.verdict).toBe('violation');
    expect(report.counts.overlappingHolds).toBe(1);
  });

  it('a re-acquire granted (or of unknown outcome) ends the old hold at its invoke; the new one overlaps', () => {
    // ok: the new hold 21..121 overlaps process 1's 31..130 (one pair); the old hold ended at 20.
    expect(checkHistory(reacquired(ok)).counts.overlappingHolds).toBe(1);
    // info: no new hold, and the old one ended at 20: nothing overlaps.
    expect(checkHistory(reacquired(info)).checks.find((c) => c.check === 'overlapping-holds')!.verdict).toBe('safe');
  });
});

describe('MUTEX-1: a loss signal while a re-acquire is in flight', () => {
  // Process 0 holds r from 1 (a lease to 100, or a session lock); it asks for r again at 5; its loss signal comes at 8,
  // the re-acquire's outcome at 9. Process 1 is granted r at 7.
  const h = (outcome: typeof info, lease = false) =>
    history(
      inv(0, 0, 'acquire', lease ? { ttlMs: 100 } : {}),
      ok(0, 1, 'acquire', { owner: 'a', token: '1', ...(lease ? { validUntil: 100 } : {}) }),
      inv(0, 5, 'acquire', lease ? { ttlMs: 100 } : {}),
      inv(1, 6, 'acquire'),
      ok(1, 7, 'acquire', { owner: 'b', token: '2' }),
      { type: 'signal', process: 0, time: 8, resource: 'r', owner: 'a', reason: 'connection-lost' },
      outcome(0, 9, 'acquire', outcome === fail ? { reason: 'contended' } : { reason: 'timeout' }),
    );

  it('a lease: the hold ended at the re-acquire invoke (5) when that did not fail, not at the later signal: no overlap', () => {
    expect(verdictOf(h(info, true), 'overlapping-holds')).toBe('safe');
  });

  it('a session lock: a re-acquire stacks or fails, never gives back what is held: the hold lasted until the signal (8)', () => {
    expect(verdictOf(h(info), 'overlapping-holds')).toBe('violation');
  });

  it('a re-acquire that failed took no effect: the hold lasted until the signal (8), past the other grant (7)', () => {
    const report = checkHistory(h(fail));
    expect(report.checks.find((c) => c.check === 'overlapping-holds')!.verdict).toBe('violation');
    expect(report.findings.find((f) => f.check === 'overlapping-holds')!.message).toMatch(/from 1 to 8 ms/);
  });
});

describe('FENCE-1: only a stacked re-acquire of a session lock still held repeats a token', () => {
  const lease = (p: number, t: number, owner: string, token: string, until?: number) => [
    inv(p, t, 'acquire', until === undefined ? {} : { ttlMs: 10 }),
    ok(p, t + 1, 'acquire', { owner, token, ...(until === undefined ? {} : { validUntil: until }) }),
  ];
  const released = (p: number, t: number, owner: string) => [inv(p, t, 'release', { owner }), ok(p, t + 1, 'release', { owner })];
  const fence = (...events: (object | object[])[]) => verdictOf(history(...events), 'token-order');

  it('a lease given back and granted again to the same process with the same token is a violation', () => {
    // The audit's history: two leases (deadlines, different owners), the first released before the second was asked for.
    expect(fence(lease(0, 0, 'a1', '5', 10), released(0, 2, 'a1'), lease(0, 20, 'a2', '5', 30))).toBe('violation');
    // A session lock released (its only level), then granted again with its token: the lock was free in between.
    expect(fence(lease(0, 0, 'a', '5'), released(0, 2, 'a'), lease(0, 20, 'a', '5'))).toBe('violation');
    // A session lock whose session ended (a loss signal), then granted again with its token.
    expect(fence(lease(0, 0, 'a', '5'), { type: 'signal', process: 0, time: 5, resource: 'r', owner: 'a', reason: 'connection-lost' }, lease(0, 20, 'a', '5'))).toBe('violation');
    // A lease (with a deadline) never stacks, held or not; another owner's grant is not a re-acquire of this one.
    expect(fence(lease(0, 0, 'a', '5', 100), lease(0, 20, 'a', '5', 100))).toBe('violation');
    expect(fence(lease(0, 0, 'a', '5'), lease(0, 20, 'b', '5'))).toBe('violation');
  });

  it('a session lock acquired again while held (stacked) repeats its token, also after one of two levels was released', () => {
    expect(fence(lease(0, 0, 'a', '5'), lease(0, 20, 'a', '5'))).toBe('safe');
    expect(fence(lease(0, 0, 'a', '5'), lease(0, 20, 'a', '5'), released(0, 30, 'a'), lease(0, 40, 'a', '5'))).toBe('safe');
    // A release whose outcome is unknown or failed may not have unstacked it: not judged.
    expect(fence(lease(0, 0, 'a', '5'), inv(0, 2, 'release', { owner: 'a' }), fail(0, 3, 'release', { owner: 'a' }), lease(0, 20, 'a', '5'))).toBe('safe');
    expect(fence(lease(0, 0, 'a', '5'), inv(0, 2, 'release', { owner: 'a' }), info(0, 3, 'release', { owner: 'a' }), lease(0, 20, 'a', '5'))).toBe('safe');
    // Tokens compare as integers: "05" is token 5.
    expect(fence(lease(0, 0, 'a', '5'), lease(0, 20, 'a', '05'))).toBe('safe');
  });

  it('40,000 stacked grants of one token are judged in O(n log n) (each grant copied the list of those before it)', () => {
    const n = 40_000;
    const h = history(Array.from({ length: n }, (_, i) => lease(0, 2 * i, 'a', '5')).flat());
    const { findings, grants } = tokenOrder(operations(h), 20, h);
    expect(grants).toBe(n);
    expect(findings.total).toBe(0);
    // Many processes sharing one token: each after the first is one finding.
    const shared = history(Array.from({ length: n }, (_, i) => lease(i, i, `o${i}`, '5')).flat());
    expect(tokenOrder(operations(shared), 20, shared).findings.total).toBe(n - 1);
  }, 30_000);
});

describe('LIN-1: a value only a rejected write carries is not the register start', () => {
  const w = (p: number, t: number, value: string, outcome: typeof ok) => [inv(p, t, 'write', { key: 'k', value }), outcome(p, t + 1, 'write', { key: 'k' })];
  const r = (p: number, t: number, value: string | null) => [inv(p, t, 'read', { key: 'k' }), ok(p, t + 1, 'read', { key: 'k', value })];

  it('a read of the value of a write the store rejected (fail) is a violation, first or after a write', () => {
    expect(verdictOf(history(w(1, 2, 'stale', fail), r(2, 4, 'stale')), 'register-linearizable')).toBe('violation');
    expect(verdictOf(history(w(0, 0, 'v1', ok), w(1, 2, 'stale', fail), r(2, 4, 'stale')), 'register-linearizable')).toBe('violation');
  });

  it('a value no write of the history carries is still the start, rejected writes of other values beside it', () => {
    expect(verdictOf(history(w(1, 2, 'stale', fail), r(2, 4, 'before')), 'register-linearizable')).toBe('safe');
    // A write whose outcome is unknown may have landed: reading its value is safe.
    expect(verdictOf(history(w(1, 2, 'maybe', info), r(2, 4, 'maybe')), 'register-linearizable')).toBe('safe');
  });
});

describe('parsing and the API agree with the CLI', () => {
  const safeLines = [JSON.stringify(inv(0, 0, 'acquire', { ttlMs: 10 })), JSON.stringify(ok(0, 1, 'acquire', { owner: 'a', token: '1', validUntil: 10 }))].join('\n');

  it('parseHistory drops a leading byte-order mark, as decodeHistory (the CLI) does', () => {
    const h = parseHistory(`\uFEFF${safeLines}\n`);
    expect(h).not.toBeInstanceOf(HistoryFormatError);
    expect(checkHistory(h as History).verdict).toBe('safe');
    // Only a leading one: a BOM elsewhere is not JSON.
    expect(parseHistory(`${safeLines}\n\uFEFF{}`)).toBeInstanceOf(HistoryFormatError);
  });

  it('a token with any number of leading zeros is its integer value; past 2^63-1 is refused naming that bound', () => {
    const zeros = '0'.repeat(60);
    const h = parseHistory([JSON.stringify(inv(0, 0, 'acquire')), JSON.stringify(ok(0, 1, 'acquire', { owner: 'a', token: `${zeros}7` }))].join('\n'));
    expect(h).not.toBeInstanceOf(HistoryFormatError);
    expect(((h as History)[1] as { token?: string }).token).toBe('7');
    const over = parseHistory([JSON.stringify(inv(0, 0, 'acquire')), JSON.stringify(ok(0, 1, 'acquire', { owner: 'a', token: `${zeros}9223372036854775808` }))].join('\n'));
    expect(over).toBeInstanceOf(HistoryFormatError);
    expect((over as HistoryFormatError).message).toMatch(/at most 2\^63-1/);
    expect((parseHistory([JSON.stringify(inv(0, 0, 'acquire')), JSON.stringify(ok(0, 1, 'acquire', { owner: 'a', token: `${zeros}9223372036854775807` }))].join('\n')) as History)[1]).toMatchObject({ token: '9223372036854775807' });
  });

  it('checkHistory refuses a history without a client operation (HistoryFormatError), as the CLI does (exit 2): nothing to judge is not safe', () => {
    for (const text of ['', '{"type":"meta"}', '{"type":"meta"}\n{"type":"signal","process":0,"time":1,"resource":"r","owner":"a","reason":"expired"}']) {
      const h = parseHistory(text);
      expect(h).not.toBeInstanceOf(HistoryFormatError);
      expect(() => checkHistory(h as History)).toThrow(HistoryFormatError);
      expect(() => checkHistory(h as History)).toThrow(/no client operations/);
    }
    expect(() => checkHistory([])).toThrow(HistoryFormatError);
  });
});

describe('the time budget bounds every phase of a check, not only the search', () => {
  /** n sequential leases, each on a resource of its own, each granted and released: safe, and long. */
  const long = (n: number) => {
    const events: object[] = [];
    for (let i = 0; i < n; i++) {
      const t = 4 * i;
      events.push(inv(0, t, 'acquire', { ttlMs: 10, resource: `r${i}` }), ok(0, t + 1, 'acquire', { owner: `a${i}`, token: String(i + 1), validUntil: t + 3, resource: `r${i}` }));
      events.push(inv(0, t + 2, 'release', { owner: `a${i}`, resource: `r${i}` }), ok(0, t + 3, 'release', { owner: `a${i}`, resource: `r${i}` }));
    }
    return history(events);
  };

  it('a budget spent before the search says unknown for every check not finished, naming the phase, never safe', () => {
    // 120,000 events: past the work judged whole (2^16 items), the first look at the clock finds the 0 ms budget spent.
    const report = checkHistory(long(30_000), { timeoutMs: 0 });
    expect(report.verdict).toBe('unknown');
    for (const c of report.checks) {
      expect(c.verdict, c.check).toBe('unknown');
      expect(c.note, c.check).toMatch(/the 0 ms budget \(--timeout-ms\) ran out while pairing operations/);
    }
    // A small history is judged whole whatever the budget.
    expect(checkHistory(long(100), { timeoutMs: 0 }).verdict).toBe('safe');
  }, 30_000);

  it('each phase reads the clock as it goes: progress about once a second, and OutOfTime past the deadline', () => {
    // A clock that moves 100 ms a look: a budget of 3 s ends within 30 looks, progress comes every 10.
    let now = 0;
    const seen: CheckProgress[] = [];
    const budget = new Budget(0, 3000, (p) => seen.push(p), () => (now += 100));
    let thrown: unknown;
    try {
      lockHistories(long(100_000), budget);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(OutOfTime);
    expect((thrown as OutOfTime).phase).toBe('building the lock histories');
    expect(seen.length).toBeGreaterThanOrEqual(2);
    expect(seen[0]).toMatchObject({ phase: 'building the lock histories', total: 1_200_000, timeoutMs: 3000 });
    expect(seen[0]!.done).toBeGreaterThan(0);
    expect(seen[0]!.elapsedMs).toBeGreaterThanOrEqual(1000);
  }, 30_000);

  it('onProgress must be a function', () => {
    expect(() => checkHistory(long(1), { onProgress: 'yes' as never })).toThrow(/onProgress/);
  });
});
