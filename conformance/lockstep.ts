import { match, P } from 'ts-pattern';
import { read } from '../model/clock.ts';
import type { Command, Operation } from '../model/command.ts';
import { isOperation } from '../model/command.ts';
import { describeDesign, nodeCount } from '../model/design.ts';
import { InvalidInputError } from '../model/errors.ts';
import { livenessIn } from '../model/node.ts';
import type { Outcome } from '../model/outcome.ts';
import type { PropertyId } from '../model/properties.ts';
import { checkProperties } from '../model/properties.ts';
import type { Owner, World } from '../model/state.ts';
import { initialWorld, sameOwner } from '../model/state.ts';
import { canonicalKey } from '../model/canonical.ts';
import type { Branch } from '../model/world.ts';
import { checkAlphabetCommand, enabled, step } from '../model/world.ts';
import type { Lease } from '../impl/lease.ts';
import type { WriteResult } from '../impl/fencedStore.ts';
import type { BackendInstance, BackendUnderTest, TimeControl } from './adapter.ts';
import { TimingError } from './sim/time.ts';
import { RunEnvironmentError } from './env/runEnvironment.ts';
import { EnvironmentError } from './env/faketime.ts';
import { finishWithin, valueWithin } from './realTimeLimit.ts';
import { boundedTime, checkInspected } from './boundedTime.ts';
import type { HeldLease } from './contract.ts';
import { checkBackendApi, checkEnvironmentApi, checkInstanceApi } from './backendApi.ts';
import { checkLockstepOptions, checkRunCommands } from './options.ts';
import type { BoundedCalls } from './adapterCall.ts';
import { AdapterError, boundedCalls, CLOSE_LIMIT_MS, closeLateInstance, ENVIRONMENT_LIMIT_MS, readAdapter, START_LIMIT_MS, callAdapter } from './adapterCall.ts';
import { shownAnswer } from './boundedTime.ts';
import type { FaultInjectors } from './faults.ts';
import { FaultNotOfferedError, injectorFor } from './faults.ts';
import { checkAcquireResult, checkExtendResult, checkReadResult, checkReleasedSignal, checkWriteResult, ContractBreach, isInvalidInput, lossReason, probes, signalProblem } from './contract.ts';
import type { ConformanceFailure, ExecutedStep, PropertyViolation, RunReport, Verdict } from './verdict.ts';
import type { Consequence } from './consequence.ts';
import { comparesTokens, consequenceOf, judgedDesign, TOKEN_SKIP_NOTE } from './consequence.ts';
import { entryOf } from '../model/record.ts';
import { describeThrown } from './thrown.ts';
import { checkObject, knownOptions } from '../impl/options.ts';

/**
 * The lockstep loop: every command goes to the model (which answers the set
 * of allowed outcomes) and to the backend (which answers what happened); the
 * backend's outcome must be one the model allows, and then the spec's
 * properties are checked on the model's state. Commands the model does not
 * enable in the current state (resume of a running client, say) are skipped.
 */
export interface LockstepOptions {
  /** Simulated clients (InstanceOptions.clients). */
  readonly clients: number;
  /** Where the backend's and the model's token counters start (InstanceOptions.tokenBase). */
  readonly tokenBase: bigint;
  /**
   * Keep going after a property violation (it is a finding about the design,
   * recorded in the report) and stop only at a conformance failure. Default:
   * stop at either.
   */
  readonly continueAfterViolation?: boolean;
  /** The clients' bound on each request round to the lock nodes, in ms (ttl designs; default: the operation's ttl). */
  readonly requestTimeoutMs?: number;
  /**
   * Real time the backend instance's close() may take, in ms (default
   * CLOSE_LIMIT_MS). A close still running then is left behind and named in
   * the report's warnings: a backend's teardown never stops the suite.
   */
  readonly closeLimitMs?: number;
  /** Real time start() may take, in ms (default START_LIMIT_MS); a start still pending then fails the check with AdapterError. */
  readonly startLimitMs?: number;
  /** Real time one fault injection or inspect() may take, in ms (default ENVIRONMENT_LIMIT_MS); one still pending then fails the check with AdapterError. */
  readonly environmentLimitMs?: number;
}

const checkKeys = knownOptions('runLockstep options', ['clients', 'tokenBase', 'continueAfterViolation', 'requestTimeoutMs', 'closeLimitMs', 'startLimitMs', 'environmentLimitMs']);

/**
 * A run's calls into the adapter outside its operations, each bounded and
 * checked (set once the instance passed its checks): fault injectors,
 * inspect() (answering one owner value per node), time control, and the
 * real-time bound of the store read that judges a probe.
 */
interface RunCalls extends BoundedCalls {
  readonly backend: string;
  readonly time: TimeControl;
  readonly nodes: number;
  readonly limitMs: number;
}
const bounds = new WeakMap<BackendInstance, RunCalls>();
function callsOf(instance: BackendInstance): RunCalls {
  const calls = bounds.get(instance);
  if (calls === undefined) throw new Error('lockstep: a run instance without its bounded calls');
  return calls;
}

/** How long a backend instance's close() may take before the run goes on without it (real time: nothing drives the virtual clock at teardown). */
export { CLOSE_LIMIT_MS } from './adapterCall.ts';

/** Per-client bookkeeping of the harness: the leases the backend handed out, a pause's pending work. */
interface Driver {
  readonly leases: Map<string, Lease>;
  /** Each lease's signal, read once and held from then on, as `using()` hands it to user code. */
  readonly signals: Map<string, AbortSignal>;
  /**
   * Leases whose signal user code has not read yet: every second grant's is
   * read only when first needed (a guarded write, a release), as code that
   * looks at `lease.signal` late does; a lease must judge its deadline then.
   */
  readonly unread: Set<string>;
  grants: number;
  /** A release sent in this step: its signal is judged once the model says whether the lease is gone or one level of a stack. */
  releasing: { readonly resource: string; readonly signal: AbortSignal; readonly firedBefore: boolean; unknown?: true } | null;
  /** Owner values of leases this client released: no node may keep them once the model has them gone. */
  readonly released: Map<string, Set<string>>;
  pendingWrite: { resource: string; value: string; token: bigint } | null;
  inFlight: { readonly op: Operation; readonly outcome: Promise<Performed> } | null;
}

/** What the backend did, and the lease it handed out (kept only once the model agrees). */
interface Performed {
  readonly outcome: Outcome;
  readonly granted?: { readonly client: number; readonly resource: string; readonly lease: Lease };
  /** A resume that sent the write its client held across the pause: the store's decision on it (judged against the model's). */
  readonly heldWrite?: { readonly client: number; readonly decision: WriteResult };
}

/**
 * Runs `commands` once on a fresh instance of `backend` and on its model in
 * lockstep (LockstepOptions), closes the instance, and reports the verdict
 * with the steps taken. A deviation or a property violation is the
 * report's verdict, not an error; an environment that fails makes the run
 * inconclusive. Throws, before start(), InvalidInputError for bad options
 * or commands (an unknown kind, a client or node the run does not have) and
 * AdapterApiError for a backend whose declaration the adapter API does not
 * take; then AdapterApiError for an instance or environment not shaped as
 * the adapter API says, and AdapterError when start() throws or outlives
 * startLimitMs.
 */
