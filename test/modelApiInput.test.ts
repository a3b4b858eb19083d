import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import * as model from '../model/index.ts';
import type { Command, Design, World } from '../model/index.ts';
import { designs, initialWorld, InvalidInputError, MATRIX_ROWS } from '../model/index.ts';
import { VALID } from './fixtures/modelJunkArgs.ts';

/**
 * `lockcheck/model` is a library too: whatever a caller hands its exported functions (null, a number where a
 * design goes, an options object of the wrong shape, a clock that would never tick), the answer is a result or an
 * InvalidInputError naming the argument, never a TypeError from deep inside, and never a hang. The model is pure
 * and synchronous: nothing here starts a server or waits on time.
 */
const thrown = (f: () => unknown): unknown => {
  try {
    f();
  } catch (e) {
    return e;
  }
  return undefined;
};

const design = designs.redlock({ nodes: 3 });
const world = (): World => initialWorld({ design, store: 'strict', clients: 2 });
const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 };
const row = MATRIX_ROWS[0]!;
const cellOptions = { maxDepth: 1, maxStates: 100 };

describe('every exported function of lockcheck/model on a junk argument', () => {
  // In a child process with a time bound: a call that loops forever (a clock that never advances) cannot be
  // interrupted in this one. The probe prints each call before it makes it, so a hang names its call.
  it('refuses junk in any one argument with an InvalidInputError, or answers; never crashes, never hangs', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/modelJunkProbe.ts'], { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 2 ** 20 });
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    const hung = lines.at(-1) === 'done' ? [] : [`did not finish (${r.signal ?? r.status}${r.stderr ? `: ${r.stderr.slice(0, 300)}` : ''}); last: ${lines.at(-1)}`];
    expect([...hung, ...lines.filter((l) => l.startsWith('crash '))]).toEqual([]);
    expect(lines.filter((l) => l.startsWith('call ')).length).toBeGreaterThan(2000);
    // Two that used to loop forever, refused by name.
    expect(lines).toContain('refused trueTimeOf({"anchorTrueMs":0,"readingMs":0,"driftPpm":-1000000}, 10, 0): invalid-config: trueTimeOf clock.driftPpm must be an integer in [-900000, 9000000], got -1000000');
    expect(lines).toContain('refused exploreByLevels([{}], {"deadlineMs":0}): invalid-config: exploreByLevels runs[0] must be an exploration (startExploration, startCell), got an object');
  });

  it('the valid arguments it starts from are valid (so the junk after them is what is probed)', () => {
    for (const [name, args] of Object.entries(VALID)) {
      const f = (model as unknown as Record<string, (...a: unknown[]) => unknown>)[name]!;
      expect(thrown(() => f(...args)), name).toBeUndefined();
    }
  });
});

const refusal = (f: () => unknown): { code: string; message: string } => {
  const e = thrown(f);
  expect(e).toBeInstanceOf(InvalidInputError);
  return { code: (e as InvalidInputError).code, message: (e as InvalidInputError).message };
};

