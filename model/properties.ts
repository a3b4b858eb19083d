import { driftFactor } from './design.ts';
import type { WorldEvent } from './event.ts';
import { livenessIn } from './node.ts';
import type { World } from './state.ts';
import { sameOwner } from './state.ts';
import { passes } from './store.ts';
import { holdsValid } from './world.ts';
import { entryOf } from './record.ts';
import { frozen } from './frozen.ts';
import { quotedName } from './shownText.ts';

/**
 * The spec's properties (spec/SPEC.md, "Properties"), one named check each,
 * evaluated after every step on the events of the step and the state after it.
 */
export type PropertyId = 'MUTEX-1' | 'FENCE-1' | 'FENCE-2' | 'STORE-1' | 'OWN-1' | 'LIVE-1' | 'DUR-1';

/** Every property ID, in the spec's order. */
export const PROPERTY_IDS: readonly PropertyId[] = frozen(['MUTEX-1', 'FENCE-1', 'FENCE-2', 'STORE-1', 'OWN-1', 'LIVE-1', 'DUR-1']);

/** Each property's title, as the spec states it. */
export const PROPERTY_TITLES: Readonly<Record<PropertyId, string>> = frozen({
  'MUTEX-1': 'mutual exclusion as the clients experience it',
  'FENCE-1': 'fencing tokens increase strictly per resource across grants',
  'FENCE-2': "the store accepts a write only if its token passes the store's policy",
  'STORE-1': "no stale holder's write lands after a newer holder's write was accepted",
  'OWN-1': "only the holder's release or extend takes effect",
  'LIVE-1': 'an abandoned lock becomes acquirable within its bound',
  'DUR-1': 'token issuer state survives a restart',
});

/** How each property is judged (spec section 5's summary table is generated from this). */
export const PROPERTY_KINDS: Readonly<Record<PropertyId, { readonly kind: 'state' | 'event'; readonly on: string }>> = frozen({
  'MUTEX-1': { kind: 'state', on: 'client leases and client clocks' },
  'FENCE-1': { kind: 'event', on: '`granted` + ghost `maxToken`' },
  'FENCE-2': { kind: 'event', on: '`write` + store policy' },
  'STORE-1': { kind: 'event', on: '`write` + ghost grant epochs' },
  'OWN-1': { kind: 'event', on: '`key-changed`' },
  'LIVE-1': { kind: 'state', on: 'node keys, node clocks (with the expiry tolerance), ghost `liveSinceTrueMs`' },
  'DUR-1': { kind: 'event', on: '`restarted` counters' },
});

/** A property broken by a step. */
export interface Violation {
  readonly property: PropertyId;
  /** The resource it concerns, where one does. */
  readonly resource?: string;
  /** What broke it, naming the clients, tokens and times. */
  readonly message: string;
}

/** MUTEX-1: at any true instant, at most one client holds a lease that is valid by its own clock. */
function mutex(after: World, out: Violation[]): void {
  // Plain loops: this runs after every step of an exploration.
  const clients = after.clients;
  for (let i = 0; i < clients.length; i++) {
    for (const resource in clients[i]!.leases) {
      // Reported once, by the first client that holds the resource.
      let earlier = false;
      for (let j = 0; j < i && !earlier; j++) earlier = entryOf(clients[j]!.leases, resource) !== undefined;
      if (earlier) continue;
      const holders: number[] = [];
      for (let j = i; j < clients.length; j++) if (holdsValid(after, j, resource)) holders.push(j);
      if (holders.length > 1) {
        out.push({ property: 'MUTEX-1', resource, message: `clients ${holders.join(' and ')} both hold a valid lease on ${quotedName(resource)} at t=${after.nowMs}` });
      }
    }
  }
}

/** LIVE-1's bound in ms of true time: ceil(ttl * (1 + driftFactor)) + 1 + the nodes' expiry tolerance. */
export function liveBoundMs(ttlMs: number, driftFactor: number, expiryToleranceMs: number): number {
  return Math.ceil(ttlMs * (1 + driftFactor)) + 1 + expiryToleranceMs;
}

