import type { IDefaultPolicyContext, IPolicy } from 'cockatiel';
import { noop } from 'cockatiel';
import { isRecoverableError } from 'etcd3';
import { readingOrNaN } from '../checkedClock.ts';
import { systemClock } from '../clock.ts';
import type { MonotonicClock } from '../clock.ts';
import { HostRefusals } from './connectRefusals.ts';

/**
 * How long a member whose call failed as an outage is passed over. Past it
 * the next call goes to it again: one call a window meets a member still
 * down, not every third.
 */
export const PASS_OVER_MS = 5000;

/** What etcd3 is told when a member is passed over: the call never went out, so it tries the next member. */
class PassedOver extends Error {
  override readonly name = 'PassedOver';
}

/**
 * etcd3's per-member fault handling for lockcheck's client (its `host`
 * factory, called once per host in order). etcd3 sends each call to its
 * members in a random order and moves to the next only when a member's
 * policy refuses the call before it goes out; a call that went out and
 * failed is never sent again (lockcheck retries nothing on its own). With
 * no policy, a paused or cut-off member took its share of every call and
 * timed each out, as long as it stayed so (a third of all calls with one of
 * three members paused). A member whose last call failed as an outage
 * (etcd3's recoverable errors: unavailable, deadline exceeded, cancelled)
 * within PASS_OVER_MS is passed over while another member has not so
 * failed; when every member has, the call goes out as before, so that a
 * client cut off from the whole cluster finds it again as soon as it heals.
 * `refusals` learns which hosts refused their last call at connect (a name
 * that does not resolve, a TLS handshake refused).
 */
export function passOverPolicies(clock: MonotonicClock = systemClock, windowMs = PASS_OVER_MS, refusals: HostRefusals = new HostRefusals()): (hostname: string) => IPolicy<IDefaultPolicyContext> {
  const failedAt: number[] = [];
  const recent = (i: number): boolean => {
    const at = failedAt[i];
    // Read inside etcd3's policy calls, where a throw would break the call: a clock that cannot be read (NaN) passes no member over.
    return at !== undefined && readingOrNaN(clock) - at < windowMs;
  };
  return () => {
    const self = failedAt.length;
    failedAt.push(Number.NaN);
    refusals.add();
    return {
      _altReturn: undefined as never,
      onSuccess: noop.onSuccess,
      onFailure: noop.onFailure,
      async execute<T>(fn: (context: IDefaultPolicyContext) => PromiseLike<T> | T, signal?: AbortSignal): Promise<T> {
        if (recent(self) && failedAt.some((_at, i) => i !== self && !recent(i))) throw new PassedOver(`etcd member ${self} failed within ${windowMs} ms: passed over`);
        try {
          const value = await noop.execute(fn, signal);
          failedAt[self] = Number.NaN;
          refusals.ended(self);
          return value;
        } catch (e) {
          if (typeof e === 'object' && e !== null && isRecoverableError(e as Error)) failedAt[self] = readingOrNaN(clock);
          refusals.ended(self, e);
          throw e;
        }
      },
    };
  };
}
