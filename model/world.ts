import { MAX_DRIFT_PPM, MIN_DRIFT_PPM, read, setDrift, step as stepClock, trueTimeOf } from './clock.ts';
import type { Command, Fault, Operation } from './command.ts';
import { isOperation } from './command.ts';
import { driftMarginMs, hasTtl, isReentrant, isSessionBound, lateReplyEnds, leaseTerms, persists, quorum, refreshExtendMs, replyTimeoutMs, restartDelayMs, rulesOf } from './design.ts';
import type { Design } from './design.ts';
import { dropsLease, keepsDeadline } from './failedExtend.ts';
import { checkDuration, checkResource, checkTtl, checkValue, InvalidInputError } from './errors.ts';
import type { WorldEvent } from './event.ts';
import {
  bumpCounter,
  counterKey,
  expiryNow,
  isReachable,
  livenessIn,
  nextToken,
  raiseCounter,
  receives,
  removeIfOwner,
  removeKey,
  setKey,
} from './node.ts';
import type { Outcome } from './outcome.ts';
import type { Arrival, Decision } from './round.ts';
import { roundEnds } from './round.ts';
import type { ClientState, InFlight, Lease, NodeState, Owner, PendingWrite, World } from './state.ts';
import { ghostOf, roundInFlight, sameOwner } from './state.ts';
import { checkCommandShape, checkKnownKeys, isObject, refuse } from './checks.ts';
import { checkWorld } from './worldCheck.ts';
import { cellOf, writeStore } from './store.ts';
import { entryOf, putEntry, withEntry } from './record.ts';

/**
 * The world model: one pure step function from a state and a command to the
 * set of (outcome, next state, events) a correct implementation may produce.
 * More than one branch where reality may legitimately differ: a key at its
 * exact expiry instant, an acquire whose reply never came.
 */
export interface Branch {
  /** What the command returns in this branch. */
  readonly outcome: Outcome;
  /** The world after it. */
  readonly next: World;
  /** What happened that the event properties judge (grants, writes, key changes, restarts). */
  readonly events: readonly WorldEvent[];
}

/**
 * Applies `command`. Throws InvalidInputError for invalid input (and then
 * nothing changed: the caller still holds the old, immutable state).
 */
export function step(world: World, command: Command): readonly Branch[] {
  checkWorld(world, 'step world');
  return stepMade(world, command);
}

/**
 * step() on a world the model made from one checked whole (a branch's next
 * world no caller has had in hand): the command is checked, the world is not
 * again (runSchedule with the model's own choosers).
 */
export function stepMade(world: World, command: Command): readonly Branch[] {
  checkCommandShape(command, 'step command');
  validate(world, command, 'step');
  return stepValid(world, command);
}

/**
 * Checks `command` as an exploration's alphabet holds it: everything step()
 * checks that does not depend on the state (its kind, fields, ranges, the
 * clients and nodes it names, what the design supports), and nothing that
 * does (a resume needs a paused client, a restart a node that is down).
 * The exploration steps a command, and so checks it, only in a state that
 * enables it: one no reached state enables (a client or node that does not
 * exist, a kind that is none) would otherwise be explored as nothing,
 * silently. Throws InvalidInputError naming `name`.
 */
export function checkAlphabetCommand(world: World, command: Command, name: string): void {
  checkCommandShape(command, name);
  try {
    validate(world, command, 'alphabet');
  } catch (e) {
    if (e instanceof InvalidInputError) throw new InvalidInputError(e.code, `${name}: ${e.message.slice(e.code.length + 2)}`);
    throw e;
  }
}

/** The fields of each command kind (command.ts): any other is refused, as a typo would otherwise read as absent. */
const COMMAND_FIELDS: Readonly<Record<Command['kind'], readonly string[]>> = {
  acquire: ['kind', 'client', 'resource', 'ttlMs', 'latencyMs', 'retries', 'retryDelayMs'],
  extend: ['kind', 'client', 'resource', 'ttlMs', 'latencyMs'],
  release: ['kind', 'client', 'resource', 'latencyMs'],
  write: ['kind', 'client', 'resource', 'value', 'latencyMs', 'delayed'],
  read: ['kind', 'client', 'resource'],
  advance: ['kind', 'ms'],
  'clock-step': ['kind', 'node', 'deltaMs'],
  'clock-drift': ['kind', 'target', 'driftPpm'],
  pause: ['kind', 'client', 'pendingWrite', 'inFlight'],
  resume: ['kind', 'client'],
  deliver: ['kind', 'client'],
  replicate: ['kind', 'node'],
  crash: ['kind', 'node'],
  restart: ['kind', 'node'],
  partition: ['kind', 'client', 'node'],
  heal: ['kind', 'client', 'node'],
  'node-delay': ['kind', 'node', 'ms'],
  'kill-connection': ['kind', 'client'],
};

/**
 * step() without its checks, for the exploration's hot path: `command` must
 * have passed step()'s validation once in a world of the same configuration
 * (its input checks depend on nothing else) and be `enabled` in `world`.
 */
export function stepValid(world: World, command: Command): readonly Branch[] {
  if (!isOperation(command)) return inject(world, command);
  const branches = operate(world, command);
  // WAIT 1 after every script: the reply comes only once the replica has what the primary has.
  return rulesOf(world.config.design).replication(world.config.design) === 'wait' ? branches.map((b) => ({ ...b, next: replicated(b.next) })) : branches;
}

/** Every up node's replica receives what its primary has (a replication step, or WAIT's acknowledgement). */
function replicated(world: World, only?: number): World {
  return {
    ...world,
    nodes: world.nodes.map((n, i) => (n.replica === undefined || !n.up || (only !== undefined && i !== only) ? n : { ...n, replica: { keys: n.keys, counters: n.counters } })),
  };
}

/**
 * Whether `command`'s precondition holds in `world` (a running client for an
 * operation or a pause, a paused one for a resume, a node up for a crash and
 * down for a restart): the exploration filters with it instead of catching
 * step's precondition errors. Input errors are still step's to report.
 */
export function enabled(world: World, command: Command): boolean {
  // A switch the compiler checks for exhaustiveness (the return type): this runs once per command and state.
  switch (command.kind) {
    case 'acquire':
    case 'extend':
    case 'release':
    case 'write':
    case 'read':
    case 'pause': {
      // A running client with a write in the network waits for its reply.
      const c = world.clients[command.client];
      return c?.paused === false && c.pendingWrite === null;
    }
    case 'resume':
      return world.clients[command.client]?.paused === true;
    case 'deliver': {
      const c = world.clients[command.client];
      return c?.paused === false && c.pendingWrite !== null;
    }
    case 'crash':
      return world.nodes[command.node]?.up === true;
    case 'replicate':
      return world.nodes[command.node]?.up === true && world.nodes[command.node]?.replica !== undefined;
    case 'restart':
      return world.nodes[command.node]?.up === false;
    case 'clock-drift': {
      const f = 'client' in command.target ? world.clients[command.target.client]?.inFlight : null;
      return !roundInFlight(f ?? null);
    }
    case 'advance':
    case 'clock-step':
    case 'partition':
    case 'heal':
    case 'node-delay':
    case 'kill-connection':
      return true;
  }
}

// ---------------------------------------------------------------------------
// Validation: every input checked before anything is built.

/**
 * `mode` 'step': the command as stepped in `world`, preconditions included.
 * 'alphabet': only what holds in every state of the world's configuration
 * (checkAlphabetCommand).
 */