/**
 * LIVE-1: no node keeps a ttl key possibly alive longer than liveBoundMs of
 * true time after its last grant, extension or lease refresh.
 */
function live(after: World, out: Violation[]): void {
  const design = after.config.design;
  for (let index = 0; index < after.nodes.length; index++) {
    const node = after.nodes[index]!;
    // A node that is down blocks nobody.
    if (!node.up) continue;
    for (const resource in node.keys) {
      const key = entryOf(node.keys, resource)!;
      // A session lock has no ttl bound.
      if (key.ttlMs === null) continue;
      // The nodes' own alive/gone set, tolerance included; the bound grows by the same tolerance.
      const boundMs = liveBoundMs(key.ttlMs, driftFactor(design), after.config.expiryToleranceMs ?? 0);
      const overdue = after.nowMs - key.liveSinceTrueMs > boundMs;
      if (overdue && livenessIn(after, node, resource).includes(true)) {
        out.push({ property: 'LIVE-1', resource, message: `node ${index} still holds ${quotedName(resource)} ${after.nowMs - key.liveSinceTrueMs} ms after its last grant (bound ${boundMs} ms)` });
      }
    }
  }
}

function fromEvent(event: WorldEvent): Violation[] {
  // A switch the compiler checks for exhaustiveness (the return type), not ts-pattern: this runs after every step of an exploration.
  const e = event;
  switch (e.kind) {
    case 'granted':
      return (
      // FENCE-1: a grant's token exceeds every token granted before it.
      e.maxTokenBefore !== null && e.token <= e.maxTokenBefore
        ? [{ property: 'FENCE-1', resource: e.resource, message: `client ${e.client} was granted token ${e.token} after token ${e.maxTokenBefore} was granted` }]
        : []
      );
    case 'write': {
      const out: Violation[] = [];
      // FENCE-2: the store's decision is exactly its policy's.
      if (e.accepted !== passes(e.policy, e.token, e.highestBefore)) {
        out.push({
          property: 'FENCE-2',
          resource: e.resource,
          message: `store (${e.policy}) ${e.accepted ? 'accepted' : 'rejected'} token ${e.token} with highest ${e.highestBefore ?? 'none'}`,
        });
      }
      // STORE-1: an accepted write never comes from an older grant than one already written.
      if (e.accepted && e.epoch < e.lastAcceptedEpochBefore) {
        out.push({
          property: 'STORE-1',
          resource: e.resource,
          message: `client ${e.client}'s stale write (grant #${e.epoch}, token ${e.token}) landed after grant #${e.lastAcceptedEpochBefore}'s write`,
        });
      }
      return out;
    }
    case 'key-changed':
      return (
      // OWN-1: a release or extend touches only the caller's own key.
      !sameOwner(e.ownerBefore, e.byOwner)
        ? [{ property: 'OWN-1', resource: e.resource, message: `client ${e.byClient} ${e.change} client ${e.ownerBefore.client}'s key on node ${e.node}` }]
        : []
      );
    case 'restarted':
      return (
      // DUR-1: no counter goes backwards across a restart.
      Object.entries(e.countersBefore).flatMap(([key, before]) => {
        const after = entryOf(e.countersAfter, key) ?? 0n;
        return after < before
          ? [{ property: 'DUR-1' as const, resource: key, message: `node ${e.node} restarted with counter ${quotedName(key)} at ${after}, was ${before}` }]
          : [];
      })
      );
  }
}

/** The event properties (FENCE-1, FENCE-2, STORE-1, OWN-1, DUR-1) a step's events violate. */
export function checkEvents(events: readonly WorldEvent[]): Violation[] {
  return events.length === 0 ? [] : events.flatMap(fromEvent);
}

/** Every property violated by a step, given its events and the state after it. */
export function checkProperties(events: readonly WorldEvent[], after: World): Violation[] {
  const out = checkEvents(events);
  mutex(after, out);
  live(after, out);
  return out;
}
