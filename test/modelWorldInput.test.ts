import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import * as model from '../model/index.ts';
import type { Branch, Command, World } from '../model/index.ts';
import { alphabetFor, designs, FAULT_CLASSES, initialWorld, InvalidInputError, MATRIX_ROWS } from '../model/index.ts';
import { enabled } from '../model/world.ts';
import { get, junkFor, mustRefuse, paths, put } from './fixtures/corrupt.ts';
import { WORLDS } from './fixtures/modelWorlds.ts';

/**
 * A World handed to `lockcheck/model` by a caller (built, or edited after step returned it) is checked whole: a
 * wrong field anywhere in it is an InvalidInputError naming its path, what was expected and what was given, never a
 * TypeError from inside the step, a loop, or an answer read from junk. The model is pure: nothing here starts a
 * server or waits on time.
 */
const refusal = (f: () => unknown): string => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(InvalidInputError);
    return (e as InvalidInputError).message;
  }
  throw new Error('not refused');
};

const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 };
const redlock = WORLDS['redlock-3 acquire in flight']!;
const single = initialWorld({ design: designs.redisSingle(), store: 'strict', clients: 2 });

describe('every field of a world, corrupted in turn, handed to every function that takes a world', () => {
  // In a child process with a time bound, as the junk-argument probe: a world that made a clock's search loop
  // forever cannot be interrupted in this one. The probe prints each call before it makes it.
  it('is refused with an InvalidInputError naming the field, or answered; never a crash, never a hang', () => {
    const r = spawnSync(process.execPath, ['--import', 'tsx', 'test/fixtures/modelWorldProbe.ts'], { encoding: 'utf8', timeout: 180_000, maxBuffer: 256 * 2 ** 20 });
    const lines = r.stdout.split('\n').filter((l) => l !== '');
    const hung = lines.at(-1) === 'done' ? [] : [`did not finish (${r.signal ?? r.status}${r.stderr ? `: ${r.stderr.slice(0, 300)}` : ''}); last: ${lines.at(-1)}`];
    expect([...hung, ...lines.filter((l) => /^(crash|unrefused|unnamed) /.test(l)).slice(0, 20)]).toEqual([]);
    // Nine worlds, every path, eleven junk values, fifteen calls: the sweep is what it says.
    const [, calls, refused] = /^calls (\d+) refused (\d+)$/.exec(lines.at(-2) ?? '') ?? [];
    expect(Number(calls)).toBeGreaterThan(100_000);
    expect(Number(refused)).toBeGreaterThan(Number(calls) * 0.8);
  }, 200_000);
});