function validate(world: World, command: Command, mode: 'step' | 'alphabet'): void {
  const design = world.config.design;
  const stepping = mode === 'step';
  if (Object.hasOwn(COMMAND_FIELDS, command.kind)) checkKnownKeys(command, `${command.kind} command`, COMMAND_FIELDS[command.kind], 'precondition');
  const client = (c: number): ClientState => {
    const state = Number.isInteger(c) ? world.clients[c] : undefined;
    if (state === undefined) throw new InvalidInputError('unknown-client', `no client ${String(c)} (have ${world.clients.length})`);
    return state;
  };
  const node = (n: number): NodeState => {
    const state = Number.isInteger(n) ? world.nodes[n] : undefined;
    if (state === undefined) throw new InvalidInputError('unknown-node', `no node ${String(n)} (have ${world.nodes.length})`);
    return state;
  };
  const active = (c: number): void => {
    const state = client(c);
    if (!stepping) return;
    if (state.paused) throw new InvalidInputError('precondition', `client ${c} is paused`);
    if (state.pendingWrite !== null) throw new InvalidInputError('precondition', `client ${c} waits for its delayed write to be delivered`);
  };
  // Late replies of extend, release and write: timed against a ttl design's request timeout, or a PostgreSQL client's statement timeout.
  const timed = (latencyMs: number | undefined): void => {
    if (latencyMs !== undefined) checkDuration(latencyMs, 'latencyMs');
  };
  // A switch, not ts-pattern: this runs once per step of an exploration.
  const c = command;
  switch (c.kind) {
    case 'acquire': {
      active(c.client);
      checkResource(c.resource);
      if (hasTtl(design)) checkTtl(c.ttlMs);
      else if (c.ttlMs !== undefined) throw new InvalidInputError('unsupported-operation', `${design.kind} locks have no ttl`);
      if (c.latencyMs !== undefined) checkDuration(c.latencyMs, 'latencyMs');
      if (c.retryDelayMs !== undefined) checkDuration(c.retryDelayMs, 'retryDelayMs');
      if (c.retries !== undefined && (!Number.isInteger(c.retries) || c.retries < 0 || c.retries > 100)) {
        throw new InvalidInputError('precondition', `retries must be an integer in [0, 100], got ${String(c.retries)}`);
      }
      return;
    }
    case 'extend': {
      active(c.client);
      checkResource(c.resource);
      if (!hasTtl(design)) throw new InvalidInputError('unsupported-operation', `${design.kind} locks have no ttl to extend`);
      checkTtl(c.ttlMs);
      timed(c.latencyMs);
      return;
    }
    case 'release': {
      active(c.client);
      checkResource(c.resource);
      timed(c.latencyMs);
      return;
    }
    case 'read': {
      active(c.client);
      checkResource(c.resource);
      return;
    }
    case 'write': {
      active(c.client);
      checkResource(c.resource);
      checkValue(c.value);
      timed(c.latencyMs);
      if (c.delayed !== undefined) {
        if (c.delayed !== true) throw new InvalidInputError('precondition', 'delayed must be true or absent');
        if (c.latencyMs !== undefined) throw new InvalidInputError('precondition', 'a delayed write has no latencyMs: its reply comes at its delivery');
        if (rulesOf(design).writes === 'at-commit') {
          throw new InvalidInputError('unsupported-operation', `${design.kind} writes inside the lock's transaction, on its own connection: a delayed write there is a late reply (latencyMs)`);
        }
      }
      return;
    }
    case 'advance': {
      if (checkDuration(c.ms, 'advance') === 0) throw new InvalidInputError('invalid-duration', 'advance must move time forward');
      return;
    }
    case 'clock-step': {
      node(c.node);
      if (!Number.isInteger(c.deltaMs) || Math.abs(c.deltaMs) > 2 ** 31 - 1) throw new InvalidInputError('invalid-duration', 'deltaMs must be an integer');
      return;
    }
    case 'clock-drift': {
      // Exactly one of the two: a target naming both would hit the node and ignore the client, silently.
      const t: unknown = c.target;
      if (!isObject(t) || Object.keys(t).length !== 1 || !('node' in t || 'client' in t)) refuse('clock-drift target', 'an object { node } or { client }', t, 'precondition');
      if ('node' in c.target) node(c.target.node);
      // A round in flight is timed by the client's clock as it was sent: a new rate mid-round is not modelled.
      else if (roundInFlight(client(c.target.client).inFlight) && stepping) {
        throw new InvalidInputError('precondition', `client ${c.target.client} has a round in flight`);
      }
      if (!Number.isInteger(c.driftPpm) || c.driftPpm < MIN_DRIFT_PPM || c.driftPpm > MAX_DRIFT_PPM) {
        throw new InvalidInputError('invalid-duration', `driftPpm must be an integer in [${MIN_DRIFT_PPM}, ${MAX_DRIFT_PPM}]`);
      }
      return;
    }
    case 'pause': {
      active(c.client);
      if (c.pendingWrite !== undefined) {
        if (!isObject(c.pendingWrite)) refuse('pause pendingWrite', 'an object { resource, value } or absent', c.pendingWrite, 'precondition');
        checkKnownKeys(c.pendingWrite, 'pause pendingWrite', ['resource', 'value'], 'precondition');
        checkResource(c.pendingWrite.resource);
        if (typeof c.pendingWrite.value !== 'string') refuse('pause pendingWrite.value', 'a string', c.pendingWrite.value, 'precondition');
        // The write goes out at the resume, unchecked: its value is checked now, as a write's is.
        checkValue(c.pendingWrite.value);
      }
      if (c.inFlight !== undefined) {
        checkCommandShape(c.inFlight, 'pause inFlight');
        // Only a client's own request can be in flight across its pause; a fault, a time step or a pause is none.
        if (!isOperation(c.inFlight)) refuse('pause inFlight', 'an operation (acquire, extend, release, write, read)', (c.inFlight as Command).kind, 'precondition');
        if (c.pendingWrite !== undefined) throw new InvalidInputError('precondition', 'a pause has a pending write or an operation in flight, not both');
        if (c.inFlight.client !== c.client) throw new InvalidInputError('precondition', `the operation in flight must be client ${c.client}'s`);
        // On PostgreSQL designs one statement is in flight: its retries would be sent after the resume, which the model does not follow.
        if (c.inFlight.kind === 'acquire' && !hasTtl(design) && (c.inFlight.retries ?? 0) > 0) {
          throw new InvalidInputError('unsupported-operation', `an acquire with retries cannot be in flight across a pause on ${design.kind} locks`);
        }
        validate(world, c.inFlight, mode);
      }
      return;
    }
    case 'resume': {
      if (!client(c.client).paused && stepping) throw new InvalidInputError('precondition', `client ${c.client} is not paused`);
      return;
    }
    case 'deliver': {
      const state = client(c.client);
      if ((state.paused || state.pendingWrite === null) && stepping) throw new InvalidInputError('precondition', `client ${c.client} has no delayed write in the network`);
      return;
    }
    case 'crash': {
      if (!node(c.node).up && stepping) throw new InvalidInputError('precondition', `node ${c.node} is already down`);
      return;
    }
    case 'replicate': {
      const n = node(c.node);
      if (n.replica === undefined) throw new InvalidInputError('unsupported-operation', `${design.kind} has no replica to replicate to`);
      if (!n.up && stepping) throw new InvalidInputError('precondition', `node ${c.node} is down`);
      return;
    }
    case 'restart': {
      if (node(c.node).up && stepping) throw new InvalidInputError('precondition', `node ${c.node} is up`);
      return;
    }
    case 'partition':
    case 'heal': {
      client(c.client);
      node(c.node);
      return;
    }
    case 'node-delay': {
      node(c.node);
      if (c.ms !== 'never') checkDuration(c.ms, 'node delay');
      return;
    }
    case 'kill-connection': {
      client(c.client);
      return;
    }
    default: {
      const unknown: never = c;
      throw new InvalidInputError('precondition', `unknown command kind ${String((unknown as { kind?: unknown }).kind)}`);
    }
  }
}

// ---------------------------------------------------------------------------
// Small pure helpers over the world.

function withClient(world: World, index: number, f: (c: ClientState) => ClientState): World {
  const clients = world.clients.slice();
  clients[index] = f(clients[index]!);
  return { ...world, clients };
}

function withLease(c: ClientState, resource: string, lease: Lease | null): ClientState {
  // A loop, not an object rest with a computed key (slow in V8): this runs for every grant and release of an exploration.
  const leases: Record<string, Lease> = {};
  for (const r in c.leases) if (r !== resource) putEntry(leases, r, c.leases[r]!);
  if (lease !== null) putEntry(leases, resource, lease);
  return { ...c, leases };
}

function tokenBase(world: World): bigint {
  return world.config.tokenBase ?? 0n;
}

function monoNow(world: World, client: number): number {
  return read(world.clients[client]!.mono, world.nowMs);
}

/** Whether the client, by its own clock and what it has been told, holds a valid lease (MUTEX-1's view). */
export function holdsValid(world: World, client: number, resource: string): boolean {
  const c = world.clients[client]!;
  const lease = entryOf(c.leases, resource);
  if (lease === undefined) return false;
  return lease.validUntilMs === null ? true : read(c.mono, world.nowMs) < lease.validUntilMs;
}

function single(outcome: Outcome, next: World, events: readonly WorldEvent[] = []): readonly Branch[] {
  return [{ outcome, next, events }];
}

/**
 * The exploration's node orbits (stepOrbits): nodes from this index on that
 * are equal in every respect are interchangeable, so fanOut branches over
 * how many of them answer each way, not which ones. Null (the default, and
 * always outside stepOrbits): every combination, as a runner matching a real
 * server's answers needs.
 */
let orbitsFrom: number | null = null;

/**
 * stepValid for the exploration, with `fixedNodes` leading nodes kept in
 * place and the rest interchangeable (the fingerprint's node symmetry): where
 * m equal nodes may each see a key alive or gone, it yields the m + 1
 * branches "the first k see it alive" instead of all 2^m. Each dropped
 * branch is a renaming of the nodes of a kept one, in a state that renaming
 * leaves as it is, so it has the same futures up to that renaming (spec 8.4,
 * "Orbit branching").
 */
export function stepOrbits(world: World, command: Command, fixedNodes: number): readonly Branch[] {
  orbitsFrom = fixedNodes;
  try {
    return stepValid(world, command);
  } finally {
    orbitsFrom = null;
  }
}

function sameClock(a: NodeState['wall'], b: NodeState['wall']): boolean {
  return a === b || (a.anchorTrueMs === b.anchorTrueMs && a.readingMs === b.readingMs && a.driftPpm === b.driftPpm);
}

function sameRecord<V>(a: Readonly<Record<string, V>>, b: Readonly<Record<string, V>>, same: (x: V, y: V) => boolean): boolean {
  if (a === b) return true;
  let n = 0;
  for (const k in a) {
    const y = b[k];
    if (y === undefined || !same(a[k]!, y)) return false;
    n++;
  }
  for (const _k in b) n--;
  return n === 0;
}

function sameKey(a: NodeState['keys'][string], b: NodeState['keys'][string]): boolean {
  return (
    a === b ||
    (sameOwner(a.owner, b.owner) && a.expiresAtMs === b.expiresAtMs && a.ttlMs === b.ttlMs && a.count === b.count && a.liveSinceTrueMs === b.liveSinceTrueMs)
  );
}

function sameCounter(a: bigint, b: bigint): boolean {
  return a === b;
}

/** Whether two nodes are equal in every field (a step or a property may read any). */
function sameNode(a: NodeState, b: NodeState): boolean {
  if (a === b) return true;
  return (
    a.up === b.up &&
    a.availableFromTrueMs === b.availableFromTrueMs &&
    a.delay === b.delay &&
    sameClock(a.wall, b.wall) &&
    sameClock(a.mono, b.mono) &&
    sameRecord(a.keys, b.keys, sameKey) &&
    sameRecord(a.counters, b.counters, sameCounter) &&
    (a.replica === b.replica ||
      (a.replica !== undefined && b.replica !== undefined && sameRecord(a.replica.keys, b.replica.keys, sameKey) && sameRecord(a.replica.counters, b.replica.counters, sameCounter)))
  );
}

/** The clients cut off from node `i`, as a string to compare. */
function cutFrom(world: World, i: number): string {
  return world.partitions
    .filter((l) => l.endsWith(`:${i}`))
    .map((l) => l.slice(0, l.indexOf(':')))
    .join();
}

/**
 * Per node, the first node of its orbit: an interchangeable node (index at
 * least `from`) equal to it with the same links to every client; itself if
 * none. Renaming two such nodes leaves the world as it is, provided no
 * client has a round in flight (its arrivals and votes name nodes).
 */
function orbitsOf(world: World, from: number): number[] {
  const nodes = world.nodes;
  const first = nodes.map((_n, i) => i);
  if (world.clients.some((c) => roundInFlight(c.inFlight))) return first;
  for (let i = from + 1; i < nodes.length; i++) {
    for (let j = from; j < i; j++) {
      if (first[j] === j && sameNode(nodes[i]!, nodes[j]!) && (world.partitions.length === 0 || cutFrom(world, i) === cutFrom(world, j))) {
        first[i] = j;
        break;
      }
    }
  }
  return first;
}

/**
 * Runs one per-node script on every node the client can reach, branching
 * where a node may see a key as alive or gone. Unreachable nodes answer
 * nothing and stay as they are. Within stepOrbits, equal interchangeable
 * nodes answer in order: a combination is kept only if along each orbit the
 * answers' indices never go down (the first of each set of renamings, in
 * the order the branches come).
 */
