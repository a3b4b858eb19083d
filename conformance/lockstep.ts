import { match, P } from 'ts-pattern';
import { read } from '../model/clock.ts';
import type { Command, Operation } from '../model/command.ts';
import { isOperation } from '../model/command.ts';
import { nodeCount } from '../model/design.ts';
import { InvalidInputError } from '../model/errors.ts';
import { livenessIn } from '../model/node.ts';
import type { Outcome } from '../model/outcome.ts';
import type { PropertyId } from '../model/properties.ts';
import { checkProperties } from '../model/properties.ts';
import type { Owner, World } from '../model/state.ts';
import { initialWorld, sameOwner } from '../model/state.ts';
import { canonicalKey } from '../model/canonical.ts';
import type { Branch } from '../model/world.ts';
import { step } from '../model/world.ts';
import type { Lease } from '../impl/lease.ts';
import type { BackendInstance, BackendUnderTest } from './adapter.ts';
import { TimingError } from './sim/time.ts';
import type { ExecutedStep, PropertyViolation, RunReport, Verdict } from './verdict.ts';

/**
 * The lockstep loop: every command goes to the model (which answers the set
 * of allowed outcomes) and to the backend (which answers what happened); the
 * backend's outcome must be one the model allows, and then the spec's
 * properties are checked on the model's state. Commands the model does not
 * enable in the current state (resume of a running client, say) are skipped.
 */
export interface LockstepOptions {
  readonly clients: number;
  readonly tokenBase: bigint;
  /**
   * Keep going after a property violation (it is a finding about the design,
   * recorded in the report) and stop only at a conformance failure. Default:
   * stop at either.
   */
  readonly continueAfterViolation?: boolean;
}

/** Per-client bookkeeping of the harness: the leases the backend handed out, a pause's pending work. */
interface Driver {
  readonly leases: Map<string, Lease>;
  /** Owner values of leases this client released: no node may keep them once the model has them gone. */
  readonly released: Map<string, Set<string>>;
  pendingWrite: { resource: string; value: string; token: bigint } | null;
  inFlight: { readonly op: Operation; readonly outcome: Promise<Performed> } | null;
}

/** What the backend did, and the lease it handed out (kept only once the model agrees). */
interface Performed {
  readonly outcome: Outcome;
  readonly granted?: { readonly client: number; readonly resource: string; readonly lease: Lease };
}

export async function runLockstep(backend: BackendUnderTest, commands: readonly Command[], options: LockstepOptions): Promise<RunReport> {
  const instance = await backend.start({ clients: options.clients, tokenBase: options.tokenBase });
  try {
    return await loop(backend, instance, commands, options);
  } finally {
    await instance.close();
  }
}

/** Candidate model states kept at once; more would mean an ambiguity the runner cannot afford to track. */
const MAX_CANDIDATES = 512;

