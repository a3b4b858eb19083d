import { describe, expect, it } from 'vitest';
import { InvalidInputError, LeaseLock } from '../impl/index.ts';
import { systemClock } from '../impl/clock.ts';
import { createRedisLock } from '../impl/redis/index.ts';
import { nodeSymmetric } from '../model/index.ts';
import { checkLinearizability, etcdRegister, InvalidOperationError } from '../conformance/history/linearizability/index.ts';
import { checkResults } from '../conformance/history/reportInput.ts';

/**
 * A list option with a hole (new Array(2), [, x]) is checked at every
 * index: Array.prototype.forEach skips holes, so a check written with it
 * passed the list, and the hole failed later as a TypeError from the first
 * call that used it.
 */
describe('a list with a hole is refused naming the index', () => {
  it('createRedisLock nodes', () => {
    expect(() => createRedisLock({ nodes: new Array(1) })).toThrow(InvalidInputError);
    expect(() => createRedisLock({ nodes: new Array(1) })).toThrow(/nodes\[0\]/);
  });

  it('LeaseLock nodes', () => {
    expect(() => new LeaseLock({ nodes: new Array(2), clock: systemClock })).toThrow(InvalidInputError);
    expect(() => new LeaseLock({ nodes: new Array(2), clock: systemClock })).toThrow(/nodes\[0\]/);
  });

  it("the model's alphabet", () => {
    expect(() => nodeSymmetric(new Array(1), 3)).toThrow(InvalidInputError);
    expect(() => nodeSymmetric(new Array(1), 3)).toThrow(/alphabet\[0\]/);
  });

  it('the operations of a linearizability check', () => {
    const ops = new Array(2);
    ops[1] = { process: 0, call: 0, return: 1, input: { f: 'write', value: 1 } };
    expect(() => checkLinearizability(etcdRegister(), ops)).toThrow(InvalidOperationError);
  });

  it("a history report's checks", () => {
    expect(() => checkResults(new Array(1))).toThrow(/checks\[0\]/);
  });
});
