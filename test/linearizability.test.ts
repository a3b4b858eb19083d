import { readFileSync } from 'node:fs';
import { fc, test } from '@fast-check/vitest';
import { describe, expect, it } from 'vitest';
import type { History } from '../conformance/history/event.ts';
import {
  casRegister,
  checkHistoryLinearizability,
  checkLinearizability,
  etcdRegister,
  HistoryShapeError,
  InvalidOperationError,
  kvStore,
  kvStoreUnpartitioned,
  leaseLock,
  multiRegister,
  register,
  mutex,
  type KvInput,
  type KvOutput,
  type LeaseLockInput,
  type Model,
  type MicroOp,
  type MultiRegisterInput,
  type MultiRegisterOutput,
  type MutexInput,
  type Operation,
  type RegisterInput,
  type RegisterOutput,
  type RegisterValue,
} from '../conformance/history/linearizability/index.ts';
import { findCorpora, loadCorpora, prepareCase } from '../conformance/history/linearizability/corpora/catalog.ts';
import { readEdn } from '../conformance/history/linearizability/corpora/edn.ts';
import { CorpusParseError } from '../conformance/history/linearizability/corpora/errors.ts';
import { PartitionSearch } from '../conformance/history/linearizability/search.ts';
import { leaseLockRelevance } from '../conformance/history/linearizability/models/leaseLockRelevance.ts';
import { lockHistoryLinearizable } from './leaseLockReference.ts';
import { parseKnossosHistory, toRegisterOperations } from '../conformance/history/linearizability/corpora/knossos.ts';
import { parseEtcdLog } from '../conformance/history/linearizability/corpora/porcupine.ts';

/**
 * This process's CPU time, in ms: the clock of the budgets and bounds below. Wall time on a loaded machine is several
 * times what the work took (a 0.4 s check ran 8 s at load 25, past its 5 s bound); CPU time is what the work took,
 * loaded or not, so a bound on it still tells linear from quadratic. (vitest runs each file in a process of its own.)
 */
const cpuMs = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** The CPU time `work` takes, in ms. */
const cpuTimeOf = (work: () => void): number => {
  const start = cpuMs();
  work();
  return cpuMs() - start;
};

type RegOp = Operation<RegisterInput, RegisterOutput>;
const read = (call: number, ret: number | undefined, value?: RegisterValue): RegOp => ({
  process: call,
  call,
  ...(ret === undefined ? {} : { return: ret }),
  input: { f: 'read' },
  ...(value === undefined ? {} : { output: { value } }),
});
const write = (call: number, ret: number | undefined, value: RegisterValue): RegOp => ({ process: call, call, ...(ret === undefined ? {} : { return: ret }), input: { f: 'write', value } });
const cas = (call: number, ret: number | undefined, from: RegisterValue, to: RegisterValue, ok?: boolean): RegOp => ({
  process: call,
  call,
  ...(ret === undefined ? {} : { return: ret }),
  input: { f: 'cas', from, to },
  ...(ok === undefined ? {} : { output: { ok } }),
});

describe('the corpora (Porcupine and Knossos test histories, expected.tsv)', () => {
  const root = findCorpora(process.cwd());
  it('are found (set LOCKCHECK_CORPORA when they are not beside the repository)', () => {
    expect(root, 'no shared/corpora with porcupine/expected.tsv above the working directory').toBeDefined();
  });
  const cases = root === undefined ? [] : loadCorpora(root);
  it('list every history of both expected.tsv files', () => {
    expect(cases.filter((c) => c.corpus === 'porcupine')).toHaveLength(109);
    expect(cases.filter((c) => c.corpus === 'knossos')).toHaveLength(126);
  });
  for (const c of cases) {
    it(`${c.corpus}/${c.file} with ${c.model} is ${c.expected === undefined ? 'checked (no verdict asserted upstream)' : c.expected ? 'linearizable' : 'not linearizable'}`, () => {
      const result = c.check({ timeoutMs: 60_000, clock: cpuMs });
      if (c.expected === undefined) expect(result.verdict).toBe('linearizable'); // the empty etcd_095
      else expect(result.verdict).toBe(c.expected ? 'linearizable' : 'not-linearizable');
    });
  }
  it('Porcupine asserts the same kv verdicts without partitioning (c01)', () => {
    for (const [name, expected] of [
      ['c01-ok', 'linearizable'],
      ['c01-bad', 'not-linearizable'],
    ] as const) {
      const c = cases.find((x) => x.file === `test_data/kv/${name}.txt`);
      expect(c).toBeDefined();
      const unpartitioned = root === undefined ? undefined : loadKv(root, name);
      expect(unpartitioned?.check().verdict).toBe(expected);
    }
  });
  it("names the operation Knossos's tests name as the one that could not be linearized", () => {
    for (const [file, init, process, call, value] of [
      ['bad-analysis', 0, 21, 13, 2],
      ['cas-failure', 0, 70, 488, 0],
      ['immediate-failure', 0, 1, 0, 3],
      ['rethink-fail-minimal', null, 1, 2, 3],
      ['rethink-fail-smaller', null, 12, 215, 3],
    ] as const) {
      const ops = toRegisterOperations(parseKnossosHistory(readFileSync(`${root}/knossos/data/cas-register/bad/${file}.edn`, 'utf8')));
      const result = checkLinearizability(casRegister(init), ops);
      expect(result.verdict, file).toBe('not-linearizable');
      if (result.verdict !== 'not-linearizable') continue;
      const blocked = ops[result.blocked!];
      expect([blocked?.process, blocked?.call, blocked?.input.f, blocked?.output?.value], file).toEqual([process, call, 'read', value]);
    }
  });

  it('a deadline gives unknown, never a verdict (etcd_007 with a clock that jumps a second per look)', () => {
    const c = cases.find((x) => x.file === 'test_data/jepsen/etcd_007.log');
    let now = 0;
    const result = c!.check({ timeoutMs: 1, clock: () => (now += 1000) });
    expect(result.verdict).toBe('unknown');
  });
});

