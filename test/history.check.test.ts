import { readFileSync } from 'node:fs';
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { CheckOptions, CheckReport } from '../conformance/history/check.ts';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import type { Hold } from '../conformance/history/holds.ts';
import { holdIntervals, overlappingHolds } from '../conformance/history/holds.ts';
import { faultIntervals } from '../conformance/history/operations.ts';
import { historyReportHtml } from '../conformance/history/report.ts';
import { HistoryFormatError, parseHistory, validateHistory } from '../conformance/history/parse.ts';

/**
 * The history checkers on hand-written histories (spec 10.4): each one has
 * histories that pass, that violate, and unknown outcomes that must not be
 * flagged. Times are ms on the shared clock.
 */
type Fields = Record<string, unknown>;
const ev = (type: string, process: number | 'nemesis', time: number, op: string, fields: Fields = {}) => ({ type, process, time, op, ...fields });
const inv = (p: number, t: number, op: string, f: Fields = {}) => ev('invoke', p, t, op, { resource: 'r', ...f });
const ok = (p: number, t: number, op: string, f: Fields = {}) => ev('ok', p, t, op, { resource: 'r', ...f });
const fail = (p: number, t: number, op: string, f: Fields = {}) => ev('fail', p, t, op, { resource: 'r', ...f });
const info = (p: number, t: number, op: string, f: Fields = {}) => ev('info', p, t, op, { resource: 'r', ...f });
const signal = (p: number, t: number, owner: string) => ({ type: 'signal', process: p, time: t, resource: 'r', owner, reason: 'lost' });

/** acquire invoked at t0, granted at t1 with owner `o<p>`. */
const acquire = (p: number, t0: number, t1: number, grant: Fields) => [inv(p, t0, 'acquire', { ttlMs: 100 }), ok(p, t1, 'acquire', { owner: `o${p}`, ...grant })];
const release = (p: number, t0: number, t1: number) => [inv(p, t0, 'release', { owner: `o${p}` }), ok(p, t1, 'release', { owner: `o${p}` })];
const write = (p: number, t0: number, t1: number, outcome: typeof ok, value: string, prev: string | null, token?: string) => [
  inv(p, t0, 'write', { key: 'x', value, prev, ...(token === undefined ? {} : { token }) }),
  outcome(p, t1, 'write', { key: 'x' }),
];
const read = (p: number, t0: number, t1: number, value: string | null) => [inv(p, t0, 'read', { key: 'x' }), ok(p, t1, 'read', { key: 'x', value })];

function history(...events: (object | object[])[]): History {
  const h = validateHistory(events.flat());
  if (h instanceof HistoryFormatError) throw h;
  return h;
}

function verdicts(r: CheckReport): Record<string, string> {
  return Object.fromEntries(r.checks.map((c) => [c.property, c.verdict]));
}

const check = (h: History, o?: CheckOptions) => checkHistory(h, o);