export async function runLockstep(backend: BackendUnderTest, commands: readonly Command[], options: LockstepOptions): Promise<RunReport> {
  // All before start(): a bad declaration, option or command would otherwise fail (or pass, having run nothing) on a started instance.
  checkBackendApi(backend);
  checkKeys(checkObject(options, 'runLockstep options'));
  checkLockstepOptions(options);
  checkRunCommands(commands, options.clients, nodeCount(judgedDesign(backend)));
  checkCommandsFor(firstWorld(backend, options), commands);
  let instance: BackendInstance;
  try {
    const startOptions = { clients: options.clients, tokenBase: options.tokenBase, ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}) };
    instance = await callAdapter(backend.name, 'start()', () => backend.start(startOptions), options.startLimitMs ?? START_LIMIT_MS, closeLateInstance(backend.name));
  } catch (e) {
    if (e instanceof RunEnvironmentError) return environmentFailed(backend, options, [], e);
    throw e;
  }
  const steps: ExecutedStep[] = [];
  let report: RunReport;
  try {
    checkInstanceApi(instance, backend.name, options.clients);
  } catch (e) {
    // Not a BackendInstance: there may be nothing to close.
    if (typeof (instance as Partial<BackendInstance> | null)?.close === 'function') await closeWithin(backend, instance, options.closeLimitMs ?? CLOSE_LIMIT_MS);
    throw e;
  }
  try {
    checkEnvironmentApi(instance.env, backend.name);
    const limitMs = options.environmentLimitMs ?? ENVIRONMENT_LIMIT_MS;
    bounds.set(instance, { ...boundedCalls(backend.name, instance.env, limitMs), backend: backend.name, time: boundedTime(backend.name, instance.env, limitMs), nodes: nodeCount(judgedDesign(backend)), limitMs });
    const r = await loop(backend, instance, commands, options, steps);
    const warnings = warningsOf(backend, instance);
    report = warnings.length > 0 ? { ...r, warnings } : r;
  } catch (e) {
    if (!(e instanceof RunEnvironmentError)) {
      await closeWithin(backend, instance, options.closeLimitMs ?? CLOSE_LIMIT_MS).catch(() => undefined); // the first failure is the one to report
      throw e;
    }
    report = environmentFailed(backend, options, steps, e);
  }
  const stuck = await closeWithin(backend, instance, options.closeLimitMs ?? CLOSE_LIMIT_MS);
  return stuck === null ? report : { ...report, warnings: [...(report.warnings ?? []), stuck] };
}

/** Client `client`'s clock reading (the adapter's clock.now()): a throw or an answer that is no finite number is an AdapterError naming it. */
function clientClockNow(backend: BackendUnderTest, instance: BackendInstance, client: number): number {
  const call = `client ${client}'s clock.now()`;
  const now: unknown = readAdapter(backend.name, call, () => instance.clients[client]!.clock.now());
  if (typeof now !== 'number' || !Number.isFinite(now)) throw new AdapterError(backend.name, call, `returned ${shownAnswer(now)}, not a finite number of ms`);
  return now;
}

/** The instance's warnings; a warnings() that throws is the adapter's failure (AdapterError). */
function warningsOf(backend: BackendUnderTest, instance: BackendInstance): readonly string[] {
  try {
    const w: unknown = instance.warnings?.() ?? [];
    if (Array.isArray(w) && w.every((x) => typeof x === 'string')) return w as string[];
    throw new AdapterError(backend.name, 'warnings()', `returned ${JSON.stringify(w)}, not an array of strings`);
  } catch (e) {
    if (e instanceof AdapterError) throw e;
    throw new AdapterError(backend.name, 'warnings()', `threw ${e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e)}`, { cause: e });
  }
}

/** Closes the instance, at most `limitMs` of real time; null when it closed, else what to warn of (a close that failed is the adapter's AdapterError). */
async function closeWithin(backend: BackendUnderTest, instance: BackendInstance, limitMs: number): Promise<string | null> {
  const closing = Promise.resolve()
    .then(() => instance.close())
    .catch((e: unknown) => {
      throw new AdapterError(backend.name, 'close() of an instance', `threw ${e instanceof Error ? `${e.name}: ${e.message.split('\n')[0]}` : String(e)}`, { cause: e });
    });
  if (await finishWithin(closing, limitMs)) return null;
  return `the backend's close() had not finished after ${limitMs} ms; the run went on without it (its connections or processes may be left open: a defect of the backend's teardown)`;
}

/** A run whose servers failed it (RunEnvironmentError): judged neither way, the reason kept as a warning. */
function environmentFailed(backend: BackendUnderTest, options: LockstepOptions, steps: ExecutedStep[], e: RunEnvironmentError): RunReport {
  const reason = `environment error, run not judged: ${e.message.split('\n')[0]}`;
  return { backend: backend.name, verdict: { kind: 'inconclusive', cause: 'environment', reason }, steps, findings: [], clients: options.clients, nodes: nodeCount(backend.design), warnings: [reason] };
}

/** The model's state before the run's first command. */
function firstWorld(backend: BackendUnderTest, options: LockstepOptions): World {
  return initialWorld({
    design: judgedDesign(backend),
    store: backend.capabilities.store,
    clients: options.clients,
    tokenBase: options.tokenBase,
    ...(backend.capabilities.expiryToleranceMs !== undefined ? { expiryToleranceMs: backend.capabilities.expiryToleranceMs } : {}),
    ...(options.requestTimeoutMs !== undefined ? { requestTimeoutMs: options.requestTimeoutMs } : {}),
  });
}

/**
 * A command no state of this run's model takes (an acquire without a ttl on a ttl design, an extend on a session lock, a
 * bad resource or duration) is refused before the backend starts: the loop skips a command the model does not take, as
 * it must one that only this state does not enable, so a schedule of them passed having run nothing.
 */
function checkCommandsFor(world: World, commands: readonly Command[]): void {
  commands.forEach((c, i) => {
    try {
      checkAlphabetCommand(world, c, `commands[${i}]`);
    } catch (e) {
      if (e instanceof InvalidInputError) throw new InvalidInputError('invalid-config', `${e.message.slice(e.code.length + 2)} (${describeDesign(world.config.design)} takes no such command)`);
      throw e;
    }
  });
}

/** Candidate model states kept at once; more would mean an ambiguity the runner cannot afford to track. */
const MAX_CANDIDATES = 512;