async function loop(backend: BackendUnderTest, instance: BackendInstance, commands: readonly Command[], options: LockstepOptions): Promise<RunReport> {
  // The states the model may be in, given everything the backend said so far: an ambiguous outcome
  // (a timed-out acquire, a key at its exact expiry) keeps every branch alive until a later one tells them apart.
  let worlds: World[] = [
    initialWorld({
      design: backend.design,
      store: backend.capabilities.store,
      clients: options.clients,
      tokenBase: options.tokenBase,
      ...(backend.capabilities.expiryToleranceMs !== undefined ? { expiryToleranceMs: backend.capabilities.expiryToleranceMs } : {}),
    }),
  ];
  const drivers: Driver[] = Array.from({ length: options.clients }, () => ({ leases: new Map(), released: new Map(), pendingWrite: null, inFlight: null }));
  const steps: ExecutedStep[] = [];
  const findings: PropertyViolation[] = [];
  const report = (verdict: Verdict): RunReport => ({ backend: backend.name, verdict, steps, findings, clients: options.clients, nodes: nodeCount(backend.design) });
  const env = instance.env;
  const owners = new Map<string, Owner>();

  /** Runs one command on model and backend; returns the report if the run ends here. */
  const execute = async (command: Command): Promise<RunReport | undefined> => {
    let branches: Branch[];
    try {
      branches = worlds.flatMap((w) => step(w, command));
    } catch (e) {
      if (e instanceof InvalidInputError) return undefined; // not enabled here
      throw e;
    }
    const startMs = env.nowMs();
    const limitMs = Math.max(...branches.map((b) => b.next.nowMs));
    const subject: Command = command.kind === 'resume' ? (drivers[command.client]!.inFlight?.op ?? command) : command;
    const work = perform(instance, drivers, command);
    // A fault other than a resume never waits on virtual time (a real one may wait on a process): await it.
    // Operations, and a resume that delivers an operation's replies, settle as virtual time moves.
    const settled = isOperation(command) || command.kind === 'resume' ? await env.runUntil(work, limitMs) : (await work, true);
    const fail = (property: PropertyId, message: string, actual: Outcome): RunReport => {
      const executed = record(steps.length, command, startMs, env.nowMs(), actual, branches, [], worlds[0]!, drivers);
      steps.push(executed);
      return report({ kind: 'conformance-failure', property, message, step: executed });
    };
    if (!settled) {
      return fail('LIVE-1', `${describeKind(command)} did not complete by t=${limitMs} ms, when the model has it done`, { kind: 'timed-out' });
    }
    const performed = await work;
    const actual = performed.outcome;
    const comparable = backend.capabilities.tokens === false ? withoutTokens : (o: Outcome) => o;
    const matching = branches.filter((b) => sameOutcome(comparable(b.outcome), comparable(actual)) && b.next.nowMs >= env.nowMs());
    if (matching.length === 0) {
      const allowed = [...new Map(branches.map((b) => [show(b.outcome), b.outcome])).keys()];
      const clientNow = 'client' in subject ? instance.clients[subject.client]!.clock.now() : 0;
      const deviation = `the backend answered ${show(actual)}; the model allows ${allowed.join(' or ')}`;
      // A holder's key gone from the backend in every allowed state is the deeper cause: someone removed a key not theirs.
      // Judged with the lease the backend just handed out, as the backend sees its clients.
      const tentative = performed.granted === undefined ? drivers : withGrant(drivers, performed.granted);
      const keys = await Promise.all(branches.map((b) => ownershipProblem(instance, b.next, b.outcome.kind === 'granted' ? tentative : drivers, owners)));
      if (keys.every((k) => k !== null)) return fail('OWN-1', `${keys[0]}; then ${deviation}`, actual);
      // Judged as compared: without tokens for a lock that has none.
      const compared = branches.map((b) => ({ ...b, outcome: comparable(b.outcome) }));
      return fail(implicated(subject, compared, comparable(actual), clientNow), deviation, actual);
    }
    // The outcome is agreed: a lease handed out is the client's now.
    if (performed.granted !== undefined) drivers[performed.granted.client]!.leases.set(performed.granted.resource, performed.granted.lease);
    await env.advanceTo(Math.min(...matching.map((b) => b.next.nowMs)));
    const timed = matching.filter((b) => b.next.nowMs === env.nowMs());
    const consistent = await observe(instance, timed, drivers, owners);
    if (consistent.length === 0) return fail('OWN-1', (await ownershipProblem(instance, timed[0]!.next, drivers, owners)) ?? 'the backend holds keys no model state allows', actual);
    const unique = new Map(consistent.map((b) => [canonicalKey(b.next, { nodeSymmetry: false }), b]));
    if (unique.size > MAX_CANDIDATES) {
      // Too many unresolved ambiguities to follow: stop here, saying so, rather than guess.
      return { ...report({ kind: 'pass' }), stoppedEarly: `${unique.size} candidate model states after step ${steps.length + 1} (more than ${MAX_CANDIDATES})` };
    }
    const kept = [...unique.values()];
    worlds = kept.map((b) => b.next);
    mirror(worlds[0]!, drivers, owners);
    // A finding is certain only when every state the backend may be in shows it.
    const perBranch = kept.map((b) => checkProperties(b.events, b.next));
    const violations = perBranch.every((v) => v.length > 0) ? perBranch[0]! : [];
    const executed = record(steps.length, command, startMs, env.nowMs(), actual, branches, violations, worlds[0]!, drivers);
    steps.push(executed);
    if (violations.length > 0) {
      const finding: PropertyViolation = { kind: 'property-violation', violations, step: executed };
      if (!options.continueAfterViolation) return report(finding);
      findings.push(finding);
    }
    return undefined;
  };

  try {
    for (const generated of commands) {
      // Servers on their own clocks: true time first catches up with the real time the last steps took.
      const behind = Math.floor(env.realTimeAheadMs?.() ?? 0);
      for (const command of behind >= 1 ? [{ kind: 'advance', ms: behind } as const, generated] : [generated]) {
        const ended = await execute(command);
        if (ended !== undefined) return ended;
      }
    }
  } catch (e) {
    // Real time outran the run's tolerance (servers on their own clocks): what follows cannot be judged.
    if (e instanceof TimingError) return { ...report({ kind: 'pass' }), stoppedEarly: e.message };
    throw e;
  }
  return report({ kind: 'pass' });
}

