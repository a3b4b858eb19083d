import { match, P } from 'ts-pattern';
import type { Command } from '../model/command.ts';
import type { Design } from '../model/design.ts';
import type { Outcome } from '../model/outcome.ts';
import { PROPERTY_IDS, type PropertyId } from '../model/properties.ts';
import type { BackendUnderTest, LibraryContract } from './adapter.ts';

/**
 * Every deviation from the model, classified by what it costs a user who
 * trusts the backend's answer (docs/adapter.md, "Auditing a library: its contract, and findings by
 * consequence"; the contract's lease terms, spec 7.11):
 * - unsafe: the client may act on a lease longer than allowed, two clients
 *   hold the lock, a stale write lands, a key of another owner changed;
 * - liveness: the lock is not there when it should be (a refused grant, a
 *   call that does not finish, a released key that stays until its ttl);
 * - safe: the safe direction, validity shorter than allowed or an early
 *   loss signal: the client gives up time it had, and nothing else.
 */
export type ConsequenceKind = 'unsafe' | 'liveness' | 'safe';

export interface Consequence {
  readonly kind: ConsequenceKind;
  /** What happened, in the user's terms. */
  readonly what: string;
}

/** Worst first. */
export const CONSEQUENCE_KINDS: readonly ConsequenceKind[] = ['unsafe', 'liveness', 'safe'];

/**
 * Said of a granted token above the model's and above every token granted
 * before it on the resource: it skipped values (a revision, a shared
 * counter), which orders the holders as well; only the exact comparison the
 * backend declared (by default) fails it.
 */
export const TOKEN_SKIP_NOTE = "the token skips values but is above every earlier one: a lock whose tokens move at events of their own declares capabilities.tokensComparedBy: 'order'";

/**
 * The consequence of a deviation: from the property the runner names (it
 * names the safe direction LIVE-1, and an overreach MUTEX-1), the operation
 * and what the backend answered against what the model allows.
 */
export function consequenceOf(property: PropertyId, command: Command, actual: Outcome, allowed: readonly Outcome[], message: string): Consequence {
  const op: Command = command.kind === 'pause' && command.inFlight ? command.inFlight : command;
  const kinds = new Set(allowed.map((o) => o.kind));
  // A refusal the model refuses too, for another reason: the client learns what it would have (no lease), nothing changed.
  // Not when the deviation is a key (OWN-1): a refusal that deleted a held lease's keys changed something.
  // Nor when the refusal is the model's own, reason and all: then the deviation is elsewhere (a signal that did not fire, say).
  const sameReason = allowed.some((o) => (o.kind === 'denied' || o.kind === 'not-extended') && o.kind === actual.kind && o.reason === actual.reason);
  if (property !== 'OWN-1' && (actual.kind === 'denied' || actual.kind === 'not-extended') && allowed.every((o) => o.kind === actual.kind) && !sameReason) return { kind: 'safe', what: 'the same refusal, for another reason' };
  return match(property)
    .with('MUTEX-1', (): Consequence => {
      if (op.kind === 'acquire' && actual.kind === 'granted' && !kinds.has('granted')) return { kind: 'unsafe', what: 'a grant the model refuses: the client may act while the lock is not its own (two holders)' };
      return { kind: 'unsafe', what: 'the client may act on a lease longer than allowed' };
    })
    .with('FENCE-2', (): Consequence =>
      // A store that refuses a write its policy takes loses the holder's write: nothing stale lands.
      actual.kind === 'rejected' && !kinds.has('rejected')
        ? { kind: 'liveness', what: "a write the store's policy takes was refused: the holder's write is lost" }
        : { kind: 'unsafe', what: 'a stale write can land: tokens do not order the holders' },
    )
    .with('FENCE-1', 'DUR-1', (): Consequence =>
      message.includes(TOKEN_SKIP_NOTE)
        ? { kind: 'safe', what: 'a token above every earlier one, not the next: it still orders the holders' }
        : { kind: 'unsafe', what: 'a stale write can land: tokens do not order the holders' },
    )
    .with('STORE-1', (): Consequence => ({ kind: 'unsafe', what: 'a stale write landed' }))
    .with('OWN-1', (): Consequence => {
      if (/released key|released lease/.test(message)) return { kind: 'liveness', what: 'a released key stays until its ttl' };
      // An extension claimed where the model has the lease over: a late reply read as a yes is as unsafe as an extend
      // without an owner check, and this step cannot tell them apart (owners are compared on their own, ttls are not).
      const keyDiffers = /\bnode \d+ (should|still) hold|holds keys/.test(message);
      if (op.kind === 'extend' && actual.kind === 'extended' && !kinds.has('extended') && !keyDiffers) return { kind: 'unsafe', what: "an extension claimed for a lease that is over: the client may act while another holds the lock (or the other's key was extended)" };
      return { kind: 'unsafe', what: 'a key of another owner changed' };
    })
    .with('LIVE-1', (): Consequence =>
      match({ op: op.kind, actual })
        .with({ actual: { kind: P.union('granted', 'extended') } }, (): Consequence => ({ kind: 'safe', what: 'validity shorter than allowed' }))
        .with({ op: 'extend', actual: { kind: 'not-extended' } }, (): Consequence => ({ kind: 'safe', what: 'an early loss signal: an extension refused that the model grants' }))
        .with({ op: 'write', actual: { kind: 'not-held' } }, (): Consequence => ({ kind: 'safe', what: 'an early loss signal: the client stopped writing under a valid lease' }))
        .otherwise((): Consequence => (/signal/.test(message) ? { kind: 'safe', what: 'an early loss signal' } : { kind: 'liveness', what: 'the lock was not there when the model has it' })),
    )
    .exhaustive();
}

