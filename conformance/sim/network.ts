import type { MonotonicClock } from '../../impl/clock.ts';
import { UnavailableError } from '../../impl/errors.ts';
import type { FaultInjectors } from '../faults.ts';
import type { VirtualTime } from './time.ts';
import { checkClock, knownOptions, refuse } from '../../impl/options.ts';
import { finishWithin } from '../realTimeLimit.ts';

/**
 * How long settled() waits for the real requests on the wire. Each is bounded
 * by its client's own timeout, far shorter; a client whose timers are on the
 * run's virtual clock cannot time out while time waits for it. Past this
 * bound the machine (or a server that stopped answering) held the request
 * up: the run is stalled (out of pace, VirtualTime.stalled) and time moves
 * on without it, rather than wait for ever.
 */
export const REAL_REPLY_BOUND_MS = 60_000;

/**
 * Checks of what call() and the fault methods take: a junk client or
 * endpoint would name a link no request uses (the fault would silently not
 * happen), or fail later as a TypeError.
 */
function checkClient(client: unknown): void {
  if (typeof client !== 'number' || !Number.isInteger(client) || client < 0) refuse('client', 'a client index (an integer >= 0)', client);
}
function checkEndpoint(endpoint: unknown): void {
  if (endpoint !== 'store' && (typeof endpoint !== 'number' || !Number.isInteger(endpoint) || endpoint < 0)) refuse('endpoint', "a node index (an integer >= 0) or 'store'", endpoint);
}
function checkDelayMs(ms: unknown, never = false): void {
  if ((!never || ms !== 'never') && (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0)) refuse('ms', `a number of ms >= 0${never ? " or 'never'" : ''}`, ms);
}

const checkNetworkKeys = knownOptions('SimNetwork options', ['realReplyBoundMs']);

/** What a request goes to: a lock node by index, or the store. */
export type Endpoint = number | 'store';

/** A server on the in-process network, as the network sees it. */
export interface Server {
  /** Whether the server takes requests now. */
  reachable(): boolean;
}

/**
 * The in-process network between clients and servers. A request runs on the
 * server at once (the server's step is atomic); its reply reaches the client
 * after the link's delay and the node's own, and not before the client
 * resumes if it is paused. A paused client does nothing until it resumes:
 * its timers wait (on the clocks made by pausable()), so does every reply
 * and reset, and with them whatever it would send next; at the resume the
 * timers that came due fire first, then the replies arrive, as for a
 * stopped process. A cut link or a server that is down fails the
 * call at once (a reset); a black-holed node swallows the request and never
 * answers (the client's own timeout ends the wait).
 */
export class SimNetwork {
  readonly #cut = new Set<string>();
  readonly #delay = new Map<number, { readonly ms: number; readonly sentAtMs: number }>();
  readonly #held = new Map<number, Array<() => void>>();
  readonly #nodeDelay = new Map<number, number | 'never'>();
  readonly #slow = new Map<number, { readonly ms: number; readonly sentAtMs: number }>();
  readonly #heldTimers = new Map<number, Array<{ readonly fire: () => void; cancelled: boolean }>>();
  /** Real requests still on the wire. */
  readonly #io = new Set<Promise<unknown>>();

  readonly #realReplyBoundMs: number;

  constructor(
    private readonly time: VirtualTime,
    private readonly servers: (endpoint: Endpoint) => Server,
    /** realReplyBoundMs: how long settled() waits for real requests (default REAL_REPLY_BOUND_MS). */
    options: { readonly realReplyBoundMs?: number } = {},
  ) {
    if (typeof time !== 'object' || time === null || typeof (time as { nowMs?: unknown }).nowMs !== 'function') refuse('time', 'a VirtualTime', time);
    if (typeof servers !== 'function') refuse('servers', 'a function from an endpoint to its Server', servers);
    if (typeof options !== 'object' || options === null) refuse('options', 'an object ({ realReplyBoundMs? })', options);
    // A typo (realReplyBound) would run with the default bound, unnoticed.
    checkNetworkKeys(options);
    const bound = options.realReplyBoundMs ?? REAL_REPLY_BOUND_MS;
    if (!Number.isInteger(bound) || bound < 1 || bound > 2 ** 31 - 1) refuse('realReplyBoundMs', 'an integer number of ms in [1, 2^31-1]', bound);
    this.#realReplyBoundMs = bound;
  }

