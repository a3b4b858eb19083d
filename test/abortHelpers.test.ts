import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { refusal } from './probes.ts';
import { checkSignal, settleAborted, unlessAborted } from '../impl/abort.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireResult } from '../impl/leaseLock.ts';
import { abandonable } from '../impl/postgres/abandon.ts';

/**
 * The cancellation helpers every lock's acquire shares (impl/abort.ts), on
 * their own: what `signal` accepts, that a wait's listener goes whichever way
 * the wait ends, and that an abort after an attempt releases only a grant.
 * Found by mutation testing (session h34): each case here failed with one
 * mutant of abort.ts (or of the PostgreSQL locks' abandonable) that the
 * locks' own tests (test/acquireAbort.test.ts, test/impl/closeLeaks.postgres.test.ts)
 * let through.
 */

const listeners = (signal: AbortSignal): number => getEventListeners(signal, 'abort').length;
const noop = (): void => undefined;

describe('checkSignal', () => {
  it('accepts a signal of another realm or a polyfill (what it has, not its class), and absent; its abort ends a wait', async () => {
    // What an AbortController polyfill, or another realm's, hands out: not an instance of this realm's AbortSignal.
    class PolyfillSignal extends EventTarget {
      aborted = false;
      reason: unknown = undefined;
    }
    const foreign = new PolyfillSignal() as unknown as AbortSignal;
    expect(foreign instanceof AbortSignal).toBe(false);
    expect(checkSignal(foreign)).toBe(foreign);
    expect(checkSignal(undefined)).toBeUndefined();
    const waiting = unlessAborted(new Promise<number>(() => undefined), foreign);
    const reason = new Error('given up');
    Object.assign(foreign, { aborted: true, reason });
    foreign.dispatchEvent(new Event('abort'));
    await expect(waiting).rejects.toBe(reason);
  });

  it.each([
    ['no aborted flag', { addEventListener: noop, removeEventListener: noop }],
    ['an aborted flag that is not a boolean', { aborted: 'no', addEventListener: noop, removeEventListener: noop }],
    ['no addEventListener', { aborted: false, removeEventListener: noop }],
    ['no removeEventListener', { aborted: false, addEventListener: noop }],
    ['a function with every member', Object.assign((): void => undefined, { aborted: false, addEventListener: noop, removeEventListener: noop })],
    ['null', null],
    ['a string', 'abort'],
  ])('refuses %s with a typed error naming the option', (_what, value) => {
    const error = refusal(() => checkSignal(value));
    expect(error.code).toBe('invalid-config');
    expect(error.message).toContain('signal must be an AbortSignal');
  });
});

describe('unlessAborted', () => {
  it('a wait whose work rejects rejects with its error and leaves no listener', async () => {
    const controller = new AbortController();
    const failure = new Error('the attempt failed');
    await expect(unlessAborted(Promise.reject(failure), controller.signal)).rejects.toBe(failure);
    expect(listeners(controller.signal)).toBe(0);
  });

  it('a wait whose work resolves resolves with its value and leaves no listener', async () => {
    const controller = new AbortController();
    await expect(unlessAborted(Promise.resolve(7), controller.signal)).resolves.toBe(7);
    expect(listeners(controller.signal)).toBe(0);
  });

  it('a signal aborted before the wait rejects with its reason at once, adds no listener, and handles the work it leaves', async () => {
    const controller = new AbortController();
    const reason = new Error('given up');
    controller.abort(reason);
    let settle: (error: Error) => void = () => undefined;
    const work = new Promise<number>((_resolve, reject) => (settle = reject));
    await expect(unlessAborted(work, controller.signal)).rejects.toBe(reason);
    expect(listeners(controller.signal)).toBe(0);
    // The abandoned work's later failure is handled: no unhandled rejection fails the run.
    settle(new Error('the attempt failed later'));
  });

  it('a signal that fires during the wait rejects with its reason before the work ends', async () => {
    const controller = new AbortController();
    const reason = new Error('given up');
    const waiting = unlessAborted(new Promise<number>(() => undefined), controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(listeners(controller.signal)).toBe(0);
  });
});

describe('settleAborted', () => {
  const granted = { kind: 'granted', lease: { token: 1n } as unknown as Lease } as AcquireResult;
  const denied = { kind: 'denied', reason: 'held' } as unknown as AcquireResult;

  it('aborted: a grant is released before the rejection; a denial releases nothing', async () => {
    const controller = new AbortController();
    const reason = new Error('given up');
    controller.abort(reason);
    const released: unknown[] = [];
    const release = (lease: Lease): Promise<void> => {
      released.push(lease);
      return Promise.resolve();
    };
    await expect(settleAborted(denied, controller.signal, release)).rejects.toBe(reason);
    expect(released).toEqual([]);
    await expect(settleAborted(granted, controller.signal, release)).rejects.toBe(reason);
    expect(released).toEqual([(granted as { lease: Lease }).lease]);
  });

  it('not aborted: the result as it is, nothing released', async () => {
    const released: unknown[] = [];
    const release = (lease: Lease): Promise<void> => {
      released.push(lease);
      return Promise.resolve();
    };
    await expect(settleAborted(granted, new AbortController().signal, release)).resolves.toBe(granted);
    await expect(settleAborted(granted, undefined, release)).resolves.toBe(granted);
    expect(released).toEqual([]);
  });
});

describe('abandonable (a PostgreSQL connection close() may abandon while it opens)', () => {
  it('no signal: the opening as it is', async () => {
    await expect(abandonable(undefined, () => undefined, () => Promise.resolve(3))).resolves.toBe(3);
  });

  it('a signal that fires while it opens abandons it once; the opening\'s own outcome is returned', async () => {
    const controller = new AbortController();
    let abandoned = 0;
    let finish: (value: number) => void = () => undefined;
    const opening = abandonable(controller.signal, () => abandoned++, () => new Promise<number>((resolve) => (finish = resolve)));
    controller.abort();
    expect(abandoned).toBe(1);
    finish(4);
    await expect(opening).resolves.toBe(4);
    expect(abandoned).toBe(1);
  });

  it('a signal already fired (close() came first) abandons it at once, without waiting for the opening', async () => {
    const controller = new AbortController();
    controller.abort();
    let abandoned = 0;
    let failOpening: (error: Error) => void = () => undefined;
    const opening = abandonable(controller.signal, () => abandoned++, () => new Promise<never>((_resolve, reject) => (failOpening = reject)));
    expect(abandoned).toBe(1);
    const destroyed = new Error('destroyed');
    failOpening(destroyed);
    await expect(opening).rejects.toBe(destroyed);
  });

  it('leaves no listener on the lock\'s signal once opened or failed: a later close() abandons nothing', async () => {
    const controller = new AbortController();
    let abandoned = 0;
    await abandonable(controller.signal, () => abandoned++, () => Promise.resolve(1));
    await expect(abandonable(controller.signal, () => abandoned++, () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    expect(listeners(controller.signal)).toBe(0);
    controller.abort();
    expect(abandoned).toBe(0);
  });
});
