import { describe, expect, it } from 'vitest';
import type { CheckReport } from '../conformance/history/check.ts';
import { checkHistory, overallVerdict } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import { holdIntervals } from '../conformance/history/holds.ts';
import { HistoryFormatError, validateHistory } from '../conformance/history/parse.ts';

/**
 * The history checkers' comparisons at their edges (docs/mutation.md,
 * "session h17"): each test pins a boundary a hand mutant of the checker
 * moved without any other test noticing. Times are ms on the shared clock.
 */
type Fields = Record<string, unknown>;
const ev = (type: string, process: number, time: number, op: string, fields: Fields = {}) => ({ type, process, time, op, resource: 'r', ...fields });
const acquire = (p: number, t0: number, t1: number, grant: Fields) => [ev('invoke', p, t0, 'acquire', { ttlMs: 100 }), ev('ok', p, t1, 'acquire', { owner: `o${p}`, ...grant })];
const write = (p: number, t0: number, t1: number, value: string, token: string) => [ev('invoke', p, t0, 'write', { key: 'x', value, prev: null, token }), ev('ok', p, t1, 'write', { key: 'x' })];

function history(...events: (object | object[])[]): History {
  const h = validateHistory(events.flat());
  if (h instanceof HistoryFormatError) throw h;
  return h;
}
const verdictOf = (r: CheckReport, property: string) => r.checks.find((c) => c.property === property)?.verdict;

describe('MUTEX-1: holds', () => {
  it('a grant with no validity left on arrival (its deadline is its ok) is no hold, and overlaps nothing', () => {
    const h = history(acquire(0, 0, 2, { validUntil: 100 }), acquire(1, 3, 5, { validUntil: 5 }));
    expect(holdIntervals(h).map((x) => x.process)).toEqual([0]);
    expect(verdictOf(checkHistory(h), 'MUTEX-1')).toBe('safe');
    // One ms of validity is a hold, inside process 0's.
    expect(verdictOf(checkHistory(history(acquire(0, 0, 2, { validUntil: 100 }), acquire(1, 3, 5, { validUntil: 6 }))), 'MUTEX-1')).toBe('violation');
  });

  it('an extension that completes exactly at the deadline comes after a lapse: the belief ends there and begins again', () => {
    const h = history(acquire(0, 0, 2, { validUntil: 20 }), ev('invoke', 0, 15, 'extend', { owner: 'o0', ttlMs: 30 }), ev('ok', 0, 20, 'extend', { owner: 'o0', validUntil: 50 }));
    expect(holdIntervals(h).map(({ start, end, endedBy }) => ({ start, end, endedBy }))).toEqual([
      { start: 2, end: 20, endedBy: 'deadline' },
      { start: 20, end: 50, endedBy: 'deadline' },
    ]);
    // 1 ms before the deadline it is one belief.
    const before = history(acquire(0, 0, 2, { validUntil: 20 }), ev('invoke', 0, 15, 'extend', { owner: 'o0', ttlMs: 30 }), ev('ok', 0, 19, 'extend', { owner: 'o0', validUntil: 50 }));
    expect(holdIntervals(before).map(({ start, end }) => [start, end])).toEqual([[2, 50]]);
  });

  it("a late signal of the process's earlier lease (another token) does not end the lease it holds now", () => {
    const h = history(
      acquire(0, 0, 2, { validUntil: 100, token: '1' }),
      // Re-acquired: the belief in token 1 ends at this invoke; token 3 is held from 12 on.
      acquire(0, 10, 12, { validUntil: 100, token: '3' }),
      { type: 'signal', process: 0, time: 30, resource: 'r', owner: 'o0', token: '1', reason: 'expired' },
      acquire(1, 35, 40, { validUntil: 120, token: '4' }),
    );
    expect(holdIntervals(h).filter((x) => x.process === 0).map(({ token, end, endedBy }) => ({ token, end, endedBy }))).toEqual([
      { token: '1', end: 10, endedBy: 'reacquire' },
      { token: '3', end: 100, endedBy: 'deadline' },
    ]);
    expect(verdictOf(checkHistory(h), 'MUTEX-1')).toBe('violation');
  });
});

