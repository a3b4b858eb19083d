import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { requestTimeoutArb, scheduleArb } from '../conformance/generate.ts';
import type { BackendUnderTest, LibraryContract, LockClient } from '../conformance/adapter.ts';
import { checkConformance } from '../conformance/check.ts';
import { runLockstep } from '../conformance/lockstep.ts';
import { replayFailOn } from '../cli/run.ts';
import type { RunReport } from '../conformance/verdict.ts';
import { MAX_NUMBER_TOKEN_BASE } from '../conformance/consequence.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import type { LockParts } from '../conformance/sim/backend.ts';
import { LeaseHandle } from '../impl/lease.ts';
import type { Lease } from '../impl/lease.ts';
import type { AcquireResult, ExtendResult } from '../impl/leaseLock.ts';
import { LeaseLock } from '../impl/leaseLock.ts';
import type { Command } from '../model/command.ts';
import type { Design } from '../model/design.ts';
import { designs } from '../model/design.ts';

/**
 * Library contracts (issue 10, item 4): every promise an adapter can declare
 * is judged by the model. For each one, a small in-memory library that keeps
 * it is not reported for it; the same library without the declaration is; and
 * a library that declares it but does otherwise is reported too.
 */

/** How the in-memory library behaves: one knob per promise a contract can declare. */
interface Behaviour {
  /** Its client learns a deadline (start + ttl - margin) or none. */
  readonly deadline: 'known' | 'none';
  /** The margin it subtracts for drift: ceil(factor * ttl) + fixedMs. */
  readonly margin: { readonly factor: number; readonly fixedMs: number };
  /** A refused extension: the lease kept or dropped (signal 'expired'), its keys kept or deleted. */
  readonly failedExtend: { readonly lease: 'kept' | 'dropped'; readonly keys: 'kept' | 'deleted' };
  /** What extend re-arms: the ttl it is given, or the one the lease was acquired with. */
  readonly refresh: 'given' | 'acquired';
  /** Gives up a round after this many ms of its clock; null: waits as long as the link does. */
  readonly timeoutMs: number | null;
  /** What its tokens go through: exact, none (0), JS numbers, or 32-bit floats (a library losing precision). */
  readonly tokens: 'bigint' | 'none' | 'number' | 'float32';
  /** It says why it refused (held, no quorum), or answers 'held' either way. */
  readonly denialReasons: boolean;
}

const LOCKCHECK_LIKE: Behaviour = { deadline: 'known', margin: { factor: 0.01, fixedMs: 2 }, failedExtend: { lease: 'kept', keys: 'kept' }, refresh: 'given', timeoutMs: null, tokens: 'bigint', denialReasons: true };

