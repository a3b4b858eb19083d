import { describe, expect, it } from 'vitest';
import type { BackendUnderTest, LockClient } from '../conformance/adapter.ts';
import { runLockstep } from '../conformance/index.ts';
import { consequenceOf } from '../conformance/consequence.ts';
import { implicated } from '../conformance/lockstep.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import { UnavailableError } from '../impl/errors.ts';
import type { Command, Outcome } from '../model/index.ts';
import { designs } from '../model/index.ts';
import { initialWorld } from '../model/state.ts';
import type { Branch } from '../model/world.ts';

/**
 * The lockstep's judgement at its edges, each pinned by a test because a
 * hand mutant of the engine there survived every other test
 * (docs/mutation.md, "The conformance engine by hand").
 */
const world = initialWorld({ design: designs.redisSingle(), store: 'strict', clients: 2, tokenBase: 0n });
const branch = (outcome: Outcome): Branch => ({ outcome, next: world, events: [] });
const acquire: Command = { kind: 'acquire', client: 0, resource: 'r', ttlMs: 10 };

describe('implicated: a deviation named by its consequence, at the boundaries', () => {
  it('a grant whose deadline is the client\'s now has no validity left: MUTEX-1, even with the model\'s token', () => {
    const allowed = [branch({ kind: 'granted', token: 1n, validUntilMs: 10 })];
    expect(implicated(acquire, allowed, { kind: 'granted', token: 1n, validUntilMs: 5 }, 5)).toBe('MUTEX-1');
    // One ms of validity left, shorter than the model's: the safe direction.
    expect(implicated(acquire, allowed, { kind: 'granted', token: 1n, validUntilMs: 6 }, 5)).toBe('LIVE-1');
  });

  it('an extension refused where the model refuses it too, for another reason, is the same refusal (safe), not a key of another owner changed', () => {
    const extend: Command = { kind: 'extend', client: 0, resource: 'r', ttlMs: 10 };
    const refused = [branch({ kind: 'not-extended', reason: 'no-quorum' })];
    const actual: Outcome = { kind: 'not-extended', reason: 'expired' };
    expect(implicated(extend, refused, actual, 0)).toBe('LIVE-1');
    expect(consequenceOf(implicated(extend, refused, actual, 0), extend, actual, [refused[0]!.outcome], 'deviation').kind).toBe('safe');
    // In flight across a pause, judged as the extend it is.
    const inFlight: Command = { kind: 'pause', client: 0, inFlight: extend };
    expect(implicated(inFlight, refused, actual, 0)).toBe('LIVE-1');
    // A refusal where the outcome may be unknown (the extension may have taken effect) is still named by the keys.
    expect(implicated(extend, [...refused, branch({ kind: 'timed-out' })], actual, 0)).toBe('OWN-1');
  });

  it('an extension claimed where the model has the lease over is named for what the client believes, not as a changed key', () => {
    const extend: Command = { kind: 'extend', client: 0, resource: 'r', ttlMs: 10 };
    const claimed: Outcome = { kind: 'extended', validUntilMs: 12 };
    const c = consequenceOf('OWN-1', { kind: 'pause', client: 0, inFlight: extend }, claimed, [{ kind: 'not-extended', reason: 'no-quorum' }], 'deviation');
    expect(c).toEqual({ kind: 'unsafe', what: "an extension claimed for a lease that is over: the client may act while another holds the lock (or the other's key was extended)" });
    // A key changed behind the model (its message names the key) is still that.
    expect(consequenceOf('OWN-1', extend, claimed, [{ kind: 'not-extended', reason: 'no-quorum' }], "node 0 should hold client 0's key on 'r' but holds nothing; then …")).toEqual({ kind: 'unsafe', what: 'a key of another owner changed' });
    expect(consequenceOf('OWN-1', extend, claimed, [claimed], 'the backend holds keys no model state allows')).toEqual({ kind: 'unsafe', what: 'a key of another owner changed' });
  });
});