describe('MUTEX-1: a stacked session lock is held until a release of each level (PostgreSQL, spec 7.4)', () => {
  const mutex = (h: History) => verdictOf(checkHistory(h), 'MUTEX-1');
  const sessionAcquire = (p: number, t0: number, t1: number, owner: string, token: string) => [ev('invoke', p, t0, 'acquire'), ev('ok', p, t1, 'acquire', { owner, token })];
  const release = (p: number, t0: number, t1: number, outcome: string, owner = 'a', token = '7') => [ev('invoke', p, t0, 'release', { owner, token }), ev(outcome, p, t1, 'release')];
  // a acquires r twice and releases once (still holding it); b is granted r at 11, before a's second release at 20.
  const stacked = (...between: object[][]) => history(sessionAcquire(0, 0, 1, 'a', '7'), sessionAcquire(0, 2, 3, 'a', '7'), ...between, sessionAcquire(1, 10, 11, 'b', '8'), release(0, 20, 21, 'ok'));

  it('two acquires, one release: the holder still holds it, and a grant to another then is two holders', () => {
    const h = stacked(release(0, 4, 5, 'ok'));
    expect(holdIntervals(h).filter((x) => x.process === 0).map(({ start, end, endedBy, events }) => ({ start, end, endedBy, events }))).toEqual([{ start: 1, end: 20, endedBy: 'release', events: [0, 1, 2, 3, 8] }]);
    expect(mutex(h)).toBe('violation');
    // Released twice before b's grant: one holder at a time.
    expect(mutex(stacked(release(0, 4, 5, 'ok'), release(0, 6, 7, 'ok')))).toBe('safe');
  });

  it('a release of one of several levels that failed gave nothing back; one whose outcome is unknown counts as done', () => {
    // Two acquires; a failed release, then one that succeeded: a level is still held at b's grant.
    expect(mutex(stacked(release(0, 4, 5, 'fail'), release(0, 6, 7, 'ok')))).toBe('violation');
    // An unknown release may have unstacked its level: no finding may rest on it.
    expect(mutex(stacked(release(0, 4, 5, 'info'), release(0, 6, 7, 'ok')))).toBe('safe');
    // A release of another lease (owner) unstacks nothing.
    expect(mutex(stacked(release(0, 4, 5, 'ok'), release(0, 6, 7, 'ok', 'z')))).toBe('violation');
  });

  it('a re-acquire whose outcome is unknown adds no level, but does not end the level held', () => {
    const unknown = [ev('invoke', 0, 2, 'acquire'), ev('info', 0, 3, 'acquire')];
    expect(mutex(history(sessionAcquire(0, 0, 1, 'a', '7'), unknown, sessionAcquire(1, 10, 11, 'b', '8')))).toBe('violation');
    expect(mutex(history(sessionAcquire(0, 0, 1, 'a', '7'), unknown, release(0, 4, 5, 'ok'), sessionAcquire(1, 10, 11, 'b', '8')))).toBe('safe');
    // Still in flight when the history ends: the level held before it is held to the end.
    expect(mutex(history(sessionAcquire(0, 0, 1, 'a', '7'), sessionAcquire(1, 10, 11, 'b', '8'), ev('invoke', 0, 12, 'acquire')))).toBe('violation');
  });

  it('the end of the session (connection lost, a dead process) ends every level at once', () => {
    for (const reason of ['connection-lost', 'process-exited']) {
      const lost = { type: 'signal', process: 0, time: 6, resource: 'r', owner: 'a', reason };
      const h = stacked([lost]);
      expect(holdIntervals(h).filter((x) => x.process === 0).map(({ end, endedBy }) => ({ end, endedBy }))).toEqual([{ end: 6, endedBy: 'signal' }]);
      expect(mutex(h), reason).toBe('safe');
    }
  });

  it('no stacking: a re-grant with a deadline, or with another token, ends the hold at its invoke as before', () => {
    // Leases (a ttl asked, a deadline granted) never stack: the second grant replaces the first, one release ends it.
    const lease = history(acquire(0, 0, 1, { owner: 'a', token: '7', validUntil: 100 }), acquire(0, 2, 3, { owner: 'a', token: '7', validUntil: 100 }), release(0, 4, 5, 'ok'), acquire(1, 10, 11, { owner: 'b', token: '8', validUntil: 200 }));
    expect(holdIntervals(lease).filter((x) => x.process === 0).map(({ start, end, endedBy }) => ({ start, end, endedBy }))).toEqual([
      { start: 1, end: 2, endedBy: 'reacquire' },
      { start: 3, end: 4, endedBy: 'release' },
    ]);
    expect(mutex(lease)).toBe('safe');
    // A session lock granted again with another token is another grant, not a level: one release ends it.
    expect(mutex(history(sessionAcquire(0, 0, 1, 'a', '7'), sessionAcquire(0, 2, 3, 'a', '9'), release(0, 4, 5, 'ok', 'a', '9'), sessionAcquire(1, 10, 11, 'b', '8')))).toBe('safe');
  });
});

describe('FENCE-1: token order', () => {
  it('a grant that completed at the instant another was invoked is concurrent with it (not ordered), as for stale writes', () => {
    const at = (invoked: number) => history(acquire(0, 0, 10, { validUntil: 11, token: '5' }), acquire(1, invoked, 12, { validUntil: 100, token: '3' }));
    expect(verdictOf(checkHistory(at(10)), 'FENCE-1')).toBe('safe');
    expect(verdictOf(checkHistory(at(11)), 'FENCE-1')).toBe('violation');
  });
});