/** A lock library over the simulated nodes, written as small npm libraries are: one round per call, no write-back. */
function tinyLibrary(parts: LockParts, b: Behaviour): Pick<LockClient, 'acquire' | 'extend' | 'release'> {
  const { nodes, clock } = parts;
  const quorum = Math.floor(nodes.length / 2) + 1;
  const held = new Map<Lease, { readonly handle: LeaseHandle; readonly ttlMs: number }>();
  let ids = 0;
  /** One round on every node, settled as each answers (a failed node answers null), or cut short by the library's timeout. */
  const round = <T>(call: (i: number) => Promise<T>): Promise<Array<{ readonly v: T } | null>> => {
    const answers = Promise.all(nodes.map((_n, i) => call(i).then((v) => ({ v }), () => null)));
    if (b.timeoutMs === null) return answers;
    return new Promise((resolve) => {
      const cancel = clock.schedule(clock.now() + b.timeoutMs!, () => resolve(nodes.map(() => null)));
      void answers.then((a) => {
        cancel();
        resolve(a);
      });
    });
  };
  const margin = (ttlMs: number): number => Math.ceil(b.margin.factor * ttlMs) + b.margin.fixedMs;
  const token = (t: bigint): bigint =>
    b.tokens === 'none' ? 0n : b.tokens === 'number' ? BigInt(Number(t)) : b.tokens === 'float32' ? BigInt(Math.fround(Number(t))) : t;
  const deleteEverywhere = (resource: string, owner: string): Promise<unknown> => round((i) => nodes[i]!.release(resource, owner));
  return {
    async acquire(resource, { ttlMs }): Promise<AcquireResult> {
      const owner = `tiny-${parts.random().toString(36).slice(2)}-${ids++}`;
      const started = clock.now();
      const votes = await round((i) => nodes[i]!.acquire(resource, owner, ttlMs));
      const granted = votes.flatMap((a) => (a !== null && a.v !== null ? [a.v] : []));
      const validUntilMs = started + ttlMs - margin(ttlMs);
      if (votes.every((v) => v === null) && b.timeoutMs !== null) return { kind: 'timed-out' };
      if (granted.length >= quorum && (b.deadline === 'none' || clock.now() < validUntilMs)) {
        const highest = granted.reduce((x, y) => (y > x ? y : x));
        const handle = new LeaseHandle(resource, owner, token(highest), b.deadline === 'none' ? null : validUntilMs, clock);
        held.set(handle, { handle, ttlMs });
        return { kind: 'granted', lease: handle };
      }
      await deleteEverywhere(resource, owner);
      const answered = votes.filter((a) => a !== null).length;
      if (!b.denialReasons) return { kind: 'denied', reason: 'held' };
      return { kind: 'denied', reason: granted.length >= quorum ? 'validity-exhausted' : answered < quorum ? 'no-quorum' : 'held' };
    },
    async extend(lease, askedMs): Promise<ExtendResult> {
      const h = held.get(lease);
      if (h === undefined || h.handle.lost) return { kind: 'not-extended', reason: 'expired' };
      const ttlMs = b.refresh === 'acquired' ? h.ttlMs : askedMs;
      const started = clock.now();
      const yes = (await round((i) => nodes[i]!.extend(lease.resource, lease.owner, ttlMs))).filter((a) => a?.v === true).length;
      const validUntilMs = started + ttlMs - margin(ttlMs);
      if (yes >= quorum && (b.deadline === 'none' || clock.now() < validUntilMs)) {
        if (b.deadline === 'known') h.handle.extendTo(validUntilMs);
        return { kind: 'extended', validUntilMs: b.deadline === 'known' ? validUntilMs : clock.now() + ttlMs };
      }
      if (b.failedExtend.lease === 'dropped') {
        held.delete(lease);
        h.handle.lose('expired');
      }
      if (b.failedExtend.keys === 'deleted') await deleteEverywhere(lease.resource, lease.owner);
      return { kind: 'not-extended', reason: 'no-quorum' };
    },
    async release(lease) {
      const h = held.get(lease);
      held.delete(lease);
      h?.handle.lose('released');
      await deleteEverywhere(lease.resource, lease.owner);
    },
  };
}

/** The library as an audited backend: `contract` is what its adapter declares. */
function audited(design: Design, behaviour: Partial<Behaviour>, contract: LibraryContract, name: string): BackendUnderTest {
  const b: Behaviour = { ...LOCKCHECK_LIKE, ...behaviour };
  let parts: LockParts | null = null;
  const backend = simLeaseBackend(
    design,
    'unfenced',
    {
      lock: (p) => {
        parts = p;
        return new LeaseLock(p);
      },
      client: () => tinyLibrary(parts!, b),
    },
    name,
  );
  return { ...backend, capabilities: { ...backend.capabilities, tokens: b.tokens !== 'none' }, contract: { validatesInput: false, ...contract } };
}

/** Whether the run reported the library: it failed, or went past a deviation it recorded. */
function reported(r: RunReport): boolean {
  return r.verdict.kind === 'conformance-failure' || (r.deviations?.length ?? 0) > 0;
}

const failureOf = (r: RunReport): { property: string; kind: string } | null =>
  r.verdict.kind === 'conformance-failure' ? { property: r.verdict.property, kind: r.verdict.consequence.kind } : null;