describe('an UnavailableError is an unknown outcome only where the model has one', () => {
  it('a release that throws UnavailableError where the model has it done is LIVE-1 naming the error, not mapped to timed-out', async () => {
    const base = simLeaseBackend(designs.redisSingle(), 'strict');
    const failing: BackendUnderTest = {
      ...base,
      start: async (o) => {
        const instance = await base.start(o);
        const clients = instance.clients.map(
          (c): LockClient => ({
            acquire: c.acquire.bind(c),
            ...(c.extend ? { extend: c.extend.bind(c) } : {}),
            release: async (lease) => {
              await c.release(lease);
              throw new UnavailableError('release: the node did not answer');
            },
            store: c.store,
            clock: c.clock,
          }),
        );
        return { ...instance, clients };
      },
    };
    const report = await runLockstep(failing, [acquire, { kind: 'release', client: 0, resource: 'r' }], { clients: 2, tokenBase: 0n });
    expect(report.verdict).toMatchObject({
      kind: 'conformance-failure',
      property: 'LIVE-1',
      message: "client 0's release threw UnavailableError: release: the node did not answer, where the model has it done",
    });
  });
});

describe("a report's steps are the schedule's own commands", () => {
  it('every command, an operation in flight across a pause included, is the object the schedule holds (callers find steps by identity)', async () => {
    const schedule: Command[] = [
      { kind: 'acquire', client: 0, resource: 'r', ttlMs: 40 },
      { kind: 'pause', client: 0, inFlight: { kind: 'extend', client: 0, resource: 'r', ttlMs: 40 } },
      { kind: 'resume', client: 0 },
      { kind: 'pause', client: 1, inFlight: { kind: 'acquire', client: 1, resource: 'r', ttlMs: 40 } },
      { kind: 'resume', client: 1 },
    ];
    const report = await runLockstep(simLeaseBackend(designs.redisSingle(), 'strict'), schedule, { clients: 2, tokenBase: 0n });
    expect(report.verdict.kind).toBe('pass');
    expect(report.steps.map((s) => schedule.indexOf(s.command))).toEqual([0, 1, 2, 3, 4]);
  });
});

describe("a counter that does not start at the run's tokenBase", () => {
  it('fails at the first grant, and the message says where the model counts from and where an adapter gets it', async () => {
    // Found plugging a fenced lock into the kit: its counter started at 0, the message only said "FENCE-1 ... token 1; the model allows 99".
    const sim = simLeaseBackend(designs.redisSingle(), 'strict');
    const fromZero: BackendUnderTest = { ...sim, name: 'counter from zero', start: (o) => sim.start({ ...o, tokenBase: 0n }) };
    const r = await runLockstep(fromZero, [acquire], { clients: 1, tokenBase: 98n });
    expect(r.verdict.kind).toBe('conformance-failure');
    const failure = r.verdict as Extract<typeof r.verdict, { kind: 'conformance-failure' }>;
    expect(failure.property).toBe('FENCE-1');
    expect(failure.message).toContain("this run's tokenBase is 98: a fresh counter's first grant is tokenBase + 1");
    expect(failure.consequence.kind).toBe('unsafe');
    // A later grant off the model's token is no base matter: no such note there.
    const late = await runLockstep({ ...sim, name: 'skips', start: async (o) => {
      const i = await sim.start(o);
      let n = 0;
      return { ...i, clients: i.clients.map((c) => ({ ...c, acquire: async (res: string, opts: Parameters<LockClient['acquire']>[1]) => {
        const g = await c.acquire(res, opts);
        if (++n !== 2 || g.kind !== 'granted') return g;
        const { resource, owner, validUntilMs, signal } = g.lease;
        return { kind: 'granted' as const, lease: { resource, owner, token: 1n, validUntilMs, signal } };
      } })) };
    } }, [acquire, { kind: 'release', client: 0, resource: 'r' }, acquire], { clients: 1, tokenBase: 0n });
    expect(late.verdict.kind).toBe('conformance-failure');
    expect((late.verdict as { message: string }).message).toContain('the backend answered {kind:granted,token:1n');
    expect((late.verdict as { message: string }).message).not.toContain('tokenBase');
  });
});