function fanOut<V>(
  world: World,
  client: number,
  resource: string,
  script: (node: NodeState, index: number, alive: boolean) => { readonly node: NodeState; readonly vote: V },
): ReadonlyArray<{ readonly nodes: readonly NodeState[]; readonly votes: ReadonlyArray<V | null> }> {
  // Each node's possible answers, then their cartesian product (one combination in the common case).
  const answers: Array<ReadonlyArray<{ readonly node: NodeState; readonly vote: V | null }>> = [];
  let combinations = 1;
  const nodes = world.nodes;
  for (let index = 0; index < nodes.length; index++) {
    const node = nodes[index]!;
    const mine = !receives(world, client, index) ? [{ node, vote: null }] : livenessIn(world, node, resource).map((alive) => script(node, index, alive));
    answers.push(mine);
    combinations *= mine.length;
  }
  const out: Array<{ readonly nodes: readonly NodeState[]; readonly votes: ReadonlyArray<V | null> }> = [];
  const orbit = orbitsFrom === null || combinations === 1 ? null : orbitsOf(world, orbitsFrom);
  const choice: number[] = new Array(nodes.length);
  combination: for (let k = 0; k < combinations; k++) {
    // The earliest node varies slowest, as the branches were ordered before.
    let rest = k;
    for (let index = nodes.length - 1; index >= 0; index--) {
      const n = answers[index]!.length;
      choice[index] = rest % n;
      rest = Math.floor(rest / n);
    }
    if (orbit !== null) {
      for (let index = 0; index < nodes.length; index++) {
        const o = orbit[index]!;
        if (o === index) continue;
        // The orbit's previous member: the nearest earlier node with the same first node.
        let prev = index - 1;
        while (orbit[prev] !== o) prev--;
        if (choice[index]! < choice[prev]!) continue combination;
      }
    }
    const picked: NodeState[] = new Array(nodes.length);
    const votes: Array<V | null> = new Array(nodes.length);
    for (let index = 0; index < nodes.length; index++) {
      const a = answers[index]![choice[index]!]!;
      picked[index] = a.node;
      votes[index] = a.vote;
    }
    out.push({ nodes: picked, votes });
  }
  return out;
}

/** Compare-and-delete on every node the client reaches (removeKey: etcd's revision moves with each delete). */
function releaseEverywhere(world: World, client: number, resource: string, owner: Owner): World {
  const nodes = world.nodes.slice();
  for (let i = 0; i < nodes.length; i++) if (receives(world, client, i)) nodes[i] = removeIfOwner(world.config.design, nodes[i]!, resource, owner, tokenBase(world));
  return { ...world, nodes };
}

/**
 * A give-up's release (7.1 step 4): the client sends compare-and-delete on
 * the attempt's owner to every node it reaches, in the background, as after
 * a denial; it may land or not before anything else happens, so it is a
 * branch beside the keys kept. null when it would delete nothing.
 */
function releasedAfterGiveUp(world: World, client: number, resource: string, owner: Owner): World | null {
  const released = releaseEverywhere(world, client, resource, owner);
  return released.nodes.every((n, i) => n === world.nodes[i]) ? null : released;
}

/** The client's bound on one round, in ms on its clock: the configured request timeout, else the operation's own. */
function timeoutMs(world: World, fallbackMs: number): number {
  return world.config.requestTimeoutMs ?? fallbackMs;
}

/**
 * A round the client sends now (to the nodes `asked` picks): when each
 * node's reply arrives (its first round is `latencyMs` late, and a node's
 * own delay adds to every round), and the client's deadline in true time.
 */
function roundOf(world: World, client: number, latencyMs: number, limitMs: number, asked: (node: number) => boolean = () => true, slowed = true): { readonly arrivals: Arrival[]; readonly deadlineMs: number } {
  const arrivals = world.nodes.map((n, i): Arrival => (!asked(i) || !isReachable(world, client, i) ? 'failed' : n.delay === 'never' ? 'never' : world.nowMs + latencyMs + (slowed ? (n.delay ?? 0) : 0)));
  return { arrivals, deadlineMs: trueTimeOf(world.clients[client]!.mono, monoNow(world, client) + limitMs, world.nowMs) };
}

/** When a round sent now ends (decided, every reply in, or the deadline). */
function roundEndMs(world: World, client: number, latencyMs: number, limitMs: number, decision: Decision | undefined, asked?: (node: number) => boolean): number {
  const r = roundOf(world, client, latencyMs, limitMs, asked);
  return roundEnds(r.arrivals, r.deadlineMs, world.nowMs, decision)[0]!.endMs;
}

/**
 * An acquire round is decided by a quorum of grants, or once no quorum can
 * come and the denial's reason is known (enough answers to say held, or too
 * many nodes unreachable).
 */
function acquireDecision(design: Design, votes: readonly (bigint | null)[]): Decision {
  const n = votes.length;
  const q = quorum(design);
  return { yes: votes.map((v) => typeof v === 'bigint'), decided: (t) => t.yes >= q || (t.yes + t.pending < q && (t.yes + t.no >= q || t.failed > n - q)) };
}

/** `needed` yes votes, or too few left to reach them (extend, write-back). */
function yesOrNever(yes: readonly boolean[], needed: number): Decision {
  return { yes, decided: (t) => t.yes >= needed || t.yes + t.pending < needed };
}

/** A release is done once a quorum answered (failures included): no other quorum can find the key then. */
function quorumAnswered(design: Design, n: number): Decision {
  return { yes: new Array<boolean>(n).fill(false), decided: (t) => t.pending <= n - quorum(design) };
}

/** A round's early decision, or none for a client that reads every reply first (leaseTerms decides 'every-reply'). */
function earlyDecision(design: Design, decision: Decision): Decision | undefined {
  return leaseTerms(design).decides === 'every-reply' ? undefined : decision;
}

/**
 * When the client answers after a refusal whose keys it undoes: at once (the
 * undo is a round it does not wait for), or for a client that reads every
 * reply, once every node of the undo round sent now has answered.
 */
function undoneAtMs(world: World, client: number, limitMs: number): number {
  const terms = leaseTerms(world.config.design);
  if (terms.decides !== 'every-reply') return world.nowMs;
  const r = roundOf(world, client, 0, limitMs);
  // Without a request timeout it waits for every reply that comes (from a black hole none: then up to the bound).
  const unbounded = (terms.clientTimeout === 'none' || terms.clientDeadline === 'none') && world.config.requestTimeoutMs === undefined && !r.arrivals.includes('never');
  return roundEnds(r.arrivals, unbounded ? Number.POSITIVE_INFINITY : r.deadlineMs, world.nowMs)[0]!.endMs;
}

type AcquireFlight = Extract<InFlight, { readonly kind: 'acquire' }>;
type ExtendFlight = Extract<InFlight, { readonly kind: 'extend' }>;
type LeaseFlight = Extract<InFlight, { readonly kind: 'lease' }>;

/** Delivers a write to the store and records what happened. */
function deliverWrite(world: World, client: number, w: PendingWrite): { readonly world: World; readonly outcome: Outcome; readonly event: WorldEvent } {
  const cell = cellOf(world.store, w.resource);
  const ghost = ghostOf(world, w.resource);
  const { decision, next } = writeStore(world.store, w.resource, w.token, w.value);
  const event: WorldEvent = {
    kind: 'write',
    client,
    resource: w.resource,
    token: w.token,
    epoch: w.epoch,
    policy: world.store.policy,
    highestBefore: cell.highest,
    accepted: decision.accepted,
    lastAcceptedEpochBefore: ghost.lastAcceptedEpoch,
  };
  const ghostAfter = decision.accepted ? { ...ghost, lastAcceptedEpoch: Math.max(ghost.lastAcceptedEpoch, w.epoch) } : ghost;
  return {
    world: { ...world, store: next, ghost: withEntry(world.ghost, w.resource, ghostAfter) },
    outcome: decision.accepted ? { kind: 'accepted' } : { kind: 'rejected', highest: decision.highest },
    event,
  };
}

// ---------------------------------------------------------------------------
// Operations.

function operate(world: World, op: Operation): readonly Branch[] {
  const c = world.clients[op.client]!;
  // A session the server ended unheard: the client learns it at its next statement to the server.
  if (c.sessionLost && reachesServer(world, op)) world = withClient(world, op.client, (s) => ({ ...s, sessionLost: false, leases: {} }));
  // A switch the compiler checks for exhaustiveness (the return type): this runs once per step of an exploration.
  switch (op.kind) {
    case 'acquire':
      return acquire(world, op.client, op.resource, op.ttlMs, op.latencyMs ?? 0, op.retries ?? 0, op.retryDelayMs ?? 0);
    case 'extend':
      return extend(world, op.client, op.resource, op.ttlMs, op.latencyMs ?? 0);
    case 'release':
      return release(world, op.client, op.resource, op.latencyMs ?? 0);
    case 'write':
      return write(world, op.client, op.resource, op.value, op.latencyMs ?? 0, op.delayed === true);
    case 'read': {
      const cell = cellOf(world.store, op.resource);
      return single({ kind: 'value', value: cell.value, token: cell.token }, world);
    }
  }
}

/**
 * One attempt, and after a denial up to `retries` more, `retryDelayMs` apart.
 * A timed-out attempt ends the loop: the client cannot know it failed.
 */
function acquire(world: World, client: number, resource: string, ttlMs: number | undefined, latencyMs: number, retries: number, retryDelayMs: number, first = true): readonly Branch[] {
  const attempt = hasTtl(world.config.design) ? acquireLease(world, client, resource, ttlMs!, latencyMs) : acquireSession(world, client, resource, latencyMs, first);
  if (retries === 0) return attempt;
  return attempt.flatMap((b) =>
    b.outcome.kind !== 'denied'
      ? [b]
      : // Only the first attempt's replies are delayed: latencyMs is one slow round trip.
        // The client sleeps on its own clock, which may run slow or fast.
        acquire({ ...b.next, nowMs: trueTimeOf(b.next.clients[client]!.mono, monoNow(b.next, client) + retryDelayMs, b.next.nowMs) }, client, resource, ttlMs, 0, retries - 1, retryDelayMs, false).map((r) => ({ ...r, events: [...b.events, ...r.events] })),
  );
}

/**
 * Lease acquisition on ttl designs (redis-single, redlock, etcd-lease): set
 * the key if absent on every reachable node, each mints a counter value in the
 * same atomic step; a grant needs a quorum and positive validity
 * ttl - elapsed - drift margin, measured on the client's monotonic clock from
 * before the first request. The token is the highest counter of the quorum,
 * written back to the quorum so the next quorum, which intersects it, mints
 * a higher one.
 */
function acquireLease(world: World, client: number, resource: string, ttlMs: number, latencyMs: number): readonly Branch[] {
  const design = world.config.design;
  if (rulesOf(design).acquireFirstRound(design) !== 'put') {
    // A consensus lock sends its put only once it has read its lease's grant: a late grant (latency, a slow or
    // black-holed node) puts the key late, judged by what the node holds then (a key that expired meanwhile is gone).
    const lease = leaseGranted(world, client, resource, ttlMs, latencyMs, 0, 0);
    const arrival = lease.flight.arrival;
    if (arrival === 'never' || (typeof arrival === 'number' && arrival > world.nowMs)) return resumeAfterLease(lease.sent, client, lease.flight, []);
  }
  // The untouched give-up is one world whichever nodes said what: it is judged with the first combination only.
  return sendAcquire(world, client, resource, ttlMs, latencyMs, 0, 0).flatMap(({ sent, flight, untouched }, i) => finishAcquire(sent, client, flight, world.nowMs, i === 0 ? untouched : null));
}