describe('validateDesign checks every field of a design', () => {
  it.each([
    ['null', null, 'invalid-config: design must be a lock design (an object with kind '],
    ['a number', 42, 'invalid-config: design must be a lock design'],
    ['an array', [], 'invalid-config: design must be a lock design'],
    ['no kind', { nodes: 3 }, "invalid-config: design.kind must be one of 'redis-single', 'redlock', 'redis-replicated', 'pg-session', 'pg-xact', 'etcd-lease', got undefined"],
    ['an unknown kind', { kind: 'zookeeper' }, 'design.kind must be one of'],
    ['a prototype key as kind', { kind: 'toString' }, 'got "toString"'],
    ['redlock nodes as a string', { ...designs.redlock(), nodes: '5' }, 'redlock needs 1..15 nodes, got "5"'],
    ['redlock nodes as a symbol', { ...designs.redlock(), nodes: Symbol('n') }, 'redlock needs 1..15 nodes, got Symbol(n)'],
    ['an unknown persistence', { ...designs.redisSingle(), persistence: 'fsync' }, "redis-single persistence must be one of 'none', 'aof-always', got \"fsync\""],
    ['failedExtend null', { ...designs.redlock(), failedExtend: null }, 'redlock failedExtend must be an object'],
    ['failedExtend.keys unknown', { ...designs.redlock(), failedExtend: { lease: 'kept', keys: 'gone' } }, "redlock failedExtend.keys must be one of 'kept', 'deleted', got \"gone\""],
    ['driftRounding unknown', { ...designs.etcdLease(), driftRounding: 'floor' }, "etcd-lease driftRounding must be one of 'ceil', 'round'"],
    ['clientDeadline unknown', { ...designs.redisSingle(), clientDeadline: 'never' }, "redis-single clientDeadline must be one of 'none'"],
    ['wait as a string', { ...designs.redisReplicated(), wait: 'yes' }, 'redis-replicated wait must be a boolean, got "yes"'],
    ['reentrant true', { ...designs.pgSession(), reentrant: true }, 'pg-session reentrant must be false or absent, got true'],
    ['leaseRenewal unknown', { ...designs.etcdLease(), leaseRenewal: 'grant' }, "etcd-lease leaseRenewal must be one of 'last-request'"],
    ['driftFactor as a string', { ...designs.redisSingle(), driftFactor: '0.01' }, 'driftFactor must be in [0, 1), got "0.01"'],
    ['statementTimeoutMs null', { ...designs.pgXact(), statementTimeoutMs: null }, 'pg-xact statementTimeoutMs must be a positive integer of ms or absent, got null'],
  ])('%s', (_what, value, message) => {
    const r = refusal(() => model.validateDesign(value as never));
    expect(r.code).toBe('invalid-config');
    expect(r.message).toContain(message);
  });

  it('accepts every design the designs helpers make, and every matrix row', () => {
    for (const d of [designs.redisSingle(), designs.redlock(), designs.redisReplicated({ wait: true }), designs.pgSession(), designs.pgXact(), designs.etcdLease({ leaseRenewal: 'last-request' }), ...MATRIX_ROWS.map((r) => r.design)]) {
      expect(model.validateDesign(d)).toBe(d);
    }
  });

  it('the design helpers and rulesOf pass through it: an unknown kind is named, not read', () => {
    for (const f of [model.rulesOf, model.quorum, model.nodeCount, model.hasTtl, model.leaseTerms, model.driftFactor, model.describeDesign, model.replication] as Array<(d: Design) => unknown>) {
      expect(refusal(() => f({ kind: 'consul' } as never)).message).toContain('design.kind must be one of');
      expect(refusal(() => f(null as never)).message).toContain('design must be a lock design');
    }
    // A design of a known kind missing a field is refused, not answered with NaN.
    expect(refusal(() => model.quorum({ kind: 'redlock' } as never)).message).toContain('redlock needs 1..15 nodes, got undefined');
    expect(model.quorum(designs.redlock({ nodes: 5 }))).toBe(3);
  });
});

