import type { Clock } from '../../model/clock.ts';
import { clockAt, read, setDrift, step } from '../../model/clock.ts';
import type { LeaseNode } from '../../impl/leaseNode.ts';
import type { SimNetwork, Server } from './network.ts';
import type { VirtualTime } from './time.ts';
import { mintAfter } from './mint.ts';

/**
 * An in-memory Redis node: keys with absolute expiry on the node's wall
 * clock (as Redis 7 keeps them: a key is live while now <= its expiry), a
 * token counter per resource, and the four lease scripts, each atomic.
 */
interface Key {
  readonly owner: string;
  readonly expiresAtMs: number;
}

export class SimRedisNode implements Server {
  wall: Clock = clockAt();
  up = true;
  #availableFromMs = 0;
  #keys = new Map<string, Key>();
  #counters = new Map<string, bigint>();

  constructor(
    private readonly time: VirtualTime,
    private readonly persistent: boolean,
    private readonly restartDelayMs: number,
    private readonly tokenBase: bigint,
  ) {}

  reachable(): boolean {
    return this.up && this.time.nowMs() >= this.#availableFromMs;
  }

  private now(): number {
    return read(this.wall, this.time.nowMs());
  }

  private live(resource: string): Key | undefined {
    const key = this.#keys.get(resource);
    if (key !== undefined && this.now() > key.expiresAtMs) {
      this.#keys.delete(resource);
      return undefined;
    }
    return key;
  }

  /** SET resource owner NX PX ttl, and INCR the counter in the same script; a counter at 2^63-1 sets nothing and throws TokenOverflowError. */
  acquire(resource: string, owner: string, ttlMs: number): bigint | null {
    if (this.live(resource) !== undefined) return null;
    const token = mintAfter(this.#counters.get(resource) ?? this.tokenBase, resource);
    this.#keys.set(resource, { owner, expiresAtMs: this.now() + ttlMs });
    this.#counters.set(resource, token);
    return token;
  }

  release(resource: string, owner: string): boolean {
    if (this.#keys.get(resource)?.owner !== owner) return false;
    this.#keys.delete(resource);
    return true;
  }

  /** Deletes whatever key is there: the broken "release without the owner check". */
  releaseAny(resource: string): boolean {
    return this.#keys.delete(resource);
  }

  extend(resource: string, owner: string, ttlMs: number): boolean {
    const key = this.live(resource);
    if (key?.owner !== owner) return false;
    this.#keys.set(resource, { owner, expiresAtMs: this.now() + ttlMs });
    return true;
  }

  /** PEXPIRE without looking at the owner: the broken "extend without the owner check". */
  extendAny(resource: string, ttlMs: number): boolean {
    const key = this.live(resource);
    if (key === undefined) return false;
    this.#keys.set(resource, { owner: key.owner, expiresAtMs: this.now() + ttlMs });
    return true;
  }

  /** SET PX without NX or owner check: the broken "extend as a plain SET". */
  set(resource: string, owner: string, ttlMs: number): boolean {
    this.#keys.set(resource, { owner, expiresAtMs: this.now() + ttlMs });
    return true;
  }

  /** GET: the owner of the live key. */
  get(resource: string): string | null {
    return this.live(resource)?.owner ?? null;
  }

  /** DEL. */
  del(resource: string): boolean {
    return this.#keys.delete(resource);
  }

  /** INCR alone: the broken "token minted in a second round trip, after the SET". */
  incr(resource: string): bigint {
    const token = mintAfter(this.#counters.get(resource) ?? this.tokenBase, resource);
    this.#counters.set(resource, token);
    return token;
  }

  raiseToken(resource: string, token: bigint): void {
    if ((this.#counters.get(resource) ?? this.tokenBase) < token) this.#counters.set(resource, token);
  }

  /** Whether the token counters survive a restart: as the keys do. Overridable only to build broken fixtures. */
  protected countersPersist(): boolean {
    return this.persistent;
  }

  crash(): void {
    this.up = false;
  }

  restart(): void {
    this.up = true;
    if (!this.persistent) this.#keys = new Map();
    if (!this.countersPersist()) this.#counters = new Map();
    this.#availableFromMs = this.time.nowMs() + this.restartDelayMs;
  }

  /** Active expiry has run before the step: a dead key stays dead whichever way the clock goes. */
  stepClock(deltaMs: number): void {
    for (const resource of [...this.#keys.keys()]) this.live(resource);
    this.wall = step(this.wall, this.time.nowMs(), deltaMs);
  }

  drift(driftPpm: number): void {
    this.wall = setDrift(this.wall, this.time.nowMs(), driftPpm);
  }

  /** Who holds `resource` now, for white-box checks. */
  holder(resource: string): string | null {
    return this.get(resource);
  }
}

/** A client's view of one node: every script goes over the network. */
export function leaseNodeOver(network: SimNetwork, client: number, index: number, node: SimRedisNode): LeaseNode {
  return {
    acquire: (resource, owner, ttlMs) => network.call(client, index, () => node.acquire(resource, owner, ttlMs)),
    release: (resource, owner) => network.call(client, index, () => node.release(resource, owner)),
    extend: (resource, owner, ttlMs) => network.call(client, index, () => node.extend(resource, owner, ttlMs)),
    raiseToken: (resource, token) => network.call(client, index, () => node.raiseToken(resource, token)),
  };
}
