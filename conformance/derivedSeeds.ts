import type { Command } from '../model/command.ts';
import type { Design, StorePolicy } from '../model/design.ts';
import { DEFAULT_ALPHABET } from '../model/faultClass.ts';
import { derivedProperties } from '../model/matrix.ts';
import type { PropertyId } from '../model/properties.ts';
import { checkProperties } from '../model/properties.ts';
import { initialWorld } from '../model/state.ts';
import type { World } from '../model/state.ts';
import { enabled, step } from '../model/world.ts';

/** A property's schedule as conformance/seedSchedules.ts records it; `derived`: built here, not found by the exploration. */
export interface FoundSchedule {
  readonly property: PropertyId;
  readonly commands: readonly Command[];
  readonly derived?: true;
}

/** Model states a check of one candidate may visit: the candidates are short, their branches few. */
const PATH_BUDGET = 20_000;

/**
 * Schedules for what a cell predicts by derivation (model/matrix.ts,
 * derivedProperties: STORE-1 from a double grant), which the bounded
 * exploration may not reach, so that those predictions too are tried first
 * on the real servers. Built from the cell's MUTEX-1 counterexample: the
 * newer holder writes, then the older one. For a fenced store the older
 * holder's token must not be behind the newer one's, so a second candidate
 * has the older holder take and release the lock once before its grant:
 * its token then runs ahead of the counter the fault loses (a restart
 * without persistence). Each candidate is kept only if the model breaks the
 * property on it, on some path of its branches; the shortest is returned.
 */
export function derivedSeeds(design: Design, store: StorePolicy, found: readonly FoundSchedule[]): FoundSchedule[] {
  const properties = new Set(found.map((f) => f.property));
  const mutex = found.find((f) => f.property === 'MUTEX-1');
  if (mutex === undefined) return [];
  const out: FoundSchedule[] = [];
  for (const property of derivedProperties(properties, store)) {
    const shortest = candidates(mutex.commands)
      .filter((commands) => breaksOnSomePath(initialWorld({ design, store, clients: DEFAULT_ALPHABET.clients }), commands, property, { left: PATH_BUDGET }))
      .sort((a, b) => a.length - b.length)[0];
    if (shortest !== undefined) out.push({ property, commands: shortest, derived: true });
  }
  return out;
}

/** The double grant with both holders' writes after it, newer first; and the same with the older holder's token run ahead. */
function candidates(doubleGrant: readonly Command[]): Command[][] {
  const acquires = doubleGrant.flatMap((c, i) => (c.kind === 'acquire' ? [{ client: c.client, resource: c.resource, at: i }] : []));
  const newer = acquires.at(-1);
  const older = acquires.find((a) => newer !== undefined && a.client !== newer.client);
  if (newer === undefined || older === undefined) return [];
  const writes: Command[] = [
    { kind: 'write', client: newer.client, resource: newer.resource, value: `v${newer.client}` },
    { kind: 'write', client: older.client, resource: older.resource, value: `v${older.client}` },
  ];
  const ahead: Command[] = [
    ...doubleGrant.slice(0, older.at),
    { ...doubleGrant[older.at]! },
    { kind: 'release', client: older.client, resource: older.resource },
    ...doubleGrant.slice(older.at),
  ];
  return [
    [...doubleGrant, ...writes],
    [...ahead, ...writes],
  ];
}

/** Whether some path through the model's branches of `commands` from `world` breaks `property` (every command enabled on the way). */
function breaksOnSomePath(world: World, commands: readonly Command[], property: PropertyId, budget: { left: number }): boolean {
  const [command, ...rest] = commands;
  if (command === undefined || !enabled(world, command)) return false;
  for (const branch of step(world, command)) {
    if (--budget.left < 0) return false;
    if (checkProperties(branch.events, branch.next).some((v) => v.property === property)) return true;
    if (breaksOnSomePath(branch.next, rest, property, budget)) return true;
  }
  return false;
}