describe('the entry points name the argument they refuse', () => {
  const w = world();
  it.each([
    ['initialWorld without a config', () => initialWorld(null as never), 'initialWorld config must be a world configuration'],
    ['initialWorld with an unknown store', () => initialWorld({ design, store: 'eventual' as never, clients: 2 }), "store must be one of 'unfenced', 'strict', 'monotonic', 'transactional', got \"eventual\""],
    ['initialWorld with clients as a symbol', () => initialWorld({ design, store: 'strict', clients: Symbol('c') as never }), 'clients must be an integer in [1, 16], got Symbol(c)'],
    ['step on no world', () => model.step(null as never, acquire), 'step world must be a world (as initialWorld or step returned it), got null'],
    ['step of no command', () => model.step(w, 42 as never), 'step command must be a command (an object with a kind), got 42'],
    ['a clock-drift without a target', () => model.step(w, { kind: 'clock-drift', target: null, driftPpm: 0 } as never), 'clock-drift target must be an object { node } or { client }, got null'],
    ['a pause with a null pending write', () => model.step(w, { kind: 'pause', client: 0, pendingWrite: null } as never), 'pause pendingWrite must be an object { resource, value } or absent, got null'],
    ['a pause with a null operation in flight', () => model.step(w, { kind: 'pause', client: 0, inFlight: null } as never), 'pause inFlight must be a command'],
    ['runSchedule with a schedule of null', () => model.runSchedule(w, [null] as never), 'runSchedule commands[0] must be a command (an object with a kind), got null'],
    ['runSchedule with a chooser that is not one', () => model.runSchedule(w, [acquire], 'first' as never), 'runSchedule choose must be a chooser (branches, command) => branch, got "first"'],
    ['runSchedule with a chooser returning junk', () => model.runSchedule(w, [acquire], () => ({}) as never), "runSchedule choose must be a chooser returning one of the step's branches, got an object"],
    ['runScenario with an unknown store', () => model.runScenario(model.SCENARIOS[0]!, 'eventual' as never), 'store must be one of'],
    ['explore without options', () => model.explore(w, [acquire], null as never), 'explore options must be an options object { maxDepth, ... }, got null'],
    ['explore with maxDepth as a string', () => model.explore(w, [acquire], { maxDepth: '3' as never }), 'explore options.maxDepth must be an integer in [0, 2147483647], got "3"'],
    ['explore with a clock that is not a function', () => model.explore(w, [acquire], { maxDepth: 1, clock: 5 as never }), 'explore options.clock must be a function returning ms, or absent, got 5'],
    ['explore with packed as a string', () => model.explore(w, [acquire], { maxDepth: 1, packed: 'no' as never }), 'explore options.packed must be a boolean or absent, got "no"'],
    ['startExploration with a null command', () => model.startExploration(w, [acquire, null as never], { maxDepth: 1 }), 'startExploration alphabet[1] must be a command'],
    ['startExploration with too many commands', () => model.startExploration(w, Array.from({ length: 0x10000 }, () => acquire), { maxDepth: 1 }), 'startExploration alphabet must be at most 65535 commands, got an array of 65536'],
    ['exploreCell with an unknown fault class', () => model.exploreCell(row, row.stores[0]!, 'meteor' as never, cellOptions), "exploreCell faultClass must be one of 'none',"],
    ['startCell without a row', () => model.startCell(null as never, 'strict', 'none', cellOptions), 'startCell row must be a matrix row { label, design, stores }, got null'],
    ['exploreByLevels without a clock', () => model.exploreByLevels([], { deadlineMs: 0 } as never), 'exploreByLevels options.clock must be a function returning ms, got undefined'],
    ['alphabetFor with an alphabet of no clients', () => model.alphabetFor(design, 'none', { ...model.DEFAULT_ALPHABET, clients: 0 }), 'alphabetFor alphabet.clients must be an integer in [1, 16], got 0'],
    ['checkProperties of no events', () => model.checkProperties(null as never, w), 'checkProperties events must be an array of events (a step branch events), got null'],
    ['checkEvents of an unknown event', () => model.checkEvents([{ kind: 'boom' }] as never), 'checkEvents events[0] must be an event of kind granted, write, key-changed, restarted, got an object'],
    ['checkEvents of a restart without counters', () => model.checkEvents([{ kind: 'restarted', node: 0, countersBefore: null, countersAfter: {} }] as never), 'checkEvents events[0].countersBefore must be a record of bigint counters, got null'],
    ['checkEvents of a grant with a number token', () => model.checkEvents([{ kind: 'granted', client: 0, resource: 'r', token: 1, epoch: 1, maxTokenBefore: null }] as never), 'checkEvents events[0].token must be a bigint, got 1'],
    ['derivedProperties of an array', () => model.derivedProperties(['MUTEX-1'] as never, 'strict'), 'derivedProperties found must be a Set of property IDs, got an array of 1'],
    ['brokenProperties of no result', () => model.brokenProperties(null as never), 'brokenProperties result must be a run result { world, steps, violations }, got null'],
    ['canonicalKey with null options', () => model.canonicalKey(w, null as never), 'canonicalKey options must be an options object or absent, got null'],
    ['driftMarginMs of a ttl as a string', () => model.driftMarginMs(design, '100' as never), 'driftMarginMs ttlMs must be an integer number of ms'],
    ['storeFits of an unknown policy', () => model.storeFits(design, 'eventual' as never), 'storeFits policy must be one of'],
    ['holdsValid of an unknown client', () => model.holdsValid(w, 7, 'r'), 'unknown-client: no client 7 (have 2)'],
    ['sameOwner of null', () => model.sameOwner(null as never, { client: 0, attempt: 1 }), 'sameOwner a must be an owner { client, attempt }, got null'],
    ['describeCommand of an unknown kind', () => model.describeCommand({ kind: 'teleport' } as never), 'describeCommand command must be a command of a known kind, got "teleport"'],
    ['describeCommand of a Symbol client', () => model.describeCommand({ kind: 'release', client: Symbol('c') as never, resource: 'r' }), 'describeCommand command.client must be a number, a string or an object, got Symbol(c)'],
    ['describeCommand of a clock-drift without a target', () => model.describeCommand({ kind: 'clock-drift', target: null as never, driftPpm: 0 }), 'describeCommand command.target must be an object { node } or { client }, got null'],
    ['describeOutcome of null', () => model.describeOutcome(null as never), 'describeOutcome outcome must be an outcome (an object with a kind), got null'],
    ['clockAt of a string', () => model.clockAt('0' as never), 'clockAt readingMs must be a finite number of ms in [-9007199254740991, 9007199254740991], got "0"'],
  ])('%s', (_what, f, message) => {
    expect(refusal(f).message).toContain(message);
  });

  it("the events and worlds step makes pass the checks (every scenario's run through the checked functions)", () => {
    let events = 0;
    for (const sc of model.SCENARIOS) {
      for (const store of Object.keys(sc.breaks) as Array<keyof typeof sc.breaks>) {
        let w = initialWorld({ design: sc.design, store, clients: 2 });
        for (const c of sc.steps) {
          const b = model.firstBranch(model.step(w, c), c);
          expect(model.checkProperties(b.events, b.next)).toEqual(model.checkEvents(b.events).concat(model.checkProperties([], b.next)));
          events += b.events.length;
          w = b.next;
        }
      }
    }
    expect(events).toBeGreaterThan(20);
  });

  it('InvalidInputError takes any message, a Symbol included', () => {
    expect(new InvalidInputError('precondition', Symbol('m') as never).message).toBe('precondition: Symbol(m)');
  });

  it('checks at the entry leave the answers as they were', () => {
    const run = model.runScenario(model.SCENARIOS[0]!, 'unfenced');
    expect(model.brokenProperties(run)).toEqual(['STORE-1']);
    expect(model.explore(w, [acquire], { maxDepth: 2 }).states).toBeGreaterThan(1);
    expect(model.describeDesign(design)).toBe('redlock(3 nodes, none)');
  });
});

