import type { Command } from './command.ts';
import type { Design, StorePolicy } from './design.ts';
import { designs } from './design.ts';
import type { PropertyId } from './properties.ts';
import { PROPERTY_IDS } from './properties.ts';
import type { RunResult } from './run.ts';
import { runSchedule } from './run.ts';
import { initialWorld } from './state.ts';
import { checkArray, checkObject, checkOneOf } from './checks.ts';
import { frozen } from './frozen.ts';

/**
 * The scenario catalogue: the published counterexamples, step by step, each
 * run with and without fencing. `breaks` lists the property IDs the schedule
 * violates under each store policy; everything else must hold.
 */
export interface Scenario {
  /** A short stable name, e.g. 'storage-demo'. */
  readonly id: string;
  /** What happens, in a sentence. */
  readonly title: string;
  /** Where it was published. */
  readonly source: string;
  /** The design it runs on. */
  readonly design: Design;
  /** The schedule. */
  readonly steps: readonly Command[];
  /** Per store policy, the property IDs the schedule breaks; every other property must hold. */
  readonly breaks: Partial<Record<StorePolicy, readonly PropertyId[]>>;
}

const r = 'order-42';
const TTL = 10_000;

const acquire = (client: number, extra: Partial<{ latencyMs: number }> = {}): Command => ({ kind: 'acquire', client, resource: r, ttlMs: TTL, ...extra });
const acquireSession = (client: number): Command => ({ kind: 'acquire', client, resource: r });
const write = (client: number, value: string): Command => ({ kind: 'write', client, resource: r, value });
const pauseBeforeWrite = (client: number, value: string): Command => ({ kind: 'pause', client, pendingWrite: { resource: r, value } });

/**
 * Kleppmann's Redlock shape on five nodes A..E: client 1 reaches only A, B, C and locks them; `fault`
 * hits C; client 2 reaches only C, D, E and tries; then `tail`.
 */
const kleppmann = (fault: readonly Command[], tail: readonly Command[]): Command[] => [
  { kind: 'partition', client: 0, node: 3 },
  { kind: 'partition', client: 0, node: 4 },
  acquire(0),
  ...fault,
  { kind: 'partition', client: 1, node: 0 },
  { kind: 'partition', client: 1, node: 1 },
  acquire(1),
  ...tail,
];
const crashC: readonly Command[] = [
  { kind: 'crash', node: 2 },
  { kind: 'restart', node: 2 },
];