describe('FENCE-1: grants ordered by completion and invoke, not by the lines (session h39)', () => {
  const fence1 = (h: History) => checkHistory(h).findings.filter((f) => f.property === 'FENCE-1').map((f) => f.message);
  it('the grants completed before another was invoked are found by their completion, whatever order they were invoked in', () => {
    // Token 9 is invoked first and completes last; token 3, invoked at 10, is below token 5, completed at 2.
    const h = history(ev('invoke', 0, 0, 'acquire', { ttlMs: 100 }), acquire(1, 1, 2, { validUntil: 3, token: '5' }), acquire(2, 10, 11, { validUntil: 12, token: '3' }), ev('ok', 0, 50, 'acquire', { owner: 'o0', validUntil: 60, token: '9' }));
    expect(fence1(h)).toEqual(["'r': process 2 was granted token 3 (invoked at 10 ms) after process 1's grant with token 5 had completed (at 2 ms); tokens must increase"]);
  });
  it('the bar is the highest token completed before, not the first nor the last completed', () => {
    const h = history(acquire(0, 0, 1, { validUntil: 1, token: '5' }), acquire(1, 2, 3, { validUntil: 3, token: '2' }), acquire(2, 10, 11, { validUntil: 11, token: '4' }));
    expect(fence1(h)).toEqual([
      "'r': process 1 was granted token 2 (invoked at 2 ms) after process 0's grant with token 5 had completed (at 1 ms); tokens must increase",
      "'r': process 2 was granted token 4 (invoked at 10 ms) after process 0's grant with token 5 had completed (at 1 ms); tokens must increase",
    ]);
    const rising = history(acquire(0, 0, 1, { validUntil: 1, token: '2' }), acquire(1, 2, 3, { validUntil: 3, token: '5' }), acquire(2, 10, 11, { validUntil: 11, token: '4' }));
    expect(fence1(rising)).toEqual(["'r': process 2 was granted token 4 (invoked at 10 ms) after process 1's grant with token 5 had completed (at 3 ms); tokens must increase"]);
  });
  it("grants are judged in the order they were invoked, not the order of the history's lines", () => {
    const h = history(acquire(2, 10, 11, { validUntil: 12, token: '3' }), acquire(1, 1, 2, { validUntil: 3, token: '5' }));
    expect(fence1(h)).toEqual(["'r': process 2 was granted token 3 (invoked at 10 ms) after process 1's grant with token 5 had completed (at 2 ms); tokens must increase"]);
    // Token 2 (invoked at 4) was concurrent with token 9 (completed at 5): no finding, though token 10's lines, invoked at 6, come first.
    expect(fence1(history(acquire(2, 6, 7, { validUntil: 7, token: '10' }), acquire(0, 0, 5, { validUntil: 5, token: '9' }), acquire(1, 4, 8, { validUntil: 8, token: '2' })))).toEqual([]);
  });
});

describe('FENCE-2: stale writes', () => {
  it('a write is judged against the highest token accepted before it was invoked, not the last one accepted', () => {
    // Token 5 accepted by 10; token 3, concurrent with it (invoked at 1), accepted by 12; then token 4 invoked at 20.
    const h = history(write(0, 0, 10, 'a', '5'), write(1, 1, 12, 'b', '3'), write(2, 20, 21, 'c', '4'));
    const r = checkHistory(h, { storePolicy: 'monotonic' });
    expect(verdictOf(r, 'FENCE-2')).toBe('violation');
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the monotonic store accepted process 2's write with token 4 (invoked at 20 ms) after it had accepted process 0's write with token 5 (completed at 10 ms): a stale write accepted",
    ]);
  });
});

