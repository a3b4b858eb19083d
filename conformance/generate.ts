import fc from 'fast-check';
import { match } from 'ts-pattern';
import type { Command, Operation } from '../model/command.ts';
import type { Design } from '../model/design.ts';
import { hasTtl, nodeCount, replyTimeoutMs, restartDelayMs, rulesOf, validateDesign } from '../model/design.ts';
import { FAULT_KINDS, isFaultKind } from './faults.ts';
import type { Capabilities, FaultKind } from './adapter.ts';
import { checkObject, knownOptions, refuse } from '../impl/options.ts';

/**
 * Schedules of operations and faults for the lockstep runner. A schedule is
 * an array of chunks: single commands, and short scripts that make the
 * interesting schedules common (a pause across an expiry, a write in flight
 * while another client takes over, a clock step or a crash on one node while
 * it holds a grant). Shrinking removes whole chunks, then commands in them.
 */
/** What scheduleArb draws schedules for. */
export interface ScheduleOptions {
  /** The design whose commands and rules apply (its nodes, ttl, session). */
  readonly design: Design;
  /** The fault kinds drawn (those the backend takes); `advance` is time, drawn anyway. */
  readonly faults: readonly FaultKind[];
  /** Simulated clients, 1..16. */
  readonly clients: number;
  /** Resources (lock names), 1..4. */
  readonly resources: number;
  /** Commands per schedule, at most. */
  readonly maxCommands: number;
  /**
   * The clients bound their waits (default true). False: a library that
   * declares no client-side timeout (LibraryContract.clientTimeout). Its
   * call to a black-holed node, or one answering after a PostgreSQL
   * design's statement timeout, waits for good (declared), so such a run
   * could only stop there unjudged: neither is drawn.
   */
  readonly lateReplies?: boolean;
  /**
   * The shortest ttl drawn (default 5 ms). Ttls reach 55 ms above it; advances
   * reach 70 ms above twice it (80 ms at the default), so a pause outlasts a
   * lease about as often at any floor.
   */
  readonly ttlFloorMs?: number;
  /** Ttls are whole multiples of this (Capabilities.ttlGrainMs), rounded up. Default 1. */
  readonly ttlGrainMs?: number;
  /**
   * Each schedule draws one of these factors and multiplies every duration in
   * it (ttls, advances, retry delays, clock steps; not latencies) by it, so ttls
   * reach from milliseconds to minutes with time advanced in proportion (a
   * drift margin's proportional part then matters). Default [1]; only
   * backends whose clocks the runner drives can take more (TIME_SCALES).
   */
  readonly timeScales?: readonly number[];
  /** The clients have an extend (default true); false (a library without one, LockClient.extend absent): no extend is drawn. */
  readonly extend?: boolean;
}

/** Time scales for backends on clocks the runner drives: ttls of ms, tens, hundreds of ms, seconds and minutes. */
export const TIME_SCALES: readonly number[] = [1, 10, 100, 1000, 4000];

/**
 * The time scales a backend can take: servers on their own real clocks run
 * in real time, at scale 1; so does a design with a delayed restart, whose
 * delay is sized for the unscaled ttls (spec: it must outlast the longest).
 */
export function timeScalesFor(capabilities: Capabilities, design: Design): readonly number[] {
  return capabilities.expiryToleranceMs === undefined && restartDelayMs(design) === 0 ? TIME_SCALES : [1];
}

/**
 * The ttl floor for a backend: on servers with their own clocks a lease
 * must outlast the wider clock margin they need (twice the run's timing
 * tolerance leaves about as much validity as the default leaves at 5 ms).
 */
export function ttlFloorFor(capabilities: Capabilities): number {
  return 5 + 2 * (capabilities.expiryToleranceMs ?? 0);
}

export const RESOURCE_NAMES = ['r0', 'r1', 'r2', 'r3'] as const;

/**
 * Resource name sets a schedule may use instead of RESOURCE_NAMES (each
 * schedule draws one set): names that prefix one another or look like key
 * suffixes and hash tags, non-ASCII (multi-byte UTF-8, a surrogate pair),
 * quotes and backslashes, the longest name allowed (256 characters of a
 * two-byte letter), digits and a blank.
 */
export const AWKWARD_RESOURCE_NAMES: ReadonlyArray<readonly [string, string, string, string]> = [
  ['a', 'a:token', '{a}', 'lock:a'],
  ['☃ snow', '🔒', `quo'te"`, 'back\\slash'],
  ['é'.repeat(256), '1', '10', ' '],
];

