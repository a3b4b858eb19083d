import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Command, Design, World } from '../model/index.ts';
import { alphabetFor, DEFAULT_ALPHABET, designs, FAULT_CLASSES, initialWorld, MATRIX_ROWS } from '../model/index.ts';
import type { FingerprintOptions } from '../model/fingerprint.ts';
import { fingerprint } from '../model/fingerprint.ts';
import { explore, fingerprintOptionsFor } from '../model/explore.ts';
import { encode, layoutFor } from '../model/packed.ts';
import { EVENT_BITS, PackedBranches, UNCHANGED } from '../model/packedBranches.ts';
import { packedContext, packedFingerprint } from '../model/packedFingerprint.ts';
import { FALLBACK, packedStep, packs } from '../model/packedStep.ts';
import { checkEvents, checkProperties } from '../model/properties.ts';
import { LIVE_1, MUTEX_1, packedStateBreaks, STATE_BITS } from '../model/packedProperties.ts';
import { read } from '../model/clock.ts';
import { enabled, stepOrbits } from '../model/world.ts';

// Replay a failure with LOCKCHECK_SEED=<seed printed by fast-check>.
const seed = Number(process.env.LOCKCHECK_SEED ?? 20261130);
const runs = Number(process.env.LOCKCHECK_RUNS ?? 150);

/** The matrix's explorations whose design packs (packed.ts): each row with its first store, under every fault class. */
const cells = MATRIX_ROWS.flatMap((row) =>
  FAULT_CLASSES.map((fault) => {
    const alphabet: Command[] = alphabetFor(row.design, fault);
    const initial = initialWorld({ design: row.design, store: row.stores[row.stores.length - 1]!, clients: 2 });
    return { label: `${row.label} / ${fault}`, alphabet, initial, layout: layoutFor(initial, alphabet) };
  }),
).filter((c) => c.layout !== null);

/** A state reached by a random schedule of one of `among`'s alphabet, a random branch each step (as stepOrbits gives them), and the states on the way. */
const reachedIn = (among: typeof cells, unbiased = false) =>
  fc
    .record({
      cell: fc.nat(among.length - 1),
      // Unbiased picks reach deeper into an alphabet (fast-check's bias favours the first commands).
      picks: fc.array(unbiased ? fc.tuple(fc.noBias(fc.nat()), fc.noBias(fc.nat())) : fc.tuple(fc.nat(), fc.nat()), { maxLength: 9 }),
      symmetry: fc.boolean(),
      holder: fc.nat(1),
      pausing: fc.boolean(),
    })
    .map(({ cell, picks, symmetry, holder, pausing }) => {
      const c = among[cell]!;
      const options: FingerprintOptions = fingerprintOptionsFor(c.initial, c.alphabet, { clientSymmetry: symmetry });
      let w = c.initial;
      const path: World[] = [w];
      // Unbiased paths open with a client's acquire, half of them with its pause right after: a lease's extension in flight.
      const opening = unbiased
        ? c.alphabet.filter((cmd) => 'client' in cmd && cmd.client === holder && ((cmd.kind === 'acquire' && cmd.latencyMs === undefined) || (pausing && cmd.kind === 'pause')))
        : [];
      for (const [pick, b] of [...opening.map((_cmd, i) => [-1 - i, 0] as const), ...picks]) {
        const on = c.alphabet.filter((cmd) => enabled(w, cmd));
        const branches = stepOrbits(w, pick < 0 ? opening[-1 - pick]! : on[pick % on.length]!, options.fixedNodes ?? 1);
        w = branches[b % branches.length]!.next;
        path.push(w);
      }
      return { ...c, options, world: w, path };
    });
const reached = reachedIn(cells);
/**
 * The timing cells, whose alphabets hold an extension across its client's
 * pause: every state on the way is checked, so that states with the round
 * in flight (and their resumes) come up often.
 */
const timing = cells.filter((c) => c.label.endsWith(' / timing'));
const reachedTiming = reachedIn(timing, true);
const timingRuns = Number(process.env.LOCKCHECK_RUNS ?? 60);