function loadKv(root: string, name: string) {
  const file = `test_data/kv/${name}.txt`;
  return prepareCase({ corpus: 'porcupine', file, model: 'kv-no-partition', expected: undefined, notes: '' }, readFileSync(`${root}/porcupine/${file}`, 'utf8'));
}

describe('checkLinearizability on small histories', () => {
  it('accepts a read concurrent with the write it sees and rejects a later stale read', () => {
    const ok = checkLinearizability(etcdRegister(), [write(0, 2, 1), read(1, 3, 1), read(4, 5, 1)]);
    expect(ok.verdict).toBe('linearizable');
    const stale = checkLinearizability(etcdRegister(), [write(0, 2, 1), read(1, 3, 1), read(4, 5, null)]);
    expect(stale.verdict).toBe('not-linearizable');
    if (stale.verdict !== 'not-linearizable') return;
    expect(stale.longestPrefix).toEqual([0, 1]);
    expect(stale.blocked).toBe(2);
  });

  it('lets a pending write take effect late, or never', () => {
    // write(1) never returned: a read long after may or may not see it
    expect(checkLinearizability(etcdRegister(), [write(0, undefined, 1), read(10, 11, 1)]).verdict).toBe('linearizable');
    expect(checkLinearizability(etcdRegister(), [write(0, undefined, 1), read(10, 11, null)]).verdict).toBe('linearizable');
    // but not before it was called
    expect(checkLinearizability(etcdRegister(), [read(0, 1, 1), write(2, undefined, 1)]).verdict).toBe('not-linearizable');
    // and once seen it stays: a later read of absent is impossible
    expect(checkLinearizability(etcdRegister(), [write(0, undefined, 1), read(10, 11, 1), read(12, 13, null)]).verdict).toBe('not-linearizable');
  });

  it('treats a failed cas as an observation (etcd) and a timed-out read as seeing anything', () => {
    expect(checkLinearizability(etcdRegister(), [write(0, 1, 3), cas(2, 3, 3, 4, false)]).verdict).toBe('not-linearizable');
    expect(checkLinearizability(etcdRegister(), [write(0, 1, 3), cas(2, 3, 3, 4, true), read(4, 5, 4)]).verdict).toBe('linearizable');
    expect(checkLinearizability(etcdRegister(), [write(0, 1, 3), read(2, 3), read(4, 5, 3)]).verdict).toBe('linearizable');
  });

  it("reads nil as a wildcard in Knossos's cas-register, and starts it at 0", () => {
    expect(checkLinearizability(casRegister(0), [read(0, 1, 0), read(2, 3, null), cas(4, 5, 0, 2, true), read(6, 7, 2)]).verdict).toBe('linearizable');
    expect(checkLinearizability(casRegister(0), [cas(0, 1, 1, 2, true)]).verdict).toBe('not-linearizable');
  });

  it('judges a mutex: overlapping holds are not linearizable, an unknown acquire may not have happened', () => {
    const op = (f: MutexInput['f'], call: number, ret?: number): Operation<MutexInput, unknown> => ({ process: call, call, ...(ret === undefined ? {} : { return: ret }), input: { f } });
    expect(checkLinearizability(mutex(), [op('acquire', 0, 1), op('release', 2, 3), op('acquire', 4, 5)]).verdict).toBe('linearizable');
    expect(checkLinearizability(mutex(), [op('acquire', 0, 1), op('acquire', 2, 3)]).verdict).toBe('not-linearizable');
    expect(checkLinearizability(mutex(), [op('acquire', 0), op('acquire', 2, 3), op('release', 4, 5), op('acquire', 6, 7)]).verdict).toBe('linearizable');
    // concurrent release and acquire: the release can go first
    expect(checkLinearizability(mutex(), [op('acquire', 0, 1), op('release', 2, 5), op('acquire', 3, 4)]).verdict).toBe('linearizable');
  });

  it('checks a multi-register transaction atomically', () => {
    const txn = (call: number, ret: number, ops: [f: 'read' | 'write', key: string, value: RegisterValue][]) => ({
      process: call,
      call,
      return: ret,
      input: ops.map(([f, key]) => ({ f, key, value: null })),
      output: ops.map(([f, key, value]) => ({ f, key, value })),
    });
    const model = multiRegister({ x: 0, y: 0 });
    expect(checkLinearizability(model, [txn(0, 1, [['write', 'x', 1], ['write', 'y', 1]]), txn(2, 3, [['read', 'x', 1], ['read', 'y', 1]])]).verdict).toBe('linearizable');
    expect(checkLinearizability(model, [txn(0, 1, [['write', 'x', 1], ['write', 'y', 1]]), txn(2, 3, [['read', 'x', 1], ['read', 'y', 0]])]).verdict).toBe('not-linearizable');
  });

  it('partitions a kv store by key and names the key that fails', () => {
    const kv = (call: number, ret: number, input: KvInput, value?: string): Operation<KvInput, KvOutput> => ({
      process: call,
      call,
      return: ret,
      input,
      ...(value === undefined ? {} : { output: { value } }),
    });
    const history = [
      kv(0, 1, { f: 'put', key: 'a', value: 'x' }),
      kv(0, 1, { f: 'append', key: 'b', value: 'y' }),
      kv(2, 3, { f: 'get', key: 'a' }, 'x'),
      kv(2, 3, { f: 'get', key: 'b' }, ''),
    ];
    const result = checkLinearizability(kvStore(), history);
    expect(result.verdict).toBe('not-linearizable');
    if (result.verdict === 'not-linearizable') expect(result.key).toBe('b');
    expect(result.stats.partitions).toBe(2);
  });

  it('decides a long sequential history without memoising its forced steps (memory linear, not quadratic, in its length)', () => {
    // 60,000 operations one after another on one register: each has one place. Memoising every step kept a bitset of
    // every operation per step (60,000 × 1,875 words, 450 MB) and ran out of the time budget before deciding.
    const ops: RegOp[] = [];
    for (let i = 0; i < 30_000; i++) ops.push(write(4 * i, 4 * i + 1, i), read(4 * i + 2, 4 * i + 3, i));
    const ok = checkLinearizability(etcdRegister(), ops, { timeoutMs: 20_000, clock: cpuMs });
    expect(ok.verdict).toBe('linearizable');
    expect(ok.stats.configurations).toBe(0);
    const stale = checkLinearizability(etcdRegister(), [...ops, read(200_000, 200_001, 7)], { timeoutMs: 20_000, clock: cpuMs });
    expect(stale).toMatchObject({ verdict: 'not-linearizable', blocked: 60_000 });
  });

  it('bounds unknown writes once per value: 200,000 lost writes and 200,000 reads of a repeating value in linear time', () => {
    // A flag toggled between two values with every write's reply lost: each lost write looked at every read of its value
    // (2 × 10^10 steps before the search began).
    const flag = (n: number) => {
      const ops: RegOp[] = [];
      for (let i = 0; i < n; i++) ops.push(write(4 * i, undefined, i % 2), read(4 * i + 2, 4 * i + 3, i % 2));
      return ops;
    };
    const n = 200_000;
    const ops = flag(n);
    let bounds: readonly (number | undefined)[] = [];
    // 0.2 s of CPU here (6 s of wall time at load 38); the quadratic bounds took 24 s of CPU.
    expect(cpuTimeOf(() => (bounds = etcdRegister().relevance!(ops)))).toBeLessThan(5_000);
    expect(bounds[0]).toBe(4 * (n - 2) + 3);
    expect(bounds[2 * (n - 1)]).toBe(4 * (n - 1) + 3);
    expect(checkLinearizability(etcdRegister(), flag(2000)).verdict).toBe('linearizable');
  });

  it('keeps the longest linearized prefix with copies linear in the steps, also when each block fails a little deeper', () => {
    // Per block: two concurrent writes x and y, then a read of x. The search places x, y first, fails at the read and
    // keeps the deeper prefix: copying the whole stack each time was quadratic (16,000 blocks: 34 of 38.7 s).
    const blocks = 2000;
    const ops: RegOp[] = [];
    for (let i = 0; i < blocks; i++) {
      const t = 10 * i;
      ops.push({ process: 1, call: t, return: t + 2, input: { f: 'write', value: `x${i}` } }, { process: 2, call: t + 1, return: t + 3, input: { f: 'write', value: `y${i}` } }, read(t + 4, t + 5, `x${i}`));
    }
    ops.push(read(10 * blocks, 10 * blocks + 1, 'never written'));
    const search = new PartitionSearch(etcdRegister(), ops);
    expect(search.run(10_000_000)).toBe('not-linearizable');
    expect(search.blocked).toBe(3 * blocks);
    expect([...search.longest]).toEqual(Array.from({ length: blocks }, (_, i) => [3 * i + 1, 3 * i, 3 * i + 2]).flat());
    // Each stack entry is copied once per push at most: the whole stack each time was about blocks² × 3/2 (6 million) here.
    expect(search.copied).toBeLessThanOrEqual(search.steps);
    expect(search.copied).toBeGreaterThanOrEqual(3 * blocks);
  });

  it('stops at its memory bound with unknown (reason memory), never a verdict or a crash', () => {
    // 16 concurrent writes, then a read of a value none wrote: not linearizable, but only after trying every subset of
    // the writes in every order's last value (16 × 2^15 configurations, about 30 MB of memo table).
    const hard: RegOp[] = [];
    for (let i = 0; i < 16; i++) hard.push({ process: i, call: i, return: 100 + i, input: { f: 'write', value: i } });
    hard.push(read(200, 201, 99));
    const bounded = checkLinearizability(etcdRegister(), hard, { maxMemoryBytes: 4 * 2 ** 20 });
    expect(bounded).toMatchObject({ verdict: 'unknown', reason: 'memory' });
    expect(bounded.stats.configurations).toBeGreaterThan(1000);
    expect(checkLinearizability(etcdRegister(), hard).verdict).toBe('not-linearizable');
    // The same bound through checkHistoryLinearizability, which checks a whole recorded history object by object.
    const events = [
      ...hard.slice(0, 16).map((o) => ({ type: 'invoke', process: o.process, time: o.call, op: 'write', resource: 'r', key: 'k', value: String((o.input as { value: number }).value) })),
      ...hard.slice(0, 16).map((o) => ({ type: 'ok', process: o.process, time: o.return, op: 'write', resource: 'r', key: 'k' })),
      { type: 'invoke', process: 0, time: 200, op: 'read', resource: 'r', key: 'k' },
      { type: 'ok', process: 0, time: 201, op: 'read', resource: 'r', key: 'k', value: '99' },
    ] as unknown as History;
    expect(checkHistoryLinearizability(events, { maxMemoryBytes: 4 * 2 ** 20 })[0]!.result).toMatchObject({ verdict: 'unknown', reason: 'memory' });
  });

  it('rejects operations with impossible times with a typed error', () => {
    expect(() => checkLinearizability(etcdRegister(), [write(5, 4, 1)])).toThrow(InvalidOperationError);
    expect(() => checkLinearizability(etcdRegister(), [write(Number.NaN, 4, 1)])).toThrow(InvalidOperationError);
  });
});