/** Most tokens one run can mint per resource: its commands, each acquire up to 4 attempts, with room to spare. */
const TOKEN_HEADROOM = 1000n;
const MAX_TOKEN = 2n ** 63n - 1n;

/**
 * Token bases that cross every edge: each decimal length (10^k for k = 1..18:
 * a comparison of digit strings breaks there), 2^31 and 2^32 (32-bit
 * integers), 2^53 (JS numbers go inexact), and 2^63-1 (the end of the
 * range). A base sits two below its edge, so a run's first grants cross it;
 * clamped so that no run can pass 2^63-1.
 */
export const TOKEN_BASES: readonly bigint[] = [
  0n,
  ...Array.from({ length: 18 }, (_v, k) => 10n ** BigInt(k + 1)),
  2n ** 31n,
  2n ** 32n,
  2n ** 53n,
  MAX_TOKEN,
].map((edge) => {
  const base = edge === 0n ? 0n : edge - 2n;
  return base > MAX_TOKEN - TOKEN_HEADROOM ? MAX_TOKEN - TOKEN_HEADROOM : base;
});

/** Token bases to start counters at; `below` keeps them under a bound (a library whose tokens are JS numbers). */
export function tokenBaseArb(below?: bigint): fc.Arbitrary<bigint> {
  // Above 0 at least: no base fits under 0 or 0, and fast-check would throw on an empty choice.
  if (below !== undefined && (typeof below !== 'bigint' || below <= 0n)) refuse('below', 'a positive bigint (or undefined for every base)', below);
  return fc.constantFrom(...TOKEN_BASES.filter((b) => below === undefined || b < below));
}

/**
 * A command with every duration in it multiplied by `scale` (but latency:
 * real environments delay replies in real time, through a proxy), and
 * resource names mapped by `name`.
 */
export function rescaled(command: Command, scale: number, name: (resource: string) => string): Command {
  const t = (ms: number): number => ms * scale;
  const named = <C extends Command>(c: C): C => ('resource' in c ? { ...c, resource: name(c.resource) } : c);
  return match<Command, Command>(command)
    .with({ kind: 'acquire' }, (a) =>
      named({
        ...a,
        ...(a.ttlMs !== undefined ? { ttlMs: t(a.ttlMs) } : {}),
        ...(a.retryDelayMs !== undefined ? { retryDelayMs: t(a.retryDelayMs) } : {}),
      }),
    )
    .with({ kind: 'extend' }, (e) => named({ ...e, ttlMs: t(e.ttlMs) }))
    .with({ kind: 'release' }, { kind: 'write' }, { kind: 'read' }, (o) => named(o))
    .with({ kind: 'advance' }, (a) => ({ ...a, ms: t(a.ms) }))
    .with({ kind: 'clock-step' }, (c) => ({ ...c, deltaMs: t(c.deltaMs) }))
    .with({ kind: 'pause' }, (p) => ({
      ...p,
      ...(p.pendingWrite !== undefined ? { pendingWrite: { ...p.pendingWrite, resource: name(p.pendingWrite.resource) } } : {}),
      ...(p.inFlight !== undefined ? { inFlight: rescaled(p.inFlight, scale, name) as Operation } : {}),
    }))
    .with({ kind: 'clock-drift' }, { kind: 'resume' }, { kind: 'deliver' }, { kind: 'crash' }, { kind: 'restart' }, { kind: 'replicate' }, { kind: 'partition' }, { kind: 'heal' }, { kind: 'node-delay' }, { kind: 'kill-connection' }, (c) => c)
    .exhaustive();
}

/**
 * The clients' request timeout for one run: drawn (or left to the ttl) when
 * the schedules may slow a node down, so that a client's own timeout, not
 * only the ttl, ends its waits. Without 'slow-node', or for a library that
 * declares no client-side timeout, it is never set, and draws nothing (other
 * schedules replay as before).
 */
export function requestTimeoutArb(faults: readonly FaultKind[], ttlFloorMs = 5, clientTimeout = true): fc.Arbitrary<number | undefined> {
  // A library without a client-side timeout (declared) cannot take one: the model's client then waits for late replies as it does.
  if (!faults.includes('slow-node') || !clientTimeout) return fc.constant(undefined);
  return fc.option(fc.integer({ min: 1, max: ttlFloorMs + 60 }), { nil: undefined, freq: 2 });
}

function writesInTransaction(design: Design): boolean {
  return rulesOf(design).writes === 'at-commit';
}