describe('a wrong field deep in a world is named by its path', () => {
  const node0 = redlock.nodes[0]!;
  const client0 = redlock.clients[0]!;
  const client1 = redlock.clients[1]!;
  const withNode0 = (n: unknown): World => ({ ...redlock, nodes: [n, ...redlock.nodes.slice(1)] }) as never;
  const withClient0 = (c: unknown): World => ({ ...redlock, clients: [c, ...redlock.clients.slice(1)] }) as never;
  it.each([
    ['a null node', () => model.step({ ...single, nodes: [null] } as never, acquire), 'invalid-config: step world.nodes[0] must be a node { wall, mono, up, availableFromTrueMs, keys, counters }, got null'],
    ['fewer nodes than the design runs on', () => model.step({ ...redlock, nodes: [null] } as never, acquire), 'step world.nodes must be an array of 3 nodes (redlock runs on 3), got an array of 1'],
    ['keys that are not a record', () => model.step(withNode0({ ...node0, keys: ['r'] }), acquire), 'step world.nodes[0].keys must be a record of keys by resource, got an array of 1'],
    ['a key without an owner', () => model.canonicalKey(withNode0({ ...node0, keys: { r: { ...node0.keys.r!, owner: null } } })), 'canonicalKey world.nodes[0].keys["r"].owner must be an owner { client, attempt }, got null'],
    ['a key owned by a client that does not exist', () => model.step(withNode0({ ...node0, keys: { r: { ...node0.keys.r!, owner: { client: 7, attempt: 1 } } } }), acquire), 'step world.nodes[0].keys["r"].owner.client must be an integer in [0, 2], got 7'],
    ['a clock with a string drift', () => model.runSchedule(withNode0({ ...node0, wall: { ...node0.wall, driftPpm: '0' } }), [acquire]), 'runSchedule initial.nodes[0].wall.driftPpm must be an integer in [-900000, 9000000], got "0"'],
    ['a counter that is a number', () => model.explore(withNode0({ ...node0, counters: { r: 1 } }), [acquire], { maxDepth: 1 }), 'explore initial.nodes[0].counters["r"] must be a bigint token in [0, 2^63-1], got 1'],
    ['a lease token that is a number', () => model.holdsValid(withClient0({ ...client0, leases: { r: { ...client0.leases.r!, token: 1 } } }), 0, 'r'), 'holdsValid world.clients[0].leases["r"].token must be a bigint token in [0, 2^63-1], got 1'],
    ['a lease token past 2^63-1', () => model.checkProperties([], withClient0({ ...client0, leases: { r: { ...client0.leases.r!, token: 2n ** 63n } } })), 'checkProperties after.clients[0].leases["r"].token must be a bigint token in [0, 2^63-1], got 9223372036854775808n'],
    ["a lease held under another client's name", () => model.step(withClient0({ ...client0, leases: { r: { ...client0.leases.r!, owner: { client: 1, attempt: 1 } } } }), acquire), 'step world.clients[0].leases["r"].owner.client must be 0 (the client it belongs to), got 1'],
    ['a NaN time', () => model.ghostOf({ ...redlock, nowMs: Number.NaN }, 'r'), 'ghostOf world.nowMs must be a finite number of ms in [-9007199254740991, 9007199254740991], got NaN'],
    ['a time past 2^53 (a clock search would never end)', () => model.step({ ...redlock, nowMs: 2 ** 60 }, acquire), 'step world.nowMs must be a finite number of ms'],
    ['a partition naming a client that does not exist', () => model.step({ ...redlock, partitions: ['2:1', '5:0'] }, acquire), 'step world.partitions[1] must be a link "client:node" of a client in [0, 2] and a node in [0, 2], got "5:0"'],
    ['partitions out of order', () => model.step({ ...redlock, partitions: ['2:1', '0:0'] }, acquire), 'step world.partitions[1] must be a link after "2:1" (links are sorted, each once), got "0:0"'],
    ['an in-flight acquire with votes for two nodes of three', () => model.step({ ...redlock, clients: [client0, { ...client1, inFlight: { ...client1.inFlight!, votes: [null, null] } }, redlock.clients[2]!] } as never, acquire), 'step world.clients[1].inFlight.votes must be an array of 3 votes (bigint or null) (one per node), got an array of 2'],
    ['an operation in flight of an unknown kind', () => model.startExploration({ ...redlock, clients: [client0, { ...client1, inFlight: { kind: 'teleport' } }, redlock.clients[2]!] } as never, [acquire], { maxDepth: 1 }), "startExploration initial.clients[1].inFlight.kind must be one of 'reply', 'later', 'acquire', 'extend', 'lease', got \"teleport\""],
    ['an operation in flight on a running client', () => model.step({ ...redlock, clients: [client0, { ...client1, paused: false }, redlock.clients[2]!] }, acquire), 'step world.clients[1].inFlight must be null (only a paused client has an operation in flight), got an object'],
    ['a pending write with a number token', () => model.step(withClient0({ ...client0, pendingWrite: { ...client0.pendingWrite!, token: 1 } }), acquire), 'step world.clients[0].pendingWrite.token must be a bigint token in [0, 2^63-1], got 1'],
    ['a store of another policy than configured', () => model.step({ ...redlock, store: { ...redlock.store, policy: 'unfenced' } }, acquire), "step world.store.policy must be 'strict' (the configuration's store), got \"unfenced\""],
    ['a ghost entry with a string count', () => model.fingerprintOptionsFor({ ...redlock, ghost: { r: { ...redlock.ghost.r!, grants: '1' } } } as never, [acquire]), 'fingerprintOptionsFor initial.ghost["r"].grants must be an integer in [0, 9007199254740991], got "1"'],
    ['more clients than configured', () => model.step({ ...redlock, clients: [...redlock.clients, client0] }, acquire), 'step world.clients must be an array of 3 clients (config.clients), got an array of 4'],
    ['a configuration with a bad design field', () => model.step({ ...redlock, config: { ...redlock.config, design: { ...redlock.config.design, nodes: '3' } } } as never, acquire), 'invalid-config: step world.config.design: redlock needs 1..15 nodes, got "3"'],
    ['a configuration with a number tokenBase', () => model.step({ ...redlock, config: { ...redlock.config, tokenBase: 0 } } as never, acquire), 'invalid-token: step world.config.tokenBase must be a bigint in [0, 2^63-1] or absent, got 0'],
    ['a replica on a design without one', () => model.step({ ...single, nodes: [{ ...single.nodes[0]!, replica: { keys: {}, counters: {} } }] }, acquire), 'step world.nodes[0].replica must be absent (redis-single has no replica), got an object'],
    ['a record with a prototype of its own', () => model.step(withNode0({ ...node0, keys: Object.create({ r: node0.keys.r }) }), acquire), 'step world.nodes[0].keys must be a record of keys by resource (a plain object), got an object'],
  ])('%s', (_what, f, message) => {
    expect(refusal(f)).toContain(message);
  });
});