/** Starts the command on the backend; resolves with its outcome (faults: ok). Never drives time. */
function perform(instance: BackendInstance, drivers: Driver[], command: Command): Promise<Performed> {
  const env = instance.env;
  return match<Command, Promise<Performed>>(command)
    .with({ kind: 'acquire' }, { kind: 'extend' }, { kind: 'release' }, { kind: 'write' }, { kind: 'read' }, (op) => operate(instance, drivers, op))
    .with({ kind: 'advance' }, async () => ok())
    .with({ kind: 'clock-step' }, async (c) => ok(await env.clockStep(c.node, c.deltaMs)))
    .with({ kind: 'clock-drift' }, async (c) => ok(await env.clockDrift(c.target, c.driftPpm)))
    .with({ kind: 'crash' }, async (c) => ok(await env.crash(c.node)))
    .with({ kind: 'restart' }, async (c) => ok(await env.restart(c.node)))
    .with({ kind: 'partition' }, async (c) => ok(await env.partition(c.client, c.node)))
    .with({ kind: 'heal' }, async (c) => ok(await env.heal(c.client, c.node)))
    .with({ kind: 'kill-connection' }, async (c) => ok(await env.killConnection(c.client)))
    .with({ kind: 'replicate' }, async () => {
      // A real replica replicates on its own schedule: the schedules the runner draws never contain this step.
      throw new InvalidInputError('unsupported-operation', 'a real replica cannot be told when to replicate');
    })
    .with({ kind: 'pause', inFlight: P.not(undefined) }, async (c) => {
      // The requests go out now; the replies wait for the resume.
      drivers[c.client]!.inFlight = { op: c.inFlight!, outcome: operate(instance, drivers, c.inFlight!) };
      return ok(await env.pause(c.client));
    })
    .with({ kind: 'pause' }, async (c) => {
      const d = drivers[c.client]!;
      const w = c.pendingWrite;
      const lease = w === undefined ? undefined : d.leases.get(w.resource);
      // The lease check happens before the pause; the write itself after it.
      d.pendingWrite = w !== undefined && lease !== undefined && !lease.signal.aborted ? { resource: w.resource, value: w.value, token: lease.token } : null;
      return ok(await env.pause(c.client));
    })
    .with({ kind: 'resume' }, async (c) => {
      const d = drivers[c.client]!;
      await env.resume(c.client);
      const pending = d.pendingWrite;
      const inFlight = d.inFlight;
      d.pendingWrite = null;
      d.inFlight = null;
      if (pending !== null) await instance.clients[c.client]!.store.write(pending.resource, pending.token, pending.value).catch(() => undefined);
      return inFlight?.outcome ?? ok();
    })
    .exhaustive();
}