function range(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from) }, (_v, i) => from + i);
}

const checkScheduleKeys = knownOptions('scheduleArb options', ['design', 'faults', 'clients', 'resources', 'maxCommands', 'lateReplies', 'ttlFloorMs', 'ttlGrainMs', 'timeScales', 'extend']);

/** scheduleArb's options' values (its keys are checkScheduleKeys'): a wrong one is refused by name, not a TypeError inside fast-check. */
function checkScheduleValues(o: Readonly<Record<string, unknown>>): void {
  const int = (name: string, min: number, max: number, required: boolean): void => {
    const v = o[name];
    if ((v !== undefined || required) && (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max)) refuse(name, `an integer in [${min}, ${max}]`, v);
  };
  const d = o.design;
  if (typeof d !== 'object' || d === null || typeof (d as { kind?: unknown }).kind !== 'string') refuse('design', 'a Design (an object with a kind)', d);
  validateDesign(d as Design);
  if (!Array.isArray(o.faults)) refuse('faults', `an array of fault kinds (${FAULT_KINDS.join(', ')})`, o.faults);
  o.faults.forEach((f, i) => {
    if (!isFaultKind(f)) refuse(`faults[${i}]`, `a fault kind (${FAULT_KINDS.join(', ')})`, f);
  });
  int('clients', 1, 16, true);
  int('resources', 1, RESOURCE_NAMES.length, true);
  int('maxCommands', 1, Number.MAX_SAFE_INTEGER, true);
  int('ttlFloorMs', 1, 2 ** 31 - 1, false);
  int('ttlGrainMs', 1, 2 ** 31 - 1, false);
  for (const name of ['lateReplies', 'extend']) if (o[name] !== undefined && typeof o[name] !== 'boolean') refuse(name, 'a boolean', o[name]);
  const scales = o.timeScales;
  if (scales !== undefined && (!Array.isArray(scales) || scales.length === 0 || !Array.from(scales as unknown[]).every((s) => typeof s === 'number' && Number.isFinite(s) && s > 0))) refuse('timeScales', 'a non-empty array of positive numbers', scales);
}

/**
 * A fast-check arbitrary of schedules: command lists for runLockstep, each
 * enabled by the design (no extend without a ttl, faults only of `faults`).
 * Throws
 * InvalidInputError('invalid-config') naming a bad option.
 */