describe('the worlds the model makes pass the check', () => {
  // Seeded walks through the public step, which checks its world whole each time: a world the model made and its
  // own check refused would end a walk with "step world ...".
  it('on every matrix row and fault class, from walks of enabled commands', () => {
    let seed = 20261201;
    const next = (n: number): number => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let steps = 0;
    for (const row of MATRIX_ROWS) {
      for (const fc of FAULT_CLASSES) {
        const alphabet = alphabetFor(row.design, fc);
        for (let walk = 0; walk < 3; walk++) {
          let w = initialWorld({ design: row.design, store: row.stores[0]!, clients: 2 });
          for (let i = 0; i < 25; i++) {
            const cmds = alphabet.filter((c) => enabled(w, c));
            if (cmds.length === 0) break;
            const c = cmds[next(cmds.length)]!;
            let branches: readonly Branch[];
            try {
              branches = model.step(w, c);
            } catch (e) {
              expect((e as Error).message).not.toContain('step world');
              continue;
            }
            steps++;
            w = branches[next(branches.length)]!.next;
          }
        }
      }
    }
    expect(steps).toBeGreaterThan(1000);
  });

  it('the worlds of the fixture are valid as they are', () => {
    for (const w of Object.values(WORLDS)) expect(model.canonicalKey(w)).toEqual(expect.any(String));
  });
});

describe('runSchedule checks the world once with the model\'s choosers, and again after a caller\'s', () => {
  const schedule: Command[] = [acquire, { kind: 'advance', ms: 1 }, { kind: 'release', client: 0, resource: 'r' }];
  it('a caller chooser that edits the branch it picks in place is refused at the next step', () => {
    const editing = (branches: readonly Branch[]): Branch => {
      (branches[0]!.next.nodes as unknown[])[0] = { ...branches[0]!.next.nodes[0]!, up: 'yes' };
      return branches[0]!;
    };
    expect(refusal(() => model.runSchedule(single, schedule, editing))).toBe('invalid-config: step world.nodes[0].up must be a boolean, got "yes"');
  });

  it('the answers are the same with the model\'s chooser as with a caller\'s that picks the same branches', () => {
    const mine = (branches: readonly Branch[]): Branch => branches[0]!;
    const w = WORLDS['redlock-3 extend in flight']!;
    const resumed: Command[] = [{ kind: 'resume', client: 0 }, ...schedule, { kind: 'acquire', client: 1, resource: 'r', ttlMs: 100 }];
    expect(model.runSchedule(w, resumed, mine)).toEqual(model.runSchedule(w, resumed));
    expect(model.runSchedule(w, resumed, model.preferOutcome('granted'))).toEqual(model.runSchedule(w, resumed, model.firstBranch));
  });
});

describe('the parts of a world the entry takes alone are checked whole too', () => {
  /** Each path of `value` corrupted with each junk: what `f` threw that is not an InvalidInputError, and wrong types it answered. */
  const sweep = (value: unknown, f: (v: never) => unknown): string[] => {
    const out: string[] = [];
    for (const p of paths(value)) {
      const original = get(value, p);
      for (const junk of junkFor(original)) {
        try {
          f(put(value, p, junk) as never);
          if (mustRefuse(original, junk)) out.push(`answered ${p.join('.')} = ${String(junk)}`);
        } catch (e) {
          if (!(e instanceof InvalidInputError)) out.push(`${p.join('.')} = ${String(junk)}: ${String(e)}`);
        }
      }
    }
    return out;
  };

  it('inFlightKey: every kind of operation in flight, corrupted field by field', () => {
    const flights = Object.values(WORLDS).flatMap((w) => w.clients.flatMap((c) => (c.inFlight === null ? [] : [c.inFlight])));
    expect(new Set(flights.map((f) => f.kind))).toEqual(new Set(['acquire', 'extend', 'lease', 'reply', 'later']));
    expect(flights.flatMap((f) => sweep(f, (g) => model.inFlightKey(g, 0, 0)))).toEqual([]);
    expect(refusal(() => model.inFlightKey({ kind: 'acquire' } as never, 0, 0))).toBe('invalid-config: inFlightKey operation.resource must be a resource name (a string), got undefined');
    expect(refusal(() => model.inFlightKey({ kind: 'reply', outcome: { kind: 'ok' }, doneMs: 1, missed: null } as never, 0, 0))).toBe(
      'invalid-config: inFlightKey operation.missed must be an object { afterMs, ends, resource } or absent, got null',
    );
  });

  it('cellOf: a store state, corrupted field by field', () => {
    const stores = Object.values(WORLDS).map((w) => w.store);
    expect(stores.some((st) => Object.keys(st.cells).length > 0)).toBe(true);
    expect(stores.flatMap((st) => sweep(st, (t) => model.cellOf(t, 'r')))).toEqual([]);
    // A cell that is not one was handed back as the cell (null read as empty, 5 as the cell itself).
    expect(refusal(() => model.cellOf({ policy: 'strict', cells: { r: 5 } } as never, 'r'))).toBe('invalid-config: cellOf store.cells["r"] must be a store cell { value, token, highest }, got 5');
    expect(refusal(() => model.cellOf({ policy: 'strict', cells: { r: null } } as never, 'r'))).toContain('cellOf store.cells["r"] must be a store cell');
  });
});