describe('a write whose outcome is unknown, seen by a read, took effect (spec 10.4.3)', () => {
  const info = (p: number, t0: number, t1: number, value: string, token: string, prev: string | null = null) => [
    ev('invoke', p, t0, 'write', { key: 'x', value, prev, token }),
    ev('info', p, t1, 'write', { key: 'x', reason: 'timeout' }),
  ];
  const read = (p: number, t0: number, t1: number, value: string | null) => [ev('invoke', p, t0, 'read', { key: 'x' }), ev('ok', p, t1, 'read', { key: 'x', value })];

  it('FENCE-2: a stale write whose reply was lost is accepted once a client read its value, and not before', () => {
    // Token 2 accepted by 1; token 1's write (invoked at 2) timed out, and process 2 read its value at 5.
    const seen = history(read(3, 0, 0, null), write(1, 0, 1, 'b', '2'), info(0, 2, 3, 'a', '1'), read(2, 4, 5, 'a'));
    const r = checkHistory(seen, { storePolicy: 'strict' });
    expect(verdictOf(r, 'FENCE-2')).toBe('violation');
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => [f.message, f.events])).toEqual([
      [
        "'r': the strict store accepted process 0's write with token 1 (invoked at 2 ms; accepted by 5 ms: its own outcome is unknown, but process 2's read returned its value then) after it had accepted process 1's write with token 2 (completed at 1 ms): a stale write accepted",
        [2, 3, 4, 5, 6, 7],
      ],
    ]);
    // Unread, the write may never have landed: nothing rests on an unknown outcome.
    expect(verdictOf(checkHistory(history(read(3, 0, 0, null), write(1, 0, 1, 'b', '2'), info(0, 2, 3, 'a', '1')), { storePolicy: 'strict' }), 'FENCE-2')).toBe('safe');
  });

  it('FENCE-2: the same value written to another key is another register, no other carrier of the value read (session h39)', () => {
    const otherKey = [ev('invoke', 4, 2, 'write', { key: 'y', value: 'a', prev: null, token: '3' }), ev('info', 4, 3, 'write', { key: 'y' })];
    const h = history(read(3, 0, 0, null), write(1, 0, 1, 'b', '2'), info(0, 2, 3, 'a', '1'), otherKey, read(2, 4, 5, 'a'));
    const r = checkHistory(h, { storePolicy: 'strict' });
    expect(verdictOf(r, 'FENCE-2')).toBe('violation');
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => f.events)).toEqual([[2, 3, 4, 5, 8, 9]]);
    // Nor is a rejected write of the same value another carrier: it took no effect.
    const rejected = [ev('invoke', 4, 2, 'write', { key: 'x', value: 'a', prev: null, token: '1' }), ev('fail', 4, 3, 'write', { key: 'x', reason: 'stale-token' })];
    const withRejected = history(read(3, 0, 0, null), write(1, 0, 1, 'b', '2'), info(0, 2, 3, 'a', '1'), rejected, read(2, 4, 5, 'a'));
    expect(verdictOf(checkHistory(withRejected, { storePolicy: 'strict' }), 'FENCE-2')).toBe('violation');
  });

  it('FENCE-2: what shows the register held another value before the history is any value seen that no write carries: a prev, or a read of a value (session h39)', () => {
    // No read of nothing: the writes' prev (null) is what shows 'a' was not there before.
    const byPrev = history(write(1, 0, 1, 'b', '2'), info(0, 2, 3, 'a', '1'), read(2, 4, 5, 'a'));
    expect(verdictOf(checkHistory(byPrev, { storePolicy: 'strict' }), 'FENCE-2')).toBe('violation');
    // A read of 'before', a value no write carries: the register held it, not 'a'.
    const unprev = (p: number, t0: number, t1: number, value: string, token: string, outcome: string) => [ev('invoke', p, t0, 'write', { key: 'x', value, token }), ev(outcome, p, t1, 'write', { key: 'x' })];
    const byRead = history(read(3, 0, 0, 'before'), unprev(1, 0, 1, 'b', '2', 'ok'), unprev(0, 2, 3, 'a', '1', 'info'), read(2, 4, 5, 'a'));
    expect(verdictOf(checkHistory(byRead, { storePolicy: 'strict' }), 'FENCE-2')).toBe('violation');
  });

  it('FENCE-2: an ok write whose value a read returned before its own ok (a slow reply) had taken effect by that return (session h39)', () => {
    // Token 2's write is invoked at 2 and its ok comes at 20; process 2 read its value at 6; token 1's write, invoked at
    // 10, was accepted after it: stale. Judged from the ok alone the two were concurrent, and it was missed.
    const slowOk = [ev('invoke', 0, 2, 'write', { key: 'x', value: 'a', prev: null, token: '2' }), ev('ok', 0, 20, 'write', { key: 'x' })];
    const stale = [ev('invoke', 1, 10, 'write', { key: 'x', value: 'c', prev: null, token: '1' }), ev('ok', 1, 11, 'write', { key: 'x' })];
    const h = history(read(3, 0, 0, null), slowOk[0]!, read(2, 5, 6, 'a'), stale, slowOk[1]!);
    const r = checkHistory(h, { storePolicy: 'strict' });
    expect(verdictOf(r, 'FENCE-2')).toBe('violation');
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 1's write with token 1 (invoked at 10 ms) after it had accepted process 0's write with token 2 (accepted by 6 ms: process 2's read returned its value then, before its own ok at 20 ms): a stale write accepted",
    ]);
    // With no read of its value before the stale write was invoked, they stay concurrent.
    expect(verdictOf(checkHistory(history(read(3, 0, 0, null), slowOk[0]!, stale, read(2, 12, 13, 'a'), slowOk[1]!), { storePolicy: 'strict' }), 'FENCE-2')).toBe('safe');
  });

  it('FENCE-2, strict: a token equal to one accepted before the write was invoked is stale by that order; a write without token is not judged (session h39)', () => {
    const untokened = [ev('invoke', 2, 1, 'write', { key: 'x', value: 'u', prev: null }), ev('ok', 2, 2, 'write', { key: 'x' })];
    const h = history(read(3, 0, 0, null), write(0, 0, 1, 'a', '5'), untokened, write(1, 3, 4, 'b', '5'));
    const r = checkHistory(h, { storePolicy: 'strict' });
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 1's write with token 5 (invoked at 3 ms) after it had accepted process 0's write with token 5 (completed at 1 ms): a stale write accepted",
    ]);
    expect(r.counts.staleWritesAccepted).toBe(1);
  });

  it('FENCE-2: the writes accepted before another was invoked are found by their completion, whatever order they were invoked in (session h39)', () => {
    // Token 9 is invoked first and completes last; token 5, invoked after it, completes at 2; token 3 (invoked at 10) is stale against 5.
    const h = history(read(3, 0, 0, null), ev('invoke', 0, 0, 'write', { key: 'x', value: 'a', prev: null, token: '9' }), write(1, 1, 2, 'b', '5'), write(2, 10, 11, 'c', '3'), ev('ok', 0, 50, 'write', { key: 'x' }));
    expect(checkHistory(h, { storePolicy: 'strict' }).findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 2's write with token 3 (invoked at 10 ms) after it had accepted process 1's write with token 5 (completed at 2 ms): a stale write accepted",
    ]);
  });

  it('FENCE-2: the bar is the highest token completed before, not the first; a write completed at the instant another is invoked is concurrent with it (session h39)', () => {
    const h = history(read(3, 0, 0, null), write(0, 0, 1, 'a', '2'), write(1, 2, 3, 'b', '5'), write(2, 10, 11, 'c', '4'));
    expect(checkHistory(h, { storePolicy: 'strict' }).findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 2's write with token 4 (invoked at 10 ms) after it had accepted process 1's write with token 5 (completed at 3 ms): a stale write accepted",
    ]);
    expect(verdictOf(checkHistory(history(read(3, 0, 0, null), write(1, 2, 3, 'b', '5'), write(2, 3, 4, 'c', '4')), { storePolicy: 'strict' }), 'FENCE-2')).toBe('safe');
  });

  it('FENCE-2: writes are judged in the order they were invoked, not the order of the history\'s lines (session h39)', () => {
    // The lines of process 2 come first though it was invoked later: token 5's write is no stale write against itself.
    const h = history(write(2, 10, 11, 'c', '3'), read(3, 0, 0, null), write(1, 1, 2, 'b', '5'));
    expect(checkHistory(h, { storePolicy: 'strict' }).findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 2's write with token 3 (invoked at 10 ms) after it had accepted process 1's write with token 5 (completed at 2 ms): a stale write accepted",
    ]);
  });

  it('FENCE-2: a read of an ok write returning after its ok changes nothing: it took effect by its ok (session h39)', () => {
    const early = [ev('invoke', 0, 2, 'write', { key: 'x', value: 'a', prev: null, token: '2' }), ev('ok', 0, 4, 'write', { key: 'x' })];
    const stale = [ev('invoke', 1, 10, 'write', { key: 'x', value: 'c', prev: null, token: '1' }), ev('ok', 1, 11, 'write', { key: 'x' })];
    const h = history(read(3, 0, 0, null), early, ev('invoke', 2, 5, 'read', { key: 'x' }), stale, ev('ok', 2, 30, 'read', { key: 'x', value: 'a' }));
    const r = checkHistory(h, { storePolicy: 'strict' });
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 1's write with token 1 (invoked at 10 ms) after it had accepted process 0's write with token 2 (completed at 4 ms): a stale write accepted",
    ]);
    // A store that takes every token (unfenced, or no policy given) accepts no stale write.
    for (const options of [{ storePolicy: 'unfenced' as const }, {}]) expect(checkHistory(h, options).counts.staleWritesAccepted).toBe(0);
  });

  it('FENCE-2: such a write took effect by the earliest return of the reads that saw it, not the first invoked (session h39)', () => {
    // Token 2's reply was lost; a slow read invoked at 4 returns its value at 40, a quick one invoked at 5 at 6. By 6 it
    // had landed, so token 1's write, invoked at 10 and accepted, is stale.
    const h = history(
      read(3, 0, 0, null),
      info(0, 2, 3, 'a', '2'),
      ev('invoke', 2, 4, 'read', { key: 'x' }),
      read(4, 5, 6, 'a'),
      [ev('invoke', 1, 10, 'write', { key: 'x', value: 'c', prev: null, token: '1' }), ev('ok', 1, 11, 'write', { key: 'x' })],
      ev('ok', 2, 40, 'read', { key: 'x', value: 'a' }),
    );
    const r = checkHistory(h, { storePolicy: 'strict' });
    expect(verdictOf(r, 'FENCE-2')).toBe('violation');
    expect(r.findings.filter((f) => f.property === 'FENCE-2').map((f) => f.message)).toEqual([
      "'r': the strict store accepted process 1's write with token 1 (invoked at 10 ms) after it had accepted process 0's write with token 2 (accepted by 6 ms: its own outcome is unknown, but process 4's read returned its value then): a stale write accepted",
    ]);
  });

  it('FENCE-2: a read is no proof when another write may have carried the value, or the register may have held it before the history', () => {
    const twice = history(read(3, 0, 0, null), write(1, 0, 1, 'b', '2'), info(0, 2, 3, 'a', '1'), info(4, 2, 3, 'a', '3'), read(2, 4, 5, 'a'));
    expect(verdictOf(checkHistory(twice, { storePolicy: 'strict' }), 'FENCE-2')).toBe('safe');
    // No value seen that no write wrote (no read of nothing, no prev of one): 'a' may be the value before the history.
    const noPrev = history(
      [ev('invoke', 1, 0, 'write', { key: 'x', value: 'b', token: '2' }), ev('ok', 1, 1, 'write', { key: 'x' })],
      [ev('invoke', 0, 2, 'write', { key: 'x', value: 'a', token: '1' }), ev('info', 0, 3, 'write', { key: 'x' })],
      read(2, 4, 5, 'a'),
    );
    expect(verdictOf(checkHistory(noPrev, { storePolicy: 'strict' }), 'FENCE-2')).toBe('safe');
    // A read that did not answer (timed out, failed) saw nothing, not "nothing": 'a' may still be the value before the history (session h39).
    for (const outcome of ['info', 'fail']) {
      const unanswered = history(
        [ev('invoke', 1, 0, 'write', { key: 'x', value: 'b', token: '2' }), ev('ok', 1, 1, 'write', { key: 'x' })],
        [ev('invoke', 0, 2, 'write', { key: 'x', value: 'a', token: '1' }), ev('info', 0, 3, 'write', { key: 'x' })],
        [ev('invoke', 3, 3, 'read', { key: 'x' }), ev(outcome, 3, 4, 'read', { key: 'x' })],
        read(2, 4, 5, 'a'),
      );
      expect(verdictOf(checkHistory(unanswered, { storePolicy: 'strict' }), 'FENCE-2'), outcome).toBe('safe');
    }
    // A read that returned before the write was invoked did not see it.
    const early = history(read(3, 0, 0, null), write(1, 0, 1, 'b', '2'), read(2, 1, 1.5, 'a'), info(0, 2, 3, 'a', '1'));
    expect(verdictOf(checkHistory(early, { storePolicy: 'strict' }), 'FENCE-2')).toBe('safe');
  });

  it('STORE-1: a landed write whose reply was lost, overwritten by a write that read what was there before it, is a lost update', () => {
    // Process 0 read nothing and writes 'a' (slow, accepted at 10); process 1's 'b', also on nothing, timed out but was read at 3.
    const h = history(read(3, 0, 0, null), [ev('invoke', 0, 0, 'write', { key: 'x', value: 'a', prev: null, token: '1' })], info(1, 1, 1.5, 'b', '2'), read(2, 2, 3, 'b'), [ev('ok', 0, 10, 'write', { key: 'x' })], read(2, 11, 12, 'a'));
    const r = checkHistory(h, { storePolicy: 'unfenced' });
    expect(r.counts.lostUpdates).toBe(1);
    expect(r.findings.find((f) => f.property === 'STORE-1')?.message).toBe(
      "'r' key 'x': process 1's write of 'b' was accepted (by 3 ms: its own outcome is unknown, but process 2's read returned its value then) before process 2 read 'a' (invoked at 11 ms), and that value does not build on it: a lost update",
    );
  });
});