describe('library contracts: each promise is declarable and judged', () => {
  it('no deadline known to the client: judged by consequence (another holder once the keys expired), not by the deadline formula', async () => {
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      { kind: 'advance', ms: 50 },
      { kind: 'write', client: 0, resource: 'r', value: 'late' },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 40 },
    ];
    const design = designs.redisSingle();
    const declared = await runLockstep(audited(design, { deadline: 'none' }, { deadline: 'none' }, 'no deadline'), schedule, { clients: 2, tokenBase: 0n });
    // Nothing it declared is a deviation; what follows from it is: client 1 gets the lock while client 0 still holds it.
    expect(declared.deviations).toBeUndefined();
    expect(declared.verdict.kind).toBe('property-violation');
    if (declared.verdict.kind === 'property-violation') expect(declared.verdict.violations.map((v) => v.property)).toEqual(['MUTEX-1']);
    // Undeclared, the same library reads as acting past lockcheck's deadline.
    const undeclared = await runLockstep(audited(design, { deadline: 'none' }, {}, 'no deadline, undeclared'), schedule, { clients: 2, tokenBase: 0n });
    expect(failureOf(undeclared)).toEqual({ property: 'MUTEX-1', kind: 'unsafe' });
    // Declared but its client does keep a deadline: the early loss signal is reported (the safe direction).
    const deviating = await runLockstep(audited(design, {}, { deadline: 'none' }, 'a deadline after all'), schedule, { clients: 2, tokenBase: 0n });
    expect(reported(deviating)).toBe(true);
  });

  it('no deadline and no request timeout: a late yes to an extend is read as the library reads it, extended (its consequence shows, not a deviation)', async () => {
    const design = designs.redisSingle();
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      // The refresh reaches the node at once (the key re-armed); its reply is read 50 ms later, after the key expired.
      { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r', ttlMs: 40 } },
      { kind: 'advance', ms: 50 },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 40 },
      { kind: 'resume', client: 0 },
    ];
    // The model gave up on the replies at the ttl (no-quorum), so the library's yes read as OWN-1, 'an extension claimed for a lease that is over'.
    const declared = await runLockstep(audited(design, { deadline: 'none' }, { deadline: 'none', clientTimeout: false }, 'no deadline, late refresh'), schedule, { clients: 2, tokenBase: 0n, continueAfterViolation: true });
    expect(declared.steps).toHaveLength(schedule.length);
    expect(failureOf(declared)).toBeNull();
    expect(declared.deviations).toBeUndefined();
    // What its contract costs: client 0 still believes it holds the lock client 1 was granted, after the extend too.
    expect(declared.verdict.kind).toBe('pass');
    expect(declared.steps.at(-1)!.actual).toMatchObject({ kind: 'extended' });
    expect(declared.findings.flatMap((f) => f.violations.map((v) => v.property))).toContain('MUTEX-1');
  });

  it('no client-side timeout: a call that waits on a black hole ends the run inconclusive, not as a finding', async () => {
    const design = designs.redisSingle();
    const hole: Command[] = [
      { kind: 'node-delay', node: 0, ms: 'never' },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
    ];
    const declared = await runLockstep(audited(design, {}, { clientTimeout: false }, 'no timeout'), hole, { clients: 1, tokenBase: 0n });
    expect(declared.verdict).toMatchObject({ kind: 'inconclusive', cause: 'no-client-timeout' });
    const undeclared = await runLockstep(audited(design, {}, {}, 'no timeout, undeclared'), hole, { clients: 1, tokenBase: 0n });
    expect(failureOf(undeclared)).toEqual({ property: 'LIVE-1', kind: 'liveness' });
    // Declared, but it gives up after 1 ms where the reply comes at 5 ms and the model grants.
    const slow: Command[] = [
      { kind: 'node-delay', node: 0, ms: 5 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
    ];
    expect((await runLockstep(audited(design, {}, { clientTimeout: false }, 'no timeout'), slow, { clients: 1, tokenBase: 0n })).verdict.kind).toBe('pass');
    const deviating = await runLockstep(audited(design, { timeoutMs: 1 }, { clientTimeout: false }, 'a timeout after all'), slow, { clients: 1, tokenBase: 0n });
    expect(reported(deviating)).toBe(true);
  });

  it('no client-side timeout: a checked audit draws no black hole and no request timeout for it (each could only stop its run unjudged)', () => {
    const faults = ['advance', 'delay', 'latency', 'slow-node'] as const;
    const schedules = fc.sample(scheduleArb({ design: designs.redisSingle(), faults, clients: 2, resources: 1, maxCommands: 40, lateReplies: false }), { numRuns: 200, seed: 1 });
    expect(schedules.flat().filter((c) => c.kind === 'node-delay' && c.ms === 'never')).toEqual([]);
    expect(schedules.flat().some((c) => c.kind === 'node-delay' && c.ms !== 0)).toBe(true);
    expect(fc.sample(requestTimeoutArb(faults, 5, false), { numRuns: 50, seed: 1 }).filter((t) => t !== undefined)).toEqual([]);
    // With a timeout of its own, both are drawn.
    expect(fc.sample(scheduleArb({ design: designs.redisSingle(), faults, clients: 2, resources: 1, maxCommands: 40 }), { numRuns: 200, seed: 1 }).flat().some((c) => c.kind === 'node-delay' && c.ms === 'never')).toBe(true);
    expect(fc.sample(requestTimeoutArb(faults, 5), { numRuns: 50, seed: 1 }).some((t) => t !== undefined)).toBe(true);
  });

  it("no reason for a refusal: a grant refused for want of a quorum is compared as a refusal, not as 'the same refusal, for another reason'", async () => {
    const design = designs.redlock({ nodes: 3 });
    const schedule: Command[] = [
      { kind: 'partition', client: 0, node: 1 },
      { kind: 'partition', client: 0, node: 2 },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
    ];
    const declared = await runLockstep(audited(design, { denialReasons: false }, { denialReasons: false }, 'no reasons'), schedule, { clients: 1, tokenBase: 0n });
    expect(declared.verdict.kind).toBe('pass');
    expect(declared.deviations).toBeUndefined();
    // Undeclared, its 'held' where the model has 'no-quorum' is reported (the safe direction).
    expect(reported(await runLockstep(audited(design, { denialReasons: false }, {}, 'no reasons, undeclared'), schedule, { clients: 1, tokenBase: 0n }))).toBe(true);
  });

  it('refresh re-arms a fixed ttl: extend is judged by the ttl the lease was acquired with', async () => {
    const design = designs.redisSingle();
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      { kind: 'advance', ms: 10 },
      { kind: 'extend', client: 0, resource: 'r', ttlMs: 100 },
      { kind: 'advance', ms: 50 },
      { kind: 'write', client: 0, resource: 'r', value: 'x' },
    ];
    const declared = await runLockstep(audited(design, { refresh: 'acquired' }, { refreshTtl: 'acquired' }, 'fixed ttl'), schedule, { clients: 1, tokenBase: 0n });
    expect(declared.verdict.kind).toBe('pass');
    expect(declared.deviations).toBeUndefined();
    // Undeclared: a deadline shorter than the model's (the safe direction), reported.
    expect(reported(await runLockstep(audited(design, { refresh: 'acquired' }, {}, 'fixed ttl, undeclared'), schedule, { clients: 1, tokenBase: 0n }))).toBe(true);
    // Declared, but it extends by the ttl it is asked for: longer than its contract allows.
    const deviating = await runLockstep(audited(design, { refresh: 'given' }, { refreshTtl: 'acquired' }, 'given ttl after all'), schedule, { clients: 1, tokenBase: 0n });
    expect(failureOf(deviating)).toEqual({ property: 'MUTEX-1', kind: 'unsafe' });
  });

  it('refresh re-arms a fixed ttl: so does an extend in flight across a pause (its key expires by the acquired ttl in the model too)', async () => {
    const design = designs.redisSingle();
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r', ttlMs: 100 } },
      { kind: 'advance', ms: 50 },
      { kind: 'resume', client: 0 },
    ];
    // Without the acquired ttl for the in-flight extend the model kept the key to t=100, and the key gone at t=50 read as OWN-1, unsafe.
    const declared = await runLockstep(audited(design, { refresh: 'acquired' }, { refreshTtl: 'acquired' }, 'fixed ttl, in flight'), schedule, { clients: 1, tokenBase: 0n });
    expect(failureOf(declared)).toBeNull();
    expect(declared.verdict.kind).toBe('pass');
  });

  it("refresh re-arms a fixed ttl: a saved schedule with such an extend replays as saved (the report's steps are the schedule's own commands)", async () => {
    // The model judges the extend by the acquired ttl; the step recorded the refitted copy, so a saved counterexample of
    // redis-semaphore (refreshTtl 'acquired') was refused at replay: "schedule.commands[1] ... is not a command the model can run".
    const design = designs.redisSingle();
    const backend = audited(design, { refresh: 'acquired' }, { refreshTtl: 'acquired' }, 'fixed ttl, replayed');
    const extend = { kind: 'extend', client: 0, resource: 'r', ttlMs: 100 } as const;
    for (const commands of [
      [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 }, { kind: 'advance', ms: 10 }, extend, { kind: 'advance', ms: 50 }],
      [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 }, { kind: 'pause', client: 0, inFlight: extend }, { kind: 'advance', ms: 50 }, { kind: 'resume', client: 0 }],
      // The same ttl as acquired: refitted to an equal copy, refused at replay as well.
      [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 }, { kind: 'pause', client: 0, inFlight: extend }, { kind: 'advance', ms: 1 }, { kind: 'resume', client: 0 }],
    ] satisfies Command[][]) {
      const report = await runLockstep(backend, commands, { clients: 1, tokenBase: 0n });
      expect(report.steps.map((s) => commands.indexOf(s.command as never))).toEqual(commands.map((_, i) => i));
      const replayed = await checkConformance(backend, { seed: 1, schedule: { commands, tokenBase: 0n } });
      expect(replayed.failure).toBeNull();
    }
  });

  describe('a failed extend drops the lease and deletes its keys', () => {
    const design = designs.redlock({ nodes: 3 });
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 },
      { kind: 'partition', client: 0, node: 0 },
      { kind: 'partition', client: 0, node: 1 },
      { kind: 'extend', client: 0, resource: 'r', ttlMs: 100 },
      { kind: 'write', client: 0, resource: 'r', value: 'x' },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 100 },
    ];
    const drops = { lease: 'dropped', keys: 'deleted' } as const;

    it('declared: agrees (the signal fires, the key on the node it reaches is gone, as the model has it)', async () => {
      const r = await runLockstep(audited(design, { failedExtend: drops, tokens: 'none' }, { tokens: 'none', failedExtend: drops }, 'drops'), schedule, { clients: 2, tokenBase: 0n });
      expect(r.verdict.kind).toBe('pass');
      expect(r.deviations).toBeUndefined();
      expect(r.steps[4]!.actual).toEqual({ kind: 'not-held' });
    });

    it('undeclared: its own key gone reads as a key changed behind the model (OWN-1)', async () => {
      const r = await runLockstep(audited(design, { failedExtend: drops, tokens: 'none' }, { tokens: 'none' }, 'drops, undeclared'), schedule, { clients: 2, tokenBase: 0n });
      expect(failureOf(r)?.property).toBe('OWN-1');
    });

    it('declared, but the library keeps the lease: its client acts on a lease its contract has dropped (unsafe)', async () => {
      const r = await runLockstep(audited(design, { tokens: 'none' }, { tokens: 'none', failedExtend: drops }, 'keeps after all'), schedule, { clients: 2, tokenBase: 0n });
      expect(failureOf(r)).toEqual({ property: 'MUTEX-1', kind: 'unsafe' });
    });

    it('keys deleted while the caller keeps its lease (redlock 4): declared, the model shows what follows, another holder', async () => {
      const kept = { lease: 'kept', keys: 'deleted' } as const;
      // Granted on nodes 1 and 2; the extend reaches node 2 only, fails, and deletes the key there: nodes 0 and 2 are free for client 1.
      const cut: Command[] = [
        { kind: 'partition', client: 0, node: 0 },
        { kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 },
        { kind: 'partition', client: 0, node: 1 },
        { kind: 'extend', client: 0, resource: 'r', ttlMs: 100 },
        { kind: 'acquire', client: 1, resource: 'r', ttlMs: 100 },
      ];
      const r = await runLockstep(audited(design, { failedExtend: kept, tokens: 'none' }, { tokens: 'none', failedExtend: kept }, 'deletes, keeps'), cut, { clients: 2, tokenBase: 0n });
      expect(r.deviations).toBeUndefined();
      expect(r.steps[4]!.actual.kind).toBe('granted');
      expect(r.verdict.kind).toBe('property-violation');
      if (r.verdict.kind === 'property-violation') expect(r.verdict.violations.map((v) => v.property)).toEqual(['MUTEX-1']);
    });
  });

  it('tokens as JS numbers: token counters start below 2^53 for it; a library losing precision below that is reported', async () => {
    const design = designs.redisSingle();
    const declared = await checkConformance(audited(design, { tokens: 'number' }, { tokens: 'number' }, 'number tokens'), { runs: 15, seed: 7, faults: ['advance'] });
    expect(declared.failure?.message ?? null).toBeNull();
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      { kind: 'release', client: 0, resource: 'r' },
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
    ];
    // Undeclared, counters may start anywhere below 2^63: a JS number rounds them.
    const undeclared = await runLockstep(audited(design, { tokens: 'number' }, {}, 'number tokens, undeclared'), schedule, { clients: 1, tokenBase: 2n ** 60n });
    expect(failureOf(undeclared)?.property).toBe('FENCE-1');
    // Declared, but the library loses precision below 2^53 too (its tokens go through a 32-bit float).
    const deviating = await runLockstep(audited(design, { tokens: 'float32' }, { tokens: 'number' }, 'float32 tokens'), schedule, { clients: 1, tokenBase: MAX_NUMBER_TOKEN_BASE });
    expect(failureOf(deviating)?.property).toBe('FENCE-1');
  });

  it('no tokens: not compared when declared, a finding when not', async () => {
    const design = designs.redisSingle();
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      { kind: 'release', client: 0, resource: 'r' },
      { kind: 'acquire', client: 1, resource: 'r', ttlMs: 40 },
    ];
    expect((await runLockstep(audited(design, { tokens: 'none' }, { tokens: 'none' }, 'no tokens'), schedule, { clients: 2, tokenBase: 0n })).verdict.kind).toBe('pass');
    const undeclared = await runLockstep({ ...audited(design, { tokens: 'none' }, {}, 'no tokens, undeclared'), capabilities: { ...designCapabilities() } }, schedule, { clients: 2, tokenBase: 0n });
    expect(failureOf(undeclared)?.property).toBe('FENCE-1');
  });

  it('its own drift margin: declared, the model uses it; a library subtracting less than it declares claims longer than allowed', async () => {
    const design = designs.redisSingle();
    const schedule: Command[] = [{ kind: 'acquire', client: 0, resource: 'r', ttlMs: 100 }];
    const margin = { factor: 0.05, fixedMs: 0, rounding: 'ceil' } as const;
    const declared = await runLockstep(audited(design, { margin: { factor: 0.05, fixedMs: 0 } }, { driftMargin: margin }, 'its margin'), schedule, { clients: 1, tokenBase: 0n });
    expect(declared.verdict.kind).toBe('pass');
    expect(declared.deviations).toBeUndefined();
    const deviating = await runLockstep(audited(design, { margin: { factor: 0.01, fixedMs: 0 } }, { driftMargin: margin }, 'less margin'), schedule, { clients: 1, tokenBase: 0n });
    expect(failureOf(deviating)).toEqual({ property: 'MUTEX-1', kind: 'unsafe' });
  });
});

