import type { ClockTarget } from '../model/command.ts';
import { checkObject, refuse } from '../impl/options.ts';
import { asText } from '../impl/errorText.ts';

/**
 * The faults an environment can inject, as a registry: each entry is an
 * injector (a function, or a small object for a fault that is undone), and
 * an entry left out is a fault the backend does not take. What a backend
 * can take is read from what its environment provides; nothing else lists
 * it. Every injector resolves when its fault is in place.
 */
export interface FaultInjectors {
  /** A node's wall clock jumps by `deltaMs` (forwards or back). */
  readonly clockStep?: (node: number, deltaMs: number) => Promise<void>;
  /** A node's or a client's clock runs fast or slow, from now on, by `driftPpm` parts per million. */
  readonly clockDrift?: (target: ClockTarget, driftPpm: number) => Promise<void>;
  /**
   * A node's process dies (losing what it did not persist), and later comes
   * back. On servers on their own clocks (spec 7.8) a restart takes real time
   * (processes start, a leader is elected): `prepareRestart`, when given, does
   * that work before true time catches up with real time, so that the
   * restart's instant in the model follows it; `restart` then only lets the
   * clients in again.
   */
  readonly crash?: { crash(node: number): Promise<void>; restart(node: number): Promise<void>; prepareRestart?(node: number): Promise<void> };
  /** The link between a client and a node is cut (calls fail at once), and later healed. */
  readonly partition?: { cut(client: number, node: number): Promise<void>; heal(client: number, node: number): Promise<void> };
  /** Replies to the requests this client sends before true time moves on take `ms` of true time (0: none). */
  readonly delay?: (client: number, ms: number) => Promise<void>;
  /**
   * Like delay, for every operation (extend, release, store writes), and the
   * promise that a paused client runs nothing, timers included, until it
   * resumes (then its due timers fire before its replies arrive): acquires
   * and extends can then be in flight across a pause.
   */
  readonly latency?: (client: number, ms: number) => Promise<void>;
  /** Every reply from a lock node takes `ms` longer (0: none), or with 'never' none comes (a black hole); the clients take the run's requestTimeoutMs. */
  readonly nodeDelay?: (node: number, ms: number | 'never') => Promise<void>;
  /** The client stops (a GC pause, SIGSTOP): its replies wait until it resumes. */
  readonly pause?: { pause(client: number): Promise<void>; resume(client: number): Promise<void> };
  /** The server ends the client's connection (and with it any session state). */
  readonly killConnection?: (client: number) => Promise<void>;
}

/**
 * THE list of fault kinds: what schedules are generated from, what the CLI
 * accepts and lists, what counterexample files may name. Each kind names
 * the injector that makes it (advance needs none: it is time control).
 */
const FAULTS = {
  advance: { injector: null, what: 'true time passes (time control; every backend takes it)' },
  'clock-step': { injector: 'clockStep', what: "a node's wall clock jumps forwards or back", ownServersOnly: "moves the server's clock, which lockcheck drives only on servers it starts (libfaketime)" },
  'clock-drift': {
    injector: 'clockDrift',
    what: "a node's or a client's clock runs fast or slow",
    ownServersOnly: "drifts Redis nodes' clocks too, driven only on servers lockcheck starts (PostgreSQL: clients drift anywhere)",
  },
  pause: { injector: 'pause', what: 'a client stops (also between its check and its write, and with replies in flight), then resumes' },
  'crash-restart': { injector: 'crash', what: 'a node crashes and restarts', ownServersOnly: "kills and restarts the server's process, lockcheck's only on servers it starts" },
  partition: { injector: 'partition', what: 'the link between a client and a node is cut, then healed' },
  delay: { injector: 'delay', what: "a client's replies come late" },
  latency: { injector: 'latency', what: "replies to every operation come late, and a write's request may be delayed (the runner holds it until the schedule's deliver step); with pause, an acquire or extend is in flight across its client's pause (its rounds interleave with other clients')" },
  'slow-node': { injector: 'nodeDelay', what: "one lock node is slow or a black hole; each run draws the clients' request timeout" },
  'kill-connection': { injector: 'killConnection', what: "the server ends a client's connection" },
} as const satisfies Record<string, { readonly injector: keyof FaultInjectors | null; readonly what: string; readonly ownServersOnly?: string }>;