/**
 * The put of a consensus lock's attempt that was paused after its lease's
 * grant: the attempt's owner, start and deadline, and the lease's end on the
 * node's expiry clock (null: the put renews it, a ZooKeeper session).
 */
interface AfterLease {
  readonly owner: Owner;
  readonly startedMono: number;
  readonly deadlineMs: number;
  readonly leaseExpiresAtMs: number | null;
}

/**
 * The first round of an attempt goes out (or, `after` a lease granted
 * earlier, its put): each node that receives it sets the key if absent and
 * mints a counter value.
 */
function sendAcquire(
  world: World,
  client: number,
  resource: string,
  ttlMs: number,
  latencyMs: number,
  retries: number,
  retryDelayMs: number,
  after?: AfterLease,
): Array<{ readonly sent: World; readonly flight: AcquireFlight; readonly untouched: World }> {
  const design = world.config.design;
  const owner: Owner = after?.owner ?? { client, attempt: world.clients[client]!.attempts + 1 };
  const ckey = counterKey(design, resource);
  const counted = after !== undefined ? world : withClient(world, client, (c) => ({ ...c, attempts: owner.attempt }));
  // A slow node slows an attempt's first round only: the put that follows a consensus lock's lease is not (7.6.1).
  const round = roundOf(counted, client, latencyMs, timeoutMs(world, ttlMs), undefined, after === undefined);
  const startedMono = after?.startedMono ?? monoNow(world, client);
  const deadlineMs = after?.deadlineMs ?? round.deadlineMs;
  return fanOut(counted, client, resource, (node, _i, alive): { readonly node: NodeState; readonly vote: bigint | null | 'failed' } => {
    if (alive) return { node, vote: null };
    const expiresAtMs = after?.leaseExpiresAtMs ?? expiryNow(design, node, world.nowMs) + ttlMs;
    // A lease that ran out before its put: the put fails (etcd: lease not found), nothing is set; an error reply, not a
    // refusal by a holder (there may be none), which the client reads as an outage (no-quorum), as the real lock does.
    if (expiresAtMs <= expiryNow(design, node, world.nowMs)) return { node, vote: 'failed' };
    // A key seen gone that is still there expired: its lease's revocation deleted it first (removeKey: etcd's revision moves).
    const free = removeKey(design, node, resource, tokenBase(world));
    // bumpCounter and setKey in one copy of the node.
    const value = nextToken(entryOf(free.counters, ckey) ?? tokenBase(world), ckey);
    const key = { owner, expiresAtMs, ttlMs, count: 1, liveSinceTrueMs: world.nowMs };
    return { node: { ...free, counters: withEntry(free.counters, ckey, value), keys: withEntry(free.keys, resource, key) }, vote: value };
  }).map(({ nodes, votes }) => {
    // A failed put is a failed reply: no vote, and the round counts it as a failure (copies only then: a hot path).
    const failed = votes.includes('failed');
    const arrivals = failed ? round.arrivals.map((a, i) => (votes[i] === 'failed' ? 'failed' : a)) : round.arrivals;
    const cast = failed ? votes.map((v) => (v === 'failed' ? null : v)) : (votes as ReadonlyArray<bigint | null>);
    return { sent: { ...counted, nodes }, flight: { kind: 'acquire', resource, ttlMs, owner, startedMono, deadlineMs, arrivals, votes: cast, retries, retryDelayMs }, untouched: counted };
  });
}

/**
 * A consensus lock's attempt whose client pauses before it has read its
 * lease's grant (spec 7.7): the first round changed no lock state; the put
 * waits for the resume.
 */
function leaseGranted(world: World, client: number, resource: string, ttlMs: number, latencyMs: number, retries: number, retryDelayMs: number): { readonly sent: World; readonly flight: LeaseFlight } {
  const design = world.config.design;
  const owner: Owner = { client, attempt: world.clients[client]!.attempts + 1 };
  const counted = withClient(world, client, (c) => ({ ...c, attempts: owner.attempt }));
  const round = roundOf(counted, client, latencyMs, timeoutMs(world, ttlMs));
  // One logical node (a cluster): its grant's expiry, on its expiry clock.
  const leaseExpiresAtMs = expiryNow(design, world.nodes[0]!, world.nowMs) + ttlMs;
  return {
    sent: counted,
    flight: { kind: 'lease', resource, ttlMs, owner, startedMono: monoNow(world, client), deadlineMs: round.deadlineMs, arrival: round.arrivals[0]!, leaseExpiresAtMs, retries, retryDelayMs },
  };
}

/**
 * A client given no request timeout may bound its wait by the ttl (then it
 * gives up at the deadline) or not at all: then it gives up when the late
 * replies come. The same give-up, later.
 */
function readLate(gaveUp: readonly Branch[], f: AcquireFlight, earliestMs: number): Branch[] {
  if (gaveUp.length === 0 || gaveUp[0]!.next.config.requestTimeoutMs !== undefined) return [];
  const last = Math.max(...f.arrivals.map((a) => (typeof a === 'number' ? Math.max(a, earliestMs) : Number.NEGATIVE_INFINITY)));
  if (!Number.isFinite(last) || last <= gaveUp[0]!.next.nowMs || f.arrivals.includes('never')) return [];
  return gaveUp.map((b) => ({ ...b, next: { ...b.next, nowMs: last } }));
}

/** The attempt judged once every reply that comes has come (none comes from a black hole: then it waits for good, judged never). */
function readLateReplies(sent: World, client: number, f: AcquireFlight, earliestMs: number): Branch[] {
  if (f.arrivals.includes('never')) return [];
  return finishAcquire(sent, client, { ...f, deadlineMs: Number.POSITIVE_INFINITY }, earliestMs, null, true);
}

/**
 * The client reads an attempt's replies (from `earliestMs` on: now, or its
 * resume): a grant needs a quorum of replies in time and positive validity
 * ttl - elapsed - drift margin, measured on the client's monotonic clock
 * from before the first request. The token is the highest counter of the
 * quorum, written back (a second round) to the nodes whose counter is behind
 * it, so the next quorum, which intersects this one, mints a higher one.
 * `untouched`: the world as if the requests never arrived (a timed-out
 * attempt cannot tell), when the attempt is judged in the step that sent it.
 */
function finishAcquire(sent: World, client: number, f: AcquireFlight, earliestMs: number, untouched: World | null, patient = false): Branch[] {
  const design = sent.config.design;
  const { resource, ttlMs, owner } = f;
  const ckey = counterKey(design, resource);
  // The ways the round can end differ only in which replies count; the give-up is one way, whichever.
  // A client that reads every reply and has no request timeout (spec 7.11) does not stop at the ttl: it waits for the
  // replies that come (none from a black hole: then it waits for good, and the model has it give up at the ttl).
  const terms = leaseTerms(design);
  const unbounded = terms.decides === 'every-reply' && (terms.clientTimeout === 'none' || terms.clientDeadline === 'none') && sent.config.requestTimeoutMs === undefined && !f.arrivals.includes('never');
  return roundEnds(f.arrivals, unbounded ? Number.POSITIVE_INFINITY : f.deadlineMs, earliestMs, earlyDecision(design, acquireDecision(design, f.votes))).flatMap(({ endMs, counted }, way): Branch[] => {
    // Judged at endMs (never before its resume), by the client's clock then.
    const afterNodes: World = { ...sent, nowMs: endMs };
    const votes = f.votes.map((v, i) => (counted[i] ? v : null));
    const grantedVotes = votes.filter((v): v is bigint => typeof v === 'bigint');
    // A reply later than the ttl (on the client's clock) is useless: the client has given up and does not
    // know what happened. Exactly at the ttl, the give-up and the reply race: both ways are allowed.
    const elapsed = read(sent.clients[client]!.mono, endMs) - f.startedMono;
    // Its keys stay until their ttl, or the release it sends as it gives up lands (7.1 step 4).
    const releasedAfter = elapsed < ttlMs || way > 0 ? null : releasedAfterGiveUp(afterNodes, client, resource, owner);
    const gaveUp: Branch[] =
      elapsed < ttlMs || way > 0
        ? []
        : [
            ...(untouched === null ? [] : [{ outcome: { kind: 'timed-out' } as const, next: { ...untouched, nowMs: afterNodes.nowMs }, events: [] }]),
            { outcome: { kind: 'timed-out' }, next: afterNodes, events: [] },
            ...(releasedAfter === null ? [] : [{ outcome: { kind: 'timed-out' } as const, next: releasedAfter, events: [] }]),
          ];
    // At the ttl itself only a reply read in time races the give-up.
    if (!patient && !unbounded && (elapsed > ttlMs || (elapsed === ttlMs && !counted.some(Boolean)))) {
      // A client with no deadline and no request timeout of its own (a library's declared contract, spec 7.11) waits for
      // the late replies and reads a grant in them as a grant, however late.
      const waits = leaseTerms(design).clientDeadline === 'none' && sent.config.requestTimeoutMs === undefined && way === 0;
      return [...gaveUp, ...(waits ? readLateReplies(sent, client, f, earliestMs) : readLate(gaveUp, f, earliestMs))];
    }
    const validityMs = ttlMs - elapsed - driftMarginMs(design, ttlMs);
    // A client that keeps no deadline computes no validity either: a quorum in time is a grant.
    const noDeadline = leaseTerms(design).clientDeadline === 'none';
    if (grantedVotes.length >= quorum(design) && (validityMs > 0 || noDeadline)) {
      const token = grantedVotes.reduce((a, b) => (b > a ? b : a));
      const ghost = ghostOf(afterNodes, resource);
      const epoch = ghost.grants + 1;
      const lease: Lease = { owner, token, validUntilMs: noDeadline ? null : f.startedMono + ttlMs - driftMarginMs(design, ttlMs), count: 1, buffered: [], epoch };
      // The write-back goes only to granting nodes whose counter is behind the token (none, while counters are in step); the lease is the
      // client's once enough of them answered that a quorum holds the token (7.3); the rest finish in the background.
      // None is sent when a quorum of the counted grants already holds the token: every later quorum meets one of them.
      const atToken = votes.filter((v) => typeof v === 'bigint' && v >= token).length;
      const behind = votes.map((v) => atToken < quorum(design) && typeof v === 'bigint' && v < token);
      const doneMs = behind.some(Boolean) ? roundEndMs(afterNodes, client, 0, timeoutMs(afterNodes, ttlMs), yesOrNever(behind, quorum(design) - atToken), (i) => behind[i]!) : afterNodes.nowMs;
      const raised: World = { ...afterNodes, nowMs: doneMs, nodes: afterNodes.nodes.map((n, i) => (behind[i] && receives(afterNodes, client, i) ? raiseCounter(n, ckey, token) : n)) };
      // The write-back is a second round trip: validity must still be left once it is done, or the grant is none (7.3). The counters
      // stay raised, and the client undoes its keys as after any refusal; no lease carries the token, so the ghost counts no grant.
      if (!noDeadline && doneMs > afterNodes.nowMs && ttlMs - (read(sent.clients[client]!.mono, doneMs) - f.startedMono) - driftMarginMs(design, ttlMs) <= 0) {
        return [...gaveUp, { outcome: { kind: 'denied', reason: 'validity-exhausted' }, next: releaseEverywhere(raised, client, resource, owner), events: [] }];
      }
      const written: World = {
        ...raised,
        ghost: withEntry(afterNodes.ghost, resource, { ...ghost, grants: epoch, maxToken: ghost.maxToken === null || token > ghost.maxToken ? token : ghost.maxToken }),
      };
      const next = withClient(written, client, (c) => withLease(c, resource, lease));
      return [
        ...gaveUp,
        {
          outcome: { kind: 'granted', token, validUntilMs: lease.validUntilMs },
          next,
          events: [{ kind: 'granted', client, resource, token, epoch, maxTokenBefore: ghost.maxToken }],
        },
      ];
    }
    // Failed: undo on every node (the client cannot know which ones said yes), a round of its own that the client does not wait for
    // (but a client that reads every reply does).
    const undone = { ...releaseEverywhere(afterNodes, client, resource, owner), nowMs: undoneAtMs(afterNodes, client, timeoutMs(afterNodes, ttlMs)) };
    const answered = counted.filter(Boolean).length;
    const reason = grantedVotes.length >= quorum(design) ? 'validity-exhausted' : answered < quorum(design) ? 'no-quorum' : 'held';
    return [...gaveUp, { outcome: { kind: 'denied', reason }, next: undone, events: [] }];
  });
}

