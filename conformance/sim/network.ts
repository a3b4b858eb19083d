import { UnavailableError } from '../../impl/errors.ts';
import type { FaultInjectors } from '../faults.ts';
import type { VirtualTime } from './time.ts';

/**
 * The in-process network between clients and servers. A request runs on the
 * server at once (the server's step is atomic); its reply reaches the client
 * after the link's delay, and not before the client resumes if it is paused.
 * A cut link or a server that is down fails the call at once (a reset).
 */
export type Endpoint = number | 'store';

export interface Server {
  /** Whether the server takes requests now. */
  reachable(): boolean;
}

export class SimNetwork {
  readonly #cut = new Set<string>();
  readonly #delay = new Map<number, { readonly ms: number; readonly sentAtMs: number }>();
  readonly #held = new Map<number, Array<() => void>>();
  /** Real requests still on the wire. */
  readonly #io = new Set<Promise<unknown>>();

  constructor(
    private readonly time: VirtualTime,
    private readonly servers: (endpoint: Endpoint) => Server,
  ) {}

  /**
   * Runs `request` on the server now; for a real server it returns a promise
   * of the reply, which the network tracks so that time does not move on
   * while real I/O is still under way (see settled()).
   */
  async call<T>(client: number, endpoint: Endpoint, request: () => T | Promise<T>): Promise<T> {
    if (this.#cut.has(`${client}:${endpoint}`) || !this.servers(endpoint).reachable()) {
      throw new UnavailableError(`client ${client} cannot reach ${endpoint === 'store' ? 'the store' : `node ${endpoint}`}`);
    }
    const sentAtMs = this.time.nowMs();
    let reply: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      const value = request();
      if (value instanceof Promise) {
        this.#io.add(value);
        try {
          reply = { ok: true, value: await value };
        } finally {
          this.#io.delete(value);
          // The store keeps no time; a lock node on its own clock must answer within the run's timing tolerance.
          if (endpoint !== 'store') this.time.noteServerReply();
        }
      } else {
        reply = { ok: true, value };
      }
    } catch (error) {
      reply = { ok: false, error };
    }
    const delay = this.#delay.get(client);
    const delayMs = delay !== undefined && delay.sentAtMs === sentAtMs ? delay.ms : 0;
    if (delayMs > 0) await this.time.sleep(delayMs);
    else await Promise.resolve();
    const held = this.#held.get(client);
    if (held !== undefined) await new Promise<void>((resolve) => held.push(resolve));
    if (!reply.ok) throw reply.error;
    return reply.value;
  }

  /** Resolves when no real request is on the wire (each is bounded by its client's own timeout); says whether it waited. */
  async settled(): Promise<boolean> {
    if (this.#io.size === 0) return false;
    while (this.#io.size > 0) await Promise.allSettled([...this.#io]);
    return true;
  }

  cut(client: number, endpoint: Endpoint): void {
    this.#cut.add(`${client}:${endpoint}`);
  }

  heal(client: number, endpoint: Endpoint): void {
    this.#cut.delete(`${client}:${endpoint}`);
  }

  /**
   * Replies to the requests this client sends now, before true time moves on,
   * take `ms` of true time (one slow round trip; later ones are not delayed).
   */
  setDelay(client: number, ms: number): void {
    if (ms === 0) this.#delay.delete(client);
    else this.#delay.set(client, { ms, sentAtMs: this.time.nowMs() });
  }

  /** The client is paused: its replies wait. */
  hold(client: number): void {
    if (!this.#held.has(client)) this.#held.set(client, []);
  }

  /** The client runs again: the replies it missed arrive. */
  release(client: number): void {
    const waiting = this.#held.get(client) ?? [];
    this.#held.delete(client);
    for (const deliver of waiting) deliver();
  }

  /** The faults this layer injects, as injectors of an Environment's `faults` (take the ones the backend offers). */
  faults(): Required<Pick<FaultInjectors, 'partition' | 'delay' | 'pause'>> {
    return {
      partition: { cut: async (client, node) => this.cut(client, node), heal: async (client, node) => this.heal(client, node) },
      delay: async (client, ms) => this.setDelay(client, ms),
      pause: { pause: async (client) => this.hold(client), resume: async (client) => this.release(client) },
    };
  }
}