function ok(_?: void): Performed {
  return { outcome: { kind: 'ok' } };
}

/** One operation through the client's LockClient and store. Harness checks mirror the model's client-side checks. */
async function operate(instance: BackendInstance, drivers: Driver[], op: Operation): Promise<Performed> {
  const client = instance.clients[op.client]!;
  const d = drivers[op.client]!;
  const outcome = (o: Outcome): Performed => ({ outcome: o });
  return match(op)
    .with({ kind: 'acquire' }, async (a): Promise<Performed> => {
      if (a.latencyMs) await instance.env.setDelay(a.client, a.latencyMs);
      try {
        const r = await client.acquire(a.resource, { ttlMs: a.ttlMs!, retries: a.retries ?? 0, retryDelayMs: a.retryDelayMs ?? 0 });
        return match(r)
          .with({ kind: 'granted' }, (g): Performed => ({
            outcome: { kind: 'granted', token: g.lease.token, validUntilMs: g.lease.validUntilMs },
            granted: { client: a.client, resource: a.resource, lease: g.lease },
          }))
          .with({ kind: 'denied' }, (x) => outcome({ kind: 'denied', reason: x.reason }))
          .with({ kind: 'timed-out' }, () => outcome({ kind: 'timed-out' }))
          .exhaustive();
      } finally {
        if (a.latencyMs) await instance.env.setDelay(a.client, 0);
      }
    })
    .with({ kind: 'extend' }, async (e): Promise<Performed> => {
      const lease = d.leases.get(e.resource);
      if (lease === undefined || client.extend === undefined) return outcome({ kind: 'not-extended', reason: 'not-held' });
      const r = await client.extend(lease, e.ttlMs);
      return outcome(r.kind === 'extended' ? { kind: 'extended', validUntilMs: r.validUntilMs } : { kind: 'not-extended', reason: r.reason });
    })
    .with({ kind: 'release' }, async (r): Promise<Performed> => {
      const lease = d.leases.get(r.resource);
      if (lease === undefined) return outcome({ kind: 'not-held' });
      d.released.set(r.resource, (d.released.get(r.resource) ?? new Set()).add(lease.owner));
      await client.release(lease);
      return outcome({ kind: 'released' });
    })
    .with({ kind: 'write' }, async (w): Promise<Performed> => {
      const lease = d.leases.get(w.resource);
      // The guarded write: the lease's signal is the client's only word on validity.
      if (lease === undefined || lease.signal.aborted) return outcome({ kind: 'not-held' });
      const r = await client.store.write(w.resource, lease.token, w.value);
      return outcome(r.kind === 'accepted' ? { kind: 'accepted' } : { kind: 'rejected', highest: r.highest });
    })
    .with({ kind: 'read' }, async (r): Promise<Performed> => {
      const v = await client.store.read(r.resource);
      return outcome({ kind: 'value', value: v.value, token: v.token });
    })
    .exhaustive();
}

/** Keeps the harness's leases in step with the model's after an agreed step. */
function mirror(world: World, drivers: Driver[], owners: Map<string, Owner>): void {
  drivers.forEach((d, client) => {
    for (const [resource, lease] of [...d.leases]) {
      const modelLease = world.clients[client]!.leases[resource];
      if (modelLease === undefined) d.leases.delete(resource);
      else owners.set(lease.owner, modelLease.owner);
    }
  });
}

function withGrant(drivers: readonly Driver[], granted: NonNullable<Performed['granted']>): Driver[] {
  return drivers.map((d, client) => (client === granted.client ? { ...d, leases: new Map(d.leases).set(granted.resource, granted.lease) } : d));
}

