import { LeaseLostError } from '../impl/errors.ts';
import type { Lease } from '../impl/lease.ts';

/**
 * The lease as the client's user code holds it: the library's own, whose
 * signal also fires (connection-lost) when the process would have died.
 *
 * `died` is the client's, alive for the whole run: a listener left on it by
 * every lease would pile up, one per lease whose signal was read (Node warns
 * past 10, MaxListenersExceededWarning, and keeps every lease reachable).
 * The listener goes when the lease is over: its own signal fired, or
 * `detach` (the release returned).
 */
export function dyingWith(lease: Lease, died: () => AbortSignal): { readonly lease: Lease; readonly detach: () => void } {
  let signal: AbortSignal | null = null;
  let detach = (): void => undefined;
  let over = false;
  return {
    lease: {
      resource: lease.resource,
      owner: lease.owner,
      token: lease.token,
      get validUntilMs() {
        return lease.validUntilMs;
      },
      get signal() {
        if (signal === null) {
          const death = new AbortController();
          const dead = died();
          const fire = (): void => death.abort(LeaseLostError.of('connection-lost', lease.resource));
          if (dead.aborted) fire();
          else if (!over && !lease.signal.aborted) {
            dead.addEventListener('abort', fire, { once: true });
            detach = () => dead.removeEventListener('abort', fire);
            lease.signal.addEventListener('abort', detach, { once: true });
          }
          signal = AbortSignal.any([lease.signal, death.signal]);
        }
        return signal;
      },
    },
    detach: () => {
      over = true;
      detach();
    },
  };
}