/** The capabilities of a library whose adapter says its leases carry tokens. */
function designCapabilities(): BackendUnderTest['capabilities'] {
  return { store: 'unfenced', ttl: true, sessionBound: false, reentrant: false, tokens: true };
}

describe('replay of a library audit counterexample', () => {
  // A matrix cell whose worst deviation was in the safe direction saves that counterexample too (redis-semaphore timing:
  // an extension refused that the model grants). Replayed past the safe deviations, as an unsafe one is, it read
  // "the counterexample no longer fails" (exit 0) while the same failure showed at the same step.
  it('is run to its saved failure: past the safe deviations to an unsafe or liveness one, but to a safe one when that is what it saved', () => {
    const audit = { contract: { deadline: 'none' } } as const;
    const failure = (consequence: string) => ({ verdict: 'conformance-failure', consequence }) as const;
    expect(replayFailOn(failure('unsafe: a stale write landed'), audit)).toEqual({ failOn: { consequences: ['unsafe', 'liveness'] } });
    expect(replayFailOn(failure('liveness: a released key stays until its ttl'), audit)).toEqual({ failOn: { consequences: ['unsafe', 'liveness'] } });
    expect(replayFailOn(failure('safe: an early loss signal: an extension refused that the model grants'), audit)).toEqual({ failOn: 'conformance-failure' });
    expect(replayFailOn({ verdict: 'property-violation', consequence: null }, audit)).toEqual({ failOn: 'any' });
    expect(replayFailOn(failure('unsafe: a stale write landed'), {})).toEqual({});
  });
});