describe('the input checks every lock client shares say what they were given, whatever it is', () => {
  // String(x) in their messages threw a TypeError for an object without a prototype, and showed '100' and 100n as 100.
  it.each([
    [Object.create(null) as unknown, 'an object'],
    [Symbol('s'), 'Symbol(s)'],
    ['100', '"100"'],
    [100n, '100n'],
  ])('%s', (value, text) => {
    const cases: readonly [() => unknown, string][] = [
      [() => model.checkTtl(value), `invalid-ttl: ttl must be an integer number of ms in [1, 2147483647], got ${text}`],
      [() => model.checkDuration(value, 'retryDelayMs'), `invalid-duration: retryDelayMs must be an integer number of ms in [0, 2147483647], got ${text}`],
      [() => model.checkRetries(value), `precondition: retries must be an integer in [0, 100], got ${text}`],
    ];
    for (const [call, message] of cases) {
      expect(call).toThrow(InvalidInputError);
      expect(call).toThrow(message);
    }
  });
});

describe("the model's exported tables are frozen whole: a caller cannot change the model for everyone", () => {
  /** Every object and array reachable from `v` (functions left as they are: their properties are never read). */
  const unfrozen = (v: unknown, at: string, out: string[] = []): string[] => {
    if (typeof v !== 'object' || v === null) return out;
    if (!Object.isFrozen(v)) out.push(at);
    for (const k of Reflect.ownKeys(v)) unfrozen((v as Record<PropertyKey, unknown>)[k], `${at}.${String(k)}`, out);
    return out;
  };

  it('every object lockcheck/model exports is frozen, every object and array in it too', () => {
    const tables = Object.entries(model).filter(([, v]) => typeof v === 'object' && v !== null);
    expect(tables.map(([k]) => k).sort()).toEqual(
      ['DEFAULT_ALPHABET', 'DESIGN_KINDS', 'EMPTY_CELL', 'FAULT_CLASSES', 'FAULT_CLASS_ALLOWS', 'FAULT_CLASS_TITLES', 'MATRIX_ROWS', 'NO_GHOST', 'PROPERTY_IDS', 'PROPERTY_KINDS', 'PROPERTY_TITLES', 'RULES', 'SCENARIOS', 'STORE_POLICIES', 'designs'].sort(),
    );
    expect(tables.flatMap(([k, v]) => unfrozen(v, k))).toEqual([]);
  });

  it('an edit attempt throws (strict mode) and the model answers as before', () => {
    const w = world();
    const answers = () => ({
      ttl: model.hasTtl(design),
      quorum: model.quorum(design),
      alphabet: model.alphabetFor(design, 'none'),
      label: model.describeDesign(MATRIX_ROWS[0]!.design),
      ghost: model.ghostOf(w, 'r'),
      cell: model.cellOf(w.store, 'r'),
      run: model.runScenario(model.SCENARIOS[0]!, 'unfenced'),
    });
    const before = answers();
    const r = model.RULES as unknown as Record<string, Record<string, unknown>>;
    const edits: Array<() => void> = [
      () => void (r.redlock!.lifetime = 'session'),
      () => void (r.redlock!.nodes = () => 1),
      () => void (r['redis-single'] = r['pg-session']!),
      () => void (model.STORE_POLICIES as string[]).push('eventual'),
      () => void ((model.DEFAULT_ALPHABET as { ttlMs: number }).ttlMs = 1),
      () => void ((model.DEFAULT_ALPHABET.advanceMs as number[])[0] = 1000),
      () => void ((MATRIX_ROWS[0]!.design as { persistence: string }).persistence = 'aof-always'),
      () => void ((model.NO_GHOST as { grants: number }).grants = 5),
      () => void ((model.EMPTY_CELL as { value: string | null }).value = 'x'),
      () => void ((model.SCENARIOS[0]!.steps as unknown[]).length = 0),
      () => void ((model.designs as Record<string, unknown>).redlock = () => ({ kind: 'redis-single' })),
    ];
    for (const edit of edits) expect(edit).toThrow(TypeError);
    expect(answers()).toEqual(before);
    expect(refusal(() => model.storeFits(design, 'eventual' as never)).message).toContain('storeFits policy must be one of');
    expect(model.designs.redlock().kind).toBe('redlock');
  });
});

