import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Command, Design, StorePolicy } from '../model/index.ts';
import { alphabetFor, designs, FAULT_CLASSES, initialWorld, step } from '../model/index.ts';
import { enabled } from '../model/world.ts';

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
  if ('resource' in command) return { ...command, resource };
  if (command.kind === 'pause' && command.pendingWrite !== undefined) return { ...command, pendingWrite: { ...command.pendingWrite, resource } };
  if (command.kind === 'pause' && command.inFlight !== undefined) return { ...command, inFlight: { ...command.inFlight, resource } };
  return command;
}

/** The outcomes and events of a run, the resource's name written as R. */
function trace(design: Design, store: StorePolicy, alphabet: readonly Command[], schedule: ReadonlyArray<readonly [number, number]>, resource: string): string {
  let w = initialWorld({ design, store, clients: 2 });
  const out: string[] = [];
  for (const [which, pick] of schedule) {
    // The schedule picks among the commands enabled here (the same under either name, or the traces differ first).
    const on = alphabet.filter((c) => enabled(w, renamed(c, resource)));
    if (on.length === 0) break;
    const command = renamed(on[which % on.length]!, resource);
    const branches = step(w, command);
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
        fc.property(fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 14 }), (schedule) => {
          const reference = trace(design, store, alphabet, schedule, 'r');
          for (const name of NAMES) expect(trace(design, store, alphabet, schedule, name)).toBe(reference);
        }),
        { seed: 20161010, numRuns: 150 },
      );
    });
  }
});