/**
 * Session-bound acquisition (PostgreSQL advisory locks): granted if free or
 * already held by this client's session (it stacks); a new grant draws a
 * token from a durable per-resource sequence in the same transaction.
 */
function acquireSession(world: World, client: number, resource: string, latencyMs: number, first: boolean): readonly Branch[] {
  if (!isReachable(world, client, 0)) {
    // The statement fails on the open connection, so the client ends its session (7.4, "Unknown outcomes"): its
    // leases go with it; the close cannot cross the cut link, and the server keeps the locks until heal or keepalive.
    // A cut link fails at once, as with ttl designs (4.2): no reply to wait for, so latencyMs does not apply.
    const closed = lateReplyEnds(world.config.design) === 'session' ? withClient(world, client, (c) => ({ ...c, sessionLost: false, leases: {} })) : world;
    return single({ kind: 'denied', reason: 'no-quorum' }, closed);
  }
  // The client's statement timeout, on its own clock: a later reply is an unknown outcome.
  const s = statementTiming(world, client, latencyMs, first);
  const later: World = { ...world, nowMs: s.endMs };
  if (s.inTime === 'yes') return answeredSession(world, later, client, resource);
  const gaveUp = lateAcquire(world, later, client, resource);
  // Exactly at the timeout the reply and the give-up race: either may win.
  return s.inTime === 'race' ? [...gaveUp, ...answeredSession(world, later, client, resource)] : gaveUp;
}

/**
 * A statement to the PostgreSQL server sent now (spec 7.4): its reply comes
 * `latencyMs` plus the server's own delay later, or never (a black hole). A
 * slow server is one slow round trip per operation, like latency: an
 * acquire's retries (`first` false) are not slowed; a black hole swallows all.
 * `inTime`: before the client's statement timeout on its clock ('race':
 * exactly at it). `endMs`: when the client has its answer or gives up (a late
 * reply's arrival, a black hole's timeout).
 */
function statementTiming(world: World, client: number, latencyMs: number, first = true): { readonly inTime: 'yes' | 'no' | 'race'; readonly endMs: number; readonly arrives: boolean } {
  const delay = world.nodes[0]!.delay ?? 0;
  if (delay === 'never') return { inTime: 'no', endMs: statementDeadlineMs(world, client), arrives: false };
  const endMs = world.nowMs + latencyMs + (first ? delay : 0);
  const elapsed = read(world.clients[client]!.mono, endMs) - monoNow(world, client);
  const timeoutMs = replyTimeoutMs(world.config.design)!;
  return { inTime: elapsed < timeoutMs ? 'yes' : elapsed === timeoutMs ? 'race' : 'no', endMs, arrives: true };
}

/** When a statement sent now stops being waited for (its timeout, in true time): a client paused past it reads no reply. */
function statementDeadlineMs(world: World, client: number): number {
  return trueTimeOf(world.clients[client]!.mono, monoNow(world, client) + replyTimeoutMs(world.config.design)!, world.nowMs);
}

/**
 * A reply later than the statement timeout: the client drops the connection
 * and returns `timed-out`, so nothing is held behind it (spec 7.4). Session
 * locks: the session ends, every lock it held goes and the client's leases
 * are lost (connection-lost). Transaction locks: only the attempt's own
 * connection goes (a stacked level is released with its transaction's
 * commit). On both designs a new lock's statement may have drawn a token
 * first (pg-xact mints it committed on its own before BEGIN, 7.5), so the
 * counter may have moved.
 */
function lateAcquire(world: World, later: World, client: number, resource: string): Branch[] {
  const timedOut = { kind: 'timed-out' } as const;
  const session = lateReplyEnds(world.config.design) === 'session';
  // A stacked level draws nothing; a not-reentrant session library's per-call session is modelled without a draw.
  if (!session && (entryOf(world.clients[client]!.leases, resource) !== undefined || world.config.design.kind !== 'pg-xact')) return [{ outcome: timedOut, next: later, events: [] }];
  const ended = session ? dropSessions(later, [client]) : later;
  const server = later.nodes[0]!;
  const free = entryOf(server.keys, resource) === undefined;
  if (!free) return [{ outcome: timedOut, next: ended, events: [] }];
  const bumped = bumpCounter(ended.nodes[0]!, counterKey(world.config.design, resource), tokenBase(world)).node;
  return [
    { outcome: timedOut, next: ended, events: [] },
    { outcome: timedOut, next: { ...ended, nodes: [bumped] }, events: [] },
  ];
}

/** The server's answer, read in time. */
function answeredSession(world: World, later: World, client: number, resource: string): readonly Branch[] {
  const design = world.config.design;
  const server = world.nodes[0]!;
  const key = entryOf(server.keys, resource);
  const lease = entryOf(world.clients[client]!.leases, resource);
  if (key !== undefined) {
    if (key.owner.client !== client || lease === undefined || !isReentrant(design)) return single({ kind: 'denied', reason: 'held' }, later);
    const stacked: World = {
      ...later,
      nodes: [setKey(server, resource, { ...key, count: key.count + 1 })],
    };
    return single({ kind: 'granted', token: lease.token, validUntilMs: null }, withClient(stacked, client, (c) => withLease(c, resource, { ...lease, count: lease.count + 1 })));
  }
  const owner: Owner = { client, attempt: world.clients[client]!.attempts + 1 };
  const bumped = bumpCounter(server, counterKey(design, resource), tokenBase(world));
  const ghost = ghostOf(world, resource);
  const epoch = ghost.grants + 1;
  const token = bumped.value;
  const granted: World = {
    ...later,
    nodes: [setKey(bumped.node, resource, { owner, expiresAtMs: null, ttlMs: null, count: 1, liveSinceTrueMs: world.nowMs })],
    ghost: withEntry(world.ghost, resource, { ...ghost, grants: epoch, maxToken: ghost.maxToken === null || token > ghost.maxToken ? token : ghost.maxToken }),
  };
  const next = withClient(granted, client, (c) => withLease({ ...c, attempts: owner.attempt }, resource, { owner, token, validUntilMs: null, count: 1, buffered: [], epoch }));
  return single({ kind: 'granted', token, validUntilMs: null }, next, [
    { kind: 'granted', client, resource, token, epoch, maxTokenBefore: ghost.maxToken },
  ]);
}

function extend(world: World, client: number, resource: string, ttlMs: number, latencyMs: number): readonly Branch[] {
  return extendRefused(world, client, resource) ?? sendExtend(world, client, resource, ttlMs, latencyMs).flatMap(({ sent, flight, events }) => finishExtend(sent, client, flight, world.nowMs, events));
}

/** An extension the client refuses before sending anything: no lease, or one already over (never revived: the client drops it). */
function extendRefused(world: World, client: number, resource: string): readonly Branch[] | null {
  if (entryOf(world.clients[client]!.leases, resource) === undefined) return single({ kind: 'not-extended', reason: 'not-held' }, world);
  if (!holdsValid(world, client, resource)) return single({ kind: 'not-extended', reason: 'expired' }, withClient(world, client, (c) => withLease(c, resource, null)));
  return null;
}

/** The extension's round goes out: each node that receives it and still holds the client's live key re-arms it. */
function sendExtend(world: World, client: number, resource: string, ttlMs: number, latencyMs: number): Array<{ readonly sent: World; readonly flight: ExtendFlight; readonly events: readonly WorldEvent[] }> {
  const design = world.config.design;
  const lease = entryOf(world.clients[client]!.leases, resource)!;
  const round = roundOf(world, client, latencyMs, timeoutMs(world, ttlMs));
  const startedMono = monoNow(world, client);
  // A shorter ttl counts from the send: a node may re-arm the key with it at once, so the lease is good until
  // the earlier of the two deadlines until the replies say more, and after a refusal (spec 4.1, MUTEX-1).
  // A library whose lease stays as it was ('unchanged') lowers nothing: what its old deadline costs is judged by consequence.
  const shortened = startedMono + ttlMs - driftMarginMs(design, ttlMs);
  const lowers = !keepsDeadline(leaseTerms(design).failedExtend);
  const atSend = lowers && lease.validUntilMs !== null && shortened < lease.validUntilMs ? withClient(world, client, (c) => withLease(c, resource, { ...lease, validUntilMs: shortened })) : world;
  return fanOut(world, client, resource, (node, _index, alive) => {
    const key = entryOf(node.keys, resource);
    if (!alive || key === undefined || !sameOwner(key.owner, lease.owner)) return { node, vote: false };
    return {
      node: setKey(node, resource, { ...key, ttlMs, expiresAtMs: expiryNow(design, node, world.nowMs) + ttlMs, liveSinceTrueMs: world.nowMs }),
      vote: true,
    };
  }).map(({ nodes, votes }) => {
    const events: WorldEvent[] = nodes.flatMap((n, i): WorldEvent[] => {
      const before = entryOf(world.nodes[i]!.keys, resource);
      return before !== undefined && entryOf(n.keys, resource) !== before
        ? [{ kind: 'key-changed', node: i, resource, byClient: client, byOwner: lease.owner, ownerBefore: before.owner, change: 'extended' }]
        : [];
    });
    return { sent: { ...atSend, nodes }, flight: { kind: 'extend', resource, ttlMs, startedMono, deadlineMs: round.deadlineMs, arrivals: round.arrivals, votes: votes.map((v) => v === true) }, events };
  });
}

