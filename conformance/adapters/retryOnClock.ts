import { sleep } from '../../impl/clock.ts';
import type { MonotonicClock } from '../../impl/clock.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';

/**
 * An acquire's retries on the client's clock: `attempt`, and after a denial
 * up to `retries` more, `retryDelayMs` apart. The adapters turn a library's
 * own retries off (they wait on real timers) and retry with this instead.
 */
export async function retryOnClock(clock: MonotonicClock, retries: number, retryDelayMs: number, attempt: () => Promise<AcquireResult>): Promise<AcquireResult> {
  for (let tries = 0; ; tries++) {
    const result = await attempt();
    if (result.kind !== 'denied' || tries >= retries) return result;
    await sleep(clock, retryDelayMs);
  }
}