/** A sequential run of the etcd register, stretched into overlapping intervals around each operation's instant. */
const sequentialRun = fc
  .array(
    fc.record({
      op: fc.oneof(
        fc.constant<RegisterInput>({ f: 'read' }),
        fc.integer({ min: 0, max: 3 }).map((value): RegisterInput => ({ f: 'write', value })),
        fc.tuple(fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 })).map(([from, to]): RegisterInput => ({ f: 'cas', from, to })),
      ),
      before: fc.integer({ min: 0, max: 35 }),
      after: fc.integer({ min: 0, max: 35 }),
      pending: fc.integer({ min: 0, max: 9 }).map((n) => n === 0),
    }),
    { minLength: 1, maxLength: 24 },
  )
  .map((steps) => {
    let state: RegisterValue = null;
    return steps.map(({ op, before, after, pending }, i): RegOp => {
      const at = 10 * i + 5;
      let output: RegisterOutput | undefined;
      if (op.f === 'read') output = { value: state };
      else if (op.f === 'write') state = op.value;
      else {
        output = { ok: state === op.from };
        if (state === op.from) state = op.to;
      }
      const timing = { process: i, call: at - before, ...(pending ? {} : { return: at + after }) };
      return { ...timing, input: op, ...(pending || output === undefined ? {} : { output }) };
    });
  });

