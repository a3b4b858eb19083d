import { readingOrNaN } from '../checkedClock.ts';
import type { MonotonicClock } from '../clock.ts';

/**
 * How long a member whose connect or call failed as an outage is tried last.
 * Past it the next session may land on it again: one session a window meets
 * a member still down, not every third.
 */
export const PASS_OVER_MS = 5000;

/** A member as node-zookeeper-client lists it (its port a string when given in the connect string). */
export interface Member {
  readonly host: string;
  readonly port: string | number;
}

const key = (m: Member): string => `${m.host}:${String(m.port)}`;

/**
 * The members that failed lately, for one zookeeperNode (the lock's sessions
 * and the store's alike). node-zookeeper-client shuffles the connect string
 * once per client and connects to the first member, moving on only when its
 * socket closes, which a paused or black-holed member's never does: each new
 * session landed on such a member as often as on any other and timed out
 * (a third of all acquires with one of three members paused). `order` puts
 * the members that failed within `windowMs` last, so a new client starts on
 * one that has not; when every member has failed lately the order is left as
 * it is, so that a client cut off from the whole ensemble finds it again as
 * soon as it heals. Members are reordered, never left out: a session whose
 * member goes away still reconnects to any of them.
 */
export class PassOver {
  readonly #clock: MonotonicClock;
  readonly #windowMs: number;
  readonly #failedAt = new Map<string, number>();

  constructor(clock: MonotonicClock, windowMs = PASS_OVER_MS) {
    this.#clock = clock;
    this.#windowMs = windowMs;
  }

  /** `member` failed as an outage now (no reply in time, its connection lost or refused). */
  failed(member: Member): void {
    // Read in the library's event handlers too, where a throw would break it: a clock that cannot be read (NaN) marks nothing.
    this.#failedAt.set(key(member), readingOrNaN(this.#clock));
  }

  /** `member` served (a session connected to it): it is no longer passed over. */
  served(member: Member): void {
    this.#failedAt.delete(key(member));
  }

  /** Whether `member` failed within the window. */
  recent(member: Member): boolean {
    const at = this.#failedAt.get(key(member));
    if (at === undefined) return false;
    if (readingOrNaN(this.#clock) - at < this.#windowMs) return true;
    // Forgotten past the window: the map holds no more than the members that failed lately.
    this.#failedAt.delete(key(member));
    return false;
  }

  /** `members` with those that failed lately moved to the end, each group in the order given (the library's shuffle). */
  order<M extends Member>(members: readonly M[]): M[] {
    // One look per member: the clock moves, and a member must land in exactly one group.
    const fresh: M[] = [];
    const failed: M[] = [];
    for (const m of members) (this.recent(m) ? failed : fresh).push(m);
    return fresh.length === 0 ? [...members] : [...fresh, ...failed];
  }
}
