import { describe, expect, it } from 'vitest';
import { InvalidInputError, TimeoutError } from '../impl/errors.ts';
import { sleep, withTimeout } from '../impl/index.ts';
import { MAX_TTL_MS } from '../model/errors.ts';
import { ManualClock } from './impl/servers.ts';

/**
 * `sleep` and `withTimeout` as lockcheck/lock gives them to users
 * (impl/publicTime.ts): every argument checked, a refusal a rejection naming
 * it, never a throw. Mutation testing (session h34) found no test of their
 * checks at all, and `sleep` refusing a signal an acquire takes (a
 * polyfill's): it tested the class, not what the signal has.
 */

async function refusal(call: () => Promise<unknown>): Promise<Error> {
  let p: Promise<unknown> | undefined;
  expect(() => (p = call())).not.toThrow();
  const e = await p!.then(
    () => new Error('not refused'),
    (error: unknown) => error,
  );
  expect(e).toBeInstanceOf(InvalidInputError);
  expect((e as InvalidInputError).code).toBe('invalid-config');
  return e as Error;
}

const wantedMs = `ms must be a number of ms in [0, ${MAX_TTL_MS}]`;

describe('sleep', () => {
  it.each([[-1], [Number.NaN], [Number.POSITIVE_INFINITY], [MAX_TTL_MS + 1], ['5']])('refuses ms %s', async (ms) => {
    expect((await refusal(() => sleep(new ManualClock(), ms as number))).message).toContain(wantedMs);
  });

  it('waits 0 ms and the most, on the clock given', async () => {
    const clock = new ManualClock();
    await sleep(clock, 0);
    let done = false;
    const waiting = sleep(clock, MAX_TTL_MS).then(() => (done = true));
    clock.advance(MAX_TTL_MS - 1);
    await Promise.resolve();
    expect(done).toBe(false);
    clock.advance(1);
    await waiting;
    expect(done).toBe(true);
  });

  it('takes a signal by what it has (a polyfill\'s too), and its abort ends the sleep with its reason', async () => {
    class PolyfillSignal extends EventTarget {
      aborted = false;
      reason: unknown = undefined;
    }
    const signal = new PolyfillSignal() as unknown as AbortSignal;
    const clock = new ManualClock();
    const waiting = sleep(clock, 1000, signal);
    const reason = new Error('given up');
    Object.assign(signal, { aborted: true, reason });
    signal.dispatchEvent(new Event('abort'));
    await expect(waiting).rejects.toBe(reason);
    expect(clock.armed).toBe(0);
  });

  it('refuses a signal that is none, and a clock that is none', async () => {
    expect((await refusal(() => sleep(new ManualClock(), 5, {} as never))).message).toContain('signal must be an AbortSignal');
    expect((await refusal(() => sleep({ now: () => 0 } as never, 5))).message).toContain('clock must be a MonotonicClock');
  });
});

describe('withTimeout', () => {
  it.each([[-1], [Number.NaN], [MAX_TTL_MS + 1]])('refuses ms %s', async (ms) => {
    expect((await refusal(() => withTimeout(new ManualClock(), ms, 'call', Promise.resolve(1)))).message).toContain(wantedMs);
  });

  it('refuses a name that is no string and work that is no promise, by their names', async () => {
    expect((await refusal(() => withTimeout(new ManualClock(), 5, 7 as never, Promise.resolve(1)))).message).toBe('invalid-config: what must be a string naming the call, got 7');
    expect((await refusal(() => withTimeout(new ManualClock(), 5, 'call', 1 as never))).message).toBe('invalid-config: work must be a Promise, got 1');
    expect((await refusal(() => withTimeout(new ManualClock(), 5, 'call', null as never))).message).toBe('invalid-config: work must be a Promise, got null');
  });

  it('bounds a thenable by the clock given: its value in time, a TimeoutError naming the call after', async () => {
    const clock = new ManualClock();
    await expect(withTimeout(clock, 1, 'quick', Promise.resolve(3))).resolves.toBe(3);
    const late = withTimeout(clock, 10, 'the slow call', new Promise<never>(() => undefined));
    clock.advance(10);
    const e = await late.then(
      () => null,
      (error: unknown) => error,
    );
    expect(e).toBeInstanceOf(TimeoutError);
    expect((e as Error).message).toBe('the slow call timed out after 10 ms');
  });
});
