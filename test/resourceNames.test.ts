import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Command, Design, StorePolicy } from '../model/index.ts';
import { alphabetFor, designs, FAULT_CLASSES, initialWorld, step } from '../model/index.ts';

/**
 * A resource is any non-empty string (model/errors.ts, checkResource): its
 * name must never change what happens to it. The model keeps per-resource
 * state in records keyed by the name, so names that are also properties of
 * every JavaScript object are the ones to try.
 */
const NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype', '__defineGetter__'];

const ROWS: ReadonlyArray<readonly [Design, StorePolicy]> = [
  [designs.redisSingle(), 'strict'],
  [designs.redlock({ nodes: 3 }), 'unfenced'],
  [designs.pgSession(), 'strict'],
  [designs.pgXact(), 'transactional'],
  [designs.etcdLease(), 'monotonic'],
];

/** `command` with its resource renamed, where it has one. */
function renamed(command: Command, resource: string): Command {
  return 'resource' in command ? { ...command, resource } : command;
}

/** The outcomes and events of a run, the resource's name written as R. */
function trace(design: Design, store: StorePolicy, schedule: ReadonlyArray<readonly [Command, number]>, resource: string): string {
  let w = initialWorld({ design, store, clients: 2 });
  const out: string[] = [];
  for (const [command, pick] of schedule) {
    const branches = step(w, renamed(command, resource));
    const b = branches[pick % branches.length]!;
    out.push(JSON.stringify([b.outcome, b.events], (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v === resource ? 'R' : v)));
    w = b.next;
  }
  return out.join('\n');
}

describe('a resource name never changes what happens to the resource', () => {
  for (const [design, store] of ROWS) {
    it(`${design.kind} (${store}): every fault class, names that are also Object.prototype properties behave as 'r'`, () => {
      const alphabet = FAULT_CLASSES.flatMap((c) => alphabetFor(design, c));
      fc.assert(
        fc.property(fc.array(fc.tuple(fc.constantFrom(...alphabet), fc.nat()), { maxLength: 14 }), (schedule) => {
          const reference = trace(design, store, schedule, 'r');
          for (const name of NAMES) expect(trace(design, store, schedule, name)).toBe(reference);
        }),
        { seed: 20161010, numRuns: 150 },
      );
    });
  }
});
