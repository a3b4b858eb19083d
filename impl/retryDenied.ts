import { settleAborted } from './abort.ts';
import type { MonotonicClock } from './clock.ts';
import { sleep } from './clock.ts';
import type { Lease } from './lease.ts';
import type { AcquireResult } from './leaseLock.ts';

/** How a lease lock retries a denied attempt. */
export interface RetryPlan {
  readonly retries: number;
  readonly retryDelayMs: number;
  readonly retryJitterMs: number;
}

/**
 * A lease lock's acquire loop: attempt `n` (0 first), and after a denial up
 * to `retries` more, each after retryDelayMs plus a draw of `random` in
 * [0, retryJitterMs] on `clock`. A `signal` that fires ends the pause at once
 * (sleep removes its listener either way); an attempt in flight finishes and
 * a grant it brings is released before the acquire rejects (settleAborted).
 */
export async function retryDenied(
  plan: RetryPlan,
  signal: AbortSignal | undefined,
  clock: MonotonicClock,
  random: () => number,
  attempt: (n: number) => Promise<AcquireResult>,
  release: (lease: Lease) => Promise<unknown>,
): Promise<AcquireResult> {
  for (let n = 0; ; n++) {
    const result = await settleAborted(await attempt(n), signal, release);
    if (result.kind !== 'denied' || n >= plan.retries) return result;
    const jitter = Math.floor(random() * (plan.retryJitterMs + 1));
    await sleep(clock, plan.retryDelayMs + jitter, signal);
  }
}