async function loop(backend: BackendUnderTest, instance: BackendInstance, commands: readonly Command[], options: LockstepOptions, steps: ExecutedStep[]): Promise<RunReport> {
  // The states the model may be in, given everything the backend said so far: an ambiguous outcome
  // (a timed-out acquire, a key at its exact expiry) keeps every branch alive until a later one tells them apart.
  let worlds: World[] = [firstWorld(backend, options)];
  const drivers: Driver[] = Array.from({ length: options.clients }, () => ({ leases: new Map(), signals: new Map(), unread: new Set(), grants: 0, releasing: null, released: new Map(), pendingWrite: null, inFlight: null }));
  const findings: PropertyViolation[] = [];
  // A library audit goes past deviations that are not unsafe where the model can follow what the backend did.
  const auditing = backend.contract !== undefined;
  const passed: ConformanceFailure[] = [];
  const passedMessages = new Set<string>();
  const report = (verdict: Verdict): RunReport => ({ backend: backend.name, verdict, steps, findings, clients: options.clients, nodes: nodeCount(backend.design), ...(passed.length > 0 ? { deviations: passed } : {}) });
  const env = callsOf(instance).time;
  const owners = new Map<string, Owner>();

  const contract = backend.contract ?? {};
  const renaming = backend.capabilities.tokensComparedBy === 'order' ? new TokenRenaming() : null;
  /** The ttl each held lease was acquired with, by client and resource: a library that re-arms a fixed ttl extends by it. */
  const acquiredTtl = new Map<string, number>();
  const refitExtend = <C extends Command>(c: C): C =>
    c.kind === 'extend' && contract.refreshTtl === 'acquired' && acquiredTtl.has(`${c.client}/${c.resource}`) ? { ...c, ttlMs: acquiredTtl.get(`${c.client}/${c.resource}`)! } : c;
  // An extend in flight across a pause re-arms the same fixed ttl as one that is not. The model runs the refitted copy; the
  // step records the schedule's own command (callers find them by identity: a saved schedule replays only as itself).
  const refit = (c: Command): Command => {
    if (c.kind !== 'pause' || c.inFlight === undefined) return refitExtend(c);
    const inFlight = refitExtend(c.inFlight);
    return inFlight === c.inFlight ? c : { ...c, inFlight };
  };

  /** Runs one command on model and backend; returns the report if the run ends here. */
  const execute = async (given: Command): Promise<RunReport | undefined> => {
    const command = refit(given);
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
    // The backend is asked what the schedule asks (a library that re-arms a fixed ttl ignores it); the model judges by what it declared.
    const work = perform(backend.name, instance, drivers, given);
    // A run may stop while the operation is still pending (it did not settle in time); its later failure is then nobody's to handle, and must not end the process.
    work.catch(() => undefined);
    // A fault other than a resume never waits on virtual time (a real one may wait on a process): await it.
    // Operations, a resume that delivers an operation's replies and a delayed write's delivery settle as virtual time moves.
    // A contract breach in a fault's own step (a lease's signal first read at a pause) is judged below, as an operation's is.
    const settled = isOperation(command) || command.kind === 'resume' || command.kind === 'deliver' ? await env.runUntil(work, limitMs) : await work.then(() => true, (e: unknown) => (e instanceof ContractBreach ? true : Promise.reject(e)));
    const fail = (property: PropertyId, message: string, actual: Outcome, judged: readonly Branch[] = branches): RunReport => {
      const executed = record(steps.length, given, startMs, env.nowMs(), actual, judged, [], worlds[0]!, drivers);
      steps.push(executed);
      const consequence = consequenceOf(property, subject, actual, judged.map((b) => b.outcome), message);
      return report({ kind: 'conformance-failure', property, consequence, message, step: executed });
    };
    if (!settled && contract.clientTimeout === false) {
      // A library without a client-side timeout waits as long as its link does: declared, so not a finding by itself.
      return report({ kind: 'inconclusive', cause: 'no-client-timeout', reason: `${describeKind(command)} had not completed by t=${limitMs} ms; the library declares no client-side timeout` });
    }
    if (!settled) {
      return fail('LIVE-1', `${describeKind(command)} did not complete by t=${limitMs} ms, when the model has it done`, { kind: 'timed-out' });
    }
    let performed: Performed;
    try {
      performed = await work;
    } catch (e) {
      // A result outside the adapter API, or a signal that broke its contract: fail, never map it to a neighbour.
      if (e instanceof ContractBreach) return fail(e.property, e.message, { kind: 'ok' });
      // Any other error is outside the adapter API too: a finding of this run, never the end of the process.
      if (e instanceof InvalidInputError) throw e;
      const unknown = unknownRelease(subject, e, branches, drivers);
      if (unknown === null) return fail('LIVE-1', `${describeKind(command)} threw ${describeThrown(e)}, where the model has it done`, { kind: 'timed-out' });
      performed = unknown;
    }
    const actual = renaming === null ? performed.outcome : renaming.rename(performed.outcome, branches);
    const comparable = comparison(backend);
    let matching = branches.filter((b) => sameOutcome(comparable(b.outcome), comparable(actual)) && b.next.nowMs >= env.nowMs());
    if (matching.length === 0 && contract.clientTimeout === false && actual.kind === 'denied') {
      // A library without a client-side timeout reads the replies the model's client gave up on at its own bound (the ttl):
      // a refusal read in them holds nothing, as the give-up holds nothing. Which keys stay, later steps tell, as after a give-up.
      matching = branches.filter((b) => b.outcome.kind === 'timed-out' && b.next.nowMs >= env.nowMs());
    }
    /** A deviation this step went past (a library audit): recorded with the step once it is executed. */
    let wentPast: { readonly property: PropertyId; readonly consequence: Consequence; readonly message: string } | null = null;
    if (matching.length === 0 && auditing) {
      // Resynchronised where it is well defined: the same outcome but for a shorter deadline or another reason of refusal.
      const clientNow = 'client' in subject ? clientClockNow(backend, instance, subject.client) : 0;
      const same = branches.filter((b) => sameKind(comparable(b.outcome), comparable(actual)) && b.next.nowMs >= env.nowMs());
      const deviation = `the backend answered ${show(actual)}; the model allows ${[...new Set(branches.map((b) => show(b.outcome)))].join(' or ')}${tokenSkipNote(subject, actual, branches, steps, options.tokenBase)}`;
      const property = same.length > 0 ? implicated(subject, same.map((b) => ({ ...b, outcome: comparable(b.outcome) })), comparable(actual), clientNow, steps) : null;
      const consequence = property === null ? null : consequenceOf(property, subject, actual, same.map((b) => b.outcome), deviation);
      if (property !== null && consequence !== null && consequence.kind !== 'unsafe') {
        wentPast = { property, consequence, message: `${deviation} (the run went on, the model following the backend)` };
        matching = same;
      }
    }
    if (matching.length === 0) {
      const allowed = [...new Map(branches.map((b) => [show(b.outcome), b.outcome])).keys()];
      const clientNow = 'client' in subject ? clientClockNow(backend, instance, subject.client) : 0;
      // An answer the model gives, but at an earlier time only (a grant handed over late): say when, or the message reads as a match.
      const earlier = branches.filter((b) => sameOutcome(comparable(b.outcome), comparable(actual))).map((b) => b.next.nowMs);
      const when = earlier.length > 0 ? ` at t=${env.nowMs()} ms (the model has that answer at t=${Math.max(...earlier)} ms)` : '';
      const deviation = `the backend answered ${show(actual)}${when}; the model allows ${allowed.join(' or ')}${tokenSkipNote(subject, actual, branches, steps, options.tokenBase)}`;
      // A holder's key gone from the backend in every allowed state is the deeper cause: someone removed a key not theirs.
      // Judged with the lease the backend just handed out, as the backend sees its clients.
      const tentative = performed.granted === undefined ? drivers : withGrant(drivers, performed.granted);
      const keys = await Promise.all(branches.map((b) => ownershipProblem(instance, b.next, b.outcome.kind === 'granted' ? tentative : drivers, owners)));
      if (keys.every((k) => k !== null)) return fail('OWN-1', `${keys[0]}; then ${deviation}`, actual);
      // Judged as compared: without tokens for a lock that has none.
      const compared = branches.map((b) => ({ ...b, outcome: comparable(b.outcome) }));
      return fail(implicated(subject, compared, comparable(actual), clientNow, steps), deviation, actual);
    }
    if (performed.heldWrite !== undefined) {
      // The write held across the pause landed at the resume: the store must decide it as the model's store does.
      const held = performed.heldWrite;
      // Compared as a plain write's outcome is: the whole decision (a refusal names the highest token accepted before),
      // its tokens renamed or left out as the backend's tokens are (before, only its kind: a wrong highest passed).
      const decision = renaming === null ? held.decision : renaming.rename(held.decision, matching);
      const agrees = (model: Outcome | null) => model === null || sameOutcome(comparable(model), comparable(decision));
      const decided = matching.map((b) => ({ ...b, outcome: heldWriteOutcome(b, held.client) ?? decision }));
      if (!decided.some((b) => agrees(b.outcome))) {
        const wanted = [...new Set(decided.map((b) => decisionText(b.outcome)))].join(' or ');
        return fail('FENCE-2', `client ${held.client}'s write, checked before its pause and sent at the resume, was ${decisionText(decision)}; the model's ${backend.capabilities.store} store has it ${wanted}`, decision, decided);
      }
      matching = matching.filter((b) => agrees(heldWriteOutcome(b, held.client)));
    }
    // The outcome is agreed: a lease handed out is the client's now.
    renaming?.learn(performed.outcome, actual);
    if (performed.granted !== undefined) {
      const d = drivers[performed.granted.client]!;
      d.leases.set(performed.granted.resource, performed.granted.lease);
      // A new grant on the resource: the signal held for an earlier lease on it is no longer this lease's.
      d.signals.delete(performed.granted.resource);
      d.unread.add(performed.granted.resource);
      try {
        if (d.grants++ % 2 === 0) signalOf(d, performed.granted.resource);
      } catch (e) {
        if (e instanceof ContractBreach) return fail(e.property, e.message, actual);
        throw e;
      }
      if (subject.kind === 'acquire' && subject.ttlMs !== undefined) acquiredTtl.set(`${performed.granted.client}/${performed.granted.resource}`, subject.ttlMs);
    }
    await env.advanceTo(Math.min(...matching.map((b) => b.next.nowMs)));
    const timed = matching.filter((b) => b.next.nowMs === env.nowMs());
    const consistent = await observe(instance, timed, drivers, owners);
    if (consistent.length === 0) return fail('OWN-1', (await ownershipProblem(instance, timed[0]!.next, drivers, owners)) ?? 'the backend holds keys no model state allows', actual);
    const unique = new Map(consistent.map((b) => [canonicalKey(b.next, { nodeSymmetry: false }), b]));
    if (unique.size > MAX_CANDIDATES) {
      // Too many unresolved ambiguities to follow: stop here, saying so, rather than guess.
      return report({ kind: 'inconclusive', cause: 'ambiguous', reason: `${unique.size} candidate model states after step ${steps.length + 1} (more than ${MAX_CANDIDATES})` });
    }
    const kept = [...unique.values()];
    worlds = kept.map((b) => b.next);
    // A library that gives its client no deadline (declared) is judged by a model whose client keeps none either (judgedDesign).
    const onRelease = released(worlds, drivers);
    const signalled = onRelease ?? signalProblem(worlds, held(drivers));
    // An early loss signal in an audit is the safe direction: noted once, and the run goes on (the client stops using the lease).
    const early = signalled !== null && auditing && consequenceOf(signalled.property, subject, actual, branches.map((b) => b.outcome), signalled.message).kind === 'safe';
    if (signalled !== null && !early) return fail(signalled.property, signalled.message, actual);
    if (signalled !== null && wentPast === null && !passedMessages.has(signalled.message)) {
      passedMessages.add(signalled.message);
      wentPast = { property: signalled.property, consequence: consequenceOf(signalled.property, subject, actual, branches.map((b) => b.outcome), signalled.message), message: `${signalled.message} (the run went on)` };
    }
    // Probes cost round trips: on servers with their own real clocks they would eat the run's timing tolerance.
    const probing = isOperation(command) && backend.capabilities.expiryToleranceMs === undefined && contract.validatesInput !== false;
    const refused = probing ? await probe(instance, worlds, drivers, command, steps.length, backend.capabilities.ttl) : null;
    if (refused !== null) return fail(refused.property, refused.message, actual);
    mirror(worlds[0]!, drivers, owners);
    // A finding is certain only when every state the backend may be in shows it.
    const perBranch = kept.map((b) => checkProperties(b.events, b.next));
    const violations = perBranch.every((v) => v.length > 0) ? perBranch[0]! : [];
    const executed = record(steps.length, given, startMs, env.nowMs(), actual, branches, violations, worlds[0]!, drivers);
    steps.push(executed);
    if (wentPast !== null) passed.push({ kind: 'conformance-failure', ...wentPast, step: executed });
    if (violations.length > 0) {
      const finding: PropertyViolation = { kind: 'property-violation', violations, step: executed };
      if (!options.continueAfterViolation) return report(finding);
      findings.push(finding);
    }
    return undefined;
  };

  try {
    for (const generated of commands) {
      // A restart's real work comes first, so that the catch-up covers it and the model restarts the node after it.
      const crash = callsOf(instance).faults.crash;
      if (generated.kind === 'restart' && crash?.prepareRestart !== undefined && worlds.every((w) => enabled(w, generated))) await crash.prepareRestart(generated.node);
      // Servers on their own clocks: true time first catches up with the real time the last steps took.
      const behind = Math.floor(env.realTimeAheadMs?.() ?? 0);
      for (const command of behind >= 1 ? [{ kind: 'advance', ms: behind } as const, generated] : [generated]) {
        const ended = await execute(command);
        if (ended !== undefined) return ended;
      }
    }
  } catch (e) {
    // Real time outran the run's tolerance (servers on their own clocks): what follows cannot be judged.
    if (e instanceof TimingError) return report({ kind: 'inconclusive', cause: 'out-of-pace', reason: e.message });
    throw e;
  }
  return report({ kind: 'pass' });
}