describe('MUTEX-1: overlapping holds as the clients believed them', () => {
  it('sequential holds are safe; holds that touch do not overlap', () => {
    const r = check(history(acquire(0, 0, 2, { validUntil: 100 }), release(0, 10, 11), acquire(1, 5, 12, { validUntil: 100 }), release(1, 20, 21), acquire(0, 20, 21, { validUntil: 50 }), acquire(1, 50, 50, { validUntil: 90 })));
    expect(verdicts(r)['MUTEX-1']).toBe('safe');
    expect(r.counts.holds).toBe(4);
    expect(r.verdict).toBe('safe');
  });

  it('two beliefs at once: a violation naming both intervals and both grants', () => {
    const r = check(history(acquire(0, 0, 5, { validUntil: 100 }), acquire(1, 10, 20, { validUntil: 120 }), release(0, 30, 31)));
    expect(r.verdict).toBe('violation');
    const f = r.findings.find((x) => x.property === 'MUTEX-1')!;
    expect(f.intervals).toEqual([
      { process: 0, resource: 'r', start: 5, end: 30 },
      { process: 1, resource: 'r', start: 20, end: 120 },
    ]);
    expect(f.events).toEqual([0, 1, 2, 3, 4]);
    expect(r.counts.overlappingHolds).toBe(1);
  });

  it('20,000 session locks never released (every pair overlaps) are counted without building a finding per pair', () => {
    // 2 × 10^8 pairs: a message per pair took minutes; the count is n(n-1)/2 and 20 findings are kept.
    const n = 20_000;
    const h = history(...Array.from({ length: n }, (_, p) => [inv(p, 2 * p, 'acquire'), ok(p, 2 * p + 1, 'acquire', { owner: `o${p}` })]));
    const list = overlappingHolds(holdIntervals(h), 20);
    expect(list.total).toBe((n * (n - 1)) / 2);
    expect(list.kept).toHaveLength(20);
    expect(list.kept[19]!.intervals).toEqual([
      { process: 0, resource: 'r', start: 1, end: null },
      { process: 20, resource: 'r', start: 41, end: null },
    ]);
  }, 20_000);

  /** Per process, disjoint holds one after another; several processes on two resources. */
  const holdSets = fc.array(fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 1, max: 8 }), fc.boolean()), { maxLength: 6 }), { maxLength: 5 }).map((perProcess) =>
    perProcess.flatMap((spans, process) => {
      let t = 0;
      return spans.map(([gap, length, other], k): Hold => {
        const start = (t += gap);
        t += length;
        return { process, resource: other ? 's' : 'r', owner: undefined, token: undefined, start, end: k === spans.length - 1 && length > 6 ? Infinity : t, endedBy: 'release', events: [], grantIndex: process * 100 + k };
      });
    }),
  );
  test.prop([holdSets], { seed: 20161010 })('counts exactly the pairs of different processes that share an instant, and keeps them in order', (holds) => {
    const sorted = [...holds].sort((a, b) => a.start - b.start || a.grantIndex - b.grantIndex);
    const pairs: [Hold, Hold][] = [];
    // Resources in the order they first hold (as findings are listed).
    for (const resource of new Set(sorted.map((h) => h.resource))) {
      const hs = sorted.filter((h) => h.resource === resource);
      for (let i = 0; i < hs.length; i++) for (let j = i + 1; j < hs.length; j++) if (hs[i]!.process !== hs[j]!.process && hs[j]!.start < hs[i]!.end) pairs.push([hs[i]!, hs[j]!]);
    }
    const list = overlappingHolds(sorted, 3);
    expect(list.total).toBe(pairs.length);
    expect(list.kept.map((f) => f.intervals!.map((x) => x.process))).toEqual(pairs.slice(0, 3).map(([a, b]) => [a.process, b.process]));
  });

  it('a hold without deadline after its acquire asked for a ttl says so (a recorder that left out validUntil)', () => {
    // acquire() gives ttlMs 100 on the invoke; neither ok carries validUntil: both holds last to the end of the history.
    const r = check(history(acquire(0, 0, 5, {}), acquire(1, 200, 205, { validUntil: 300 })));
    const f = r.findings.find((x) => x.property === 'MUTEX-1')!;
    expect(f.message).toMatch(/process 0 from 5 to ∞ ms \(granted on line 2; ended by history-end; no deadline: its acquire asked for a ttl of 100 ms but its ok carries no validUntil, so it lasts until a release or signal\) and process 1 from 205 to 300 ms \(granted on line 4; ended by deadline\)$/);
  });

  it("a register's value from before the history, the last operation placed, is named as such (it crashed the report)", () => {
    // 'v0' is read but never written: the register starts with it. The read of 'x' before anyone wrote 'x' cannot follow it.
    const r = check(history(read(0, 0, 1, 'x'), write(1, 5, 6, ok, 'x', null), read(0, 10, 11, 'v0')));
    const lin = r.findings.find((x) => x.check === 'register-linearizable')!;
    expect(lin.message).toMatch(/1 of its 4 operations .* the last of them the register's value before the history \("v0"\), and then process 0's read of 'x' \(line 1, invoked at 0 ms, returned at 1 ms\) cannot be placed/);
  });

  it('findings name the lines (1-based, as the text report lists them), processes, operations and times', () => {
    // Line 1 and 2: process 0's acquire; lines 3 and 4: process 1's; line 5: process 0's release.
    const r = check(history(acquire(0, 0, 5, { validUntil: 100 }), acquire(1, 10, 20, { validUntil: 120 }), release(0, 30, 31)));
    const mutex = r.findings.find((x) => x.property === 'MUTEX-1')!;
    expect(mutex.message).toMatch(/process 0 from 5 to 30 ms \(granted on line 2;.* process 1 from 20 to 120 ms \(granted on line 4;/);
    const lin = r.findings.find((x) => x.check === 'lock-linearizable')!;
    expect(lin.message).toMatch(/the last of them process 0's acquire by o0 \(line 1, invoked at 0 ms, returned at 5 ms\), and then process 1's acquire by o1 \(line 3, invoked at 10 ms, returned at 20 ms\) cannot be placed/);
    expect(lin.events).toEqual([0, 2]);
    const reg = check(history(write(0, 0, 1, ok, 'a', null), read(1, 2, 3, 'b'), read(1, 4, 5, 'c'))).findings.find((x) => x.check === 'register-linearizable')!;
    expect(reg.message).toMatch(/process 1's read of 'b' \(line 3, invoked at 2 ms, returned at 3 ms\) cannot be placed/);
  });

  it('an info or pending acquire is no hold: never a false positive', () => {
    const infoAcquire = [inv(0, 0, 'acquire', { ttlMs: 100 }), info(0, 50, 'acquire', { reason: 'timeout' })];
    expect(check(history(infoAcquire, acquire(1, 10, 20, { validUntil: 120 }))).verdict).toBe('safe');
    expect(check(history(inv(0, 0, 'acquire', { ttlMs: 100 }), acquire(1, 10, 20, { validUntil: 120 }))).verdict).toBe('safe');
  });

  it('a hold ends at its deadline, at its release invoke and at its loss signal', () => {
    expect(verdicts(check(history(acquire(0, 0, 5, { validUntil: 50 }), acquire(1, 10, 60, { validUntil: 120 }))))['MUTEX-1']).toBe('safe');
    expect(verdicts(check(history(acquire(0, 0, 5, { validUntil: 70 }), acquire(1, 10, 60, { validUntil: 120 }))))['MUTEX-1']).toBe('violation');
    // A session lock (no deadline) ends at the loss signal.
    expect(verdicts(check(history(acquire(0, 0, 5, {}), signal(0, 30, 'o0'), acquire(1, 10, 40, {}))))['MUTEX-1']).toBe('safe');
    expect(verdicts(check(history(acquire(0, 0, 5, {}), signal(0, 30, 'someone-else'), acquire(1, 10, 40, {}))))['MUTEX-1']).toBe('violation');
    // The release's invoke ends it, whatever the release's outcome.
    expect(verdicts(check(history(acquire(0, 0, 5, {}), inv(0, 30, 'release', { owner: 'o0' }), info(0, 90, 'release', { owner: 'o0' }), acquire(1, 10, 40, {}))))['MUTEX-1']).toBe('safe');
  });

  it('an extend moves the deadline; an info extend does not; a failed one ends the hold', () => {
    const base = acquire(0, 0, 5, { validUntil: 50 });
    const later = acquire(1, 10, 60, { validUntil: 120 });
    const extend = (outcome: typeof ok) => [inv(0, 40, 'extend', { owner: 'o0', ttlMs: 100 }), outcome(0, 45, 'extend', { owner: 'o0', validUntil: 140 })];
    expect(verdicts(check(history(base, extend(ok), later)))['MUTEX-1']).toBe('violation');
    expect(verdicts(check(history(base, extend(info), later)))['MUTEX-1']).toBe('safe');
    const failed = [inv(0, 40, 'extend', { owner: 'o0' }), fail(0, 45, 'extend', { owner: 'o0', reason: 'lost' })];
    expect(verdicts(check(history(acquire(0, 0, 5, {}), failed, later)))['MUTEX-1']).toBe('safe');
  });

  it('an extend that succeeds after the deadline passed resumes the belief only from its ok', () => {
    const base = acquire(0, 0, 5, { validUntil: 50 });
    const extend = [inv(0, 60, 'extend', { owner: 'o0' }), ok(0, 70, 'extend', { owner: 'o0', validUntil: 150 })];
    expect(verdicts(check(history(base, extend, acquire(1, 52, 55, {}), release(1, 65, 66))))['MUTEX-1']).toBe('safe');
    expect(verdicts(check(history(base, extend, acquire(1, 52, 55, {}), release(1, 75, 76))))['MUTEX-1']).toBe('violation');
  });

  it('one process re-acquiring is not two holders; other resources do not interfere', () => {
    expect(verdicts(check(history(acquire(0, 0, 5, { validUntil: 100 }), acquire(0, 10, 20, { validUntil: 120 }))))['MUTEX-1']).toBe('safe');
    const other = [inv(1, 10, 'acquire', { resource: 's' }), ok(1, 20, 'acquire', { resource: 's', owner: 'o1' })];
    expect(verdicts(check(history(acquire(0, 0, 5, { validUntil: 100 }), other)))['MUTEX-1']).toBe('safe');
  });
});

describe('FENCE-1: a grant that completed before another was invoked has the lower token', () => {
  it('increasing tokens are safe; concurrent grants are not ordered', () => {
    expect(verdicts(check(history(acquire(0, 0, 5, { token: '1' }), acquire(1, 10, 20, { token: '2' }))))['FENCE-1']).toBe('safe');
    // Windows overlap (1 invoked before 0 completed): either order is possible.
    expect(verdicts(check(history(acquire(0, 0, 5, { token: '2' }), acquire(1, 4, 20, { token: '1' }))))['FENCE-1']).toBe('safe');
  });

  it('a later grant with a token not above an earlier one: a violation, exact near 2^63-1', () => {
    const r = check(history(acquire(0, 0, 5, { token: '9223372036854775807', validUntil: 8 }), acquire(1, 10, 20, { token: '9223372036854775806' })));
    expect(verdicts(r)['FENCE-1']).toBe('violation');
    expect(r.findings[0]!.message).toMatch(/token 9223372036854775806 .* token 9223372036854775807/);
    expect(verdicts(check(history(acquire(0, 0, 5, { token: '7' }), release(0, 6, 7), acquire(1, 10, 20, { token: '7' }))))['FENCE-1']).toBe('violation');
  });

  it('two processes granted one token are a violation however their grants overlap (whichever came second got a token not above); one process\'s stacked grants are not', () => {
    const overlapping = (a: string, b: string) => history(acquire(0, 0, 5, { token: a }), acquire(1, 1, 4, { token: b }));
    const r = check(overlapping('7', '7'));
    expect(verdicts(r)['FENCE-1']).toBe('violation');
    expect(r.findings.filter((f) => f.property === 'FENCE-1')).toHaveLength(1);
    // One process's two grants with one token (a stacked re-acquire) are not judged; only the other process's grant of it is.
    const stacked = check(history(acquire(0, 0, 5, { token: '7' }), acquire(0, 6, 9, { token: '7' }), acquire(1, 6, 8, { token: '7' })));
    expect(stacked.findings.filter((f) => f.property === 'FENCE-1').map((f) => f.message)).toEqual([expect.stringMatching(/^'r': process 1 was granted token 7 \(invoked at 6 ms\) after process 0's grant/)]);
    expect(verdicts(check(overlapping(String(2n ** 53n), String(2n ** 53n + 1n))))['FENCE-1']).toBe('safe');
    expect(verdicts(check(overlapping(String(2n ** 63n - 1n), String(2n ** 63n - 1n))))['FENCE-1']).toBe('violation');
  });

  it('info acquires and a stacked re-acquire of one process (same token) are not judged', () => {
    const infoAcquire = [inv(0, 0, 'acquire'), info(0, 5, 'acquire')];
    expect(verdicts(check(history(infoAcquire, acquire(1, 10, 20, { token: '1' }), acquire(2, 30, 40, { token: '2' }))))['FENCE-1']).toBe('safe');
    expect(verdicts(check(history(acquire(0, 0, 5, { token: '3' }), acquire(0, 10, 20, { token: '3' }))))['FENCE-1']).toBe('safe');
  });
});

describe('STORE-1: lost updates of read-modify-writes', () => {
  it('a chain of increments read back whole is safe', () => {
    const r = check(history(write(0, 0, 1, ok, '1', null), write(1, 2, 3, ok, '2', '1'), write(0, 4, 5, ok, '3', '2'), read(1, 6, 7, '3')));
    expect(verdicts(r)['STORE-1']).toBe('safe');
    expect(r.counts).toMatchObject({ writesAccepted: 3, lostUpdates: 0 });
  });

  it('two accepted writes based on the same read: one is lost', () => {
    const r = check(history(write(0, 0, 1, ok, '1', null), write(1, 2, 3, ok, '2', null)));
    expect(verdicts(r)['STORE-1']).toBe('violation');
    expect(r.counts.lostUpdates).toBe(1);
    expect(r.findings[0]!.events).toEqual([0, 1, 2, 3]);
  });

  it('a read that misses an accepted write: lost', () => {
    // Process 1's write is info (it may have landed); process 0's accepted write is missing from what is read.
    const r = check(history(write(0, 0, 1, ok, 'a', null), write(1, 2, 3, info, 'b', null), read(2, 10, 11, 'b')));
    expect(verdicts(r)['STORE-1']).toBe('violation');
    expect(r.counts.lostUpdates).toBe(1);
    expect(r.findings[0]!.message).toMatch(/write of 'a' was accepted .* read 'b'/);
  });

  it('a register that starts at a value written before the history: that value is the root of the chain', () => {
    expect(verdicts(check(history(write(0, 0, 1, ok, '18', '17'), write(1, 2, 3, ok, '19', '18'), read(2, 4, 5, '19'))))['STORE-1']).toBe('safe');
    const r = check(history(write(0, 0, 1, ok, '18', '17'), write(1, 2, 3, info, '19', '18'), read(2, 4, 5, '17')));
    expect(verdicts(r)['STORE-1']).toBe('violation');
    expect(r.findings[0]!.message).toMatch(/write of '18' was accepted .* read '17'/);
    // Two values nobody wrote: no single initial value, nothing judged by reads.
    expect(verdicts(check(history(write(0, 0, 1, ok, '18', '17'), write(1, 2, 3, info, '9', '8'), read(2, 4, 5, '9'))))['STORE-1']).toBe('safe');
  });

  it('a long chain read back at the end: only the write left out of it is lost', () => {
    const chain = Array.from({ length: 50 }, (_v, i) => write(i % 3, 10 * i, 10 * i + 1, ok, `${i + 1}`, i === 0 ? null : `${i}`));
    const branch = write(3, 200, 201, ok, 'x', '20');
    const r = check(history(...chain, branch, read(4, 600, 601, '50')));
    expect(r.counts.lostUpdates).toBe(1);
    expect(r.findings.map((f) => f.message)).toEqual([expect.stringMatching(/process 3's write of 'x' was accepted .* read '50'/)]);
  });

  it('unknown writes no read saw and rejected writes are never counted as accepted', () => {
    expect(verdicts(check(history(write(0, 0, 1, ok, '1', null), write(1, 2, 3, info, '2', null))))['STORE-1']).toBe('safe');
    expect(verdicts(check(history(write(0, 0, 1, ok, '1', null), write(1, 2, 3, fail, '2', null))))['STORE-1']).toBe('safe');
    // A write still in flight when the read was invoked may come after it.
    expect(verdicts(check(history(write(0, 0, 1, ok, '1', null), inv(1, 2, 'read', { key: 'x' }), write(2, 3, 9, ok, '2', '1'), ok(1, 10, 'read', { key: 'x', value: '1' }))))['STORE-1']).toBe('safe');
  });

  it('a value written twice (ABA) is not judged as a lost update', () => {
    const r = check(history(write(0, 0, 1, ok, '5', null), write(1, 2, 3, ok, '6', '5'), write(0, 4, 5, ok, '5', '6'), write(1, 6, 7, ok, '7', '5'), write(2, 8, 9, ok, '8', '7')));
    expect(verdicts(r)['STORE-1']).toBe('safe');
  });

  it('a value held before the history and written once in it is held twice (ABA): two writes reading it lose nothing', () => {
    // Sequential 17 -> 18 -> 17 -> 19: the first 17 is the value before the history, the second the write of it.
    expect(verdicts(check(history(write(0, 0, 1, ok, '18', '17'), write(0, 2, 3, ok, '17', '18'), write(0, 4, 5, ok, '19', '17'))))['STORE-1']).toBe('safe');
    // When the value before the history is known to be another one (16, read by the first write), 17 was held once: lost.
    const r = check(history(write(0, 0, 1, ok, '17', '16'), write(1, 2, 3, ok, '18', '17'), write(2, 4, 5, ok, '19', '17')));
    expect(verdicts(r)['STORE-1']).toBe('violation');
    expect(r.counts.lostUpdates).toBe(1);
  });

  it('blind writes (no prev) are not judged', () => {
    const blind = [inv(0, 0, 'write', { key: 'x', value: '1' }), ok(0, 1, 'write', { key: 'x' }), inv(1, 2, 'write', { key: 'x', value: '2' }), ok(1, 3, 'write', { key: 'x' })];
    expect(verdicts(check(history(blind)))['STORE-1']).toBe('skipped');
  });
});

describe('FENCE-2: stale writes accepted by a fenced store', () => {
  const seq = (a: string, b: string) => history(write(0, 0, 1, ok, '1', null, a), write(1, 2, 3, ok, '2', '1', b));
  it('by policy: strict rejects equal tokens, monotonic accepts them, lower tokens are stale for both', () => {
    expect(verdicts(check(seq('1', '2'), { storePolicy: 'strict' }))['FENCE-2']).toBe('safe');
    expect(verdicts(check(seq('2', '2'), { storePolicy: 'strict' }))['FENCE-2']).toBe('violation');
    expect(verdicts(check(seq('2', '2'), { storePolicy: 'monotonic' }))['FENCE-2']).toBe('safe');
    const r = check(seq('3', '2'), { storePolicy: 'monotonic' });
    expect(verdicts(r)['FENCE-2']).toBe('violation');
    expect(r.counts.staleWritesAccepted).toBe(1);
  });

  it('strict: two accepted writes with one token are stale however they overlap (the one judged second met it as its highest); monotonic takes them', () => {
    // Both in flight at once: no real-time order between them, yet a strict store can accept only one.
    const overlapping = (token: string, other: string) => history(write(0, 0, 3, ok, '1', null, token), write(1, 1, 2, ok, '2', null, other));
    const r = check(overlapping('7', '7'), { storePolicy: 'strict' });
    expect(verdicts(r)['FENCE-2']).toBe('violation');
    expect(r.counts.staleWritesAccepted).toBe(1);
    expect(verdicts(check(overlapping('7', '7'), { storePolicy: 'monotonic' }))['FENCE-2']).toBe('safe');
    expect(verdicts(check(overlapping('7', '8'), { storePolicy: 'strict' }))['FENCE-2']).toBe('safe');
    // Past 2^53, where a double would make 2^53 and 2^53+1 one token: still two.
    expect(verdicts(check(overlapping(String(2n ** 53n), String(2n ** 53n + 1n)), { storePolicy: 'strict' }))['FENCE-2']).toBe('safe');
    expect(verdicts(check(overlapping(String(2n ** 63n - 1n), String(2n ** 63n - 1n)), { storePolicy: 'strict' }))['FENCE-2']).toBe('violation');
  });

  it('the policy comes from the meta line unless the options say otherwise; unknown or unfenced: not judged', () => {
    const h = history({ type: 'meta', store: 'strict' }, write(0, 0, 1, ok, '1', null, '2'), write(1, 2, 3, ok, '2', '1', '2'));
    expect(check(h).storePolicy).toBe('strict');
    expect(verdicts(check(h))['FENCE-2']).toBe('violation');
    expect(verdicts(check(h, { storePolicy: 'monotonic' }))['FENCE-2']).toBe('safe');
    expect(verdicts(check(seq('3', '2')))['FENCE-2']).toBe('skipped');
    expect(verdicts(check(seq('3', '2'), { storePolicy: 'unfenced' }))['FENCE-2']).toBe('skipped');
  });

  it('concurrent writes, info writes and rejected writes are not judged stale', () => {
    expect(verdicts(check(history(write(0, 0, 5, ok, '1', null, '3'), write(1, 2, 6, ok, '2', '1', '2')), { storePolicy: 'strict' }))['FENCE-2']).toBe('safe');
    expect(verdicts(check(history(write(0, 0, 1, info, '1', null, '3'), write(1, 2, 3, ok, '2', '1', '2')), { storePolicy: 'strict' }))['FENCE-2']).toBe('safe');
    const r = check(history(write(0, 0, 1, ok, '1', null, '3'), write(1, 2, 3, fail, '2', '1', '2')), { storePolicy: 'strict' });
    expect(verdicts(r)['FENCE-2']).toBe('safe');
    expect(r.counts).toMatchObject({ writesAccepted: 1, writesRejected: 1 });
  });
});

describe('registers are told apart whatever their names', () => {
  it("'a/b' key 'c' and 'a' key 'b/c' are two registers (LIN-1), and so are names with a NUL in them (STORE-1)", () => {
    const w = (p: number, t: number, resource: string, key: string, value: string, prev?: string | null) => [
      inv(p, t, 'write', { resource, key, value, ...(prev === undefined ? {} : { prev }) }),
      ok(p, t + 1, 'write', { resource, key }),
    ];
    const r = (p: number, t: number, resource: string, key: string, value: string) => [inv(p, t, 'read', { resource, key }), ok(p, t + 1, 'read', { resource, key, value })];
    const slash = check(history(w(0, 0, 'a/b', 'c', '1'), w(1, 2, 'a', 'b/c', '2'), r(0, 4, 'a/b', 'c', '1')));
    expect(slash.verdict).toBe('safe');
    expect(slash.checks.find((c) => c.check === 'register-linearizable')?.verdict).toBe('safe');
    const nul = check(history(w(0, 0, 'a\u0000b', 'c', '1', null), w(1, 2, 'a', 'b\u0000c', '2', null)));
    expect(nul.counts.lostUpdates).toBe(0);
    expect(nul.verdict).toBe('safe');
    // Named so that one can tell which: quoted when a name has a '/'.
    const bad = check(history(w(0, 0, 'a/b', 'c', '1'), r(0, 4, 'a/b', 'c', '2'), r(0, 6, 'a/b', 'c', '3')));
    expect(bad.findings.find((f) => f.check === 'register-linearizable')?.message).toMatch(/^register 'a\/b' key 'c' is not linearizable/);
  });
});

describe('the report', () => {
  it("the timeline's operations name their lines (1-based), like the findings", () => {
    const h = history(acquire(0, 0, 5, { validUntil: 100 }), inv(1, 6, 'acquire'));
    const html = historyReportHtml(h, check(h));
    expect(html).toMatch(/process 0: acquire 'r' .*-&gt; ok \(0\.\.5 ms; lines 1, 2\)/);
    expect(html).toMatch(/process 1: acquire 'r' .*-&gt; pending \(6\.\.6 ms; line 3\)/);
  });

  it('pairs 60,000 faults begun at once with their ends, oldest first, in linear time', () => {
    // The pairing copied its queue of open begins at every begin and every end: 60,000 at once took minutes.
    const n = 60_000;
    const fault = (type: string, t: number) => ev(type, 'nemesis', t, 'fault', { fault: 'pause-client', target: 'client 1' });
    const h = history([...Array.from({ length: n }, (_, i) => fault('invoke', i)), ...Array.from({ length: n - 1 }, (_, i) => fault('ok', n + i))]);
    const faults = faultIntervals(h);
    expect(faults).toHaveLength(n);
    expect(faults[0]).toMatchObject({ start: 0, end: n, beginIndex: 0, endIndex: n });
    expect(faults[n - 1]).toMatchObject({ start: n - 1, end: 2 * n - 2, beginIndex: n - 1, endIndex: undefined });
  }, 20_000);

  it('counts operations, unknown outcomes and faults; the verdict is the worst check', () => {
    const r = check(
      history(
        ev('invoke', 'nemesis', 0, 'fault', { fault: 'pause-client', target: 'client 0' }),
        acquire(0, 0, 5, { validUntil: 100, token: '1' }),
        write(0, 6, 7, info, '1', null, '1'),
        ev('ok', 'nemesis', 8, 'fault', { fault: 'pause-client', target: 'client 0' }),
        inv(1, 9, 'acquire'),
      ),
    );
    expect(r.counts).toMatchObject({ events: 6 + 1, operations: 3, grants: 1, unknownOutcomes: 2, faults: 1, writesUnknown: 1 });
    expect(r.verdict).toBe('safe');
  });

  it('keeps at most maxFindings per check but counts them all', () => {
    const r = check(history(acquire(0, 0, 5, { validUntil: 100 }), acquire(1, 1, 6, { validUntil: 100 }), acquire(2, 2, 7, { validUntil: 100 })), { maxFindings: 1 });
    expect(r.checks.find((c) => c.property === 'MUTEX-1')).toMatchObject({ verdict: 'violation', findings: 3 });
    expect(r.findings.filter((f) => f.property === 'MUTEX-1')).toHaveLength(1);
    expect(r.counts.overlappingHolds).toBe(3);
  });

  it("judges the example of docs/histories.md safe, every check decided", () => {
    const example = /```jsonl\n([\s\S]*?)```/.exec(readFileSync('docs/histories.md', 'utf8'))![1]!;
    const h = parseHistory(example);
    if (h instanceof HistoryFormatError) throw h;
    const r = check(h);
    expect(r.checks.map((c) => c.verdict)).toEqual(['safe', 'safe', 'safe', 'safe', 'safe', 'safe']);
    expect(r.counts).toMatchObject({ grants: 2, writesAccepted: 1, writesUnknown: 1 });
  });
});

describe('checkHistory stopped by its caller (options.stop)', () => {
  it('keeps the checks it decided and says unknown, interrupted, for the search it stopped', () => {
    // Writes whose outcome is unknown and a read no order of them explains: the search would run to its budget.
    const events: object[] = [];
    for (let p = 0; p < 30; p++) events.push({ type: 'invoke', process: p, time: 0, op: 'write', resource: 'r', key: 'k', value: `v${p}` });
    for (let p = 0; p < 30; p++) events.push({ type: 'info', process: p, time: 1, op: 'write', resource: 'r', key: 'k' });
    for (let i = 0, t = 2; i < 60; i++, t += 2) {
      events.push({ type: 'invoke', process: 30, time: t, op: 'read', resource: 'r', key: 'k' }, { type: 'ok', process: 30, time: t + 1, op: 'read', resource: 'r', key: 'k', value: `v${(i * 7) % 30}` });
    }
    let looks = 0;
    const r = checkHistory(events as History, { timeoutMs: 600_000, stop: () => ++looks > 2 });
    expect(r.checks.find((c) => c.check === 'lost-updates')?.verdict).not.toBe('unknown');
    expect(r.checks.find((c) => c.check === 'register-linearizable')).toMatchObject({ verdict: 'unknown', note: 'not decided: interrupted while searching the register histories' });
    expect(r.verdict).toBe('unknown');
    expect(() => checkHistory(events as History, { stop: 1 as unknown as () => boolean })).toThrow(/options\.stop/);
  });
});