/** Random (mostly not linearizable) register histories of up to 6 operations, some pending. */
const randomRegisterHistory = fc
  .array(
    fc.record({
      f: fc.constantFrom('read', 'write', 'cas'),
      a: fc.constantFrom<RegisterValue>(null, 0, 1),
      b: fc.constantFrom<RegisterValue>(0, 1),
      ok: fc.boolean(),
      call: fc.integer({ min: 0, max: 20 }),
      length: fc.integer({ min: 0, max: 12 }),
      pending: fc.integer({ min: 0, max: 3 }).map((n) => n === 0),
    }),
    { maxLength: 6 },
  )
  .map((raw) =>
    raw.map(({ f, a, b, ok, call, length, pending }, i): RegOp => {
      const timing = { process: i, call, ...(pending ? {} : { return: call + length }) };
      if (f === 'write') return { ...timing, input: { f, value: b } };
      if (f === 'read') return { ...timing, input: { f }, ...(pending ? {} : { output: { value: a } }) };
      return { ...timing, input: { f, from: a, to: b }, ...(pending ? {} : { output: { ok } }) };
    }),
  );

/** Linearizable iff some order of all completed operations and some of the pending ones respects real time and the model. */
function bruteForce<S, I, O>(ops: readonly Operation<I, O>[], model: Model<S, I, O> = etcdRegister() as unknown as Model<S, I, O>): boolean {
  const done = (o: Operation<I, O>): number => o.return ?? Infinity;
  const search = (placed: readonly number[], state: S): boolean => {
    const rest = ops.map((_, i) => i).filter((i) => !placed.includes(i));
    // Its own reading of an unknown outcome (no return, or Infinity), not the checker's isPending.
    if (rest.every((i) => ops[i]!.return === undefined || ops[i]!.return === Infinity)) return true;
    const deadline = Math.min(...rest.map((i) => done(ops[i]!)));
    return rest.some((i) => {
      if (ops[i]!.call > deadline) return false;
      const next = model.step(state, ops[i]!.input, ops[i]!.output);
      return typeof next !== 'symbol' && search([...placed, i], next);
    });
  };
  return search([], model.init());
}