function resourcesOf(drivers: readonly Driver[]): Set<string> {
  return new Set(drivers.flatMap((d) => [...d.leases.keys(), ...d.released.keys()]));
}

/**
 * OWN-1, white-box: every key the model says a client holds (granted, live
 * for sure, on a node that is up) must hold that client's owner value on the
 * backend too. Needs the environment's optional inspect(); keeps the branches
 * the backend's keys agree with.
 */
async function observe(instance: BackendInstance, branches: readonly Branch[], drivers: Driver[], owners: ReadonlyMap<string, Owner>): Promise<Branch[]> {
  const inspect = instance.env.inspect;
  if (inspect === undefined) return [...branches];
  const held = new Map<string, ReadonlyArray<string | null>>();
  for (const resource of resourcesOf(drivers)) held.set(resource, await inspect(resource));
  return branches.filter((b) => wrongKey(b.next, drivers, held, owners) === null);
}

/** What is wrong with the backend's keys against this model state, or null (also when it cannot inspect). */
async function ownershipProblem(instance: BackendInstance, world: World, drivers: Driver[], owners: ReadonlyMap<string, Owner>): Promise<string | null> {
  const inspect = instance.env.inspect;
  if (inspect === undefined) return null;
  const held = new Map<string, ReadonlyArray<string | null>>();
  for (const resource of resourcesOf(drivers)) held.set(resource, await inspect(resource));
  return wrongKey(world, drivers, held, owners);
}

/** The first disagreement between the backend's keys and the model's: a holder's key gone, or a released key kept. */
function wrongKey(world: World, drivers: Driver[], held: ReadonlyMap<string, ReadonlyArray<string | null>>, owners: ReadonlyMap<string, Owner>): string | null {
  for (const [client, d] of drivers.entries()) {
    for (const [resource, gone] of d.released) {
      for (const [index, node] of world.nodes.entries()) {
        const owner = held.get(resource)?.[index] ?? null;
        if (!node.up || owner === null || !gone.has(owner)) continue;
        const key = node.keys[resource];
        const modelOwner = owners.get(owner);
        const modelKeeps = key !== undefined && modelOwner !== undefined && sameOwner(key.owner, modelOwner) && livenessIn(world, node, resource).includes(true);
        if (!modelKeeps) return `node ${index} still holds client ${client}'s released key on '${resource}' (owner ${owner.slice(0, 8)}…)`;
      }
    }
  }
  for (const [client, d] of drivers.entries()) {
    for (const [resource, lease] of d.leases) {
      const modelLease = world.clients[client]!.leases[resource];
      if (modelLease === undefined) continue;
      for (const [index, node] of world.nodes.entries()) {
        const key = node.keys[resource];
        const surelyLive = livenessIn(world, node, resource).every((alive) => alive);
        if (!node.up || key === undefined || !surelyLive || !sameOwner(key.owner, modelLease.owner)) continue;
        const owner = held.get(resource)?.[index] ?? null;
        if (owner !== lease.owner) {
          return `node ${index} should hold client ${client}'s key on '${resource}' (owner ${lease.owner.slice(0, 8)}…) but holds ${owner === null ? 'nothing' : `${owner.slice(0, 8)}…`}`;
        }
      }
    }
  }
  return null;
}

/** An outcome with its tokens blanked, for a lock that has none. */
function withoutTokens(o: Outcome): Outcome {
  return match(o)
    .with({ kind: 'granted' }, (g): Outcome => ({ ...g, token: 0n }))
    .with({ kind: 'rejected' }, (r): Outcome => ({ ...r, highest: 0n }))
    .with({ kind: 'value' }, (v): Outcome => ({ ...v, token: null }))
    .otherwise((x) => x);
}