/**
 * What a finding about the design costs a user, for a library audited
 * against its contract: the library agreed with the model of what it
 * promises, and the model breaks the property (two holders, a stale write).
 */
export function findingConsequence(property: PropertyId): Consequence {
  return match(property)
    .with('MUTEX-1', (): Consequence => ({ kind: 'unsafe', what: 'two clients hold the lock at once' }))
    .with('STORE-1', (): Consequence => ({ kind: 'unsafe', what: 'a stale write landed' }))
    .with('FENCE-1', 'FENCE-2', 'DUR-1', (): Consequence => ({ kind: 'unsafe', what: 'tokens do not order the holders' }))
    .with('OWN-1', (): Consequence => ({ kind: 'unsafe', what: 'a key of another owner changed' }))
    .with('LIVE-1', (): Consequence => ({ kind: 'liveness', what: 'an abandoned lock stays longer than its bound' }))
    .exhaustive();
}

/**
 * The design the model judges the backend by: the adapter's design, with
 * what its library declares: its own drift allowance, no deadline, what a
 * refused extension does (model/design.ts, LeaseTerms).
 */
export function judgedDesign(backend: BackendUnderTest): Design {
  return contractDesign(backend.design, backend.contract, backend.capabilities.reentrant);
}

/**
 * A design with a library's contract applied: the model of what the library
 * promises. The matrix predicts a library row, and seeds its runs, from
 * this model (conformance/writeSeeds.ts explores it), never from the bare
 * design.
 */
export function contractDesign(design: Design, contract: LibraryContract | undefined, reentrant: boolean): Design {
  if (contract === undefined) return design;
  const m = contract.driftMargin;
  // No client timeout matters only with a deadline: a client without one already reads every late reply.
  const timeout = contract.deadline !== 'none' && contract.clientTimeout === false ? { clientTimeout: 'none' as const } : {};
  const decides = contract.decidesAt === 'every-reply' ? { decides: 'every-reply' as const } : {};
  const terms = { ...(contract.deadline === 'none' ? { clientDeadline: 'none' as const } : {}), ...timeout, ...decides, ...(contract.failedExtend !== undefined ? { failedExtend: contract.failedExtend } : {}) };
  return match(design)
    .with({ kind: P.union('redis-single', 'redlock', 'etcd-lease') }, (d): Design => ({ ...d, ...(m === undefined ? {} : { driftFactor: m.factor, clockMarginMs: m.fixedMs, driftRounding: m.rounding }), ...terms }))
    // Session locks stack in PostgreSQL; a library that opens a session per call declares reentrant: false.
    .with({ kind: 'pg-session' }, (d): Design => (reentrant ? d : { ...d, reentrant: false }))
    .otherwise((d) => d);
}

/** Whether the runner compares tokens: not for a lock that has none (declared either way). */
export function comparesTokens(backend: BackendUnderTest): boolean {
  return backend.capabilities.tokens !== false && backend.contract?.tokens !== 'none';
}

/** The properties about tokens: a lock without any (declared) has none to order, so they say nothing about it. */
export const TOKEN_PROPERTIES: readonly PropertyId[] = ['FENCE-1', 'FENCE-2', 'DUR-1'];

/** Whether a property is judged for this backend: every one, but the token properties only for a lock with tokens. */
export function judgesProperty(backend: BackendUnderTest, property: PropertyId): boolean {
  return comparesTokens(backend) || !TOKEN_PROPERTIES.includes(property);
}

/**
 * A check's findings per property (CheckResult.findings): the runs judged to
 * their end that showed it (0: judged, none did), or null when it was not
 * decided: no run was judged to its end, or the backend is not judged by it
 * (the token properties of a lock without tokens, as the matrix does).
 */
export function findingCounts(backend: BackendUnderTest, seen: Readonly<Partial<Record<PropertyId, number>>>, judgedRuns: number): Record<PropertyId, number | null> {
  return Object.fromEntries(PROPERTY_IDS.map((p) => [p, judgedRuns === 0 || !judgesProperty(backend, p) ? null : (seen[p] ?? 0)])) as Record<PropertyId, number | null>;
}

/** Token counters start below this for a library whose tokens are JS numbers (exact to 2^53 only). */
export const MAX_NUMBER_TOKEN_BASE = 2n ** 53n - 2n ** 20n;
