import { match } from 'ts-pattern';
import type { Command } from './command.ts';
import type { Design } from './design.ts';
import { hasTtl, nodeCount, replication, replyTimeoutMs, rulesOf, validateDesign } from './design.ts';
import { checkArray, checkInteger, checkKnownKeys, checkObject, checkOneOf } from './checks.ts';
import { checkDuration, checkResource, checkTtl } from './errors.ts';
import { MAX_CLIENTS } from './state.ts';
import { frozen } from './frozen.ts';

/**
 * The fault classes of the comparison matrix (spec/SPEC.md, "Predicted
 * matrix"), each as the finite alphabet of commands an exploration may
 * schedule. Every class includes the plain operations and the passing of time.
 */
export type FaultClass =
  | 'none'
  | 'partition'
  | 'delay'
  | 'client-pause'
  | 'clock-step'
  | 'clock-drift'
  | 'crash-restart'
  | 'connection-loss'
  | 'timing';

/** Every fault class, in the matrix's column order. */
export const FAULT_CLASSES: readonly FaultClass[] = frozen([
  'none',
  'partition',
  'delay',
  'client-pause',
  'clock-step',
  'clock-drift',
  'crash-restart',
  'connection-loss',
  'timing',
]);

/** Each fault class in a line, for tables and reports. */
export const FAULT_CLASS_TITLES: Readonly<Record<FaultClass, string>> = frozen({
  none: 'no faults',
  partition: 'client-node links lose every message',
  delay: 'replies delayed (acquire latency)',
  'client-pause': 'a client pauses, also between its lease check and its write',
  'clock-step': "one node's wall clock jumps (with lost messages)",
  'clock-drift': "a client's clock runs slow beyond the drift allowance",
  'crash-restart': 'a node crashes and restarts at once (with lost messages)',
  'connection-loss': "the server drops a client's connection (with pauses)",
  timing: 'late replies on every operation, delayed write requests, one node slow or a black hole',
});

/**
 * What each class's exploration schedules besides the operations and
 * `advance`, as spec/SPEC.md section 8 prints it (generated from here; the
 * consistency test checks the named fault kinds against alphabetFor).
 */
export const FAULT_CLASS_ALLOWS: Readonly<Record<FaultClass, string>> = frozen({
  none: 'nothing else',
  partition: '`partition` of any client from any node; no heal, so a cut lasts to the end of the schedule',
  delay:
    '`acquire` with a `latencyMs` of half the ttl and of exactly the ttl (where the reply races the give-up, so both `timed-out` branches are drawn); a reply later than the ttl adds nothing new (it is only `timed-out`). On PostgreSQL designs, which have no ttl, one `acquire` with a latency of the same length',
  'client-pause': '`pause` (with or without a pending write) and `resume`',
  'clock-step': "`clock-step` of node 0's wall clock by +ttl or -ttl, and `partition`",
  'clock-drift': "`clock-drift` of a client's monotonic clock to half speed (-500000 ppm), beyond any drift allowance",
  'crash-restart':
    '`crash` and `restart` of node 0 (restart at once, delayed only by the design\'s `restartDelayMs`), and `partition`; on redis-replicated the crash is a failover (Sentinel promotes the replica with what it has) and, without WAIT, `replicate` (asynchronous replication catches up) is scheduled too',
  'connection-loss': '`kill-connection`, and `pause` / `resume`',
  timing:
    "`node-delay` of node 0 by the ttl and `never` (a black hole, for good), late replies of exactly the ttl on `write` and `release`, an operation held in flight across its client's `pause` until `resume` (on ttl designs an extension with a shorter ttl, 0.3 of it; on PostgreSQL designs an acquire), and a `write` whose request the network delays (`delayed`), landing at the client's `deliver` step whenever the schedule puts it (not on pg-xact, whose writes share the lock's connection); on PostgreSQL designs the statement timeout stands for the ttl (the reply races the client's timeout)",
});

/** Sizes of the exploration's small world. Times are in ms, chosen so that coarse steps straddle the deadlines. */
export interface Alphabet {
  /** Clients in the world. */
  readonly clients: number;
  /** The one resource every operation names. */
  readonly resource: string;
  /** The ttl of every acquire and extend, ms. */
  readonly ttlMs: number;
  /** A short and a long passing of time: the long one outlasts a lease. */
  readonly advanceMs: readonly number[];
}

/** The matrix's small world: two clients, one resource, ttl 10 ms, advances of 4 and 12 ms. */
export const DEFAULT_ALPHABET: Alphabet = frozen({ clients: 2, resource: 'r', ttlMs: 10, advanceMs: [4, 12] });

/** The node that clock and crash faults hit: one node, a minority of any cluster larger than two (nodes are symmetric). */
export const FAULTY_NODE = 0;

function range(n: number): number[] {
  return Array.from({ length: n }, (_v, i) => i);
}

