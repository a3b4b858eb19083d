import type { MonotonicClock } from './clock.ts';
import { checkedClock } from './checkedClock.ts';
import type { AcquireOptions, AcquireResult, ExtendResult } from './leaseLock.ts';
import type { Lease } from './lease.ts';
import { InvalidInputError } from '../model/errors.ts';
import { checkMethods, checkObject, closest, shown } from './options.ts';
import { asText } from './errorText.ts';
import { quotedValue } from '../model/shownText.ts';

/** The lock could not be taken. */
export class LockNotAcquiredError extends Error {
  override readonly name = 'LockNotAcquiredError';
  constructor(
    readonly resource: string,
    readonly reason: 'held' | 'no-quorum' | 'validity-exhausted' | 'timed-out',
  ) {
    super(`could not acquire '${asText(resource)}': ${asText(reason)}`);
  }
}

/** using()'s options: the lock's acquire options, and when to extend. */
export interface UsingOptions extends AcquireOptions {
  /**
   * Extend when this fraction of the ttl is left, in [0, 1) (default 0.5); set to 0 to never extend. Never
   * sooner than a tenth of the lease's validity left after the last extension (a lease is valid for less than
   * its ttl: a fraction near 1 would extend back to back).
   */
  readonly extendAtFraction?: number;
}

/**
 * What using() needs of a lock: `LeaseLock` (Redis, Redlock), `EtcdLock` and
 * `ZookeeperLock` each fit, with their own acquire options `O` (ZooKeeper's
 * take `waitMs`). Structural: it was `LeaseLock` itself, whose private fields
 * no other lock has, so `using(etcdLock, ...)` did not compile.
 */
export interface UsableLock<O extends AcquireOptions = AcquireOptions> {
  acquire(resource: string, options: O): Promise<AcquireResult>;
  extend(lease: Lease, ttlMs: number): Promise<ExtendResult>;
  /** lockcheck's locks resolve whether the release is known (a boolean); using() reads only a rejection. */
  release(lease: Lease): Promise<unknown>;
  clockOf(): MonotonicClock;
}

/** Background extensions are at least 1/MIN_GAP_DIVISOR of the lease's validity left apart. */
const MIN_GAP_DIVISOR = 10;

/** using()'s own options, beyond the lock's acquire options. */
const USING_OPTIONS = ['extendAtFraction'];

/**
 * Runs `fn` while holding `resource`. The lease is extended in the background
 * before it runs out; if an extension fails, the lease simply runs out and its
 * signal fires: `fn` must stop using the resource then. It never re-acquires
 * silently (a new grant would be a new token and a different holder).
 * Releases when `fn` settles, whatever happens; a release that throws (a
 * refusal: LeaseLock.release) rejects using() with its error, unless `fn`
 * threw, whose error wins; a release that resolves false (not known to have
 * happened: the key may stay until its ttl) does not change what using()
 * settles with. `options.signal` cancels the
 * acquire (and its retries) only: once `fn` runs, the lock stays held until
 * `fn` settles, since releasing under a running `fn` would let another holder
 * in beside it; an `fn` that should stop on the caller's signal reads it too.
 */
export async function using<T, O extends AcquireOptions = AcquireOptions>(
  lock: UsableLock<O>,
  resource: string,
  options: NoInfer<O> & Pick<UsingOptions, 'extendAtFraction'>,
  fn: (signal: AbortSignal, lease: Lease) => Promise<T>,
): Promise<T> {
  checkMethods(lock, 'lock', 'a LeaseLock', ['acquire', 'extend', 'release', 'clockOf']);
  checkObject(options, 'using options');
  if (typeof fn !== 'function') throw new InvalidInputError('invalid-config', `fn must be a function, got ${shown(fn)}`);
  const fractionOption: unknown = options.extendAtFraction ?? 0.5;
  // Outside [0, 1) the extension would be planned at or before now, again and again: a spin.
  if (typeof fractionOption !== 'number' || !(fractionOption >= 0 && fractionOption < 1)) {
    // shown(), not String(): an object without a prototype has no toString, and String() threw a TypeError here.
    throw new InvalidInputError('invalid-config', `extendAtFraction must be a number in [0, 1), got ${shown(fractionOption)}`);
  }
  // The acquire options alone go to the lock, which refuses any key it does not know by its own list (backends differ);
  // extendAtFraction is using()'s own, and a key that looks like a typo of it is refused here, where it can be told.
  const { extendAtFraction: _own, ...acquireOptions } = options;
  for (const key of Object.keys(acquireOptions)) {
    if (closest(key, USING_OPTIONS) !== undefined) throw new InvalidInputError('invalid-config', `using options: unknown option ${quotedValue(key)} (did you mean extendAtFraction?); using() takes extendAtFraction and the lock's acquire options`);
  }
  const result = await lock.acquire(resource, acquireOptions as unknown as O);
  if (result.kind !== 'granted') throw new LockNotAcquiredError(resource, result.kind === 'denied' ? result.reason : 'timed-out');
  const lease = result.lease;
  // Read checked (impl/checkedClock.ts): a reading that is no number made the plan a string sum or NaN, a timer never due or due at once.
  const clock = checkedClock(lock.clockOf());
  const fraction = fractionOption;
  let cancel: () => void = () => undefined;
  let stopped = false;
  const plan = (): void => {
    if (stopped || fraction <= 0 || lease.validUntilMs === null || lease.signal.aborted) return;
    // Every lease is valid for less than its ttl (the drift allowance, the round trip), so a fraction whose share of the
    // ttl reaches what is left planned each extension at or just after the last one's reply: back to back, over a
    // thousand a second. Extensions are at least a tenth of the validity left apart.
    const now = clock.now();
    const at = Math.max(lease.validUntilMs - Math.floor(options.ttlMs * fraction), now + Math.ceil((lease.validUntilMs - now) / MIN_GAP_DIVISOR));
    cancel = clock.schedule(at, () => {
      // Whatever goes wrong (the extension refused, or the next plan unable to read the clock) ends the extending, not the
      // process: the lease then runs out and its signal says so. A throw in the first handler escaped the second: unhandled.
      void lock
        .extend(lease, options.ttlMs)
        .then((r) => {
          if (r.kind === 'extended') plan();
        })
        .catch(() => undefined);
    });
  };
  let threw = false;
  try {
    // Inside the try: a clock that cannot be read (InvalidInputError) rejects using() with the lease released, not kept.
    plan();
    return await fn(lease.signal, lease);
  } catch (error) {
    threw = true;
    throw error;
  } finally {
    stopped = true;
    cancel();
    // A release refused (no permission: the key stays until its ttl) rejects using(), unless fn threw: fn's own error is the one the caller hears.
    await lock.release(lease).catch((error: unknown) => {
      if (!threw) throw error;
    });
  }
}