/** Starts the command on the backend; resolves with its outcome (faults: ok). Never drives time. */
function perform(backend: string, instance: BackendInstance, drivers: Driver[], command: Command): Promise<Performed> {
  const fault = <K extends keyof FaultInjectors>(key: K): NonNullable<FaultInjectors[K]> => injectorFor(callsOf(instance).faults, key, backend);
  return match<Command, Promise<Performed>>(command)
    .with({ kind: 'acquire' }, { kind: 'extend' }, { kind: 'release' }, { kind: 'write' }, { kind: 'read' }, (op) => operate(backend, instance, drivers, op))
    .with({ kind: 'advance' }, async () => ok())
    .with({ kind: 'clock-step' }, async (c) => ok(await injected(c, () => fault('clockStep')(c.node, c.deltaMs))))
    .with({ kind: 'clock-drift' }, async (c) => ok(await injected(c, () => fault('clockDrift')(c.target, c.driftPpm))))
    .with({ kind: 'crash' }, async (c) => ok(await injected(c, () => fault('crash').crash(c.node))))
    .with({ kind: 'restart' }, async (c) => ok(await injected(c, () => fault('crash').restart(c.node))))
    .with({ kind: 'partition' }, async (c) => ok(await injected(c, () => fault('partition').cut(c.client, c.node))))
    .with({ kind: 'heal' }, async (c) => ok(await injected(c, () => fault('partition').heal(c.client, c.node))))
    .with({ kind: 'node-delay' }, async (c) => ok(await injected(c, () => fault('nodeDelay')(c.node, c.ms))))
    .with({ kind: 'kill-connection' }, async (c) => ok(await injected(c, () => fault('killConnection')(c.client))))
    .with({ kind: 'replicate' }, async () => {
      // A real replica replicates on its own schedule: the schedules the runner draws never contain this step.
      throw new InvalidInputError('unsupported-operation', 'a real replica cannot be told when to replicate');
    })
    .with({ kind: 'pause', inFlight: P.not(undefined) }, async (c) => {
      // The requests go out now, late replies set up before they do; the replies wait for the resume.
      const op = c.inFlight!;
      const latencyMs = latencyOf(op);
      if (latencyMs > 0) await lateReplies(backend, instance, op)(op.client, latencyMs);
      const outcome = operate(backend, instance, drivers, latencyMs > 0 ? ({ ...op, latencyMs: 0 } as Operation) : op);
      outcome.catch(() => undefined); // awaited at the resume, if the run gets that far
      drivers[c.client]!.inFlight = { op: c.inFlight!, outcome };
      return ok(await injected(c, () => fault('pause').pause(c.client)));
    })
    .with({ kind: 'pause' }, async (c) => {
      const d = drivers[c.client]!;
      const w = c.pendingWrite;
      const lease = w === undefined ? undefined : d.leases.get(w.resource);
      const signal = w === undefined ? undefined : signalOf(d, w.resource);
      // The lease check happens before the pause; the write itself after it.
      d.pendingWrite = w !== undefined && lease !== undefined && signal !== undefined && !signal.aborted ? { resource: w.resource, value: w.value, token: lease.token } : null;
      return ok(await injected(c, () => fault('pause').pause(c.client)));
    })
    .with({ kind: 'resume' }, async (c) => {
      const d = drivers[c.client]!;
      // The in-flight operation's delay is for its first round only.
      if (d.inFlight !== null && latencyOf(d.inFlight.op) > 0) await lateReplies(backend, instance, d.inFlight.op)(c.client, 0);
      await injected(c, () => fault('pause').resume(c.client));
      const pending = d.pendingWrite;
      const inFlight = d.inFlight;
      d.pendingWrite = null;
      d.inFlight = null;
      // The store's decision on the held write is the stale write a pause lets through: it is judged, as a delivered one is.
      // A write that failed (its link or the store down) decided nothing the runner can judge.
      const decision =
        pending === null ? undefined : await instance.clients[c.client]!.store.write(pending.resource, pending.token, pending.value).then(checkWriteResult, (e: unknown) => (e instanceof ContractBreach ? Promise.reject(e) : undefined));
      if (inFlight !== null) return inFlight.outcome;
      return decision === undefined ? ok() : { outcome: { kind: 'ok' }, heldWrite: { client: c.client, decision } };
    })
    .with({ kind: 'deliver' }, async (c): Promise<Performed> => {
      // The write the runner held for the network (a delayed request) goes out now; the store cannot tell who held it.
      const d = drivers[c.client]!;
      const pending = d.pendingWrite;
      d.pendingWrite = null;
      if (pending === null) throw new InvalidInputError('precondition', `client ${c.client} has no delayed write`);
      const r = checkWriteResult(await instance.clients[c.client]!.store.write(pending.resource, pending.token, pending.value));
      return { outcome: r.kind === 'accepted' ? { kind: 'accepted' } : { kind: 'rejected', highest: r.highest } };
    })
    .exhaustive();
}

