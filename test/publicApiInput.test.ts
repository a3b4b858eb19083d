import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Design } from '../model/design.ts';
import { InvalidInputError } from '../model/errors.ts';
import { testTempDir } from './tempDirs.ts';

/**
 * Every public function and class of the package's entries but lockcheck/model
 * (test/modelApiInput.test.ts) answers a wrong-typed argument with a typed
 * error (InvalidInputError naming the argument, or the entry's own error
 * class), never a TypeError, RangeError or ReferenceError from inside the
 * library, and never a promise left pending. No server is started: junk is
 * refused before any I/O.
 */

const ENTRIES = [
  '../conformance/index.ts',
  '../conformance/suite.ts',
  '../conformance/adapter.ts',
  '../conformance/kit.ts',
  '../conformance/history/index.ts',
  '../impl/index.ts',
  '../impl/redis/index.ts',
  '../impl/postgres/index.ts',
  '../impl/etcd/index.ts',
  '../impl/zookeeper/index.ts',
];

const JUNK: readonly [string, unknown][] = [
  ['null', null],
  ['42', 42],
  ["'x'", 'x'],
  ['{ bogus: 1 }', { bogus: 1 }],
  ['[]', []],
  ['a Symbol', Symbol('s')],
  ['1n', 1n],
  ['NaN', Number.NaN],
  ['a function', () => 'junk'],
  ['an object without a prototype', Object.create(null) as unknown],
];

/** Not called by the sweep: it installs the library clock process-wide whatever it is given (it takes no argument). */
const NOT_SWEPT = new Set(['installLibraryClock']);
/**
 * An empty options object, prototype or not, is no junk where every option is optional: PostgresServer.start
 * would start a server (the sweep must start none).
 */
const VALID_EMPTY = new Set(['PostgresServer.start']);
/** InvalidInputError's own constructor is lockcheck/model's (model/errors.ts), swept in test/modelApiInput.test.ts. */
const OWNED_ELSEWHERE = new Set(['InvalidInputError']);

const CRASHES = [TypeError, RangeError, ReferenceError, SyntaxError];
const BOUND_MS = 2_000;