  /**
   * Runs `request` on the server now; for a real server it returns a promise
   * of the reply, which the network tracks so that time does not move on
   * while real I/O is still under way (see settled()).
   */
  async call<T>(client: number, endpoint: Endpoint, request: () => T | Promise<T>): Promise<T> {
    // Three type tests against a call's promises and map lookups: no measurable cost on the sim's request path.
    checkClient(client);
    checkEndpoint(endpoint);
    if (typeof request !== 'function') refuse('request', 'a function', request);
    if (this.#cut.has(`${client}:${endpoint}`) || !this.servers(endpoint).reachable()) {
      // A reset comes at once, but a client that has just paused reads it only when it resumes.
      await Promise.resolve();
      const held = this.#held.get(client);
      if (held !== undefined) await new Promise<void>((resolve) => held.push(resolve));
      throw new UnavailableError(`client ${client} cannot reach ${endpoint === 'store' ? 'the store' : `node ${endpoint}`}`);
    }
    const sentAtMs = this.time.nowMs();
    const own = endpoint === 'store' ? 0 : (this.#nodeDelay.get(endpoint) ?? 0);
    // Swallowed: the caller's deadline is all that ends its wait.
    if (own === 'never') return new Promise<T>(() => undefined);
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
    const slow = endpoint === 'store' ? undefined : this.#slow.get(client);
    const delayMs = (delay !== undefined && delay.sentAtMs === sentAtMs ? delay.ms : 0) + (slow !== undefined && slow.sentAtMs === sentAtMs ? slow.ms : 0) + own;
    if (delayMs > 0) await this.time.sleep(delayMs);
    else await Promise.resolve();
    const held = this.#held.get(client);
    if (held !== undefined) await new Promise<void>((resolve) => held.push(resolve));
    if (!reply.ok) throw reply.error;
    return reply.value;
  }

  /**
   * Resolves when no real request is on the wire; says whether it waited.
   * Bounded: requests still unanswered after REAL_REPLY_BOUND_MS stall the
   * run and are no longer waited for.
   */
  async settled(): Promise<boolean> {
    if (this.#io.size === 0) return false;
    while (this.#io.size > 0) {
      const waiting = [...this.#io];
      if (await finishWithin(Promise.allSettled(waiting), this.#realReplyBoundMs)) continue;
      this.time.stalled(`${waiting.length === 1 ? 'a real request' : `${waiting.length} real requests`} had no reply after ${this.#realReplyBoundMs} ms of real time`);
      for (const p of waiting) this.#io.delete(p);
    }
    return true;
  }

  /** Cuts the link between `client` and `endpoint`: calls over it fail at once with UnavailableError until heal(). */
  cut(client: number, endpoint: Endpoint): void {
    checkClient(client);
    checkEndpoint(endpoint);
    this.#cut.add(`${client}:${endpoint}`);
  }

  /** Whether the link is cut (a client's close cannot cross it). */
  isCut(client: number, endpoint: Endpoint): boolean {
    checkClient(client);
    checkEndpoint(endpoint);
    return this.#cut.has(`${client}:${endpoint}`);
  }

  /** Heals a cut link. */
  heal(client: number, endpoint: Endpoint): void {
    checkClient(client);
    checkEndpoint(endpoint);
    this.#cut.delete(`${client}:${endpoint}`);
  }

  /**
   * Replies to the requests this client sends now, before true time moves on,
   * take `ms` of true time (one slow round trip; later ones are not delayed).
   */
  setDelay(client: number, ms: number): void {
    checkClient(client);
    checkDelayMs(ms);
    if (ms === 0) this.#delay.delete(client);
    else this.#delay.set(client, { ms, sentAtMs: this.time.nowMs() });
  }

  /**
   * A slow server as one slow round trip per operation (the one-node
   * PostgreSQL designs, spec 7.4): replies from lock nodes to the requests
   * this client sends now take `ms` longer. Call it as an operation starts.
   */
  slowNow(client: number, ms: number): void {
    checkClient(client);
    checkDelayMs(ms);
    if (ms === 0) this.#slow.delete(client);
    else this.#slow.set(client, { ms, sentAtMs: this.time.nowMs() });
  }

  /** Every reply from lock node `node` takes `ms` longer (0: none), or never comes. */
  setNodeDelay(node: number, ms: number | 'never'): void {
    if (typeof node !== 'number' || !Number.isInteger(node) || node < 0) refuse('node', 'a node index (an integer >= 0)', node);
    checkDelayMs(ms, true);
    if (ms === 0) this.#nodeDelay.delete(node);
    else this.#nodeDelay.set(node, ms);
  }

  /** The client's clock, with its timers held while the client is paused. */
  pausable(client: number, clock: MonotonicClock): MonotonicClock {
    checkClient(client);
    checkClock(clock);
    return {
      now: () => clock.now(),
      schedule: (atMs, fn) => {
        const timer = { fire: fn, cancelled: false };
        const cancel = clock.schedule(atMs, () => {
          const held = this.#heldTimers.get(client);
          if (held !== undefined) held.push(timer);
          else fn();
        });
        return () => {
          timer.cancelled = true;
          cancel();
        };
      },
    };
  }

  /** The client is paused: its sends, timers and replies wait. */
  hold(client: number): void {
    checkClient(client);
    if (!this.#held.has(client)) this.#held.set(client, []);
    if (!this.#heldTimers.has(client)) this.#heldTimers.set(client, []);
  }

  /** The client runs again: the timers that came due fire, then the replies it missed arrive. */
  release(client: number): void {
    checkClient(client);
    const timers = this.#heldTimers.get(client) ?? [];
    this.#heldTimers.delete(client);
    const waiting = this.#held.get(client) ?? [];
    this.#held.delete(client);
    for (const t of timers) if (!t.cancelled) t.fire();
    for (const deliver of waiting) deliver();
  }

  /**
   * The timing faults this layer injects (issue 11, class 2): late replies
   * on every operation and rounds in flight across a pause (`latency`; the
   * clients' clocks must be pausable()), and slow or black-holed nodes
   * (`nodeDelay`; the clients must take the run's requestTimeoutMs).
   */
  timingFaults(): Required<Pick<FaultInjectors, 'latency' | 'nodeDelay'>> {
    return {
      latency: async (client, ms) => this.setDelay(client, ms),
      nodeDelay: async (node, ms) => this.setNodeDelay(node, ms),
    };
  }

  /**
   * The timing faults of a one-node PostgreSQL server (spec 7.4): `latency`,
   * and `nodeDelay` as one slow round trip per operation, which
   * `slowOperation(client)` applies (call it as each operation starts), or a
   * black hole. The clients' clocks must be pausable().
   */
  serverTiming(): { readonly faults: Required<Pick<FaultInjectors, 'latency' | 'nodeDelay'>>; slowOperation(client: number): void } {
    let slowMs = 0;
    return {
      faults: {
        latency: async (client, ms) => this.setDelay(client, ms),
        nodeDelay: async (node, ms) => {
          this.setNodeDelay(node, ms === 'never' ? 'never' : 0);
          slowMs = ms === 'never' ? 0 : ms;
        },
      },
      slowOperation: (client) => this.slowNow(client, slowMs),
    };
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