/**
 * The client reads the extension's replies (from `earliestMs` on): extended
 * if a quorum answered yes in time and, on its clock when they came, both
 * the new deadline (from before the requests) and the old one are still
 * ahead. An old deadline reached just then races the replies.
 */
function finishExtend(sent: World, client: number, f: ExtendFlight, earliestMs: number, events: readonly WorldEvent[]): Branch[] {
  const design = sent.config.design;
  const lease = entryOf(sent.clients[client]!.leases, f.resource);
  // A client with no deadline and no request timeout of its own (a library's declared contract, spec 7.11) waits for
  // the replies however late, as its acquire does (readLateReplies); from a black hole none comes, so there it does not.
  // So does a client with a deadline that declares no request timeout (clientTimeout 'none'): a late quorum is still refused below.
  const terms = leaseTerms(design);
  const waits = (terms.clientDeadline === 'none' || terms.clientTimeout === 'none') && sent.config.requestTimeoutMs === undefined && !f.arrivals.includes('never');
  return roundEnds(f.arrivals, waits ? Number.POSITIVE_INFINITY : f.deadlineMs, earliestMs, earlyDecision(design, yesOrNever(f.votes, quorum(design)))).flatMap(({ endMs, counted }): Branch[] => {
    const after: World = { ...sent, nowMs: endMs };
    // Denied: the nodes that answered no leave too few for a quorum (not a refusal for want of answers).
    const denied = f.votes.filter((v, i) => !v && counted[i]).length > f.votes.length - quorum(design);
    const refused: Branch = lease === undefined ? { outcome: { kind: 'not-extended', reason: 'no-quorum' }, next: after, events } : failedExtend(after, client, f.resource, lease, denied, f.ttlMs, events);
    if (lease === undefined) return [refused];
    const yes = f.votes.filter((v, i) => v && counted[i]).length;
    // No deadline (declared by the library): a quorum re-armed its keys, and that is all the client learns.
    if (lease.validUntilMs === null) return leaseTerms(design).clientDeadline === 'none' && yes >= quorum(design) ? [{ outcome: { kind: 'extended', validUntilMs: f.startedMono + f.ttlMs }, next: after, events }] : [refused];
    const validUntilMs = f.startedMono + f.ttlMs - driftMarginMs(design, f.ttlMs);
    const mono = read(sent.clients[client]!.mono, endMs);
    if (yes < quorum(design) || mono >= validUntilMs || mono > lease.validUntilMs) return [refused];
    const extended: Branch = { outcome: { kind: 'extended', validUntilMs }, next: withClient(after, client, (c) => withLease(c, f.resource, { ...lease, validUntilMs })), events };
    return mono === lease.validUntilMs ? [extended, refused] : [extended];
  });
}

/**
 * What a statement in flight across a pause leaves when its client resumes
 * past its timeout (see InFlight 'reply'); null for an operation that is no
 * statement to the server, or one that failed at once.
 */
function statementMissed(world: World, op: Operation): NonNullable<Extract<InFlight, { readonly kind: 'reply' }>['missed']> | null {
  const design = world.config.design;
  const statement = op.kind === 'acquire' || op.kind === 'release' || (op.kind === 'write' && rulesOf(design).writes === 'at-commit');
  // A release or write with no lease sends nothing.
  if (!isSessionBound(design) || !statement || (op.kind !== 'acquire' && entryOf(world.clients[op.client]!.leases, op.resource) === undefined)) return null;
  const session = lateReplyEnds(design) === 'session';
  // On a cut link the statement failed at once and the client has closed its session already (unheard).
  const ends = !isReachable(world, op.client, 0)
    ? 'nothing'
    : session
      ? 'session'
      : op.kind === 'release' || (op.kind === 'acquire' && entryOf(world.clients[op.client]!.leases, op.resource) !== undefined)
        ? 'nothing'
        : 'transaction';
  return { afterMs: statementDeadlineMs(world, op.client), ends, resource: op.resource };
}

/**
 * A refused extension, as the client's terms have it: by default the lease
 * is kept (until its deadline) with its keys; a library may drop the lease,
 * and delete the keys it still holds (compare-and-delete on every node it
 * reaches, a round it does not wait for).
 */
function failedExtend(after: World, client: number, resource: string, lease: Lease, denied: boolean, ttlMs: number, events: readonly WorldEvent[]): Branch {
  const terms = leaseTerms(after.config.design).failedExtend ?? { lease: 'kept', keys: 'kept' };
  const cleared = terms.keys === 'deleted' ? { ...releaseEverywhere(after, client, resource, lease.owner), nowMs: undoneAtMs(after, client, timeoutMs(after, ttlMs)) } : after;
  const deleted: WorldEvent[] = after.nodes.flatMap((n, i): WorldEvent[] => {
    const before = entryOf(n.keys, resource);
    return before !== undefined && entryOf(cleared.nodes[i]!.keys, resource) === undefined
      ? [{ kind: 'key-changed', node: i, resource, byClient: client, byOwner: lease.owner, ownerBefore: before.owner, change: 'deleted' }]
      : [];
  });
  // Otherwise the lease as it stands (lowered at the send for 'kept' and 'dropped' only).
  const next = dropsLease(terms, denied) ? withClient(cleared, client, (c) => withLease(c, resource, null)) : cleared;
  return { outcome: { kind: 'not-extended', reason: 'no-quorum' }, next, events: [...events, ...deleted] };
}

/** Whether an operation is a statement to the PostgreSQL server that the server answers (the store outside pg-xact is another system). */
function reachesServer(world: World, op: Operation): boolean {
  const toServer = op.kind === 'acquire' || op.kind === 'release' || (op.kind === 'write' && rulesOf(world.config.design).writes === 'at-commit');
  return isSessionBound(world.config.design) && toServer && isReachable(world, op.client, 0);
}

function release(world: World, client: number, resource: string, latencyMs: number): readonly Branch[] {
  const design = world.config.design;
  const lease = entryOf(world.clients[client]!.leases, resource);
  if (lease === undefined) return single({ kind: 'not-held' }, world);
  if (isSessionBound(design)) return releaseSession(world, client, resource, lease, latencyMs);
  // Compare-and-delete on every node that receives it; the client waits until a quorum answered (a release's own bound is 1 s).
  const doneMs = roundEndMs(world, client, latencyMs, timeoutMs(world, 1000), earlyDecision(design, quorumAnswered(design, world.nodes.length)));
  const cleared = releaseEverywhere(world, client, resource, lease.owner);
  const events: WorldEvent[] = world.nodes.flatMap((n, i): WorldEvent[] => {
    const before = entryOf(n.keys, resource);
    return before !== undefined && entryOf(cleared.nodes[i]!.keys, resource) === undefined
      ? [{ kind: 'key-changed', node: i, resource, byClient: client, byOwner: lease.owner, ownerBefore: before.owner, change: 'deleted' }]
      : [];
  });
  return single({ kind: 'released' }, withClient({ ...cleared, nowMs: doneMs }, client, (c) => withLease(c, resource, null)), events);
}

/** Unlock (session) or commit (transaction): pg-xact applies the buffered writes atomically with the release. */
function releaseSession(world: World, client: number, resource: string, lease: Lease, latencyMs: number): readonly Branch[] {
  const design = world.config.design;
  if (!isReachable(world, client, 0)) {
    // The unlock or commit gets no reply: its outcome is unknown, so the client closes the connection (7.4,
    // "Unknown outcomes"). The close cannot cross the cut link either: the server keeps the lock until it
    // notices (keepalive, at an advance) or the close arrives (at heal); a transaction's buffered writes are lost.
    // pg-session: the session goes, with every lease on it; pg-xact: the lease's own transaction.
    const gone = (c: ClientState): ClientState => (lateReplyEnds(design) === 'session' ? { ...c, sessionLost: false, leases: {} } : withLease(c, resource, null));
    return single({ kind: 'timed-out' }, withClient(world, client, gone));
  }
  const s = statementTiming(world, client, latencyMs);
  const answered = releasedSession(world, client, resource, lease).map((b) => ({ ...b, next: { ...b.next, nowMs: s.endMs } }));
  if (s.inTime === 'yes') return answered;
  // No reply in time: the client drops its connection (7.4). pg-session: the session goes, with every lock and lease on it.
  // pg-xact: the COMMIT ran if it arrived (a black hole's may not have: either), and the transaction is over either way.
  const late: Branch[] =
    lateReplyEnds(design) === 'session'
      ? [{ outcome: { kind: 'timed-out' }, next: dropSessions({ ...world, nowMs: s.endMs }, [client]), events: [] }]
      : [
          ...answered.map((b) => ({ ...b, outcome: { kind: 'timed-out' } as const })),
          ...(s.arrives ? [] : [{ outcome: { kind: 'timed-out' } as const, next: abortTransaction({ ...world, nowMs: s.endMs }, client, resource), events: [] }]),
        ];
  return s.inTime === 'race' ? [...answered, ...late] : late;
}

/** pg-xact: the client drops the transaction's connection; the server aborts it, its lock and its buffered writes go. */
function abortTransaction(world: World, client: number, resource: string): World {
  const lease = entryOf(world.clients[client]!.leases, resource);
  if (lease === undefined) return world;
  const server = world.nodes[0]!;
  const key = entryOf(server.keys, resource);
  const nodes = key !== undefined && sameOwner(key.owner, lease.owner) ? [removeKey(world.config.design, server, resource, tokenBase(world)), ...world.nodes.slice(1)] : world.nodes;
  return withClient({ ...world, nodes }, client, (c) => withLease(c, resource, null));
}

/** The unlock or commit, answered. */
function releasedSession(world: World, client: number, resource: string, lease: Lease): readonly Branch[] {
  const design = world.config.design;
  const server = world.nodes[0]!;
  const key = entryOf(server.keys, resource);
  const own = key !== undefined && sameOwner(key.owner, lease.owner) ? key : undefined;
  if (rulesOf(design).stacking === 'per-release' && lease.count > 1) {
    const nodes = own === undefined ? world.nodes : [setKey(server, resource, { ...own, count: own.count - 1 })];
    return single({ kind: 'released' }, withClient({ ...world, nodes }, client, (c) => withLease(c, resource, { ...lease, count: lease.count - 1 })));
  }
  let next: World = { ...world, nodes: [own !== undefined ? removeKey(design, server, resource, tokenBase(world)) : server] };
  const events: WorldEvent[] =
    own === undefined ? [] : [{ kind: 'key-changed', node: 0, resource, byClient: client, byOwner: lease.owner, ownerBefore: own.owner, change: 'deleted' }];
  if (rulesOf(design).writes === 'at-commit') {
    for (const value of lease.buffered) {
      const delivered = deliverWrite(next, client, { resource, value, token: lease.token, epoch: lease.epoch });
      next = delivered.world;
      events.push(delivered.event);
    }
  }
  return single({ kind: 'released' }, withClient(next, client, (c) => withLease(c, resource, null)), events);
}