/** Outcomes agree when every field agrees: tokens and deadlines exactly. */
export function sameOutcome(a: Outcome, b: Outcome): boolean {
  return JSON.stringify(a, bigints) === JSON.stringify(b, bigints);
}

function bigints(_key: string, value: unknown): unknown {
  return typeof value === 'bigint' ? `${value}n` : value;
}

export function show(o: Outcome): string {
  return JSON.stringify(o, bigints).replaceAll('"', '');
}

function describeKind(command: Command): string {
  return 'client' in command ? `client ${command.client}'s ${command.kind}` : command.kind;
}

/** The property a deviation endangers, by what the backend got wrong. */
function implicated(command: Command, branches: readonly Branch[], actual: Outcome, clientNowMs: number): PropertyId {
  const expected = branches.map((b) => b.outcome);
  const op: Command = command.kind === 'pause' && command.inFlight ? command.inFlight : command;
  const wantedKinds = new Set(expected.map((o) => o.kind));
  return match({ op: op.kind, actual })
    .with({ op: 'acquire', actual: { kind: 'granted' } }, ({ actual: a }): PropertyId => {
      const granted = expected.filter((o): o is Extract<Outcome, { kind: 'granted' }> => o.kind === 'granted');
      // A lease with no validity left on arrival, or one granted where the model grants none, overlaps another holder's.
      if (granted.length === 0 || (a.validUntilMs !== null && a.validUntilMs <= clientNowMs)) return 'MUTEX-1';
      const sameToken = granted.filter((g) => g.token === a.token);
      if (sameToken.length === 0) return 'FENCE-1';
      // Same grant, another deadline: claiming longer than allowed endangers exclusion; shorter only gives time away.
      return sameToken.some((g) => g.validUntilMs !== null && a.validUntilMs !== null && a.validUntilMs < g.validUntilMs) ? 'LIVE-1' : 'MUTEX-1';
    })
    .with({ op: 'acquire' }, (): PropertyId => 'LIVE-1')
    .with({ op: 'extend', actual: { kind: 'extended' } }, (): PropertyId => (wantedKinds.has('extended') ? 'MUTEX-1' : 'OWN-1'))
    .with({ op: 'extend' }, (): PropertyId => 'OWN-1')
    .with({ op: 'release' }, (): PropertyId => 'OWN-1')
    // A write the client should not have sent acts on a lease that is over; one it refused gave a valid lease away.
    .with({ op: 'write', actual: { kind: P.union('accepted', 'rejected') } }, (): PropertyId => (wantedKinds.has('not-held') && !wantedKinds.has('accepted') && !wantedKinds.has('rejected') ? 'MUTEX-1' : 'FENCE-2'))
    .with({ op: 'write' }, (): PropertyId => 'LIVE-1')
    .with({ op: 'read' }, (): PropertyId => 'STORE-1')
    .otherwise((): PropertyId => (command.kind === 'resume' ? 'STORE-1' : 'LIVE-1'));
}

function record(
  index: number,
  command: Command,
  startMs: number,
  endMs: number,
  actual: Outcome,
  branches: readonly Branch[],
  violations: ExecutedStep['violations'],
  world: World,
  drivers: Driver[],
): ExecutedStep {
  const leases = drivers.flatMap((d, client) =>
    [...d.leases.entries()].map(([resource, lease]) => {
      const mono = world.clients[client]!.mono;
      // The deadline in true time, for drawing: when the client's clock reaches it.
      const left = lease.validUntilMs === null ? null : lease.validUntilMs - read(mono, world.nowMs);
      return { client, resource, token: lease.token, validUntilTrueMs: left === null ? null : world.nowMs + Math.max(0, left) };
    }),
  );
  const nodes = world.nodes.map((n) => ({ up: n.up, clockOffsetMs: read(n.wall, world.nowMs) - world.nowMs }));
  return { index, command, startMs, endMs, actual, allowed: branches.map((b) => b.outcome), violations, leases, nodes };
}