describe('a design is checked once only when it cannot have changed since', () => {
  it('the designs helpers return frozen designs: an edit throws, the design stays checked', () => {
    const d = designs.redlock({ nodes: 3 });
    expect(Object.isFrozen(d)).toBe(true);
    expect(() => ((d as { nodes: number }).nodes = 0)).toThrow(TypeError);
    expect(model.quorum(d)).toBe(2);
  });

  it('a design a caller can still edit is checked again at every call', () => {
    const d = { ...designs.redlock({ nodes: 3 }) } as { nodes: unknown };
    expect(model.quorum(d as never)).toBe(2);
    d.nodes = '3';
    expect(refusal(() => model.quorum(d as never)).message).toContain('redlock needs 1..15 nodes, got "3"');
    // The same for a world's design: edited in place after initialWorld, it is refused at the next step.
    const mine = { ...designs.redisSingle() } as { persistence: unknown };
    const w = initialWorld({ design: mine as never, store: 'strict', clients: 1 });
    mine.persistence = 'fsync';
    expect(refusal(() => model.step(w, { kind: 'advance', ms: 1 })).message).toContain('step world.config.design: redis-single persistence must be one of');
  });

  it('a frozen design with a getter, or with a failedExtend that is not frozen, is checked again too', () => {
    let nodes: unknown = 3;
    const getter = Object.freeze(Object.defineProperty({ ...designs.redlock({ nodes: 3 }) }, 'nodes', { get: () => nodes, enumerable: true }));
    expect(model.quorum(getter)).toBe(2);
    nodes = '3';
    expect(refusal(() => model.quorum(getter)).message).toContain('redlock needs 1..15 nodes, got "3"');
    const failedExtend = { lease: 'kept', keys: 'kept' };
    const outer = Object.freeze({ ...designs.redlock({ nodes: 3 }), failedExtend }) as Design;
    expect(model.quorum(outer)).toBe(2);
    failedExtend.keys = 'gone';
    expect(refusal(() => model.quorum(outer)).message).toContain("redlock failedExtend.keys must be one of 'kept', 'deleted', got \"gone\"");
  });
});