/**
 * A fault the environment injects (its servers, proxies, clocks): a failure
 * of its own (a restarted server whose admin connection timed out on a
 * loaded machine: a driver's untyped error) fails that run only, judged
 * neither way, and the check goes on (RunEnvironmentError), as a failed
 * inspect() does. The environment's typed errors (EnvironmentError: the
 * machine, or the run, already decided), a fault it does not offer, a pace
 * lost to real time, and a bug in the runner or the environment's code
 * (TypeError, RangeError, ReferenceError) go up as they are.
 */
async function injected<T>(command: Command, inject: () => T | Promise<T>): Promise<T> {
  try {
    return await inject();
  } catch (e) {
    if (e instanceof EnvironmentError || e instanceof TimingError || e instanceof FaultNotOfferedError || e instanceof InvalidInputError) throw e;
    if (e instanceof TypeError || e instanceof RangeError || e instanceof ReferenceError || !(e instanceof Error)) throw e;
    throw new RunEnvironmentError(`the environment's ${command.kind} fault failed: ${e.message.split('\n')[0]}`);
  }
}

/**
 * A release or a write in a transaction that fails loudly (UnavailableError)
 * where the model has its outcome unknown (spec 7.4, "Unknown outcomes") is
 * that outcome; null for any other error.
 */
function unknownRelease(subject: Command, error: unknown, branches: readonly Branch[], drivers: Driver[]): Performed | null {
  if ((subject.kind !== 'release' && subject.kind !== 'write') || (error as Error | undefined)?.name !== 'UnavailableError' || !branches.some((b) => b.outcome.kind === 'timed-out')) return null;
  const releasing = subject.kind === 'release' ? drivers[subject.client]!.releasing : null;
  if (releasing !== null) releasing.unknown = true;
  return { outcome: { kind: 'timed-out' } };
}

function ok(_awaited?: void): Performed {
  return { outcome: { kind: 'ok' } };
}

/** One operation through the client's LockClient and store. Harness checks mirror the model's client-side checks. */
async function operate(backend: string, instance: BackendInstance, drivers: Driver[], op: Operation): Promise<Performed> {
  const client = instance.clients[op.client]!;
  const d = drivers[op.client]!;
  const outcome = (o: Outcome): Performed => ({ outcome: o });
  return match(op)
    .with({ kind: 'acquire' }, async (a): Promise<Performed> => {
      const delay = a.latencyMs ? injectorFor(callsOf(instance).faults, 'delay', backend) : null;
      if (delay !== null) await delay(a.client, a.latencyMs!);
      try {
        const r = checkAcquireResult(await client.acquire(a.resource, { ttlMs: a.ttlMs!, retries: a.retries ?? 0, retryDelayMs: a.retryDelayMs ?? 0 }));
        return match(r)
          .with({ kind: 'granted' }, (g): Performed => ({
            outcome: { kind: 'granted', token: g.lease.token, validUntilMs: g.lease.validUntilMs },
            granted: { client: a.client, resource: a.resource, lease: g.lease },
          }))
          .with({ kind: 'denied' }, (x) => outcome({ kind: 'denied', reason: x.reason }))
          .with({ kind: 'timed-out' }, () => outcome({ kind: 'timed-out' }))
          .exhaustive();
      } finally {
        if (delay !== null) await delay(a.client, 0);
      }
    })
    .with({ kind: 'extend' }, async (e): Promise<Performed> => {
      const lease = d.leases.get(e.resource);
      if (lease === undefined || client.extend === undefined) return outcome({ kind: 'not-extended', reason: 'not-held' });
      const r = checkExtendResult(await late(backend, instance, e, () => client.extend!(lease, e.ttlMs)));
      return outcome(r.kind === 'extended' ? { kind: 'extended', validUntilMs: r.validUntilMs } : { kind: 'not-extended', reason: r.reason });
    })
    .with({ kind: 'release' }, async (r): Promise<Performed> => {
      const lease = d.leases.get(r.resource);
      if (lease === undefined) return outcome({ kind: 'not-held' });
      d.released.set(r.resource, (d.released.get(r.resource) ?? new Set()).add(lease.owner));
      // Code that never looked at the signal releases without reading it: the signal, read after, must have fired.
      const unread = d.unread.delete(r.resource);
      const signal = unread ? undefined : signalOf(d, r.resource);
      // Released by the client: its signal is judged by the release (see released()), not against the model's deadline.
      if (signal !== undefined) d.releasing = { resource: r.resource, signal, firedBefore: signal.aborted };
      d.signals.delete(r.resource);
      await late(backend, instance, r, () => client.release(lease));
      // Read after the release, it may say 'expired' for a lease that ran out as it was released: only its firing is judged.
      if (unread) {
        const late = readSignal(lease, r.resource);
        if (!(late instanceof AbortSignal)) throw new ContractBreach('MUTEX-1', `the released lease on '${r.resource}' has signal ${String(late)}, which the adapter API does not define`);
        d.releasing = { resource: r.resource, signal: late, firedBefore: true };
      }
      return outcome({ kind: 'released' });
    })
    .with({ kind: 'write' }, async (w): Promise<Performed> => {
      const lease = d.leases.get(w.resource);
      const signal = signalOf(d, w.resource);
      // The guarded write: the signal held since the grant is the client's only word on validity.
      if (lease === undefined || signal === undefined || signal.aborted) return outcome({ kind: 'not-held' });
      if (w.delayed === true) {
        // Checked and sent: the runner holds the request as the network would, and sends it at the deliver step.
        d.pendingWrite = { resource: w.resource, value: w.value, token: lease.token };
        return ok();
      }
      const r = checkWriteResult(await late(backend, instance, w, () => client.store.write(w.resource, lease.token, w.value)));
      return outcome(r.kind === 'accepted' ? { kind: 'accepted' } : { kind: 'rejected', highest: r.highest });
    })
    .with({ kind: 'read' }, async (r): Promise<Performed> => {
      const v = checkReadResult(await client.store.read(r.resource));
      return outcome({ kind: 'value', value: v.value, token: v.token });
    })
    .exhaustive();
}