/** The same model without its relevance bounds: unknown operations stay candidates to the end. */
const unbounded = <S, I, O>(model: Model<S, I, O>): Model<S, I, O> => ({ ...model, relevance: undefined });

type LockOp = Operation<LeaseLockInput, unknown>;
/** Small lease-lock histories as fromHistory.ts makes them (an unknown acquire or extend: no deadline), some unknown outcomes. */
const randomLockHistory = fc
  .array(
    fc.record({
      f: fc.constantFrom('acquire', 'acquire', 'extend', 'release', 'session-ended'),
      owner: fc.constantFrom('a', 'b', 'c'),
      // -Infinity: a grant whose deadline is not known (the lock held before the history began), already run out.
      until: fc.constantFrom(-Infinity, 5, 15, 25, Infinity),
      call: fc.integer({ min: 0, max: 20 }),
      length: fc.integer({ min: 0, max: 12 }),
      pending: fc.integer({ min: 0, max: 2 }).map((n) => n === 0),
    }),
    { maxLength: 7 },
  )
  .map((raw) =>
    raw.map(({ f, owner, until, call, length, pending }, i): LockOp => {
      const timing = { process: i, call, ...(pending ? {} : { return: call + length }) };
      const validUntil = pending ? Infinity : until;
      if (f === 'acquire') return { ...timing, input: { f, owner, validUntil, latest: pending ? Infinity : call + length } };
      const latest = pending ? Infinity : call + length;
      if (f === 'extend') return { ...timing, input: { f, owner, validUntil, latest } };
      // The end of a session is known (a signal shows it), never pending.
      if (f === 'session-ended') return { process: i, call, return: call + length, input: { f, owner, latest: call + length } };
      return { ...timing, input: { f: 'release', owner, latest } };
    }),
  );

/** Register histories of reads and writes only (the relevance of unknown writes is bounded there), many unknown writes. */
const randomReadWriteHistory = fc
  .array(
    fc.record({
      write: fc.boolean(),
      value: fc.constantFrom<RegisterValue>(null, 0, 1, 2),
      call: fc.integer({ min: 0, max: 20 }),
      length: fc.integer({ min: 0, max: 12 }),
      pending: fc.integer({ min: 0, max: 2 }).map((n) => n === 0),
    }),
    { maxLength: 7 },
  )
  .map((raw) => raw.map(({ write: w, value, call, length, pending }): RegOp => (w ? write(call, pending ? undefined : call + length, value ?? 0) : read(call, call + length, value))));

describe('properties', () => {
  test.prop([sequentialRun])('a history stretched from a sequential run is linearizable', (ops) => {
    const result = checkLinearizability(etcdRegister(), [...ops].reverse());
    expect(result.verdict).toBe('linearizable');
  });

  test.prop([sequentialRun, fc.nat(), fc.integer({ min: 1, max: 30 })])('adding a read of a value never written makes it not linearizable', (ops, where, width) => {
    const call = where % (10 * ops.length + 10);
    const impossible = read(call, call + width, 99);
    const result = checkLinearizability(etcdRegister(), [...ops, impossible]);
    expect(result.verdict).toBe('not-linearizable');
  });

  test.prop([randomRegisterHistory])('agrees with a brute-force search over every order on small random histories', (ops) => {
    const expected = bruteForce(ops) ? 'linearizable' : 'not-linearizable';
    expect(checkLinearizability(etcdRegister(), ops).verdict).toBe(expected);
  });

  // LIN-1: bounding how long unknown outcomes matter (Model.relevance) never changes a verdict.
  test.prop([randomLockHistory], { numRuns: 400 })('lease lock: the bounded search, the unbounded one and a brute force agree (unknown acquires, extends, releases)', (ops) => {
    const expected = bruteForce(ops, leaseLock()) ? 'linearizable' : 'not-linearizable';
    expect(checkLinearizability(unbounded(leaseLock()), ops).verdict).toBe(expected);
    expect(checkLinearizability(leaseLock(), ops).verdict).toBe(expected);
  });

  // Unknown acquires taking a lease over (a granted lease first), unknown releases: half the outcomes unknown.
  const takeoverHistory = fc.tuple(fc.constantFrom(10, 20, 30), randomLockHistory).map(([until, ops]): LockOp[] => [
    { process: 'first', call: 0, return: 1, input: { f: 'acquire', owner: 'x', validUntil: until, latest: 1 } },
    ...ops,
  ]);
  test.prop([takeoverHistory], { numRuns: 600 })(
    'lease lock: the search agrees with a brute force over instants written from the spec (an unknown takeover binds everything after it)',
    (ops) => {
      // An unknown acquire taking a lease over, then its unknown release: what follows still came after the lease's deadline.
      expect(checkLinearizability(leaseLock(), ops).verdict).toBe(lockHistoryLinearizable(ops) ? 'linearizable' : 'not-linearizable');
    },
  );

  test.prop([randomReadWriteHistory], { numRuns: 400 })('register: the bounded search, the unbounded one and a brute force agree (unknown writes)', (ops) => {
    for (const model of [etcdRegister(), register(0)]) {
      const expected = bruteForce(ops, model) ? 'linearizable' : 'not-linearizable';
      expect(checkLinearizability(unbounded(model), ops).verdict, model.name).toBe(expected);
      expect(checkLinearizability(model, ops).verdict, model.name).toBe(expected);
    }
  });

  const kvHistory = fc.array(
    fc.record({
      f: fc.constantFrom('get', 'put', 'append'),
      key: fc.constantFrom('a', 'b'),
      value: fc.constantFrom('', 'x', 'y', 'xy'),
      call: fc.integer({ min: 0, max: 40 }),
      length: fc.integer({ min: 0, max: 15 }),
    }),
    { maxLength: 9 },
  );
  test.prop([kvHistory])('partitioning a kv store by key never changes the verdict', (raw) => {
    const ops = raw.map(({ f, key, value, call, length }, i): Operation<KvInput, KvOutput> => ({
      process: i,
      call,
      return: call + length,
      input: f === 'get' ? { f, key } : { f, key, value },
      ...(f === 'get' ? { output: { value } } : {}),
    }));
    expect(checkLinearizability(kvStore(), ops).verdict).toBe(checkLinearizability(kvStoreUnpartitioned(), ops).verdict);
  });
});