/** The commands an exploration of `design` under `faultClass` may schedule. */
export function alphabetFor(design: Design, faultClass: FaultClass, a: Alphabet = DEFAULT_ALPHABET): Command[] {
  validateDesign(design);
  checkOneOf(faultClass, 'alphabetFor faultClass', FAULT_CLASSES);
  checkObject(a, 'alphabetFor alphabet', 'an alphabet { clients, resource, ttlMs, advanceMs } or absent');
  checkKnownKeys(a, 'alphabetFor alphabet', ['clients', 'resource', 'ttlMs', 'advanceMs']);
  checkInteger(a.clients, 'alphabetFor alphabet.clients', 1, MAX_CLIENTS);
  checkResource(a.resource);
  checkTtl(a.ttlMs);
  checkArray(a.advanceMs, 'alphabetFor alphabet.advanceMs', 'an array of ms');
  for (const ms of a.advanceMs) checkDuration(ms, 'alphabetFor alphabet.advanceMs');
  const clients = range(a.clients);
  const nodes = range(nodeCount(design));
  const r = a.resource;
  const ttl = hasTtl(design);
  const ops: Command[] = [
    ...clients.map((client): Command => (ttl ? { kind: 'acquire', client, resource: r, ttlMs: a.ttlMs } : { kind: 'acquire', client, resource: r })),
    ...clients.map((client): Command => ({ kind: 'write', client, resource: r, value: `v${client}` })),
    ...clients.map((client): Command => ({ kind: 'release', client, resource: r })),
    ...(ttl ? clients.map((client): Command => ({ kind: 'extend', client, resource: r, ttlMs: a.ttlMs })) : []),
    ...a.advanceMs.map((ms): Command => ({ kind: 'advance', ms })),
  ];
  const partitions: Command[] = clients.flatMap((client) => nodes.map((node): Command => ({ kind: 'partition', client, node })));
  const pauses: Command[] = clients.flatMap((client): Command[] => [
    { kind: 'pause', client, pendingWrite: { resource: r, value: `late${client}` } },
    { kind: 'resume', client },
  ]);
  const faults = match(faultClass)
    .with('none', (): Command[] => [])
    .with('partition', () => partitions)
    .with('delay', () =>
      clients.flatMap((client): Command[] =>
        ttl
          ? [
              { kind: 'acquire', client, resource: r, ttlMs: a.ttlMs, latencyMs: Math.ceil(a.ttlMs / 2) },
              { kind: 'acquire', client, resource: r, ttlMs: a.ttlMs, latencyMs: a.ttlMs },
            ]
          : [{ kind: 'acquire', client, resource: r, latencyMs: a.ttlMs }],
      ),
    )
    .with('client-pause', () => pauses)
    .with('clock-step', (): Command[] => [
      { kind: 'clock-step', node: FAULTY_NODE, deltaMs: a.ttlMs },
      { kind: 'clock-step', node: FAULTY_NODE, deltaMs: -a.ttlMs },
      ...partitions,
    ])
    .with('clock-drift', () => clients.map((client): Command => ({ kind: 'clock-drift', target: { client }, driftPpm: -500_000 })))
    .with('crash-restart', (): Command[] => [
      // With an asynchronous replica the crash is a failover, and when replication catches up is the schedule's choice.
      ...(replication(design) === 'async' ? [{ kind: 'replicate', node: FAULTY_NODE } as const] : []),
      { kind: 'crash', node: FAULTY_NODE },
      { kind: 'restart', node: FAULTY_NODE },
      ...partitions,
    ])
    .with('connection-loss', () => [...clients.map((client): Command => ({ kind: 'kill-connection', client })), ...pauses])
    .with('timing', (): Command[] => {
      // Late exactly at the bound the client waits by (its ttl, or a PostgreSQL statement timeout): the reply races the give-up.
      const lateMs = ttl ? a.ttlMs : replyTimeoutMs(design)!;
      // A delayed request: the write checked now lands at a later deliver (not where it shares the lock's own connection).
      const delayable = rulesOf(design).writes !== 'at-commit';
      return [
        { kind: 'node-delay', node: FAULTY_NODE, ms: lateMs },
        { kind: 'node-delay', node: FAULTY_NODE, ms: 'never' },
        // An operation in flight across its client's pause, as the matrix's timing column draws pauses with late
        // replies: on ttl designs an extension with a shorter ttl, whose key may run out before the client reads
        // a word (spec 4.1); on PostgreSQL designs a lock statement, which runs or not while the client is stopped.
        ...clients.flatMap((client): Command[] => [
          { kind: 'pause', client, inFlight: ttl ? { kind: 'extend', client, resource: r, ttlMs: Math.ceil(a.ttlMs * 0.3) } : { kind: 'acquire', client, resource: r } },
          { kind: 'resume', client },
        ]),
        ...clients.flatMap((client): Command[] => [
          { kind: 'write', client, resource: r, value: `v${client}`, latencyMs: lateMs },
          { kind: 'release', client, resource: r, latencyMs: lateMs },
          ...(delayable
            ? [
                { kind: 'write', client, resource: r, value: `late${client}`, delayed: true } as const,
                { kind: 'deliver', client } as const,
              ]
            : []),
        ]),
      ];
    })
    .exhaustive();
  return [...ops, ...faults];
}