function latencyOf(op: Operation): number {
  return op.kind === 'read' ? 0 : (op.latencyMs ?? 0);
}

/** The injector that makes an operation's replies late: an acquire's is `delay`; every other operation's is `latency`. */
function lateReplies(backend: string, instance: BackendInstance, op: Operation): (client: number, ms: number) => Promise<void> {
  return injectorFor(callsOf(instance).faults, op.kind === 'acquire' ? 'delay' : 'latency', backend);
}

/** Runs `call` with the replies to the requests it sends now delayed by the operation's latency. */
async function late<T>(backend: string, instance: BackendInstance, op: Exclude<Operation, { readonly kind: 'acquire' | 'read' }>, call: () => Promise<T>): Promise<T> {
  if (!op.latencyMs) return call();
  const delay = lateReplies(backend, instance, op);
  await delay(op.client, op.latencyMs);
  try {
    return await call();
  } finally {
    await delay(op.client, 0);
  }
}

/** Keeps the harness's leases in step with the model's after an agreed step. */
function mirror(world: World, drivers: Driver[], owners: Map<string, Owner>): void {
  drivers.forEach((d, client) => {
    for (const [resource, lease] of [...d.leases]) {
      const modelLease = entryOf(world.clients[client]!.leases, resource);
      if (modelLease === undefined) {
        d.leases.delete(resource);
        d.signals.delete(resource);
        d.unread.delete(resource);
      } else owners.set(lease.owner, modelLease.owner);
    }
  });
}

/**
 * The signals of leases released in this step: one level of a stack released
 * (the model still has the lease) leaves the signal alone, and it is held
 * again; a lease gone must have signalled 'released'.
 */
function released(worlds: readonly World[], drivers: Driver[]): ContractBreach | null {
  for (const [client, d] of drivers.entries()) {
    const r = d.releasing;
    if (r === null) continue;
    d.releasing = null;
    if (worlds.every((w) => entryOf(w.clients[client]!.leases, r.resource) !== undefined)) {
      if (r.signal.aborted && !r.firedBefore) return new ContractBreach('LIVE-1', `client ${client} released one level of its stacked lease on '${r.resource}' and its signal fired: the lease is still held`);
      d.signals.set(r.resource, r.signal);
      continue;
    }
    // A release whose outcome is unknown ended the session: a stacked lease on it is lost with the connection.
    if (r.unknown === true && r.signal.aborted && lossReason(r.signal) === 'connection-lost') continue;
    try {
      checkReleasedSignal(r.signal, r.firedBefore, r.resource);
    } catch (e) {
      if (e instanceof ContractBreach) return e;
      throw e;
    }
  }
  return null;
}

/** The lease's signal as user code holds it: read now if it was not yet, then kept. */
function signalOf(d: Driver, resource: string): AbortSignal | undefined {
  const lease = d.leases.get(resource);
  if (d.unread.delete(resource) && lease !== undefined) {
    const signal = readSignal(lease, resource);
    if (!(signal instanceof AbortSignal)) throw new ContractBreach('MUTEX-1', `the lease on '${resource}' has signal ${String(signal)}, which the adapter API does not define`);
    // One signal per lease: code that reads it again (using() and the task it runs) must hold the same one.
    if (readSignal(lease, resource) !== signal) throw new ContractBreach('MUTEX-1', `the lease on '${resource}' gives a different signal on each read: a signal read before another may never fire`);
    d.signals.set(resource, signal);
  }
  return d.signals.get(resource);
}

/** `lease.signal`, read as user code reads it; a getter that throws is a breach of the adapter API, not the harness's failure. */
function readSignal(lease: Lease, resource: string): unknown {
  try {
    return lease.signal;
  } catch (e) {
    throw new ContractBreach('MUTEX-1', `reading the signal of the lease on '${resource}' threw ${describeThrown(e)}: user code cannot learn when the lease ends`);
  }
}

function held(drivers: readonly Driver[]): Array<Map<string, HeldLease>> {
  return drivers.map((d) => new Map([...d.signals].flatMap(([resource, signal]) => {
    const lease = d.leases.get(resource);
    return lease === undefined ? [] : [[resource, { lease, signal }] as const];
  })));
}

/**
 * After an agreed operation, one invalid call by the same client (a different
 * one each step, in turn): it must be refused with InvalidInputError at once,
 * and change neither the nodes' keys nor the store.
 */
async function probe(instance: BackendInstance, worlds: readonly World[], drivers: Driver[], op: Operation, index: number, ttl: boolean): Promise<ContractBreach | null> {
  if (worlds.some((w) => w.clients[op.client]!.paused)) return null;
  const client = instance.clients[op.client]!;
  const list = probes(client, op.resource, ttl, drivers[op.client]!.leases.get(op.resource));
  const p = list[index % list.length]!;
  const property = p.what.startsWith('write') ? 'FENCE-2' : 'MUTEX-1';
  // What the call could change: the store's cell for a write, the nodes' keys for a lock call.
  const state = async (): Promise<string> =>
    property === 'FENCE-2'
      ? JSON.stringify(await storeCell(instance, op.client, op.resource), (_k, x: unknown) => (typeof x === 'bigint' ? `${x}` : x))
      : JSON.stringify(callsOf(instance).inspect === undefined ? null : await look(callsOf(instance), op.resource));
  const before = await state();
  let error: unknown = null;
  let refused = false;
  // A call that throws at once, not in its promise, counts the same.
  const call = Promise.resolve().then(p.call).then(
    () => undefined,
    (e: unknown) => {
      error = e;
      refused = true;
    },
  );
  const env = callsOf(instance).time;
  if (!(await env.runUntil(call, env.nowMs()))) return new ContractBreach(property, `invalid input (${p.what}) was not refused at once`);
  if (!isInvalidInput(error)) return new ContractBreach(property, `invalid input (${p.what}) was ${refused ? `refused with ${describeThrown(error)}` : 'accepted'}, not with InvalidInputError`);
  if ((error as InvalidInputError).code !== p.code) return new ContractBreach(property, `invalid input (${p.what}) was refused with code ${String((error as InvalidInputError).code)}, not ${p.code}`);
  if (!(error as Error).message?.includes(p.names)) return new ContractBreach(property, `invalid input (${p.what}) was refused with "${(error as Error).message}", which does not name ${p.names}`);
  const after = await state();
  if (before !== after) return new ContractBreach(property, `invalid input (${p.what}) was refused but changed state: ${before} -> ${after}`);
  return null;
}

/**
 * The store's cell as `client` reads it, to see that a refused write changed
 * nothing: a read that fails (at once, or in its promise) shows as null both
 * times; one still pending after the run's environment bound ends the run
 * unjudged, naming it (the harness's look, as inspect() is).
 */
async function storeCell(instance: BackendInstance, client: number, resource: string): Promise<unknown> {
  const calls = callsOf(instance);
  const reading = Promise.resolve()
    .then(() => instance.clients[client]!.store.read(resource))
    .catch(() => null);
  const read = await valueWithin(reading, calls.limitMs);
  if (!read.done) throw new RunEnvironmentError(new AdapterError(calls.backend, `client ${client}'s store.read()`, `had not settled after ${calls.limitMs} ms of real time (a promise of the store that never settles?)`).message);
  return read.value;
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
  const inspect = callsOf(instance).inspect;
  if (inspect === undefined) return [...branches];
  const held = new Map<string, ReadonlyArray<string | null>>();
  for (const resource of resourcesOf(drivers)) held.set(resource, await look(callsOf(instance), resource));
  const consistent = branches.filter((b) => wrongKey(b.next, drivers, held, owners) === null);
  // A state without a key the backend shows alive is not the state it is in (a key the server kept past its expiry, alive
  // again after its clock stepped back, where the model may also have purged it): such states are dropped, unless none is
  // left, so that a finding in the others is certain. With none left the step is judged as before (the other checks).
  const holding = consistent.filter((b) => !lacksShownKey(b.next, drivers, held, owners));
  return holding.length > 0 ? holding : consistent;
}