describe('LIN-1: the lease lock as a sequential specification', () => {
  const lin = (r: CheckReport) => r.checks.find((c) => c.check === 'lock-linearizable')?.verdict;
  it('an extension by a process that no longer holds the lock (another was granted it after the deadline) is no linearizable history', () => {
    const h = (extender: string) =>
      history(
        acquire(0, 0, 2, { validUntil: 20 }),
        acquire(1, 21, 25, { validUntil: 60 }),
        ev('invoke', 0, 30, 'extend', { owner: extender, ttlMs: 40 }),
        ev('ok', 0, 31, 'extend', { owner: extender, validUntil: 70 }),
      );
    expect(lin(checkHistory(h('o0')))).toBe('violation');
    // The holder's own extension is fine (as far as the sequential lock goes).
    expect(lin(checkHistory(h('o1')))).toBe('safe');
  });
});

describe('LIN-1: which lease an operation names', () => {
  const lin = (r: CheckReport) => r.checks.find((c) => c.check === 'lock-linearizable')?.verdict;
  it("a grant whose ok names no owner is its process's next release's (as MUTEX-1 matches them), not a lease nobody releases", () => {
    const h = (releaser: string) =>
      history(
        ev('invoke', 0, 0, 'acquire'),
        ev('ok', 0, 1, 'acquire', { token: '1' }),
        ev('invoke', 0, 5, 'release', { owner: releaser }),
        ev('ok', 0, 6, 'release'),
        ev('invoke', 1, 10, 'acquire'),
        ev('ok', 1, 11, 'acquire', { owner: 'b', token: '2' }),
      );
    expect(lin(checkHistory(h('a')))).toBe('safe');
    // A release by another process names someone else's lease: process 0's session lock is still held at 10.
    const other = history(
      ev('invoke', 0, 0, 'acquire'),
      ev('ok', 0, 1, 'acquire', { token: '1' }),
      ev('invoke', 2, 5, 'release', { owner: 'a' }),
      ev('ok', 2, 6, 'release'),
      ev('invoke', 1, 10, 'acquire'),
      ev('ok', 1, 11, 'acquire', { owner: 'b', token: '2' }),
    );
    expect(lin(checkHistory(other))).toBe('violation');
    // A lost reply naming no owner is not given the next release's: a's lease, released at 5, cannot be extended at 10.
    const lostReply = history(
      ev('invoke', 0, 0, 'acquire'),
      ev('info', 0, 1, 'acquire', { reason: 'timeout' }),
      ev('invoke', 0, 5, 'release', { owner: 'a' }),
      ev('ok', 0, 6, 'release'),
      ev('invoke', 0, 10, 'extend', { owner: 'a', ttlMs: 100 }),
      ev('ok', 0, 11, 'extend', { validUntil: 110 }),
    );
    expect(lin(checkHistory(lostReply))).toBe('violation');
  });

  it('an acquire whose outcome is unknown keeps the owner its info names: that lease may be extended', () => {
    const h = history(
      ev('invoke', 0, 0, 'acquire', { ttlMs: 100 }),
      ev('info', 0, 50, 'acquire', { owner: 'w1', reason: 'timeout' }),
      ev('invoke', 0, 60, 'extend', { owner: 'w1', ttlMs: 100 }),
      ev('ok', 0, 61, 'extend', { validUntil: 150 }),
    );
    expect(lin(checkHistory(h))).toBe('safe');
    expect(checkHistory(h).verdict).toBe('safe');
  });
});