export function scheduleArb(o: ScheduleOptions): fc.Arbitrary<Command[]> {
  checkScheduleKeys(checkObject(o, 'scheduleArb options'));
  checkScheduleValues(o as unknown as Readonly<Record<string, unknown>>);
  const ttl = hasTtl(o.design);
  const has = (f: FaultKind) => o.faults.includes(f);
  const client = fc.integer({ min: 0, max: o.clients - 1 });
  const other = (c: number) => (c + 1) % o.clients;
  const node = fc.integer({ min: 0, max: nodeCount(o.design) - 1 });
  const resource = fc.constantFrom(...RESOURCE_NAMES.slice(0, o.resources));
  const floor = o.ttlFloorMs ?? 5;
  const grain = o.ttlGrainMs ?? 1;
  const ttlMs = fc.integer({ min: floor, max: floor + 55 }).map((ms) => Math.ceil(ms / grain) * grain);
  // With a ttl grain (whole seconds) the ttls dwarf the usual advances: then half of the advances are short
  // (up to 75 ms) and half pass the longest ttl by up to the floor (which holds twice the servers' expiry
  // tolerance), so that a pause or a wait crosses an expiry, late servers included, and a run stays short.
  const longestTtlMs = Math.ceil((floor + 55) / grain) * grain;
  const gapMs =
    o.ttlGrainMs === undefined
      ? // Twice the floor: on servers with their own clocks (floor 5 + 2ε) a pause still outlasts a lease by more than ε about as often as at 5 ms.
        fc.integer({ min: 1, max: 2 * floor + 70 })
      : fc.oneof(fc.integer({ min: 1, max: 75 }), fc.integer({ min: longestTtlMs, max: longestTtlMs + floor }));
  const value = fc.constantFrom('a', 'b', 'c');

  // On PostgreSQL designs a reply may also come around the client's statement timeout: a late one is an unknown outcome (spec 7.4).
  const timeoutMs = o.lateReplies === false ? null : replyTimeoutMs(o.design);
  const latencyMs = fc.oneof(
    fc.constant(0),
    fc.integer({ min: 1, max: 70 }),
    ...(timeoutMs === null ? [] : [fc.integer({ min: Math.max(1, timeoutMs - 5), max: timeoutMs + 50 })]),
  );
  const acquire = (c: fc.Arbitrary<number>, latency: boolean): fc.Arbitrary<Command> =>
    fc
      .record({
        client: c,
        resource,
        ttlMs,
        latencyMs: latency && has('delay') ? latencyMs : fc.constant(0),
        retries: fc.oneof({ weight: 4, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }) }),
        retryDelayMs: fc.integer({ min: 1, max: 20 }),
      })
      .map((a): Command => {
        const base = { kind: 'acquire' as const, client: a.client, resource: a.resource };
        const timing = { ...(a.latencyMs ? { latencyMs: a.latencyMs } : {}), ...(a.retries ? { retries: a.retries, retryDelayMs: a.retryDelayMs } : {}) };
        return ttl ? { ...base, ttlMs: a.ttlMs, ...timing } : { ...base, ...timing };
      });
  // Late replies on every operation: from a few ms to past the ttl, so a reply can outlive the deadline it brings;
  // on PostgreSQL designs also around the statement timeout (a late unlock, commit or statement in a transaction).
  const lateOps = has('latency');
  const lateMs = fc.oneof(
    { weight: 2, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: floor + 70 }) },
    ...(timeoutMs === null ? [] : [{ weight: 1, arbitrary: fc.integer({ min: Math.max(1, timeoutMs - 5), max: timeoutMs + 50 }) }]),
  );
  const late = <O extends Operation>(op: fc.Arbitrary<O>): fc.Arbitrary<O> => (!lateOps ? op : fc.tuple(op, lateMs).map(([o, l]) => (l > 0 ? { ...o, latencyMs: l } : o)));
  const operation: fc.Arbitrary<Operation> = fc.oneof(
    { weight: 4, arbitrary: acquire(client, true) as fc.Arbitrary<Operation> },
    { weight: 3, arbitrary: late(fc.record({ kind: fc.constant('write' as const), client, resource, value })) },
    { weight: 2, arbitrary: late(fc.record({ kind: fc.constant('release' as const), client, resource })) },
    { weight: ttl ? 2 : 0, arbitrary: late(fc.record({ kind: fc.constant('extend' as const), client, resource, ttlMs })) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('read' as const), client, resource }) },
  );
  const advance = gapMs.map((ms): Command => ({ kind: 'advance', ms }));

  const single: Array<fc.WeightedArbitrary<Command[]>> = [
    { weight: 10, arbitrary: operation.map((c) => [c]) },
    { weight: 5, arbitrary: advance.map((c) => [c]) },
  ];
  if (has('clock-step')) single.push({ weight: 1, arbitrary: fc.record({ node, deltaMs: fc.integer({ min: -60, max: 60 }) }).map(({ node: n, deltaMs }) => [{ kind: 'clock-step', node: n, deltaMs } as Command]) });
  if (has('clock-drift')) {
    single.push({
      weight: 1,
      arbitrary: fc
        .record({ target: fc.oneof(client.map((c) => ({ client: c })), node.map((n) => ({ node: n }))), driftPpm: fc.constantFrom(-500_000, -10_000, 0, 10_000, 500_000) })
        .map(({ target, driftPpm }) => [{ kind: 'clock-drift', target, driftPpm } as Command]),
    });
  }
  if (has('crash-restart')) single.push({ weight: 1, arbitrary: node.map((n) => [{ kind: 'crash', node: n } as Command, { kind: 'restart', node: n } as Command]) });
  if (has('partition')) {
    single.push({ weight: 1, arbitrary: fc.record({ client, node }).map((l) => [{ kind: 'partition', ...l } as Command]) });
    single.push({ weight: 1, arbitrary: fc.record({ client, node }).map((l) => [{ kind: 'heal', ...l } as Command]) });
  }
  if (has('kill-connection')) single.push({ weight: 1, arbitrary: client.map((c) => [{ kind: 'kill-connection', client: c } as Command]) });
  // One node slow or a black hole (and back): unlike a cut link, the client learns nothing until its timeout.
  const nodeDelay = fc.oneof(
    ...(o.lateReplies === false ? [] : [fc.constant<number | 'never'>('never')]),
    fc.integer({ min: 1, max: floor + 70 }),
    fc.constant(0),
    // A PostgreSQL server slow around the statement timeout.
    ...(timeoutMs === null ? [] : [fc.integer({ min: Math.max(1, timeoutMs - 5), max: timeoutMs + 50 })]),
  );
  if (has('slow-node')) single.push({ weight: 2, arbitrary: fc.record({ node, ms: nodeDelay }).map(({ node: n, ms }) => [{ kind: 'node-delay', node: n, ms } as Command]) });

  const scripts: Array<fc.WeightedArbitrary<Command[]>> = [];
  // A write whose request the network delays (spec 3, "Delayed requests"): the runner holds it until the client's deliver.
  // Not where writes share the lock's own connection (pg-xact): there a late write is a late reply.
  if (lateOps && !writesInTransaction(o.design)) {
    single.push({ weight: 2, arbitrary: fc.record({ client, resource, value }).map((w) => [{ kind: 'write', ...w, delayed: true } as Command]) });
    single.push({ weight: 2, arbitrary: client.map((c) => [{ kind: 'deliver', client: c } as Command]) });
    if (o.clients > 1) {
      // Kleppmann's delayed packet: checked under a valid lease, it lands after the lease ended and the next holder wrote.
      scripts.push({
        weight: 3,
        arbitrary: fc.tuple(acquire(client, false), value, advance, acquire(fc.constant(0), false)).map(([first, v, gap, second]) => {
          const a = first as Extract<Command, { kind: 'acquire' }>;
          const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
          return [
            a,
            { kind: 'write', client: a.client, resource: a.resource, value: v, delayed: true },
            gap,
            b,
            { kind: 'write', client: b.client, resource: a.resource, value: 'new' },
            { kind: 'deliver', client: a.client },
            { kind: 'read', client: b.client, resource: a.resource },
          ];
        }),
      });
    }
  }
  if (has('pause') && o.clients > 1) {
    // A pause across an expiry, with the write checked before it and sent after it.
    scripts.push({
      weight: 3,
      arbitrary: fc.tuple(acquire(client, false), advance, value, acquire(fc.constant(0), false), value).map(([first, gap, v1, second, v2]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
        return [
          a,
          { kind: 'pause', client: a.client, pendingWrite: { resource: a.resource, value: v1 } },
          gap,
          b,
          { kind: 'write', client: b.client, resource: a.resource, value: v2 },
          { kind: 'resume', client: a.client },
          { kind: 'read', client: b.client, resource: a.resource },
        ];
      }),
    });
    // An operation in flight while another client takes over.
    scripts.push({
      weight: 3,
      arbitrary: fc
        .tuple(acquire(client, false), advance, fc.constantFrom('release', 'write'), value, acquire(fc.constant(0), false))
        .map(([first, gap, kind, v, second]) => {
          const a = first as Extract<Command, { kind: 'acquire' }>;
          const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
          const inFlight: Operation =
            kind === 'write' ? { kind: 'write', client: a.client, resource: a.resource, value: v } : { kind: 'release', client: a.client, resource: a.resource };
          return [
            a,
            gap,
            { kind: 'pause', client: a.client, inFlight },
            gap,
            b,
            { kind: 'write', client: b.client, resource: a.resource, value: 'new' },
            { kind: 'resume', client: a.client },
            { kind: 'read', client: b.client, resource: a.resource },
          ];
        }),
    });
  }
  // Time passing, or a node's clock jumping ahead (its keys expire early), while a client stalls.
  const jolt: fc.Arbitrary<Command> = has('clock-step') ? fc.oneof(advance, fc.record({ node, deltaMs: gapMs }).map(({ node: n, deltaMs }): Command => ({ kind: 'clock-step', node: n, deltaMs }))) : advance;
  if (has('latency') && has('pause') && !ttl && timeoutMs !== null && o.clients > 1) {
    // A statement in flight across its client's pause, the pause shorter or longer than the statement timeout:
    // resumed past it, the client's timer fires before the reply is read and it drops its connection (7.4).
    const around = fc.oneof(gapMs, fc.integer({ min: Math.max(1, timeoutMs - 5), max: timeoutMs + 50 }));
    scripts.push({
      weight: 3,
      arbitrary: fc
        .tuple(acquire(client, false), fc.constantFrom('acquire', 'release', 'write'), lateMs, around, acquire(fc.constant(0), false), value)
        .map(([first, kind, latencyMs, gap, second, v]) => {
          const a = first as Extract<Command, { kind: 'acquire' }>;
          const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
          const timing = latencyMs > 0 ? { latencyMs } : {};
          const inFlight: Operation =
            kind === 'acquire'
              ? { kind: 'acquire', client: a.client, resource: a.resource, ...timing }
              : kind === 'write'
                ? { kind: 'write', client: a.client, resource: a.resource, value: v, ...timing }
                : { kind: 'release', client: a.client, resource: a.resource, ...timing };
          return [
            ...(kind === 'acquire' ? [] : [a]),
            { kind: 'pause', client: a.client, inFlight },
            { kind: 'advance', ms: gap },
            b,
            { kind: 'resume', client: a.client },
            { kind: 'write', client: a.client, resource: a.resource, value: v },
            { kind: 'write', client: b.client, resource: a.resource, value: 'new' },
            { kind: 'read', client: b.client, resource: a.resource },
          ];
        }),
    });
  }
  if (has('latency') && has('pause') && ttl && o.clients > 1) {
    // An acquire's rounds interleave with another client: its votes go out, the client stalls before reading them
    // (and before its write-back), time passes or a node's clock jumps, another client acquires, then the first goes on.
    scripts.push({
      weight: 3,
      arbitrary: fc
        .tuple(acquire(client, true), jolt, acquire(fc.constant(0), false), value)
        .map(([first, gap, second, v]) => {
          const a = first as Extract<Operation, { kind: 'acquire' }>;
          const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
          return [
            { kind: 'pause', client: a.client, inFlight: a },
            gap,
            b,
            { kind: 'resume', client: a.client },
            { kind: 'write', client: a.client, resource: a.resource, value: v },
            { kind: 'write', client: b.client, resource: a.resource, value: 'new' },
            { kind: 'read', client: b.client, resource: a.resource },
          ];
        }),
    });
    // An extension in flight across its client's pause while the lease runs out and another client takes over.
    scripts.push({
      weight: 3,
      arbitrary: fc
        .tuple(acquire(client, false), ttlMs, fc.oneof(fc.constant(0), fc.integer({ min: 1, max: floor + 70 })), advance, acquire(fc.constant(0), false), value)
        .map(([first, extendMs, latencyMs, gap, second, v]) => {
          const a = first as Extract<Command, { kind: 'acquire' }>;
          const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
          const extend: Operation = { kind: 'extend', client: a.client, resource: a.resource, ttlMs: extendMs, ...(latencyMs > 0 ? { latencyMs } : {}) };
          return [
            a,
            { kind: 'pause', client: a.client, inFlight: extend },
            gap,
            b,
            { kind: 'resume', client: a.client },
            { kind: 'write', client: a.client, resource: a.resource, value: v },
            { kind: 'write', client: b.client, resource: a.resource, value: 'new' },
          ];
        }),
    });
  }
  if (has('slow-node') && !ttl) {
    // A slow or silent PostgreSQL server while a lock is taken, written under and released.
    scripts.push({
      weight: 2,
      arbitrary: fc.tuple(nodeDelay, acquire(client, true), value, acquire(fc.constant(0), false)).map(([ms, first, v, second]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        return [
          { kind: 'node-delay', node: 0, ms },
          a,
          { kind: 'write', client: a.client, resource: a.resource, value: v },
          { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource },
          { kind: 'release', client: a.client, resource: a.resource },
          { kind: 'node-delay', node: 0, ms: 0 },
        ];
      }),
    });
  }
  if (has('slow-node') && ttl) {
    // A slow or silent node while a lease is taken, extended and released.
    scripts.push({
      weight: 2,
      arbitrary: fc.tuple(node, nodeDelay, acquire(client, true), ttlMs, acquire(fc.constant(0), false)).map(([n, ms, first, extendMs, second]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        return [
          { kind: 'node-delay', node: n, ms },
          a,
          { kind: 'extend', client: a.client, resource: a.resource, ttlMs: extendMs },
          { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource },
          { kind: 'release', client: a.client, resource: a.resource },
          { kind: 'node-delay', node: n, ms: 0 },
        ];
      }),
    });
  }
  if (has('kill-connection') && has('pause') && o.clients > 1) {
    // The holder pauses with a checked write; its session is ended; someone else takes over; the holder wakes.
    scripts.push({
      weight: 3,
      arbitrary: fc.tuple(acquire(client, false), value, acquire(fc.constant(0), false)).map(([first, v, second]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
        return [
          a,
          { kind: 'pause', client: a.client, pendingWrite: { resource: a.resource, value: v } },
          { kind: 'kill-connection', client: a.client },
          b,
          { kind: 'write', client: b.client, resource: a.resource, value: 'new' },
          { kind: 'release', client: b.client, resource: a.resource },
          { kind: 'resume', client: a.client },
          { kind: 'read', client: b.client, resource: a.resource },
        ];
      }),
    });
  }
  if (has('clock-step')) {
    // A clock jump on one node while it holds a grant, then a contender; then, or not, the first holder acts on the lease
    // its own clock still holds valid: an extension, a release or a write after another took over is where a node's
    // missing owner check shows (an extend without one was found at run 193 of 500 before, by chance).
    const afterwards = fc.constantFrom<'none' | 'extend' | 'release' | 'write'>('none', ...(ttl ? (['extend'] as const) : []), 'release', 'write');
    scripts.push({
      weight: 2,
      arbitrary: fc.tuple(acquire(client, false), node, gapMs, acquire(fc.constant(0), false), afterwards, ttlMs, value).map(([first, n, jump, second, then, extendMs, v]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        const stale: Command[] = match(then)
          .with('none', (): Command[] => [])
          .with('extend', (): Command[] => [{ kind: 'extend', client: a.client, resource: a.resource, ttlMs: extendMs }])
          .with('release', (): Command[] => [{ kind: 'release', client: a.client, resource: a.resource }])
          .with('write', (): Command[] => [{ kind: 'write', client: a.client, resource: a.resource, value: v }])
          .exhaustive();
        return [a, { kind: 'clock-step', node: n, deltaMs: jump }, { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource }, ...stale];
      }),
    });
  }
  if (has('partition') && (has('clock-step') || has('crash-restart')) && nodeCount(o.design) >= 3) {
    // Kleppmann's shape: the holder reaches only a bare majority; one node of it jumps ahead or loses its
    // memory; the next client reaches that node and the ones the holder could not.
    scripts.push({
      weight: 3,
      arbitrary: fc
        .tuple(acquire(client, false), acquire(fc.constant(0), false), gapMs, fc.boolean())
        .map(([first, second, jump, crash]) => {
          const a = first as Extract<Command, { kind: 'acquire' }>;
          const n = nodeCount(o.design);
          const q = Math.floor(n / 2) + 1;
          const b = other(a.client);
          const cut = (c: number, nodes: number[]): Command[] => nodes.map((node): Command => ({ kind: 'partition', client: c, node }));
          const shared = q - 1;
          const fault: Command[] =
            crash && has('crash-restart')
              ? [{ kind: 'crash', node: shared }, { kind: 'restart', node: shared }]
              : has('clock-step')
                ? [{ kind: 'clock-step', node: shared, deltaMs: a.ttlMs! + jump }]
                : [{ kind: 'crash', node: shared }, { kind: 'restart', node: shared }];
          return [
            ...cut(a.client, range(q, n)),
            a,
            ...fault,
            ...cut(b, range(0, shared)),
            { ...(second as Extract<Command, { kind: 'acquire' }>), client: b, resource: a.resource },
            { kind: 'write', client: b, resource: a.resource, value: 'new' },
            { kind: 'write', client: a.client, resource: a.resource, value: 'old' },
          ];
        }),
    });
  }
  if (has('partition') && ttl && nodeCount(o.design) >= 3) {
    // The holder loses touch with a majority while its lease runs: an extension then has no quorum; another client takes over.
    scripts.push({
      weight: 2,
      arbitrary: fc.tuple(acquire(client, false), ttlMs, acquire(fc.constant(0), false)).map(([first, extendMs, second]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        const n = nodeCount(o.design);
        const lost = range(0, n - Math.floor(n / 2));
        return [
          a,
          ...lost.map((node): Command => ({ kind: 'partition', client: a.client, node })),
          { kind: 'extend', client: a.client, resource: a.resource, ttlMs: extendMs },
          { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource },
          ...lost.map((node): Command => ({ kind: 'heal', client: a.client, node })),
        ];
      }),
    });
  }
  if (has('partition') && !ttl && o.clients > 1) {
    // A one-sided partition from a session lock's server (spec 3): the cut holder may release (its outcome unknown) or
    // write on; time passes (keepalive may end the session); another client tries; the link heals.
    scripts.push({
      weight: 3,
      arbitrary: fc
        .tuple(acquire(client, false), fc.constantFrom('release', 'write'), value, advance, advance, acquire(fc.constant(0), false))
        .map(([first, kind, v, gap1, gap2, second]) => {
          const a = first as Extract<Command, { kind: 'acquire' }>;
          const b = { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource };
          const holder: Command = kind === 'release' ? { kind: 'release', client: a.client, resource: a.resource } : { kind: 'write', client: a.client, resource: a.resource, value: v };
          return [a, { kind: 'partition', client: a.client, node: 0 }, holder, gap1, gap2, b, { kind: 'write', client: b.client, resource: a.resource, value: 'new' }, holder, { kind: 'heal', client: a.client, node: 0 }];
        }),
    });
  }
  if (has('crash-restart')) {
    scripts.push({
      weight: 2,
      arbitrary: fc.tuple(acquire(client, false), node, acquire(fc.constant(0), false)).map(([first, n, second]) => {
        const a = first as Extract<Command, { kind: 'acquire' }>;
        return [a, { kind: 'crash', node: n }, { kind: 'restart', node: n }, { ...(second as Extract<Command, { kind: 'acquire' }>), client: other(a.client), resource: a.resource }];
      }),
    });
  }
  const names = [RESOURCE_NAMES, ...AWKWARD_RESOURCE_NAMES];
  const chunks = fc.array(fc.oneof(...single, ...scripts), { maxLength: Math.max(1, Math.ceil(o.maxCommands / 2)) });
  // Scale shrinks towards 1; the name set only within its branch (fc.oneof without cross-shrink): the minimising pass (minimise.ts) maps names back to r0.. .
  return fc
    .tuple(fc.constantFrom(...(o.timeScales ?? [1])), fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: AWKWARD_RESOURCE_NAMES.length }) }), chunks)
    .map(([scale, set, cs]) => {
      const name = (r: string): string => names[set]![RESOURCE_NAMES.indexOf(r as (typeof RESOURCE_NAMES)[number])]!;
      const commands = cs
        .flat()
        .slice(0, o.maxCommands)
        .map((c) => (scale === 1 && set === 0 ? c : rescaled(c, scale, name)))
        .flatMap((c) => (o.extend === false ? withoutExtend(c) : [c]));
      // With latency, statements in flight across a pause longer than the timeout are part of what is drawn; a client
      // with no timeout of its own (declared) is never paused past the model's timeout with a statement in flight.
      const modelTimeoutMs = replyTimeoutMs(o.design);
      if (modelTimeoutMs === null || (timeoutMs !== null && has('latency'))) return commands;
      return noTimeoutWhilePaused(commands, modelTimeoutMs);
    });
}