/** Whether the backend shows a client's key on a node where this model state has no key of that owner (the model's key purged). */
function lacksShownKey(world: World, drivers: Driver[], held: ReadonlyMap<string, ReadonlyArray<string | null>>, owners: ReadonlyMap<string, Owner>): boolean {
  for (const resource of resourcesOf(drivers)) {
    for (const [index, node] of world.nodes.entries()) {
      const owner = held.get(resource)?.[index] ?? null;
      const modelOwner = owner === null ? undefined : owners.get(owner);
      if (!node.up || modelOwner === undefined) continue;
      const key = entryOf(node.keys, resource);
      if (key === undefined || !sameOwner(key.owner, modelOwner)) return true;
    }
  }
  return false;
}

/**
 * The environment's own look at the keys. Its failure (a server the harness
 * could not read in its bound) is the environment's, not the backend's: the
 * run is judged neither way, and the check goes on (out of pace stays so).
 */
async function look(calls: RunCalls, resource: string): Promise<ReadonlyArray<string | null>> {
  let held: unknown;
  try {
    held = await calls.inspect!(resource);
  } catch (e) {
    if (e instanceof RunEnvironmentError || e instanceof TimingError) throw e;
    throw new RunEnvironmentError(`the environment could not inspect '${resource}': ${e instanceof Error ? e.message : String(e)}`);
  }
  // An answer of another shape is the adapter's defect, not the servers' failure: it stops the check.
  return checkInspected(calls.backend, held, calls.nodes);
}

/** What is wrong with the backend's keys against this model state, or null (also when it cannot inspect). */
async function ownershipProblem(instance: BackendInstance, world: World, drivers: Driver[], owners: ReadonlyMap<string, Owner>): Promise<string | null> {
  const inspect = callsOf(instance).inspect;
  if (inspect === undefined) return null;
  const held = new Map<string, ReadonlyArray<string | null>>();
  for (const resource of resourcesOf(drivers)) held.set(resource, await look(callsOf(instance), resource));
  return wrongKey(world, drivers, held, owners);
}

