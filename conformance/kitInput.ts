import type { Design, StorePolicy } from '../model/design.ts';
import { STORE_POLICIES, validateDesign } from '../model/design.ts';
import { InvalidInputError } from '../model/errors.ts';
import { checkClock, isObject, refuse, shown } from '../impl/options.ts';
import { offClientClock as offClock, onClientClock as onClock, type LibraryClockNotes } from './libraryClock.ts';
import type { MonotonicClock } from '../impl/clock.ts';
import { AdapterApiError } from './backendApi.ts';

/**
 * Checks of what the kit's (lockcheck/kit) public functions take: a wrong
 * argument is InvalidInputError('invalid-config') naming it and what was
 * given, before any server, connection or file is touched, never a TypeError
 * from deep inside.
 */

/** A design of one of `kinds`, checked by the model's validateDesign; `fn` names the function for the message. */
export function checkDesignOf<K extends Design['kind']>(design: unknown, kinds: readonly K[], fn: string): Extract<Design, { kind: K }> {
  if (!isObject(design) || typeof design.kind !== 'string') refuse('design', `a Design (an object with a kind: ${kinds.join(' or ')})`, design);
  if (!kinds.includes(design.kind as K)) throw new InvalidInputError('invalid-config', `${fn} runs ${kinds.join(' and ')} designs, not ${shown(design.kind)}`);
  return validateDesign(design as unknown as Design) as Extract<Design, { kind: K }>;
}

export function checkStorePolicy(store: unknown): StorePolicy {
  if (!STORE_POLICIES.includes(store as StorePolicy)) refuse('store', `one of ${STORE_POLICIES.join(', ')}`, store);
  return store as StorePolicy;
}

/** A RedisCluster as startRedisCluster or connectRedisCluster return it. */
export function checkRedisCluster(cluster: unknown): void {
  if (!isObject(cluster) || !Array.isArray(cluster.nodes) || !isObject(cluster.store)) refuse('cluster', 'a RedisCluster (from startRedisCluster or connectRedisCluster)', cluster);
}

/** A PostgresTarget: a url, and a process when lockcheck started the server (targetOf, connectPostgres). */
export function checkPostgresTarget(server: unknown): void {
  if (!isObject(server) || typeof server.url !== 'string') refuse('server', 'a PostgresTarget (from targetOf or connectPostgres)', server);
  const p = server.process;
  if (p !== undefined && (!isObject(p) || typeof p.crash !== 'function' || typeof p.restart !== 'function')) refuse('server.process', 'an object with crash() and restart()', p);
}

/** A server URL given to parse or connect: a string (the URL's own checks follow, as ServerUrlError). */
export function checkUrlText(raw: unknown, name = 'url'): string {
  if (typeof raw !== 'string') refuse(name, 'a URL string', raw);
  return raw;
}

export function checkFunction(value: unknown, name: string): void {
  if (typeof value !== 'function') refuse(name, 'a function', value);
}

/**
 * onClientClock and offClientClock as the kit gives them to users, with
 * their arguments checked; lockcheck's own adapters call the unchecked ones
 * (libraryClock.ts) on every client call.
 */
export function onClientClock<T>(clock: MonotonicClock, fn: () => T, notes?: LibraryClockNotes): T {
  checkClock(clock);
  checkFunction(fn, 'fn');
  if (notes !== undefined && (!isObject(notes) || typeof notes.realTimers !== 'number' || !Array.isArray(notes.timerErrors))) refuse('notes', 'LibraryClockNotes (from libraryClockNotes())', notes);
  return notes === undefined ? onClock(clock, fn) : onClock(clock, fn, notes);
}

/** Runs `fn` outside any client's call, on the real clock (a driver's own I/O timeouts must stay real); returns what `fn` returns. */
export function offClientClock<T>(fn: () => T): T {
  checkFunction(fn, 'fn');
  return offClock(fn);
}

/**
 * What a kit adapter's client() gave: its lock calls (acquire, release, extend or none). The kit wraps them into the
 * run's LockClient, so the instance's own check saw functions there whatever client() returned: a missing release was
 * judged as the library's (OWN-1, "holds nothing"), a null a TypeError. AdapterApiError naming the adapter and the client.
 */
export function checkLockCalls(calls: unknown, adapter: string, client: number): void {
  const said = `${adapter}: adapter.client() for client ${client} returned`;
  const c = calls as Record<string, unknown> | null | undefined;
  if (c === null || typeof c !== 'object') throw new AdapterApiError(`${said} ${c === null ? 'null' : typeof c}, not lock calls (LockCalls: acquire, release, extend?)`);
  const missing = [
    ...(['acquire', 'release'] as const).filter((m) => typeof c[m] !== 'function').map((m) => `${m}()`),
    ...(c.extend !== undefined && typeof c.extend !== 'function' ? ['extend() (a function, or absent)'] : []),
  ];
  if (missing.length > 0) throw new AdapterApiError(`${said} lock calls without ${missing.join(', ')} (LockCalls: acquire, release, extend?)`);
}
