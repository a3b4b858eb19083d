import { describe, expect, it } from 'vitest';
import { TimeoutError } from '../../impl/errors.ts';
import { LockNotAcquiredError } from '../../impl/using.ts';
import { beforeTheFault, usingBeforeTheFault, waiterInLine, type Settled } from './blackhole.ts';

// The black-hole tests' setup on the live server: a loaded machine's slow answer is tried again on a fresh name, and
// nothing else is hidden.
describe('beforeTheFault', () => {
  it('tries again on a fresh name after a timeout and after an unwanted answer, and says which name it took', async () => {
    const names: string[] = [];
    const answers: Array<() => Promise<{ kind: string }>> = [
      () => Promise.reject(new TimeoutError('acquire', 300)),
      () => Promise.resolve({ kind: 'timed-out' }),
      () => Promise.resolve({ kind: 'granted' }),
    ];
    const got = await beforeTheFault('acquire', 'held', (name) => (names.push(name), answers[names.length - 1]!()), (v) => v.kind === 'granted');
    expect(names).toEqual(['held', 'held-1', 'held-2']);
    expect(got).toEqual({ value: { kind: 'granted' }, name: 'held-2' });
  });

  it('an error other than an outage is the test\'s: thrown at once, not tried again', async () => {
    let calls = 0;
    const bug = new TypeError('x is undefined');
    await expect(beforeTheFault('acquire', 'held', () => (calls++, Promise.reject(bug)), () => true)).rejects.toBe(bug);
    expect(calls).toBe(1);
  });

  it('waiterInLine replaces a waiter that settled before it stood in line, and hands back the one in line, unsettled', async () => {
    let made = 1;
    const gaveUp = Promise.resolve('denied');
    const inLine = new Promise<string>(() => undefined);
    const got = await waiterInLine('in line', gaveUp, async () => made === 2, () => (made++, inLine));
    expect(made).toBe(2);
    expect(got.waiting).toBe(inLine);
  });

  it('usingBeforeTheFault runs again on a fresh resource only while fn never ran and the acquire gave up', async () => {
    const resources: string[] = [];
    let ran = false;
    const outcomes: Array<Settled<string>> = [
      { ok: false, error: new LockNotAcquiredError('u', 'timed-out'), ms: 1 },
      { ok: true, value: 'lost', ms: 1 },
    ];
    const got = await usingBeforeTheFault(
      'u',
      (resource) => {
        resources.push(resource);
        if (resources.length === 2) ran = true;
        return Promise.resolve(outcomes[resources.length - 1]!);
      },
      () => ran,
    );
    expect(resources).toEqual(['u', 'u-1']);
    expect(got).toEqual({ ok: true, value: 'lost', ms: 1 });
    // fn ran and then the call failed: that failure is the test's to judge.
    const failed: Settled<string> = { ok: false, error: new LockNotAcquiredError('u', 'no-quorum'), ms: 1 };
    let tries = 0;
    expect(await usingBeforeTheFault('u', () => (tries++, Promise.resolve(failed)), () => true)).toBe(failed);
    expect(tries).toBe(1);
  });
});