/**
 * Small timings for the differential tests: calls and returns on a few instants (equal times, everything overlapping),
 * and unknown outcomes in both forms (no return, return Infinity).
 */
const smallTiming = fc.record({ call: fc.integer({ min: 0, max: 8 }), length: fc.integer({ min: 0, max: 6 }), unknown: fc.constantFrom(false, false, false, 'absent', 'infinite') });
type SmallTiming = typeof smallTiming extends fc.Arbitrary<infer T> ? T : never;
const timed = ({ call, length, unknown }: SmallTiming, process: number) => ({ process, call, ...(unknown === 'absent' ? {} : { return: unknown === 'infinite' ? Infinity : call + length }) });

describe('differential: every model against a brute force over every order (up to 6 operations)', () => {
  const agree = <S, I, O>(ops: readonly Operation<I, O>[], model: () => Model<S, I, O>, oracle: () => Model<unknown, I, O> = model as () => Model<unknown, I, O>): void => {
    const expected = bruteForce(ops, oracle()) ? 'linearizable' : 'not-linearizable';
    expect(checkLinearizability(model(), ops).verdict).toBe(expected);
    expect(checkLinearizability(unbounded(model()), ops).verdict).toBe(expected);
  };
  const value = fc.constantFrom<RegisterValue>(null, 0, 1);
  const registerOps = fc.array(fc.tuple(smallTiming, fc.constantFrom('read', 'write', 'cas'), value, value, fc.constantFrom(undefined, true, false)), { maxLength: 6 }).map((raw) =>
    raw.map(([t, f, a, b, ok], i): RegOp => {
      const base = timed(t, i);
      const known = t.unknown === false;
      if (f === 'read') return { ...base, input: { f }, ...(known ? { output: { value: a } } : {}) };
      if (f === 'write') return { ...base, input: { f, value: a } };
      return { ...base, input: { f, from: a, to: b }, ...(known && ok !== undefined ? { output: { ok } } : {}) };
    }),
  );
  test.prop([registerOps], { numRuns: 300 })("Knossos's cas-register (nil reads match anything), from 0 and from nil; the etcd register", (ops) => {
    agree(ops, () => casRegister(0));
    agree(ops, () => casRegister(null));
    agree(ops, etcdRegister);
  });
  test.prop([registerOps.map((ops) => ops.filter((o) => o.input.f !== 'cas'))], { numRuns: 300 })("Knossos's register, from 0 and from nil", (ops) => {
    agree(ops, () => register(0));
    agree(ops, () => register(null));
  });
  test.prop([fc.array(fc.tuple(smallTiming, fc.constantFrom('acquire', 'release')), { maxLength: 6 })], { numRuns: 300 })('the mutex', (raw) => {
    agree(
      raw.map(([t, f], i): Operation<MutexInput, unknown> => ({ ...timed(t, i), input: { f } })),
      mutex,
    );
  });
  const key = fc.constantFrom('x', 'y');
  test.prop([fc.array(fc.tuple(smallTiming, fc.array(fc.tuple(fc.constantFrom('read', 'write'), key, value), { minLength: 1, maxLength: 2 })), { maxLength: 6 })], { numRuns: 300 })(
    'the multi-register (transactions applied atomically)',
    (raw) => {
      const ops = raw.map(([t, micro], i): Operation<MultiRegisterInput, MultiRegisterOutput> => {
        const completed = micro.map(([f, k, v]): MicroOp => ({ f, key: k, value: v }));
        // Invoked with its reads unknown (nil), completed with what they read.
        return { ...timed(t, i), input: completed.map((m) => (m.f === 'read' ? { ...m, value: null } : m)), ...(t.unknown === false ? { output: completed } : {}) };
      });
      agree(ops, () => multiRegister({ x: 0, y: 0 }));
    },
  );
  test.prop([fc.array(fc.tuple(smallTiming, fc.constantFrom('get', 'put', 'append'), key, fc.constantFrom('', 'a', 'b', 'ab')), { maxLength: 6 })], { numRuns: 300 })(
    'the kv store, partitioned by key and not, against a brute force over the whole store',
    (raw) => {
      const ops = raw.map(([t, f, k, v], i): Operation<KvInput, KvOutput> => ({ ...timed(t, i), input: f === 'get' ? { f, key: k } : { f, key: k, value: v }, ...(f === 'get' && t.unknown === false ? { output: { value: v } } : {}) }));
      agree(ops, kvStore, kvStoreUnpartitioned);
      agree(ops, kvStoreUnpartitioned);
    },
  );
});