/** The scenario catalogue (docs/model.md): each published counterexample with the properties it breaks per store policy. */
export const SCENARIOS: readonly Scenario[] = frozen([
  {
    id: 'storage-demo',
    title: 'Client 1 gets token 1 and pauses; client 2 gets token 2 and writes; client 1 wakes and writes',
    source: "Kleppmann 2016, 'How to do distributed locking'; the article's storage-engine demonstration",
    design: designs.redisSingle(),
    steps: [
      acquire(0),
      pauseBeforeWrite(0, 'ORDER_STALE_OVERWRITE'),
      { kind: 'advance', ms: 15_000 },
      acquire(1),
      write(1, 'ORDER_SETTLED_V2'),
      { kind: 'resume', client: 0 },
      { kind: 'read', client: 1, resource: r },
    ],
    breaks: { unfenced: ['STORE-1'], strict: [], monotonic: [] },
  },
  {
    id: 'redlock-clock-jump',
    title: "Client 1 locks nodes A, B, C (D, E unreachable); C's clock jumps forward; client 2 locks C, D, E",
    source: "Kleppmann 2016, Redlock's first counterexample",
    design: designs.redlock({ nodes: 5 }),
    steps: kleppmann([{ kind: 'clock-step', node: 2, deltaMs: TTL + 1 }], [write(1, 'from-client-2'), write(0, 'from-client-1')]),
    breaks: { unfenced: ['MUTEX-1', 'STORE-1'], strict: ['MUTEX-1'], monotonic: ['MUTEX-1'] },
  },
  {
    id: 'redlock-crash-restart',
    title: 'Client 1 locks A, B, C (D, E unreachable); C crashes and restarts at once without persistence; client 2 locks C, D, E',
    source: "Kleppmann 2016, Redlock's second counterexample",
    design: designs.redlock({ nodes: 5 }),
    steps: kleppmann(crashC, [write(1, 'from-client-2'), write(0, 'from-client-1')]),
    // The lost counter re-issues token 1: a strict store rejects the equal token, a monotonic one lets it land.
    breaks: { unfenced: ['DUR-1', 'FENCE-1', 'MUTEX-1', 'STORE-1'], strict: ['DUR-1', 'FENCE-1', 'MUTEX-1'], monotonic: ['DUR-1', 'FENCE-1', 'MUTEX-1', 'STORE-1'] },
  },
  {
    id: 'redlock-crash-restart-aof',
    title: 'The same crash with AOF fsync always: node C keeps the key, client 2 is denied',
    source: "antirez 2016, 'Is Redlock safe?' (persistence as the fix)",
    design: designs.redlock({ nodes: 5, persistence: 'aof-always' }),
    steps: kleppmann(crashC, [write(0, 'from-client-1')]),
    breaks: { unfenced: [], strict: [], monotonic: [] },
  },
  {
    id: 'redlock-crash-delayed-restart',
    title: 'The same crash without persistence but a restart delayed by the ttl: node C sits out until the old lease is over',
    source: "antirez 2016, 'Is Redlock safe?' (delayed restarts)",
    design: designs.redlock({ nodes: 5, restartDelayMs: TTL + 1 }),
    steps: kleppmann(crashC, [write(0, 'from-client-1')]),
    // The lease holds; only the lost counter shows.
    breaks: { unfenced: ['DUR-1'], strict: ['DUR-1'], monotonic: ['DUR-1'] },
  },
  {
    id: 'redis-single-clock-jump',
    title: "The Redis node's clock jumps forward: the key expires while the holder's clock says it is valid",
    source: 'Kleppmann 2016 (clock jumps apply to any wall-clock lease)',
    design: designs.redisSingle(),
    steps: [acquire(0), { kind: 'clock-step', node: 0, deltaMs: TTL + 1 }, acquire(1), write(1, 'new'), write(0, 'old')],
    breaks: { unfenced: ['MUTEX-1', 'STORE-1'], strict: ['MUTEX-1'], monotonic: ['MUTEX-1'] },
  },
  {
    id: 'pg-session-connection-kill',
    title: "Client 1 holds a session lock and pauses; its connection is killed; client 2 locks and writes; client 1 wakes and writes",
    source: 'PostgreSQL advisory locks (a session lock dies with its connection)',
    design: designs.pgSession(),
    steps: [
      acquireSession(0),
      pauseBeforeWrite(0, 'stale'),
      { kind: 'kill-connection', client: 0 },
      acquireSession(1),
      write(1, 'fresh'),
      { kind: 'resume', client: 0 },
    ],
    breaks: { unfenced: ['MUTEX-1', 'STORE-1'], strict: ['MUTEX-1'], monotonic: ['MUTEX-1'] },
  },
  {
    id: 'pg-xact-connection-kill',
    title: 'The same with a transaction-scoped lock and the data in the same transaction: the stale write rolls back',
    source: 'PostgreSQL advisory locks (transaction scope)',
    design: designs.pgXact(),
    steps: [
      acquireSession(0),
      pauseBeforeWrite(0, 'stale'),
      { kind: 'kill-connection', client: 0 },
      acquireSession(1),
      write(1, 'fresh'),
      { kind: 'release', client: 1, resource: r },
      { kind: 'resume', client: 0 },
    ],
    breaks: { transactional: ['MUTEX-1'] },
  },
  {
    id: 'etcd-pause',
    title: 'An etcd lease holder pauses past its lease between check and write',
    source: 'Jepsen, etcd 3.4.3 (locks are leases; fence the resource with the revision)',
    design: designs.etcdLease(),
    steps: [acquire(0), pauseBeforeWrite(0, 'stale'), { kind: 'advance', ms: 15_000 }, acquire(1), write(1, 'fresh'), { kind: 'resume', client: 0 }],
    breaks: { unfenced: ['STORE-1'], strict: [], monotonic: [] },
  },
]);

/** Runs a scenario under one store policy. */
export function runScenario(scenario: Scenario, store: StorePolicy): RunResult {
  checkObject(scenario, 'runScenario scenario', 'a scenario { design, steps, ... }');
  // The design, the store and the steps are checked where they are used (initialWorld, runSchedule, step).
  return runSchedule(initialWorld({ design: scenario.design, store, clients: 2 }), scenario.steps);
}

/** The distinct property IDs a run violated, sorted. */
export function brokenProperties(result: RunResult): PropertyId[] {
  const violations = checkArray(checkObject(result, 'brokenProperties result', 'a run result { world, steps, violations }').violations, 'brokenProperties result.violations', 'an array of violations');
  // Each a violation of a property that is one: a property of another type or name was listed as broken.
  (violations as readonly unknown[]).forEach((v, i) => checkOneOf(checkObject(v, `brokenProperties result.violations[${i}]`, 'a violation { property, ... }').property, `brokenProperties result.violations[${i}].property`, PROPERTY_IDS));
  return [...new Set(result.violations.map((v) => v.property))].sort();
}