/** A fault a schedule can inject (`advance`, `pause`, `crash`, ...): FAULT_KINDS lists them, describeFaultKind says what each does. */
export type FaultKind = keyof typeof FAULTS;

/** Every fault kind, in the order they are listed. */
export const FAULT_KINDS = Object.keys(FAULTS) as readonly FaultKind[];

// Every injector has its kind: an injector added above without one fails to typecheck here.
type Unlisted = Exclude<keyof FaultInjectors, (typeof FAULTS)[FaultKind]['injector']>;
export const everyInjectorListed: [Unlisted] extends [never] ? true : Unlisted = true;

/** Whether `value` names a fault kind (any value; never throws). */
export function isFaultKind(value: unknown): value is FaultKind {
  return typeof value === 'string' && Object.hasOwn(FAULTS, value);
}

/** One line per fault kind, for help texts. */
export function describeFaultKind(kind: FaultKind): string {
  if (!isFaultKind(kind)) refuse('kind', `a fault kind (${FAULT_KINDS.join(', ')})`, kind);
  return FAULTS[kind].what;
}

/**
 * Why a fault kind is not offered on the user's own servers (`--redis`,
 * `--pg`), or null where it is: every fault that acts between the clients
 * and the servers (in the run's network layer, or a TCP proxy in front of a
 * server) is offered there too; what needs the server's process or clock is not.
 */
export function ownServersOnly(kind: FaultKind): string | null {
  const f = FAULTS[kind];
  return 'ownServersOnly' in f ? f.ownServersOnly : null;
}

/** The fault kinds these injectors make (advance always). */
export function faultKindsOf(faults: FaultInjectors): FaultKind[] {
  checkObject(faults, 'faults', 'a FaultInjectors registry (an object; {} for none)');
  return FAULT_KINDS.filter((k) => {
    const injector = FAULTS[k].injector;
    return injector === null || faults[injector] !== undefined;
  });
}

/** Only the injectors of the given kinds (all when `kinds` is undefined): how a backend offers fewer faults than its environment could. */
export function onlyFaults(faults: FaultInjectors, kinds: readonly FaultKind[] | undefined): FaultInjectors {
  checkObject(faults, 'faults', 'a FaultInjectors registry (an object; {} for none)');
  if (kinds === undefined) return faults;
  if (!Array.isArray(kinds)) refuse('kinds', 'an array of fault kinds, or undefined for all', kinds);
  kinds.forEach((k, i) => {
    if (!isFaultKind(k)) refuse(`kinds[${i}]`, `a fault kind (${FAULT_KINDS.join(', ')})`, k);
  });
  const keep = new Set((kinds as readonly FaultKind[]).map((k) => FAULTS[k].injector));
  return Object.fromEntries(Object.entries(faults).filter(([key]) => keep.has(key as keyof FaultInjectors))) as FaultInjectors;
}

/** A command needs a fault the backend's environment does not provide (a replayed counterexample of another backend, say). */
export class FaultNotOfferedError extends Error {
  override readonly name = 'FaultNotOfferedError';
  constructor(
    readonly backend: string,
    readonly kind: FaultKind,
  ) {
    // An error's constructor must not throw: a kind it does not know, or a Symbol, is still said.
    super(`${asText(backend)} takes no ${asText(kind)} fault: ${isFaultKind(kind) ? `its environment provides no faults.${FAULTS[kind].injector}` : 'no such fault kind'}`);
  }
}

/** The injector for `kind`, or a FaultNotOfferedError. */
export function injectorFor<K extends keyof FaultInjectors>(faults: FaultInjectors, key: K, backend: string): NonNullable<FaultInjectors[K]> {
  const injector = faults[key];
  if (injector === undefined) throw new FaultNotOfferedError(backend, FAULT_KINDS.find((k) => FAULTS[k].injector === key)!);
  return injector as NonNullable<FaultInjectors[K]>;
}