/** The first disagreement between the backend's keys and the model's: a holder's key gone, or a released key kept. */
function wrongKey(world: World, drivers: Driver[], held: ReadonlyMap<string, ReadonlyArray<string | null>>, owners: ReadonlyMap<string, Owner>): string | null {
  for (const [client, d] of drivers.entries()) {
    for (const [resource, gone] of d.released) {
      for (const [index, node] of world.nodes.entries()) {
        const owner = held.get(resource)?.[index] ?? null;
        if (!node.up || owner === null || !gone.has(owner)) continue;
        const key = entryOf(node.keys, resource);
        const modelOwner = owners.get(owner);
        const modelKeeps = key !== undefined && modelOwner !== undefined && sameOwner(key.owner, modelOwner) && livenessIn(world, node, resource).includes(true);
        if (!modelKeeps) return `node ${index} still holds client ${client}'s released key on '${resource}' (owner ${owner.slice(0, 8)}…)`;
      }
    }
  }
  for (const [client, d] of drivers.entries()) {
    for (const [resource, lease] of d.leases) {
      const modelLease = entryOf(world.clients[client]!.leases, resource);
      if (modelLease === undefined) continue;
      for (const [index, node] of world.nodes.entries()) {
        const key = entryOf(node.keys, resource);
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

/**
 * Tokens compared by order (Capabilities.tokensComparedBy 'order'): a new
 * grant's token that exceeds every token granted before in the run stands for
 * the token the model grants; tokens in store replies are renamed by what they
 * stood for. A token that is not above every earlier one keeps its own value,
 * so it matches no model token and the step fails (FENCE-1).
 */
class TokenRenaming {
  readonly #names = new Map<bigint, bigint>();
  #highest: bigint | null = null;

  rename(o: Outcome, branches: readonly Branch[]): Outcome {
    const known = (t: bigint): bigint => this.#names.get(t) ?? t;
    return match(o)
      .with({ kind: 'granted' }, (g): Outcome => {
        if (this.#highest !== null && g.token <= this.#highest) return g;
        const modelled = branches.find((b) => b.outcome.kind === 'granted' && b.outcome.validUntilMs === g.validUntilMs) ?? branches.find((b) => b.outcome.kind === 'granted');
        return modelled !== undefined && modelled.outcome.kind === 'granted' ? { ...g, token: modelled.outcome.token } : g;
      })
      .with({ kind: 'rejected' }, (r): Outcome => ({ ...r, highest: known(r.highest) }))
      .with({ kind: 'value' }, (v): Outcome => ({ ...v, token: v.token === null ? null : known(v.token) }))
      .otherwise((x) => x);
  }

  /** The step's outcome agreed: a grant's own token now stands for the model's. */
  learn(own: Outcome, renamed: Outcome): void {
    if (own.kind !== 'granted' || renamed.kind !== 'granted') return;
    this.#names.set(own.token, renamed.token);
    if (this.#highest === null || own.token > this.#highest) this.#highest = own.token;
  }
}

/** What the runner compares of an outcome: without tokens for a lock that has none, without deadlines for one that reports none. */
function comparison(backend: BackendUnderTest): (o: Outcome) => Outcome {
  const tokens = comparesTokens(backend);
  const deadlines = backend.contract?.deadline !== 'none';
  const reasons = backend.contract?.denialReasons !== false;
  return (o) => {
    const t = tokens ? o : withoutTokens(o);
    const d = deadlines ? t : withoutDeadline(t);
    // A library that does not say why it refused (declared): a refusal is a refusal.
    return reasons || d.kind !== 'denied' ? d : { kind: 'denied', reason: 'held' };
  };
}

function withoutDeadline(o: Outcome): Outcome {
  return match(o)
    .with({ kind: 'granted' }, (g): Outcome => ({ ...g, validUntilMs: null }))
    .with({ kind: 'extended' }, (g): Outcome => ({ ...g, validUntilMs: 0 }))
    .otherwise((x) => x);
}

/** An outcome with its tokens blanked, for a lock that has none. */
function withoutTokens(o: Outcome): Outcome {
  return match(o)
    .with({ kind: 'granted' }, (g): Outcome => ({ ...g, token: 0n }))
    .with({ kind: 'rejected' }, (r): Outcome => ({ ...r, highest: 0n }))
    .with({ kind: 'value' }, (v): Outcome => ({ ...v, token: null }))
    .otherwise((x) => x);
}

/** The same outcome but for a deadline or a reason of refusal (tokens and values still agree). */
function sameKind(a: Outcome, b: Outcome): boolean {
  const loose = (o: Outcome): Outcome =>
    match(o)
      .with({ kind: 'granted' }, (g): Outcome => ({ ...g, validUntilMs: null }))
      .with({ kind: 'extended' }, (g): Outcome => ({ ...g, validUntilMs: 0 }))
      .with({ kind: 'denied' }, (d): Outcome => ({ ...d, reason: 'held' }))
      .with({ kind: 'not-extended' }, (d): Outcome => ({ ...d, reason: 'expired' }))
      .otherwise((x) => x);
  return sameOutcome(loose(a), loose(b));
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

/**
 * The property a deviation endangers, named by its consequence: what a user
 * who trusted the backend's answer would lose. A deviation in the safe
 * direction (less validity, a lease given up early) only costs liveness.
 */
export function implicated(command: Command, branches: readonly Branch[], actual: Outcome, clientNowMs: number, earlier: readonly ExecutedStep[] = []): PropertyId {
  const expected = branches.map((b) => b.outcome);
  const op: Command = command.kind === 'pause' && command.inFlight ? command.inFlight : command;
  const wantedKinds = new Set(expected.map((o) => o.kind));
  return match({ op: op.kind, actual })
    .with({ op: 'acquire', actual: { kind: 'granted' } }, ({ actual: a }): PropertyId => {
      const granted = expected.filter((o): o is Extract<Outcome, { kind: 'granted' }> => o.kind === 'granted');
      // A lease with no validity left on arrival, or one granted where the model grants none, overlaps another holder's.
      if (granted.length === 0 || (a.validUntilMs !== null && a.validUntilMs <= clientNowMs)) return 'MUTEX-1';
      const sameToken = granted.filter((g) => g.token === a.token);
      // A token at or below one already handed out after a restart: the issuer lost its counter (DUR-1).
      if (sameToken.length === 0) return counterLost(op, a.token, earlier) ? 'DUR-1' : 'FENCE-1';
      return longerThanAllowed(a.validUntilMs, sameToken.map((g) => g.validUntilMs)) ? 'MUTEX-1' : 'LIVE-1';
    })
    .with({ op: 'acquire' }, (): PropertyId => 'LIVE-1')
    .with({ op: 'extend', actual: { kind: 'extended' } }, ({ actual: a }): PropertyId => {
      const extended = expected.filter((o): o is Extract<Outcome, { kind: 'extended' }> => o.kind === 'extended');
      // Same extension, another deadline: claiming longer than allowed endangers exclusion; shorter only gives time away.
      if (extended.length > 0) return longerThanAllowed(a.validUntilMs, extended.map((e) => e.validUntilMs)) ? 'MUTEX-1' : 'LIVE-1';
      // A key of another owner on a node: the extension acted on a key that is not the client's (OWN-1).
      // The holder's lease is over: extending it revives what is no longer the client's (OWN-1).
      // Otherwise the holder still owns its keys, just not on a quorum: an extension claimed anyway lets a quorum grant it again (MUTEX-1).
      const quorumless = branches.some((b) => b.outcome.kind === 'not-extended' && b.outcome.reason === 'no-quorum' && !othersKey(b.next, op));
      return quorumless ? 'MUTEX-1' : 'OWN-1';
    })
    // A refused extension the model grants gives a valid lease away: the safe direction. So does one the model
    // refuses too, for another reason: the client learns what it would have (the keys are compared on their own).
    .with({ op: 'extend', actual: { kind: 'not-extended' } }, (): PropertyId => (wantedKinds.has('extended') || (wantedKinds.size === 1 && wantedKinds.has('not-extended')) ? 'LIVE-1' : 'OWN-1'))
    .with({ op: 'extend' }, (): PropertyId => (wantedKinds.has('extended') ? 'LIVE-1' : 'OWN-1'))
    // A release reported done where its outcome is unknown leaves the lock held behind the client's back (LIVE-1).
    .with({ op: 'release' }, (): PropertyId => (wantedKinds.has('timed-out') ? 'LIVE-1' : 'OWN-1'))
    // A write the client should not have sent acts on a lease that is over; one it refused gave a valid lease away.
    // (A delayed write's send is `ok`: sent.)
    .with({ op: 'write', actual: { kind: P.union('accepted', 'rejected', 'ok') } }, (): PropertyId => (wantedKinds.has('not-held') && !wantedKinds.has('accepted') && !wantedKinds.has('rejected') && !wantedKinds.has('ok') ? 'MUTEX-1' : 'FENCE-2'))
    .with({ op: 'write' }, (): PropertyId => 'LIVE-1')
    .with({ op: 'read' }, (): PropertyId => 'STORE-1')
    // A delayed write judged otherwise than the store's policy judges it when it lands.
    .with({ op: 'deliver' }, (): PropertyId => 'FENCE-2')
    .otherwise((): PropertyId => (command.kind === 'resume' ? 'STORE-1' : 'LIVE-1'));
}

/**
 * A grant whose token is above every one the model allows and every one
 * granted before on the resource in this run (TOKEN_SKIP_NOTE): the note
 * that says so, else ''. A token at or below an earlier one is no skip.
 */
function tokenSkipNote(command: Command, actual: Outcome, branches: readonly Branch[], earlier: readonly ExecutedStep[], tokenBase: bigint): string {
  if (command.kind !== 'acquire' || actual.kind !== 'granted') return '';
  const allowed = branches.flatMap((b) => (b.outcome.kind === 'granted' ? [b.outcome.token] : []));
  const before = earlier.flatMap((s) => (s.command.kind === 'acquire' && s.command.resource === command.resource && s.actual.kind === 'granted' ? [s.actual.token] : []));
  const skips = allowed.length > 0 && [...allowed, ...before].every((t) => actual.token > t);
  // The run's first grant off the model's token: most often a counter that does not start at the run's tokenBase.
  const first = allowed.length > 0 && !allowed.includes(actual.token) && earlier.every((s) => s.actual.kind !== 'granted');
  const base = first ? ` (this run's tokenBase is ${tokenBase}: a fresh counter's first grant is tokenBase + 1; start() gets it, and a kit adapter's client() as parts.tokenBase)` : '';
  return `${skips ? ` (${TOKEN_SKIP_NOTE})` : ''}${base}`;
}

function decisionText(o: Outcome): string {
  return o.kind === 'rejected' ? `rejected (highest token accepted before: ${o.highest})` : o.kind;
}

/** The model's decision on a client's write that landed in this branch's step (null: it sent none there). */
function heldWriteOutcome(branch: Branch, client: number): Outcome | null {
  const w = branch.events.find((e) => e.kind === 'write' && e.client === client);
  if (w === undefined || w.kind !== 'write') return null;
  return w.accepted ? { kind: 'accepted' } : { kind: 'rejected', highest: w.highestBefore! };
}

/** Whether a node holds a key on the operation's resource that is not the client's own lease's. */
function othersKey(world: World, op: Command): boolean {
  if (!('resource' in op) || !('client' in op)) return false;
  const leases = world.clients[op.client]?.leases;
  const mine = leases === undefined ? undefined : entryOf(leases, op.resource)?.owner;
  return world.nodes.some((n) => {
    const key = entryOf(n.keys, op.resource);
    return key !== undefined && (mine === undefined || !sameOwner(key.owner, mine));
  });
}

/** A deadline later than every one the model allows (null, no deadline, is the longest). */
function longerThanAllowed(actual: number | null, allowed: ReadonlyArray<number | null>): boolean {
  return allowed.every((v) => v !== null && (actual === null || actual > v));
}

/** Whether a granted token went back to or below one granted earlier on the resource, with a restart in between. */
function counterLost(op: Command, token: bigint, earlier: readonly ExecutedStep[]): boolean {
  if (op.kind !== 'acquire') return false;
  let highest: bigint | null = null;
  let restartedSince = false;
  for (const s of earlier) {
    const c = s.command.kind === 'pause' && s.command.inFlight ? s.command.inFlight : s.command;
    if (c.kind === 'restart') restartedSince = true;
    if (c.kind === 'acquire' && c.resource === op.resource && s.actual.kind === 'granted' && (highest === null || s.actual.token >= highest)) {
      highest = s.actual.token;
      restartedSince = false;
    }
  }
  return highest !== null && restartedSince && token <= highest;
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