/** Whether the packed engine holds `world`: an operation in flight packs only as an extension's round or its refusal at the send. */
const packable = (world: World): boolean =>
  world.clients.every((c) => c.inFlight === null || c.inFlight.kind === 'extend' || (c.inFlight.kind === 'reply' && c.inFlight.outcome.kind === 'not-extended'));

const print = (w: World, options: FingerprintOptions): string => {
  const out = { hi: 0, lo: 0 };
  fingerprint(w, out, options);
  return `${out.hi}:${out.lo}`;
};

/** The event properties a reference branch breaks, as the packed step's bits. */
const eventBits = (events: Parameters<typeof checkEvents>[0]): number =>
  checkEvents(events).reduce((bits, v) => bits | EVENT_BITS.find(([p]) => p === v.property)![1], 0);

describe('the packed engine against the reference step (model/world.ts)', () => {
  /** A state packs exactly when `packable` says, and its packed fingerprint is the World's. */
  const packsAsReference = (world: World, layout: NonNullable<(typeof cells)[number]['layout']>, initial: World, options: FingerprintOptions): void => {
    const packed = new Float64Array(layout.size);
    // Any other operation in flight does not pack (the explorer steps it with the reference).
    const ok = packable(world);
    expect(encode(layout, world, packed)).toBe(ok);
    if (!ok) return;
    const out = { hi: 0, lo: 0 };
    packedFingerprint(packedContext(layout, initial, options), packed, out);
    expect(`${out.hi}:${out.lo}`).toBe(print(world, options));
  };

  it('packs every reachable state, and its fingerprint is the reference fingerprint of the World', () => {
    fc.assert(
      fc.property(reached, ({ world, layout, initial, options }) => packsAsReference(world, layout!, initial, options)),
      { seed, numRuns: runs },
    );
  });

  it('packs the timing cells\' states with an extension in flight, with the reference fingerprint', () => {
    let inFlight = 0;
    fc.assert(
      fc.property(reachedTiming, ({ path, layout, initial, options }) => {
        for (const w of path) {
          packsAsReference(w, layout!, initial, options);
          if (w.clients.some((c) => c.inFlight?.kind === 'extend' && c.inFlight.votes.some((v) => v))) inFlight++;
        }
      }),
      { seed, numRuns: timingRuns },
    );
    // The property must reach what it is about.
    expect(inFlight).toBeGreaterThan(20);
  });

  /** Every enabled packed command from `world` against the reference step, word for word; how many in-flight commands (a pause with an extension, a resume reading one) were compared. */
  const stepsAsReference = (world: World, layout: NonNullable<(typeof cells)[number]['layout']>, initial: World, options: FingerprintOptions, alphabet: readonly Command[]): number => {
        let flights = 0;
        const ctx = packedContext(layout, initial, options);
        const packed = new Float64Array(layout.size);
        const expected = new Float64Array(layout.size);
        const out = new PackedBranches(layout.size);
        if (!packable(world)) return 0;
        expect(encode(layout, world, packed)).toBe(true);
        for (const command of alphabet) {
          if (!enabled(world, command) || !packs(initial, command)) continue;
          const reference = stepOrbits(world, command, ctx.fixedNodes);
          const n = packedStep(ctx, packed, command, out);
          const what = JSON.stringify(command);
          if (n === FALLBACK) {
            // Only a resume with a session lost falls back.
            const c = command.kind === 'resume' ? world.clients[command.client]! : null;
            expect(c !== null && c.sessionLost, what).toBe(true);
            continue;
          }
          if ((command.kind === 'pause' && command.inFlight !== undefined) || (command.kind === 'resume' && world.clients[command.client]!.inFlight?.kind === 'extend')) flights++;
          if (n === UNCHANGED) {
            // The reference returns the very state (the explorer skips it).
            expect(reference.length, what).toBe(1);
            expect(reference[0]!.next === world && reference[0]!.events.length === 0, what).toBe(true);
            continue;
          }
          expect(n, what).toBe(reference.length);
          reference.forEach((branch, b) => {
            expect(encode(layout!, branch.next, expected), what).toBe(true);
            expect(Array.from(out.state(b)), `${what} branch ${b}`).toEqual(Array.from(expected));
            expect(out.events(b), `${what} branch ${b} events`).toBe(eventBits(branch.events));
            const fp = { hi: 0, lo: 0 };
            packedFingerprint(ctx, out.state(b), fp);
            expect(`${fp.hi}:${fp.lo}`, `${what} branch ${b} fingerprint`).toBe(print(branch.next, options));
          });
        }
        return flights;
  };

  it('gives every enabled packed command the reference branches: the same states, in order, the same event violations and fingerprints', () => {
    fc.assert(
      fc.property(reached, ({ world, layout, initial, options, alphabet }) => {
        stepsAsReference(world, layout!, initial, options, alphabet);
      }),
      { seed, numRuns: runs },
    );
  });

  it('steps the timing cells\' pauses with an extension in flight and their resumes as the reference does, word for word', () => {
    let flights = 0;
    fc.assert(
      fc.property(reachedTiming, ({ path, layout, initial, options, alphabet }) => {
        for (const w of path) flights += stepsAsReference(w, layout!, initial, options, alphabet);
      }),
      { seed, numRuns: timingRuns },
    );
    expect(flights).toBeGreaterThan(50);
  });

  it('fingerprints two reachable states alike exactly when the reference does', () => {
    fc.assert(
      fc.property(reached, reached, (a, b) => {
        if (a.initial !== b.initial) return;
        const ctx = packedContext(a.layout!, a.initial, a.options);
        const pa = new Float64Array(a.layout!.size);
        const pb = new Float64Array(a.layout!.size);
        encode(a.layout!, a.world, pa);
        encode(a.layout!, b.world, pb);
        const fa = { hi: 0, lo: 0 };
        const fb = { hi: 0, lo: 0 };
        packedFingerprint(ctx, pa, fa);
        packedFingerprint(ctx, pb, fb);
        expect(fa.hi === fb.hi && fa.lo === fb.lo).toBe(print(a.world, a.options) === print(b.world, a.options));
      }),
      { seed, numRuns: runs },
    );
  });

  it('judges MUTEX-1 and LIVE-1 on a packed state as the reference judges its World, in every state to a depth', () => {
    // Cells whose shortest MUTEX-1 and LIVE-1 counterexamples lie within the depth: both verdicts of both checks come up.
    const picked: ReadonlyArray<readonly [string, number]> = [
      ['redis-replicated(async) / clock-step', 4],
      ['redlock(5 nodes, none) / clock-step', 5],
      ['redis-single(none) / timing', 5],
      ['etcd-lease / clock-drift', 4],
    ];
    const broken = { 'MUTEX-1': 0, 'LIVE-1': 0 };
    let judged = 0;
    for (const [label, depth] of picked) {
      const c = cells.find((x) => x.label === label)!;
      expect(c, label).toBeDefined();
      const options = fingerprintOptionsFor(c.initial, c.alphabet, {});
      const ctx = packedContext(c.layout!, c.initial, options);
      const packed = new Float64Array(c.layout!.size);
      const seen = new Set<string>([print(c.initial, options)]);
      /** Checks the packed verdict against the World's; returns the World's. */
      const judgedAlike = (world: World, what: string): number => {
        expect(encode(c.layout!, world, packed), what).toBe(true);
        const want = checkProperties([], world).reduce((bits, v) => bits | STATE_BITS.find(([p]) => p === v.property)![1], 0);
        expect(packedStateBreaks(ctx, packed), what).toBe(want);
        return want;
      };
      let level: World[] = [c.initial];
      for (let d = 0; d <= depth; d++) {
        const next: World[] = [];
        for (const world of level) {
          if (packable(world)) {
            const want = judgedAlike(world, `${label}, a state at depth ${d}`);
            for (const [p, bit] of STATE_BITS) if ((want & bit) !== 0) broken[p as keyof typeof broken]++;
            judged++;
            // At the edges: each lease running out at this very instant of its client's clock, each node down.
            if ((want & MUTEX_1) !== 0) {
              world.clients.forEach((client, i) => {
                const leases = Object.fromEntries(Object.entries(client.leases).map(([r, l]) => [r, { ...l, validUntilMs: read(client.mono, world.nowMs) }]));
                judgedAlike({ ...world, clients: world.clients.map((x, j) => (j === i ? { ...x, leases } : x)) }, `${label}, depth ${d}, client ${i}'s leases just out`);
              });
            }
            if ((want & LIVE_1) !== 0) {
              world.nodes.forEach((_n, i) => judgedAlike({ ...world, nodes: world.nodes.map((x, j) => (j === i ? { ...x, up: false } : x)) }, `${label}, depth ${d}, node ${i} down`));
            }
          }
          if (d === depth) continue;
          for (const command of c.alphabet) {
            if (!enabled(world, command)) continue;
            for (const branch of stepOrbits(world, command, ctx.fixedNodes)) {
              const key = print(branch.next, options);
              if (seen.has(key)) continue;
              seen.add(key);
              next.push(branch.next);
            }
          }
        }
        level = next;
      }
    }
    // The test must reach what it is about: both verdicts of both checks.
    expect(judged).toBeGreaterThan(1000);
    expect(broken['MUTEX-1']).toBeGreaterThan(10);
    expect(broken['LIVE-1']).toBeGreaterThan(10);
    expect(judged - broken['MUTEX-1'] - broken['LIVE-1']).toBeGreaterThan(1000);
  });

  /**
   * The lease terms of an audited library's contract (spec 7.11), which no
   * matrix row has: the contract rows' explored cells never reach some of
   * them (no client timeout matters only where a reply later than the ttl
   * is needed for the quorum, which no timing cell of five nodes draws).
   * Each design here goes with the same design without its term, and a step
   * counts as reaching the term when the two reference steps differ.
   */
  const contractCells = (() => {
    const ttl = DEFAULT_ALPHABET.ttlMs;
    const redlock3 = designs.redlock({ nodes: 3 }) as Extract<Design, { kind: 'redlock' }>;
    const single = designs.redisSingle() as Extract<Design, { kind: 'redis-single' }>;
    const pairs: ReadonlyArray<readonly [string, Design, Design]> = [
      // redlock 5's contract on three nodes: it waits for an extension's replies however late.
      ['no client timeout', { ...redlock3, clientTimeout: 'none', failedExtend: { lease: 'unchanged', keys: 'kept' } }, { ...redlock3, failedExtend: { lease: 'unchanged', keys: 'kept' } }],
      // ioredis-lock's and redis-semaphore Mutex's: the lock dropped only when the node said the key is gone.
      ['dropped if denied, one node', { ...single, clientDeadline: 'none', failedExtend: { lease: 'dropped-if-denied', keys: 'kept' } }, { ...single, clientDeadline: 'none', failedExtend: { lease: 'dropped', keys: 'kept' } }],
      ['dropped if denied, three nodes', { ...redlock3, failedExtend: { lease: 'dropped-if-denied', keys: 'deleted' } }, { ...redlock3, failedExtend: { lease: 'dropped', keys: 'deleted' } }],
      // redlock 4's on three nodes: every round read to its last reply, a refusal's undo round too.
      // RedlockMutex's on three nodes: no deadline, every reply read, a refusal's keys deleted after every reply of the undo round.
      ['no deadline, decides on every reply', { ...redlock3, clientDeadline: 'none', decides: 'every-reply', failedExtend: { lease: 'dropped', keys: 'deleted' } }, { ...redlock3, clientDeadline: 'none', failedExtend: { lease: 'dropped', keys: 'deleted' } }],
      ['decides on every reply', { ...redlock3, clientTimeout: 'none', decides: 'every-reply', failedExtend: { lease: 'unchanged', keys: 'deleted' } }, { ...redlock3, clientTimeout: 'none', failedExtend: { lease: 'unchanged', keys: 'deleted' } }],
    ];
    return pairs.map(([label, design, without]) => {
      // The lease's commands only (no writes: the terms are about extensions), so that random paths reach them often.
      const timing = alphabetFor(design, 'timing').filter((c) => c.kind !== 'write' && c.kind !== 'deliver');
      const cuts = alphabetFor(design, 'partition').filter((c) => c.kind === 'partition');
      // An extension whose replies all come after its ttl: the client with no timeout reads them, the other gives up.
      // An acquire likewise: the client that reads every reply without a timeout waits for them, judges them, and undoes its keys.
      const late: Command[] = [0, 1].flatMap((client): Command[] => [
        { kind: 'extend', client, resource: DEFAULT_ALPHABET.resource, ttlMs: ttl, latencyMs: 2 * ttl },
        ...('decides' in design ? [{ kind: 'acquire', client, resource: DEFAULT_ALPHABET.resource, ttlMs: ttl, latencyMs: 2 * ttl } as const] : []),
      ]);
      const alphabet = [...timing, ...cuts, ...late];
      const initial = initialWorld({ design, store: 'unfenced', clients: 2 });
      return { label, alphabet, initial, layout: layoutFor(initial, alphabet), without };
    });
  })();

  it("steps a library contract's lease terms as the reference does, and reaches each term (no client timeout, dropped if denied, decides on every reply)", () => {
    expect(contractCells.every((c) => c.layout !== null)).toBe(true);
    const reachedTerm = new Map<string, number>(contractCells.map((c) => [c.label, 0]));
    const shown = (branches: ReturnType<typeof stepOrbits>): string => JSON.stringify(branches.map((b) => [b.outcome, b.next.nowMs, b.next.clients.map((c) => c.leases)]), (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v));
    for (const cell of contractCells) {
      fc.assert(
        fc.property(reachedIn([cell], true), ({ path, layout, initial, options, alphabet }) => {
          const fixed = options.fixedNodes ?? 1;
          for (const w of path) {
            stepsAsReference(w, layout!, initial, options, alphabet);
            const other: World = { ...w, config: { ...w.config, design: cell.without } };
            for (const command of alphabet) {
              if ((command.kind !== 'extend' && command.kind !== 'resume' && command.kind !== 'acquire' && command.kind !== 'release') || !enabled(w, command)) continue;
              if (shown(stepOrbits(w, command, fixed)) !== shown(stepOrbits(other, command, fixed))) reachedTerm.set(cell.label, reachedTerm.get(cell.label)! + 1);
            }
          }
        }),
        { seed, numRuns: 12 },
      );
    }
    // The property must reach what it is about: each term changes some step.
    for (const [label, n] of reachedTerm) expect(n, label).toBeGreaterThan(5);
  });

  it('explores as the reference alone does: the same states, transitions and shortest counterexamples', () => {
    const picked: ReadonlyArray<readonly [string, number]> = [
      ['redlock(5 nodes, none) / delay', 4],
      ['redlock(5 nodes, none) / clock-step', 4],
      ['redis-replicated(WAIT 1) / crash-restart', 5],
      ['etcd-lease / timing', 5],
      ['redis-single(none) / client-pause', 5],
      ['redlock(5 nodes, none) / timing', 4],
      ['redis-single(none) / timing', 5],
    ];
    for (const [label, depth] of picked) {
      const c = cells.find((x) => x.label === label)!;
      expect(c, label).toBeDefined();
      const packed = explore(c.initial, c.alphabet, { maxDepth: depth });
      const reference = explore(c.initial, c.alphabet, { maxDepth: depth, packed: false });
      const shape = (r: typeof packed): unknown => ({
        states: r.states,
        transitions: r.transitions,
        depth: r.depthCompleted,
        found: r.counterexamples.map((x) => [x.property, x.steps.length, x.violation.message, x.steps.map((s) => JSON.stringify(s.command))]),
      });
      expect(shape(packed), c.label).toEqual(shape(reference));
    }
  });
});