/** A command for clients without extend: an extend is left out, a pause with an extend in flight is a plain pause. */
export function withoutExtend(c: Command): Command[] {
  if (c.kind === 'extend') return [];
  if (c.kind === 'pause' && c.inFlight?.kind === 'extend') return [{ kind: 'pause', client: c.client }];
  return [c];
}

/**
 * A statement in flight across a pause longer than the statement timeout is
 * not modelled (spec: "Not modelled"): while a client is paused with an
 * operation in flight, time moves on by at most half the timeout (advances
 * cut short, late replies and retry loops trimmed).
 */
function noTimeoutWhilePaused(commands: readonly Command[], timeoutMs: number): Command[] {
  const budget = Math.floor(timeoutMs / 2);
  const inFlight = new Set<number>();
  let spent = 0;
  const out: Command[] = [];
  for (const c of commands) {
    if (c.kind === 'pause' && c.inFlight !== undefined) {
      if (inFlight.size === 0) spent = 0;
      inFlight.add(c.client);
    }
    if (c.kind === 'resume') inFlight.delete(c.client);
    if (inFlight.size > 0 && c.kind === 'advance') {
      const ms = Math.min(c.ms, budget - spent);
      spent += Math.max(0, ms);
      if (ms >= 1) out.push({ ...c, ms });
      continue;
    }
    if (inFlight.size > 0 && c.kind === 'acquire') {
      const latencyMs = Math.min(c.latencyMs ?? 0, 70);
      const waits = (c.retries ?? 0) * (c.retryDelayMs ?? 0);
      const keepsRetries = spent + latencyMs + waits <= budget;
      const { latencyMs: _l, retries: _r, retryDelayMs: _d, ...rest } = c;
      const trimmed = { ...rest, ...(latencyMs > 0 ? { latencyMs } : {}), ...(keepsRetries && c.retries ? { retries: c.retries, retryDelayMs: c.retryDelayMs ?? 0 } : {}) };
      spent += latencyMs + (keepsRetries ? waits : 0);
      out.push(trimmed);
      continue;
    }
    out.push(c);
  }
  return out;
}