describe('LIN-1: session locks (no deadline) end with their session', () => {
  const lin = (r: CheckReport) => r.checks.find((c) => c.check === 'lock-linearizable')?.verdict;
  const sessionAcquire = (p: number, t0: number, t1: number, owner: string, token: string) => [ev('invoke', p, t0, 'acquire'), ev('ok', p, t1, 'acquire', { owner, token })];
  const lost = (p: number, t: number, owner: string, reason: string) => ({ type: 'signal', process: p, time: t, resource: 'r', owner, reason });

  it('a session lost without a release (connection-lost, process-exited) was freed by the server before its signal, and only then', () => {
    for (const reason of ['connection-lost', 'process-exited']) {
      const h = history(sessionAcquire(0, 0, 1, 'a', '1'), lost(0, 5, 'a', reason), sessionAcquire(1, 10, 11, 'b', '2'));
      expect(lin(checkHistory(h)), reason).toBe('safe');
    }
    // A signal of what the client believes only (expired), or of a lease with a deadline (the server keeps it), frees nothing.
    expect(lin(checkHistory(history(sessionAcquire(0, 0, 1, 'a', '1'), lost(0, 5, 'a', 'expired'), sessionAcquire(1, 10, 11, 'b', '2'))))).toBe('violation');
    const lease = history(acquire(0, 0, 1, { owner: 'a', validUntil: 100 }), lost(0, 5, 'a', 'process-exited'), acquire(1, 10, 11, { owner: 'b', validUntil: 200 }));
    expect(lin(checkHistory(lease))).toBe('violation');
    // The session ended before its signal, never after: a's first session is lost at 5; a takes the lock again at 7 (a new session); b's grant at 11 overlaps it.
    const h = history(sessionAcquire(0, 0, 1, 'a', '1'), lost(0, 5, 'a', 'connection-lost'), sessionAcquire(0, 6, 7, 'a', '2'), sessionAcquire(1, 10, 11, 'b', '3'));
    expect(lin(checkHistory(h))).toBe('violation');
  });

  it('a stacked PostgreSQL re-acquire (same owner, same token) needs its own release (spec 7.4)', () => {
    const stacked = (between: object[]) =>
      history(
        sessionAcquire(0, 0, 1, 'a', '7'),
        sessionAcquire(0, 2, 3, 'a', '7'),
        ev('invoke', 0, 4, 'release', { owner: 'a', token: '7' }),
        ev('ok', 0, 5, 'release'),
        between,
        ev('invoke', 0, 20, 'release', { owner: 'a', token: '7' }),
        ev('ok', 0, 21, 'release'),
      );
    expect(lin(checkHistory(stacked([])))).toBe('safe');
    // Between the two releases the lock is still held once: b's grant there overlaps it.
    expect(lin(checkHistory(stacked(sessionAcquire(1, 10, 11, 'b', '8'))))).toBe('violation');
    // A second grant of the held lock with another token is no stacking.
    expect(lin(checkHistory(history(sessionAcquire(0, 0, 1, 'a', '7'), sessionAcquire(0, 2, 3, 'a', '9'))))).toBe('violation');
    // The end of the session frees every stacked acquire at once.
    expect(lin(checkHistory(history(sessionAcquire(0, 0, 1, 'a', '7'), sessionAcquire(0, 2, 3, 'a', '7'), lost(0, 5, 'a', 'connection-lost'), sessionAcquire(1, 10, 11, 'b', '8'))))).toBe('safe');
  });
});