function write(world: World, client: number, resource: string, value: string, latencyMs: number, delayed: boolean): readonly Branch[] {
  const lease = entryOf(world.clients[client]!.leases, resource);
  if (lease === undefined || !holdsValid(world, client, resource)) return single({ kind: 'not-held' }, world);
  if (rulesOf(world.config.design).writes === 'at-commit') {
    // The statement cannot reach the transaction's connection: the client gives the transaction up.
    if (!isReachable(world, client, 0)) return single({ kind: 'not-held' }, withClient(world, client, (c) => withLease(c, resource, null)));
    // Inside the transaction: visible to others only at commit. A reply later than the statement timeout: the client
    // drops the transaction's connection (7.4), and the server aborts it.
    const s = statementTiming(world, client, latencyMs);
    const later: World = { ...world, nowMs: s.endMs };
    const accepted = single({ kind: 'accepted' }, withClient(later, client, (c) => withLease(c, resource, { ...lease, buffered: [...lease.buffered, value] })));
    if (s.inTime === 'yes') return accepted;
    const late = single({ kind: 'timed-out' }, abortTransaction(later, client, resource));
    return s.inTime === 'race' ? [...accepted, ...late] : late;
  }
  const w: PendingWrite = { resource, value, token: lease.token, epoch: lease.epoch };
  // Checked and sent; the network holds it until the client's deliver (spec 3, "Delayed requests").
  if (delayed) return single({ kind: 'ok' }, withClient(world, client, (c) => ({ ...c, pendingWrite: w })));
  // The store applies the write when it arrives; its reply may come later.
  const delivered = deliverWrite(world, client, w);
  return single(delivered.outcome, { ...delivered.world, nowMs: world.nowMs + latencyMs }, [delivered.event]);
}

// ---------------------------------------------------------------------------
// Faults.

function inject(world: World, fault: Fault): readonly Branch[] {
  const design = world.config.design;
  const ok = (next: World, events: readonly WorldEvent[] = []): readonly Branch[] => single({ kind: 'ok' }, next, events);
  // A switch the compiler checks for exhaustiveness (the return type), not ts-pattern: this runs once per step of an exploration.
  const f = fault;
  switch (f.kind) {
    case 'advance': {
      const later: World = { ...world, nowMs: world.nowMs + f.ms };
      // Keepalive timing is the deployment's: while time passes the server may or may not notice a cut client.
      const unheard = isSessionBound(design) ? cutSessions(world) : [];
      return unheard.length === 0 ? ok(later) : [...ok(later), ...ok(dropSessions(later, unheard, 'unheard'))];
    }
    case 'clock-step': {
      const node = world.nodes[f.node]!;
      const stepped = (n: NodeState): World => ({ ...world, nodes: world.nodes.map((m, i) => (i === f.node ? { ...n, wall: stepClock(n.wall, world.nowMs, f.deltaMs) } : m)) });
      // A key already dead may or may not have been purged (active expiry) before the step: a step back revives it only if not.
      const dead = Object.keys(node.keys).filter((r) => livenessIn(world, node, r).every((alive) => !alive));
      if (dead.length === 0) return ok(stepped(node));
      const purged = dead.reduce((n, r) => removeKey(design, n, r, tokenBase(world)), node);
      return [...ok(stepped(purged)), ...ok(stepped(node))];
    }
    case 'clock-drift': {
      const t = f.target;
      if ('node' in t) {
        return ok({
          ...world,
          nodes: world.nodes.map((n, i) => (i === t.node ? { ...n, wall: setDrift(n.wall, world.nowMs, f.driftPpm), mono: setDrift(n.mono, world.nowMs, f.driftPpm) } : n)),
        });
      }
      return ok(withClient(world, t.client, (c) => ({ ...c, mono: setDrift(c.mono, world.nowMs, f.driftPpm) })));
    }
    case 'pause': {
      const op = f.inFlight;
      const pausing = (next: World, inFlight: InFlight, events: readonly WorldEvent[] = []): Branch => ({ outcome: { kind: 'ok' }, next: withClient(next, f.client, (c) => ({ ...c, paused: true, inFlight })), events });
      if (op?.kind === 'acquire' && hasTtl(design)) {
        // The first round goes out; its replies wait for the resume.
        const put = sendAcquire(world, op.client, op.resource, op.ttlMs!, op.latencyMs ?? 0, op.retries ?? 0, op.retryDelayMs ?? 0).map(({ sent, flight }) => pausing(sent, flight));
        if (rulesOf(design).acquireFirstRound(design) === 'put') return put;
        // A consensus lock's first round is its lease: the client may also have paused before it read the grant and sent the put.
        // First, as a stopped client is most often stopped there (the runner's token renaming tries the first grant first).
        const lease = leaseGranted(world, op.client, op.resource, op.ttlMs!, op.latencyMs ?? 0, op.retries ?? 0, op.retryDelayMs ?? 0);
        return [pausing(lease.sent, lease.flight), ...put];
      }
      if (op?.kind === 'extend') {
        const refused = extendRefused(world, op.client, op.resource);
        if (refused !== null) return refused.map((b) => pausing(b.next, { kind: 'reply', outcome: b.outcome, doneMs: b.next.nowMs }));
        return sendExtend(world, op.client, op.resource, op.ttlMs, op.latencyMs ?? 0).map(({ sent, flight, events }) => pausing(sent, flight, events));
      }
      const missed = op === undefined ? null : statementMissed(world, op);
      if (op !== undefined && op.kind !== 'read' && missed !== null && isReachable(world, op.client, 0)) {
        // A statement to a PostgreSQL server: it runs as it arrives (a black hole's never does); whether its reply
        // or the client's timer comes first is judged at the resume.
        const s = statementTiming(world, op.client, op.latencyMs ?? 0);
        // A new lock may need a connection first (unless one is open; pg-xact sends BEGIN with the lock in one round trip):
        // its statement then goes out after the resume, or it went out before the pause.
        const later = op.kind === 'acquire' && entryOf(world.clients[op.client]!.leases, op.resource) === undefined;
        const laterBranch: Branch[] = later ? [pausing(world, { kind: 'later', client: op.client, resource: op.resource, arrivalMs: s.arrives ? s.endMs : Number.POSITIVE_INFINITY, deadlineMs: missed.afterMs })] : [];
        if (!s.arrives) {
          const ends = missed.ends === 'session' ? 'session' : op.kind === 'acquire' ? 'nothing' : 'transaction';
          return [pausing(world, { kind: 'reply', outcome: { kind: 'timed-out' }, doneMs: Number.POSITIVE_INFINITY, missed: { ...missed, ends } }), ...laterBranch];
        }
        const { delay, ...calm } = world.nodes[0]!;
        const answered = operate({ ...world, nodes: [calm, ...world.nodes.slice(1)] }, { ...op, latencyMs: 0 });
        return [
          ...answered.map((b) =>
            pausing({ ...b.next, nowMs: world.nowMs, nodes: [{ ...b.next.nodes[0]!, ...(delay === undefined ? {} : { delay }) }, ...b.next.nodes.slice(1)] }, { kind: 'reply', outcome: b.outcome, doneMs: s.endMs, missed }, b.events),
          ),
          ...laterBranch,
        ];
      }
      if (op !== undefined) {
        // Settled when sent; the client reads the outcome at its resume, or when the round ends if that is later.
        // A statement that failed at once on a cut link is read at the resume too: past its timeout, the timer fires first.
        return operate(world, op).map((b) =>
          pausing({ ...b.next, nowMs: world.nowMs }, { kind: 'reply', outcome: b.outcome, doneMs: b.next.nowMs, ...(missed === null ? {} : { missed }) }, b.events),
        );
      }
      const lease = f.pendingWrite === undefined ? undefined : entryOf(world.clients[f.client]!.leases, f.pendingWrite.resource);
      // The check happens now; only a write that passed it is left pending.
      const pendingWrite: PendingWrite | null =
        f.pendingWrite !== undefined && lease !== undefined && holdsValid(world, f.client, f.pendingWrite.resource)
          ? { resource: f.pendingWrite.resource, value: f.pendingWrite.value, token: lease.token, epoch: lease.epoch }
          : null;
      return ok(withClient(world, f.client, (c) => ({ ...c, paused: true, pendingWrite })));
    }
    case 'resume':
      return resume(world, f.client);
    case 'deliver': {
      // The delayed write lands now, unchecked: the lease it was checked under may have ended since.
      const pending = world.clients[f.client]!.pendingWrite!;
      const delivered = deliverWrite(withClient(world, f.client, (c) => ({ ...c, pendingWrite: null })), f.client, pending);
      return single(delivered.outcome, delivered.world, [delivered.event]);
    }
    case 'replicate':
      return ok(replicated(world, f.node));
    case 'crash': {
      const onCrash = rulesOf(design).onCrash;
      const crashing = (n: NodeState): NodeState =>
        onCrash === 'keep'
          ? { ...n, up: false }
          : onCrash === 'promote-replica'
            ? // Sentinel promotes the replica with what replication had delivered; the rest is lost.
              { ...n, up: false, keys: n.replica?.keys ?? {}, counters: n.replica?.counters ?? {} }
            : // etcd's leader revokes expired leases as they expire: only live keys are left to refresh (each revoke's delete moves the revision).
              Object.keys(n.keys).reduce<NodeState>((m, r) => (livenessIn(world, n, r).includes(true) ? m : removeKey(design, m, r, tokenBase(world))), { ...n, up: false });
      const crashed = crashing(world.nodes[f.node]!);
      // Within the expiry tolerance a real lessor may not have revoked an expired lease yet (spec 7.7): each such key
      // was revoked before the crash or survives it, a branch per combination (none without a tolerance).
      const unsure = onCrash === 'drop-expired' ? Object.keys(crashed.keys).filter((r) => livenessIn(world, crashed, r).includes(false)) : [];
      const variants = unsure.reduce<NodeState[]>((ns, r) => ns.flatMap((n) => [n, removeKey(design, n, r, tokenBase(world))]), [crashed]);
      return variants.flatMap((node) => {
        const down: World = { ...world, nodes: world.nodes.map((n, i) => (i === f.node ? node : n)) };
        // A failover is the token issuer's restart: its counters are now the promoted replica's (DUR-1).
        const failedOver: WorldEvent[] =
          onCrash === 'promote-replica' ? [{ kind: 'restarted', node: f.node, countersBefore: world.nodes[f.node]!.counters, countersAfter: down.nodes[f.node]!.counters }] : [];
        // A database crash ends every session, and session-bound locks with them.
        return ok(isSessionBound(design) ? dropSessions(down, world.clients.map((_c, i) => i)) : down, failedOver);
      });
    }
    case 'restart': {
      const before = world.nodes[f.node]!;
      const kept = persists(design);
      const mono = expiryNow(design, before, world.nowMs);
      const keys = !kept
        ? {}
        : rulesOf(design).onRestart === 'refresh'
          ? // A new etcd leader refreshes every lease to its full ttl, plus its election timeout (lessor.Promote): that
            // grace is the design's, so LIVE-1's bound counts from its end.
            Object.fromEntries(
              Object.entries(before.keys).map(([r, k]) => [r, { ...k, expiresAtMs: mono + (k.ttlMs ?? 0) + refreshExtendMs(design), liveSinceTrueMs: world.nowMs + refreshExtendMs(design) }]),
            )
          : before.keys;
      const counters = kept ? before.counters : {};
      // A failed-over primary comes back as the new primary's replica and resynchronises in full.
      const replica = before.replica === undefined ? {} : { replica: { keys, counters } };
      const after: NodeState = { ...before, up: true, keys, counters, availableFromTrueMs: world.nowMs + restartDelayMs(design), ...replica };
      return ok({ ...world, nodes: world.nodes.map((n, i) => (i === f.node ? after : n)) }, [
        { kind: 'restarted', node: f.node, countersBefore: before.counters, countersAfter: after.counters },
      ]);
    }
    case 'partition': {
      const link = `${f.client}:${f.node}`;
      // A session outlives a cut link: the server notices only later, through keepalive (see advance).
      return ok(world.partitions.includes(link) ? world : { ...world, partitions: [...world.partitions, link].sort() });
    }
    case 'heal': {
      const healed: World = { ...world, partitions: world.partitions.filter((l) => l !== `${f.client}:${f.node}`) };
      return ok(isSessionBound(design) && f.node === 0 && world.partitions.includes(`${f.client}:0`) ? closesCross(healed, f.client) : healed);
    }
    case 'node-delay':
      return ok({
        ...world,
        nodes: world.nodes.map((n, i) => {
          if (i !== f.node) return n;
          const { delay: _old, ...rest } = n;
          return f.ms === 0 ? rest : { ...rest, delay: f.ms };
        }),
      });
    case 'kill-connection':
      return ok(isSessionBound(design) ? dropSessions(world, [f.client]) : world);
  }
}