const isClass = (f: unknown): boolean => typeof f === 'function' && /^class[\s{]/.test(Function.prototype.toString.call(f));

/** What a call did: 'ok' (returned, resolved, or a typed error), or what escaped. */
async function outcome(call: () => unknown): Promise<string> {
  let result: unknown;
  try {
    result = call();
  } catch (e) {
    return judged(e);
  }
  if (!(result instanceof Promise)) return 'ok';
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<string>((resolve) => {
    timer = setTimeout(() => resolve(`still pending after ${BOUND_MS} ms`), BOUND_MS);
  });
  try {
    return await Promise.race([result.then(() => 'ok', judged), bound]);
  } finally {
    clearTimeout(timer);
  }
}

function judged(e: unknown): string {
  if (CRASHES.some((c) => e?.constructor === c)) return `${(e as Error).constructor.name}: ${(e as Error).message}`;
  return 'ok';
}

/** Each public callable of `mod`: its functions, its classes (called with new) and their static methods. */
function callables(mod: Record<string, unknown>): [string, (...args: unknown[]) => unknown][] {
  const out: [string, (...args: unknown[]) => unknown][] = [];
  for (const [name, value] of Object.entries(mod)) {
    if (typeof value !== 'function' || NOT_SWEPT.has(name)) continue;
    if (!isClass(value)) {
      out.push([name, value as (...args: unknown[]) => unknown]);
      continue;
    }
    if (!OWNED_ELSEWHERE.has(name)) out.push([`new ${name}`, (...args) => new (value as new (...a: unknown[]) => unknown)(...args)]);
    for (const key of Object.getOwnPropertyNames(value)) {
      const member = (value as unknown as Record<string, unknown>)[key];
      if (typeof member === 'function' && !isClass(member)) out.push([`${name}.${key}`, (...args) => (member as (...a: unknown[]) => unknown).apply(value, args)]);
    }
  }
  return out;
}

describe('the public API on junk arguments', () => {
  // A safety net: the sweep must start no server, but should one slip through it is stopped all the same.
  afterAll(async () => {
    const kit = await import('../conformance/kit.ts');
    await Promise.all([kit.stopAllPostgresServers(), kit.stopAllRedisServers()]);
  });

  it.each(ENTRIES)('%s: nothing escapes as a TypeError, RangeError or ReferenceError, nothing hangs', async (entry) => {
    const mod = (await import(entry)) as Record<string, unknown>;
    const escaped: string[] = [];
    for (const [name, fn] of callables(mod)) {
      for (const [shown, junk] of JUNK) {
        if (VALID_EMPTY.has(name) && typeof junk === 'object' && junk !== null && !Array.isArray(junk) && Object.keys(junk).length === 0) continue;
        // The junk alone, then in every position (an optional options object or a clock given junk as well).
        for (const args of [[junk], [junk, junk, junk, junk, junk]]) {
          const what = await outcome(() => fn(...args));
          if (what !== 'ok') escaped.push(`${name}(${args.map(() => shown).join(', ')}): ${what}`);
        }
      }
    }
    expect(escaped).toEqual([]);
  });
});

describe('junk in each position of a call that is right otherwise', async () => {
  const kit = await import('../conformance/kit.ts');
  const lc = await import('../conformance/index.ts');
  const lock = await import('../impl/index.ts');
  const history = await import('../conformance/history/index.ts');
  const { designs } = await import('../model/index.ts');
  const parent = testTempDir('lockcheck-apiinput-');
  const events = [
    { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
    { type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', owner: 'a', token: '1' },
  ];
  const report = history.checkHistory(events as never);
  // Its timers fire at once: a sleep of any length given it ends.
  const clock = { now: () => 0, schedule: (_at: number, fire: () => void) => (queueMicrotask(fire), () => undefined) };
  const cluster = { nodes: [{ url: 'redis://127.0.0.1:1' }], store: { url: 'redis://127.0.0.1:1' }, persistence: 'unknown', stop: async () => undefined };
  const target = { url: 'postgres://127.0.0.1:1/x' };
  // [name, the call, its right arguments]: each position in turn takes each junk value, the others stay right.
  const CALLS: readonly [string, (...a: unknown[]) => unknown, readonly unknown[]][] = [
    ['realRedisBackend', kit.realRedisBackend as never, [cluster, designs.redisSingle(), 'strict', { name: 'r' }]],
    ['realPostgresBackend', kit.realPostgresBackend as never, [target, designs.pgSession(), 'strict', { name: 'p' }]],
    ['startRedisRun', kit.startRedisRun as never, [cluster, designs.redisSingle(), { clients: 1 }]],
    ['underOwnNames', kit.underOwnNames as never, [{ ...target, process: { crash: async () => undefined, restart: async () => undefined } }, async () => ({})]],
    ['onClientClock', kit.onClientClock as never, [clock, () => 1]],
    ['onlyFaults', kit.onlyFaults as never, [{}, ['pause']]],
    ['checkBackendApi', lc.checkBackendApi as never, [{}, 'the backend']],
    ['sleep', lock.sleep as never, [clock, 1, new AbortController().signal]],
    ['withTimeout', lock.withTimeout as never, [clock, 1, 'w', Promise.resolve(1)]],
    ['historyReportHtml', history.historyReportHtml as never, [events, report, 'title']],
    // A relative directory (the junk 'x' is a fine one) is made under the test's own temporary directory, never in the checkout.
    ['writeHistoryReport', (dir, ...rest) => history.writeHistoryReport((typeof dir === 'string' && dir !== '' ? join(parent, dir) : dir) as never, ...(rest as [never, never, never])), [join(parent, 'out'), events, report, 'title']],
    ['new FaultNotOfferedError', (...a) => new lc.FaultNotOfferedError(...(a as [never, never])), ['b', 'pause']],
    ['new AdapterError', (...a) => new lc.AdapterError(...(a as [never, never, never])), ['b', 'start()', 'failed']],
    ['new TimeoutError', (...a) => new lock.TimeoutError(...(a as [never, never])), ['call', 5]],
    ['new ConnectionConfigError', (...a) => new lock.ConnectionConfigError(...(a as [never, never, never])), ['tls', 'm', {}]],
    ['new ServerRefusedError', (...a) => new lock.ServerRefusedError(...(a as [never, never, never, never])), ['schema', '42P01', 'm', {}]],
    ['new LeaseLostError', (...a) => new lock.LeaseLostError(...(a as [never, never])), ['expired', 'r']],
    ['LeaseLostError.of', (...a) => lock.LeaseLostError.of(...(a as [never, never])), ['expired', 'r']],
    ['new LockNotAcquiredError', (...a) => new lock.LockNotAcquiredError(...(a as [never, never])), ['r', 'held']],
    ['new ReplicationError', (...a) => new lock.ReplicationError(...(a as [never, never])), [1, 0]],
    ['new TokenOverflowError', (...a) => new lock.TokenOverflowError(...(a as [never])), ['r']],
    ['new HistoryFormatError', (...a) => new history.HistoryFormatError(...(a as [never, never, never])), [1, 'op', 'unknown']],
    ['new EnvironmentError', (...a) => new kit.EnvironmentError(...(a as [never, never])), ['m', 'fix']],
    ['new OutputFileError', (...a) => new lc.OutputFileError(...(a as [never, never, never])), ['exists', '/x', 'm']],
  ];

  it.each(CALLS)('%s: nothing escapes, nothing hangs', async (_name, fn, right) => {
    const escaped: string[] = [];
    for (let i = 0; i < right.length; i++) {
      for (const [shown, junk] of JUNK) {
        const args = right.map((a, k) => (k === i ? junk : a));
        const what = await outcome(() => fn(...args));
        if (what !== 'ok') escaped.push(`argument ${i + 1} ${shown}: ${what}`);
      }
    }
    expect(escaped).toEqual([]);
  });
});

describe("the kit's in-process parts: their methods on junk", async () => {
  const kit = await import('../conformance/kit.ts');
  /** TypeScript-private (not for callers): moveTo, pace, quiesce, add; SimStore's protected passes. */
  const PRIVATE = new Set(['constructor', 'moveTo', 'pace', 'quiesce', 'add', 'passes']);
  const fresh = (): { time: InstanceType<typeof kit.VirtualTime>; parts: [string, object][] } => {
    const time = new kit.VirtualTime();
    const store = new kit.SimStore('strict');
    return { time, parts: [['VirtualTime', time], ['SimNetwork', new kit.SimNetwork(time, () => store)], ['SimStore', store]] };
  };

  it.each(['VirtualTime', 'SimNetwork', 'SimStore'])('%s: nothing escapes, nothing hangs, and time still advances after the junk', async (which) => {
    const escaped: string[] = [];
    const methods = Object.getOwnPropertyNames(Object.getPrototypeOf(fresh().parts.find(([n]) => n === which)![1])).filter((m) => !PRIVATE.has(m));
    expect(methods.length).toBeGreaterThan(2);
    for (const method of methods) {
      for (const [shown, junk] of JUNK) {
        // A number is a fine duration: the sleep waits for virtual time, as it should.
        if (which === 'VirtualTime' && method === 'sleep' && typeof junk === 'number' && !Number.isNaN(junk)) continue;
        for (const args of [[junk], [junk, junk, junk]]) {
          const { time, parts } = fresh();
          const part = parts.find(([n]) => n === which)![1] as Record<string, (...a: unknown[]) => unknown>;
          let what = await outcome(() => part[method]!(...args));
          // Nothing the junk left behind (a timer due at a Symbol, a NaN time) breaks the next advance.
          // (stalled() marks the run out of pace on purpose: its next advance is a TimingError.)
          const target = time.nowMs() + 100;
          if (what === 'ok' && method !== 'stalled') what = await outcome(() => time.advanceTo(target));
          if (what === 'ok' && method !== 'stalled' && time.nowMs() !== target) what = `time stood at ${time.nowMs()} after advancing to ${target}`;
          if (what !== 'ok') escaped.push(`${which}.${method}(${args.map(() => shown).join(', ')}): ${what}`);
        }
      }
    }
    expect(escaped).toEqual([]);
  });
});

/** The error `f` throws or rejects with. */
async function errorOf(f: () => unknown): Promise<unknown> {
  try {
    await f();
  } catch (e) {
    return e;
  }
  throw new Error('did not throw');
}

async function refusal(f: () => unknown, message: RegExp): Promise<void> {
  const e = await errorOf(f);
  expect(e).toBeInstanceOf(InvalidInputError);
  expect((e as InvalidInputError).code).toBe('invalid-config');
  expect((e as Error).message).toMatch(message);
}

describe('the kit (lockcheck/kit)', async () => {
  const kit = await import('../conformance/kit.ts');
  const cluster = { nodes: [{ url: 'redis://127.0.0.1:1' }], store: { url: 'redis://127.0.0.1:1' }, persistence: 'unknown', stop: async () => undefined } as never;
  const redisSingle: Design = { kind: 'redis-single', persistence: 'none', restartDelayMs: 0, driftFactor: 0.01, clockMarginMs: 1000 };

  it('RedisServer.start and PostgresServer.start refuse null options and wrong values by name, before any process', async () => {
    await refusal(() => kit.RedisServer.start(null as never), /^invalid-config: RedisServer options must be an object, got null$/);
    await refusal(() => kit.RedisServer.start({ persistence: 'always' as never }), /persistence must be 'none' or 'aof-always', got "always"/);
    await refusal(() => kit.RedisServer.start({ persistence: 'none', startTimeoutMs: -1 }), /startTimeoutMs must be a positive number of ms, got -1/);
    await refusal(() => kit.RedisServer.start({ persistence: 'none', config: [42 as never] }), /config must be an array of redis.conf lines/);
    await refusal(() => kit.PostgresServer.start(null as never), /^invalid-config: PostgresServer options must be an object, got null$/);
    await refusal(() => kit.PostgresServer.start({ fsync: 'yes' as never }), /fsync must be a boolean, got "yes"/);
    await refusal(() => kit.PostgresServer.start({ settings: { work_mem: null as never } }), /settings\.work_mem must be a string, number or boolean, got null/);
  });

  it('a server is not made with new', async () => {
    await refusal(() => new (kit.RedisServer as unknown as new (o: unknown) => unknown)(null), /made by RedisServer\.start\(options\), not by new RedisServer\(\)/);
    await refusal(() => new (kit.PostgresServer as unknown as new (o: unknown) => unknown)({}), /made by PostgresServer\.start\(options\), not by new PostgresServer\(\)/);
  });

  it('realRedisBackend and realPostgresBackend check the cluster or target, the design, the store and the options', async () => {
    await refusal(() => kit.realRedisBackend(null as never, redisSingle, 'strict'), /^invalid-config: cluster must be a RedisCluster .*, got null$/);
    await refusal(() => kit.realRedisBackend(cluster, { bogus: 1 } as never, 'strict'), /design must be a Design .*, got an object/);
    await refusal(() => kit.realRedisBackend(cluster, { kind: 'pg-session' } as never, 'strict'), /realRedisBackend runs redis-single and redlock designs, not "pg-session"/);
    await refusal(() => kit.realRedisBackend(cluster, redisSingle, 'fenced' as never), /store must be one of unfenced, strict, monotonic, transactional, got "fenced"/);
    await refusal(() => kit.realRedisBackend(cluster, redisSingle, 'strict', null as never), /realRedisBackend options must be an object, got null/);
    await refusal(() => kit.realRedisBackend(cluster, redisSingle, 'strict', { node: 42 as never }), /node must be a function, got 42/);
    await refusal(() => kit.realPostgresBackend({ url: 42 } as never, { kind: 'pg-session', statementTimeoutMs: 1000 } as never, 'strict'), /server must be a PostgresTarget .*, got an object/);
    await refusal(() => kit.realPostgresBackend({ url: 'postgres://h/d' }, { kind: 'pg-session', statementTimeoutMs: 1000 } as never, 'strict', { keepaliveMs: 'x' as never }), /keepaliveMs must be a positive integer number of ms, got "x"/);
    await refusal(() => kit.targetOf({ url: 'postgres://h/d' } as never), /server must be a PostgresServer \(from PostgresServer\.start\), got an object/);
    await refusal(() => kit.underOwnNames({ url: 'postgres://h/d' }, 42 as never), /start must be a function, got 42/);
    await refusal(() => kit.toleranceOn(null as never), /cluster must be a RedisCluster/);
  });

  it('URLs and clusters of URLs: a string first, then the URL checks (ServerUrlError), before any connection', async () => {
    await refusal(() => kit.parseRedisUrl(null as never), /^invalid-config: url must be a URL string, got null$/);
    await refusal(() => kit.parsePostgresUrl(42 as never), /^invalid-config: url must be a URL string, got 42$/);
    await refusal(() => kit.connectRedisCluster('redis://h:1' as never), /urls must be an array of redis:\/\/ URLs, got "redis:\/\/h:1"/);
    await refusal(() => kit.connectRedisCluster(['redis://h:1', null] as never), /urls\[1\] must be a URL string, got null/);
    await refusal(() => kit.connectPostgres(null as never), /url must be a URL string, got null/);
    expect(await errorOf(() => kit.concurrentRedis('x'))).toBeInstanceOf(kit.ServerUrlError);
  });

  it('onClientClock and offClientClock: a clock with now() and schedule(), and a function', async () => {
    await refusal(() => kit.onClientClock({ now: () => 0 } as never, () => 1), /clock must be a MonotonicClock \(with now\(\), schedule\(\)\), got an object without schedule\(\)/);
    await refusal(() => kit.onClientClock({ now: () => 0, schedule: () => () => undefined }, 42 as never), /fn must be a function, got 42/);
    await refusal(() => kit.offClientClock(null as never), /fn must be a function, got null/);
    expect(kit.offClientClock(() => 7)).toBe(7);
  });

  it('fault helpers name the fault kinds and the registry', async () => {
    await refusal(() => kit.faultKindsOf(null as never), /faults must be a FaultInjectors registry .*, got null/);
    await refusal(() => kit.onlyFaults({}, ['pause', 'teleport'] as never), /kinds\[1\] must be a fault kind \(.*\), got "teleport"/);
  });
});

describe('lockcheck', async () => {
  const lc = await import('../conformance/index.ts');

  it('describeFaultKind, tokenBaseArb, textTimeline, htmlTimeline and checkMisconfigurations refuse by name', async () => {
    await refusal(() => lc.describeFaultKind('teleport' as never), /kind must be a fault kind \(advance, .*\), got "teleport"/);
    await refusal(() => lc.tokenBaseArb(5 as never), /below must be a positive bigint .*, got 5/);
    await refusal(() => lc.textTimeline(null as never), /^invalid-config: report must be a RunReport .*, got null$/);
    await refusal(() => lc.htmlTimeline({ backend: 'b', verdict: { kind: 'pass' }, clients: 1e12, nodes: 1, steps: [], findings: [] } as never), /report\.clients must be an integer in \[0, 1000\], got 1000000000000/);
    const e = await errorOf(() => lc.checkMisconfigurations(null as never));
    expect(e).toBeInstanceOf(lc.AdapterApiError);
    expect((e as Error).message).toMatch(/checkMisconfigurations: the backend must be a BackendUnderTest/);
  });

  it('an error class given a Symbol or an unknown fault kind still makes its error', () => {
    expect(new lc.FaultNotOfferedError('b', 'teleport' as never).message).toBe('b takes no teleport fault: no such fault kind');
    expect(new lc.AdapterError(Symbol('b') as never, 'start()', 'failed').message).toBe('adapter Symbol(b): start() failed');
    expect(new lc.AdapterApiError(Symbol('m') as never).message).toBe('Symbol(m)');
  });
});

describe('lockcheck/lock, lockcheck/postgres', async () => {
  const lock = await import('../impl/index.ts');
  const pgEntry = await import('../impl/postgres/index.ts');

  it('sleep and withTimeout reject with InvalidInputError naming the argument', async () => {
    await refusal(() => lock.sleep({ now: () => 0 } as never, 1), /clock must be a MonotonicClock \(with now\(\), schedule\(\)\), got an object without schedule\(\)/);
    await refusal(() => lock.sleep(lock.systemClock, 'x' as never), /ms must be a number of ms in \[0, 2147483647\], got "x"/);
    await refusal(() => lock.sleep(lock.systemClock, 1, {} as never), /signal must be an AbortSignal, got an object/);
    await refusal(() => lock.withTimeout(lock.systemClock, 1, 'w', 42 as never), /work must be a Promise, got 42/);
    await expect(lock.withTimeout(lock.systemClock, 1000, 'w', Promise.resolve(3))).resolves.toBe(3);
  });

  it('ensureSchema refuses a db without query() before sending anything', async () => {
    await refusal(() => pgEntry.ensureSchema({} as never), /db must be a pg Client or Pool \(with query\(\)\), got an object without query\(\)/);
  });

  it('error classes given a Symbol still make their error', () => {
    expect(new lock.TimeoutError(Symbol('call') as never, 5).message).toBe('Symbol(call) timed out after 5 ms');
    expect(new lock.UnavailableError(Symbol('u') as never).message).toBe('Symbol(u)');
    expect(new lock.LockNotAcquiredError(Symbol('r') as never, 'held').message).toBe("could not acquire 'Symbol(r)': held");
  });
});

describe('lockcheck/history: the report functions', async () => {
  const history = await import('../conformance/history/index.ts');
  const events = [
    { type: 'invoke', process: 0, time: 0, op: 'acquire', resource: 'r', ttlMs: 100 },
    { type: 'ok', process: 0, time: 1, op: 'acquire', resource: 'r', owner: 'a', token: '1' },
  ];
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('overallVerdict and historyReportHtml name what is wrong', async () => {
    await refusal(() => history.overallVerdict(null as never), /^invalid-config: checks must be an array of check results .*, got null$/);
    await refusal(() => history.overallVerdict([{ verdict: 'fine' }] as never), /checks\[0\]\.verdict must be one of safe, violation, unknown, skipped, got "fine"/);
    const report = history.checkHistory(events as never);
    await refusal(() => history.historyReportHtml(events as never, null as never), /^invalid-config: report must be a CheckReport \(from checkHistory\), got null$/);
    await refusal(() => history.historyReportHtml(events as never, { ...report, findings: [{ property: 'MUTEX-1', message: 42, events: [] }] } as never), /report\.findings\[0\]\.message must be a string, got 42/);
    expect(await errorOf(() => history.historyReportHtml([{ type: 'nope' }] as never, report))).toBeInstanceOf(history.HistoryFormatError);
    expect(history.historyReportHtml(events as never, report)).toMatch(/^<!doctype html>/i);
  });

  it('writeHistoryReport refuses a bad report before it makes the directory', async () => {
    const parent = mkdtempSync(join(tmpdir(), 'lockcheck-apiinput-'));
    dirs.push(parent);
    const dir = join(parent, 'report');
    await refusal(() => history.writeHistoryReport(dir, events as never, {} as never), /report\.verdict must be one of safe, violation, unknown, got undefined/);
    expect(existsSync(dir)).toBe(false);
    await refusal(() => history.writeHistoryReport(42 as never, events as never, history.checkHistory(events as never)), /dir must be a non-empty string, got 42/);
  });
});