describe('LIN-1: a history cut in the middle of a lease', () => {
  const lin = (r: CheckReport) => r.checks.find((c) => c.check === 'lock-linearizable')?.verdict;
  const extend = (p: number, t0: number, t1: number, owner: string, validUntil: number) => [ev('invoke', p, t0, 'extend', { owner, token: '5', ttlMs: 100 }), ev('ok', p, t1, 'extend', { validUntil })];
  const release = (p: number, t0: number, t1: number, owner: string) => [ev('invoke', p, t0, 'release', { owner, token: '5' }), ev('ok', p, t1, 'release')];

  it('may start with the lock held by the owner first seen extending it, and only by it', () => {
    expect(lin(checkHistory(history(extend(0, 0, 1, 'a', 100), release(0, 10, 11, 'a'), acquire(1, 20, 21, { owner: 'b', validUntil: 200 }))))).toBe('safe');
    const r = checkHistory(history(release(0, 0, 1, 'a'), acquire(1, 20, 21, { owner: 'b', validUntil: 200 })));
    expect(lin(r)).toBe('safe');
    // Held by a at the start, it is not b's: b's extension needs a grant the history does not have.
    const two = checkHistory(history(extend(0, 0, 1, 'a', 100), release(0, 10, 11, 'a'), extend(1, 20, 21, 'b', 200)));
    expect(lin(two)).toBe('violation');
    // a's lease, extended to 100, is still a's when b is granted at 21.
    expect(lin(checkHistory(history(extend(0, 0, 1, 'a', 100), acquire(1, 20, 21, { owner: 'b', validUntil: 200 }))))).toBe('violation');
  });
});