describe("lockcheck's own histories", () => {
  it("bounds the unknown operations of one owner once per owner: 40,000 unknown releases and acquires of one owner in linear time", () => {
    // One owner (a hostname, say) with a grant and a release whose reply was lost, 20,000 times; then 20,000 acquires whose
    // replies were lost. Each unknown operation looked at all of its owner's operations: 4 x 10^9 steps before the search began.
    const n = 20_000;
    const ops: Operation<LeaseLockInput, unknown>[] = [];
    for (let i = 0; i < n; i++) {
      ops.push({ process: 0, call: 4 * i, return: 4 * i + 1, input: { f: 'acquire', owner: 'host', validUntil: 4 * i + 3, latest: 4 * i + 1 } });
      ops.push({ process: 0, call: 4 * i + 2, input: { f: 'release', owner: 'host' } });
    }
    for (let i = 0; i < n; i++) ops.push({ process: 1, call: 4 * n + i, input: { f: 'acquire', owner: 'host', validUntil: Infinity, latest: Infinity } });
    let bounds: readonly (number | undefined)[] = [];
    // 0.4 s of CPU here (10 s of wall time at load 38); 65 s before, once per operation.
    expect(cpuTimeOf(() => (bounds = leaseLockRelevance(ops)))).toBeLessThan(5_000);
    // A lost release matters until the first grant invoked after its owner's last grant returned: none here, so up to the
    // last grant returning before the owner's latest deadline.
    expect(bounds[1]).toBe(4 * (n - 1) + 1);
    expect(bounds[2 * n - 1]).toBe(4 * (n - 1) + 1);
    // A lost acquire called after every release of its owner could matter can never matter.
    expect(bounds[2 * n]).toBe(-Infinity);
  });

  it('keeps a lost release while an unknown acquire that would otherwise take its lease over binds what its owner did next', () => {
    // c holds a session lock (6..9); b's acquire and c's release are lost; b extends (19..31, until 25). Had c's release not
    // landed, b's acquire could take over only c's lease (it has none: never), so b's extend needs the release: it must stay
    // a candidate until b's extend returns, not be forgotten after the last known grant (9).
    const ops: LockOp[] = [
      { process: 0, call: 19, return: 31, input: { f: 'extend', owner: 'b', validUntil: 25, latest: 31 } },
      { process: 1, call: 16, input: { f: 'acquire', owner: 'c', validUntil: Infinity, latest: Infinity } },
      { process: 2, call: 18, input: { f: 'release', owner: 'c', latest: Infinity } },
      { process: 3, call: 15, input: { f: 'acquire', owner: 'b', validUntil: Infinity, latest: Infinity } },
      { process: 4, call: 8, return: 9, input: { f: 'acquire', owner: 'c', validUntil: Infinity, latest: 9 } },
    ];
    expect(bruteForce(ops, leaseLock())).toBe(true);
    expect(checkLinearizability(leaseLock(), ops).verdict).toBe('linearizable');
    // A lease: an unknown acquire taking it over took effect after its deadline (20), which b's extend (returned at 12) precedes.
    const lease: LockOp[] = [
      { process: 0, call: 0, return: 1, input: { f: 'acquire', owner: 'c', validUntil: 20, latest: 1 } },
      { process: 1, call: 2, input: { f: 'release', owner: 'c', latest: Infinity } },
      { process: 2, call: 3, input: { f: 'acquire', owner: 'b', validUntil: Infinity, latest: Infinity } },
      { process: 2, call: 10, return: 12, input: { f: 'extend', owner: 'b', validUntil: 30, latest: 12 } },
      { process: 3, call: 40, return: 41, input: { f: 'acquire', owner: 'a', validUntil: 50, latest: 41 } },
    ];
    expect(bruteForce(lease, leaseLock())).toBe(true);
    expect(checkLinearizability(leaseLock(), lease).verdict).toBe('linearizable');
    // Without c's lost release, b's extend cannot follow b's acquire: not linearizable.
    const withoutRelease = lease.filter((o) => o.input.f !== 'release');
    expect(bruteForce(withoutRelease, leaseLock())).toBe(false);
    expect(checkLinearizability(leaseLock(), withoutRelease).verdict).toBe('not-linearizable');
  });

  const ev = (e: object): History[number] => e as History[number];
  it('finds two holders at once in a lock history, and none when the first lease ran out', () => {
    const history: History = [
      ev({ type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 }),
      ev({ type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', owner: 'a', token: '1', validUntil: 100 }),
      ev({ type: 'invoke', process: 1, time: 10, op: 'acquire', resource: 'r', ttlMs: 100 }),
      ev({ type: 'ok', process: 1, time: 11, op: 'acquire', resource: 'r', owner: 'b', token: '2', validUntil: 110 }),
    ];
    const [lock] = checkHistoryLinearizability(history);
    expect(lock?.object).toBe('lock r');
    expect(lock?.result.verdict).toBe('not-linearizable');
    const expired = history.map((e, i) => (i >= 2 ? ev({ ...e, time: (e as { time: number }).time + 200 }) : e));
    expect(checkHistoryLinearizability(expired)[0]?.result.verdict).toBe('linearizable');
  });

  it('judges each store register on its own; a failed write did not happen, an unknown one may have', () => {
    const history: History = [
      ev({ type: 'invoke', process: 0, time: 0, op: 'write', resource: 'r', key: 'k', value: '1' }),
      ev({ type: 'fail', process: 0, time: 1, op: 'write', resource: 'r', key: 'k', value: '1', reason: 'stale-token' }),
      ev({ type: 'invoke', process: 1, time: 2, op: 'write', resource: 'r', key: 'k', value: '2' }),
      ev({ type: 'info', process: 1, time: 3, op: 'write', resource: 'r', key: 'k', value: '2', reason: 'timeout' }),
      ev({ type: 'invoke', process: 2, time: 4, op: 'read', resource: 'r', key: 'k' }),
      ev({ type: 'ok', process: 2, time: 5, op: 'read', resource: 'r', key: 'k', value: '2' }),
    ];
    expect(checkHistoryLinearizability(history).map((v) => [v.object, v.result.verdict])).toEqual([['register r/k', 'linearizable']]);
    const sawFailed = history.map((e, i) => (i === 5 ? ev({ ...e, value: '1' }) : e));
    expect(checkHistoryLinearizability(sawFailed)[0]?.result.verdict).toBe('not-linearizable');
  });

  it('rejects a completion with nothing in flight with a typed error', () => {
    const bad: History = [ev({ type: 'ok', process: 0, time: 0, op: 'read', resource: 'r', key: 'k', value: null })];
    expect(() => checkHistoryLinearizability(bad)).toThrow(HistoryShapeError);
  });
});

describe('corpus parsers', () => {
  it('read EDN and fail with a typed error naming the line', () => {
    expect(readEdn('[{:a 1, :b "x\\"y"} #{:k} (nil true) ; note\n 12N]')).toBeDefined();
    const err = (() => {
      try {
        readEdn('[{:a 1}\n {:b 2]');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(CorpusParseError);
    expect((err as CorpusParseError).line).toBe(2);
  });
  it('fail with a typed error, not a stack overflow, on forms nested 100,000 deep (open, closed, or discarded)', () => {
    for (const text of ['['.repeat(100_000), '['.repeat(100_000) + ']'.repeat(100_000), '#_'.repeat(100_000) + '1 2']) {
      expect(() => readEdn(text)).toThrow(/forms nested deeper than 256/);
      expect(() => readEdn(text)).toThrow(CorpusParseError);
    }
    expect(readEdn('['.repeat(200) + ']'.repeat(200))).toBeDefined();
  });
  it('refuse what a Map or a number would change silently: a map key or set element twice, a number past the doubles, a process that is no non-negative integer', () => {
    const lineOf = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return e instanceof CorpusParseError ? [e.line, e.reason] : e;
      }
      return undefined;
    };
    expect(lineOf(() => readEdn('[{:process 1 :type :invoke}\n {:process 1 :type :invoke :process 2}]'))).toEqual([2, 'map key :process given twice']);
    expect(lineOf(() => readEdn('[#{:a :b :a}]'))).toEqual([1, 'a set holds an element twice']);
    expect(lineOf(() => readEdn('[1.5e400]'))).toEqual([1, "number '1.5e400' out of range"]);
    for (const p of ['1.5', '-1', '99999999999999999999']) {
      expect(() => parseKnossosHistory(`[{:process ${p} :type :invoke :f :read}]`)).toThrow(/:process must be a non-negative integer or a keyword/);
    }
  });
  it('reject an etcd log line of no known shape, and a completion with no invoke', () => {
    expect(() => parseEtcdLog('INFO  jepsen.util - 1\t:invoke\t:frob\tnil\n')).toThrow(CorpusParseError);
    expect(() => parseEtcdLog('INFO  jepsen.util - 1\t:ok\t:read\t3\n')).toThrow(/no open invoke/);
  });
  it('keep Knossos semantics: :fail drops the operation, :info leaves it pending, nemesis events are ignored', () => {
    const ops = parseKnossosHistory(
      '[{:process 0 :type :invoke :f :write :value 1} {:process :nemesis :type :info :f :start} {:process 0 :type :fail :f :write :value 1}' +
        ' {:process 1 :type :invoke :f :write :value 2} {:process 1 :type :info :f :write :value 2}' +
        ' {:process 2 :type :invoke :f :read :value nil} {:process 2 :type :ok :f :read :value 2}]',
    );
    expect(ops.map((o) => [o.process, o.f, o.return])).toEqual([
      [1, 'write', undefined],
      [2, 'read', 6],
    ]);
    expect(() => parseKnossosHistory('[{:process 0 :type :ok :f :read :value 1}]')).toThrow(CorpusParseError);
  });
});