/**
 * A healed link lets through the closes it held back (spec 3, 7.4): a session
 * (or transaction) the client gave up is ended on the server, and a running
 * client whose session the server ended unheard now hears of it (a paused one
 * at resume).
 */
function closesCross(world: World, client: number): World {
  const c = world.clients[client]!;
  const server = world.nodes[0]!;
  // Locks of this client that none of its leases stands for: left by a session it closed.
  const orphans = Object.entries(server.keys).filter(([r, k]) => k.owner.client === client && !(entryOf(c.leases, r) !== undefined && sameOwner(entryOf(c.leases, r)!.owner, k.owner)));
  const nodes = orphans.length === 0 ? world.nodes : [orphans.reduce((n, [r]) => removeKey(world.config.design, n, r, tokenBase(world)), server), ...world.nodes.slice(1)];
  const next: World = { ...world, nodes };
  return c.sessionLost && !c.paused ? withClient(next, client, (s) => ({ ...s, sessionLost: false, leases: {} })) : next;
}

/** Clients cut from the server whose session still holds a lock there: the ones keepalive may end. */
function cutSessions(world: World): number[] {
  const holders = new Set(Object.values(world.nodes[0]!.keys).map((k) => k.owner.client));
  return [...holders].filter((c) => world.partitions.includes(`${c}:0`)).sort((a, b) => a - b);
}

/**
 * The server ends these clients' sessions: their advisory locks go at once
 * (and an open transaction rolls back). `heard`: a running client notices at
 * once and drops its leases, a paused one when it resumes (kill-connection, a
 * crash). `unheard`: the server noticed a dead link (keepalive), and no client
 * hears of it until it next reaches the server.
 */
function dropSessions(world: World, clients: readonly number[], told: 'heard' | 'unheard' = 'heard'): World {
  const gone = new Set(clients);
  const nodes = world.nodes.map((n) => {
    let kept = n;
    for (const [resource, key] of Object.entries(n.keys)) if (gone.has(key.owner.client)) kept = removeKey(world.config.design, kept, resource, tokenBase(world));
    return kept;
  });
  return {
    ...world,
    nodes,
    clients: world.clients.map((c, i) =>
      !gone.has(i) ? c : c.paused || told === 'unheard' ? { ...c, sessionLost: Object.keys(c.leases).length > 0 || c.sessionLost } : { ...c, leases: {} },
    ),
  };
}

/** The client runs again: a write checked before the pause goes out first, unchecked; then it learns of a lost session. */
function resume(world: World, client: number): readonly Branch[] {
  const c = world.clients[client]!;
  let next = withClient(world, client, (s) => ({ ...s, paused: false, pendingWrite: null, inFlight: null }));
  const events: WorldEvent[] = [];
  const pending = c.pendingWrite;
  if (pending !== null) {
    if (rulesOf(world.config.design).writes === 'at-commit') {
      // The statement goes to the transaction's own connection: dead if the session was lost.
      const lease = entryOf(c.leases, pending.resource);
      if (!c.sessionLost && lease !== undefined && isReachable(world, client, 0)) {
        // A black-holed server swallows it: the client gives up at its statement timeout and drops the transaction (7.4).
        // A slow one answers it one slow round trip later.
        const delay = world.nodes[0]!.delay ?? 0;
        next =
          delay === 'never'
            ? abortTransaction({ ...next, nowMs: statementDeadlineMs(next, client) }, client, pending.resource)
            : withClient({ ...next, nowMs: next.nowMs + delay }, client, (s) => withLease(s, pending.resource, { ...lease, buffered: [...lease.buffered, pending.value] }));
      }
    } else {
      const delivered = deliverWrite(next, client, pending);
      next = delivered.world;
      events.push(delivered.event);
    }
  }
  // A lost session is heard of at resume, unless the link is cut: then at the next statement that gets through.
  const hears = !world.partitions.includes(`${client}:0`);
  if (c.sessionLost && hears) next = withClient(next, client, (s) => ({ ...s, sessionLost: false, leases: {} }));
  const f = c.inFlight;
  if (f === null) return single({ kind: 'ok' }, next, events);
  switch (f.kind) {
    case 'reply': {
      const readMs = Math.max(next.nowMs, f.doneMs);
      const m = f.missed;
      if (m === undefined || readMs < m.afterMs) return single(f.outcome, { ...next, nowMs: readMs }, events);
      // A statement's reply read only after its timeout (the client resumed past it, or the reply is later): the timer
      // fires first, and the client drops its connection (7.4). Exactly at the timeout, either.
      const endMs = Math.max(next.nowMs, m.afterMs);
      const gone = m.ends === 'session' ? dropSessions(next, [client]) : m.ends === 'transaction' ? abortTransaction(next, client, m.resource) : next;
      const missed = single({ kind: 'timed-out' }, { ...gone, nowMs: endMs }, events);
      return readMs === m.afterMs ? [...single(f.outcome, { ...next, nowMs: readMs }, events), ...missed] : missed;
    }
    case 'later': {
      // The first round trip's reply (a connect, a BEGIN), read at the resume or when it comes; past its timeout nothing is held yet.
      const readMs = Math.max(next.nowMs, f.arrivalMs);
      const missed = single({ kind: 'timed-out' }, { ...next, nowMs: Math.max(next.nowMs, f.deadlineMs) }, events);
      if (readMs > f.deadlineMs) return missed;
      const sent = acquire({ ...next, nowMs: readMs }, client, f.resource, undefined, 0, 0, 0, false).map((b) => ({ ...b, events: [...events, ...b.events] }));
      return readMs === f.deadlineMs ? [...sent, ...missed] : sent;
    }
    case 'extend':
      return finishExtend(next, client, f, next.nowMs, events);
    case 'acquire':
      return retried(finishAcquire(next, client, f, next.nowMs, null), client, f);
    case 'lease':
      return resumeAfterLease(next, client, f, events);
  }
}

/** A denied first attempt goes on with its retries, as a blocking acquire does. */
function retried(first: readonly Branch[], client: number, f: AcquireFlight | LeaseFlight): Branch[] {
  return first.flatMap((b) =>
    b.outcome.kind !== 'denied' || f.retries === 0
      ? [b]
      : acquire({ ...b.next, nowMs: trueTimeOf(b.next.clients[client]!.mono, monoNow(b.next, client) + f.retryDelayMs, b.next.nowMs) }, client, f.resource, f.ttlMs, 0, f.retries - 1, f.retryDelayMs).map((r) => ({ ...r, events: [...b.events, ...r.events] })),
  );
}

/**
 * The client reads its lease's grant (at the resume, or when it comes) and
 * only then sends the put, judged by its clock when the put's replies come;
 * past its timeout it gave up first, and the lease just runs out.
 */
function resumeAfterLease(next: World, client: number, f: LeaseFlight, events: readonly WorldEvent[]): readonly Branch[] {
  const design = next.config.design;
  // The lease's request timed out (its timer fires at the resume at the earliest): no put went out, so the lock was not
  // taken; only a wait that reached the ttl on the client's clock is the attempt's give-up, `timed-out` (7.1, 7.6.1).
  const gaveUpMs = Math.max(next.nowMs, f.deadlineMs);
  const gaveUpAt: World = { ...next, nowMs: gaveUpMs };
  const waitedOut = read(next.clients[client]!.mono, gaveUpMs) - f.startedMono >= f.ttlMs;
  const gaveUp = waitedOut ? single({ kind: 'timed-out' }, gaveUpAt, events) : retried(single({ kind: 'denied', reason: 'no-quorum' }, gaveUpAt, events), client, f);
  if (f.arrival === 'never') return gaveUp;
  // The grant failed at once (the service down or cut off): no quorum, read at the resume.
  if (f.arrival === 'failed') return retried(single({ kind: 'denied', reason: 'no-quorum' }, next, events), client, f);
  const readMs = Math.max(next.nowMs, f.arrival);
  if (readMs > f.deadlineMs) return gaveUp;
  const renewed = rulesOf(design).acquireFirstRound(design) === 'lease-renewed';
  const after: AfterLease = { owner: f.owner, startedMono: f.startedMono, deadlineMs: f.deadlineMs, leaseExpiresAtMs: renewed ? null : f.leaseExpiresAtMs };
  const put = sendAcquire({ ...next, nowMs: readMs }, client, f.resource, f.ttlMs, 0, f.retries, f.retryDelayMs, after).flatMap(({ sent, flight }) =>
    finishAcquire(sent, client, flight, readMs, null).map((b) => ({ ...b, events: [...events, ...b.events] })),
  );
  const sent = retried(put, client, f);
  return readMs === f.deadlineMs ? [...sent, ...gaveUp] : sent;
}