describe('LIN-1: a register may have held, before the history, a value a write of it carries (values repeat)', () => {
  // A flag register read 'on', then written 'on' again: it held 'on' before the history. The start was only ever the
  // one value no write carries, so the first read was placed before anything and called a violation (found by audit h39).
  const lin = (...events: (object | object[])[]) => checkHistory(history(...events)).checks.find((c) => c.check === 'register-linearizable')?.verdict;
  const read = (p: number, t: number, value: string | null) => [ev('invoke', p, t, 'read', { key: 'k' }), ev('ok', p, t + 1, 'read', { key: 'k', value })];
  const put = (p: number, t: number, value: string, outcome = 'ok') => [ev('invoke', p, t, 'write', { key: 'k', value }), ev(outcome, p, t + 1, 'write', { key: 'k' })];

  it('a read of a value before any write of it returned may have seen the start: safe, whatever the write\'s outcome but rejected', () => {
    expect(lin(read(0, 0, 'on'), put(0, 2, 'on'))).toBe('safe');
    expect(lin(read(0, 0, 'on'), put(0, 2, 'on', 'info'))).toBe('safe');
    expect(lin(read(0, 0, 'on'), put(0, 2, 'off'), put(0, 4, 'on'), read(0, 6, 'on'))).toBe('safe');
    // A value only a rejected write carries stays the history's own, never the start (historyAudit.test.ts).
    expect(lin(read(0, 0, 'on'), put(0, 2, 'on', 'fail'))).toBe('violation');
  });

  it('no start explains a read made after a write returned, nor two starts: still violations', () => {
    // The write of 'off' returned before the read of 'on' was invoked: 'on' cannot be the start, and nothing wrote it since.
    expect(lin(put(0, 0, 'off'), read(0, 2, 'on'), put(0, 4, 'on'))).toBe('violation');
    expect(lin(read(0, 0, 'on'), read(0, 2, 'off'), put(0, 4, 'on'), put(0, 6, 'off'))).toBe('violation');
    expect(lin(read(0, 0, 'on'), read(0, 2, null), put(0, 4, 'on'))).toBe('violation');
  });
});

describe('the verdict', () => {
  it('a violation in one check outweighs a check that could not decide', () => {
    expect(
      overallVerdict([
        { check: 'lock-linearizable', property: 'LIN-1', verdict: 'unknown', findings: null, note: 'timed out' },
        { check: 'overlapping-holds', property: 'MUTEX-1', verdict: 'violation', findings: 1 },
      ]),
    ).toBe('violation');
  });

  it('findings counted but not kept (maxFindings 0) are still a violation', () => {
    const r = checkHistory(history(acquire(0, 0, 5, { validUntil: 100 }), acquire(1, 10, 20, { validUntil: 120 })), { maxFindings: 0 });
    expect(r.findings).toEqual([]);
    expect(r.checks.find((c) => c.check === 'overlapping-holds')).toMatchObject({ verdict: 'violation', findings: 1 });
    expect(r.verdict).toBe('violation');
  });
});
