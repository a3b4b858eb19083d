import { describe, expect, it } from 'vitest';
import type { StorePolicy } from '../model/index.ts';
import { brokenProperties, runScenario, SCENARIOS } from '../model/index.ts';

describe('scenario catalogue', () => {
  for (const scenario of SCENARIOS) {
    for (const [store, expected] of Object.entries(scenario.breaks) as Array<[StorePolicy, readonly string[]]>) {
      it(`${scenario.id} with a ${store} store breaks exactly ${expected.length ? expected.join(', ') : 'nothing'}`, () => {
        expect(brokenProperties(runScenario(scenario, store))).toEqual([...expected].sort());
      });
    }
  }

  const byId = (id: string) => SCENARIOS.find((s) => s.id === id)!;

  it('storage demo: token 1 pauses, token 2 writes, the late token-1 write is rejected and token 2 stays', () => {
    const run = runScenario(byId('storage-demo'), 'strict');
    expect(run.steps.map((s) => s.outcome)).toEqual([
      { kind: 'granted', token: 1n, validUntilMs: 10_000 - 102 },
      { kind: 'ok' },
      { kind: 'ok' },
      { kind: 'granted', token: 2n, validUntilMs: 15_000 + 10_000 - 102 },
      { kind: 'accepted' },
      { kind: 'ok' },
      { kind: 'value', value: 'ORDER_SETTLED_V2', token: 2n },
    ]);
    // The stale write reached the store and was turned away there, not by the client.
    const unfenced = runScenario(byId('storage-demo'), 'unfenced');
    expect(unfenced.steps.at(-1)!.outcome).toEqual({ kind: 'value', value: 'ORDER_STALE_OVERWRITE', token: 1n });
  });

  it('Redlock clock jump: both clients are granted while both leases are valid, and the higher token wins the store', () => {
    const run = runScenario(byId('redlock-clock-jump'), 'strict');
    const grants = run.steps.filter((s) => s.outcome.kind === 'granted').map((s) => s.outcome);
    expect(grants).toHaveLength(2);
    expect(run.violations.find((v) => v.property === 'MUTEX-1')?.message).toMatch(/clients 0 and 1 both hold/);
    expect(run.steps.at(-1)!.outcome).toEqual({ kind: 'rejected', highest: 2n });
  });

  it('Redlock crash-restart without persistence re-issues token 1; with AOF the second client is denied', () => {
    const lost = runScenario(byId('redlock-crash-restart'), 'strict');
    const tokens = lost.steps.flatMap((s) => (s.outcome.kind === 'granted' ? [s.outcome.token] : []));
    expect(tokens).toEqual([1n, 1n]);
    const kept = runScenario(byId('redlock-crash-restart-aof'), 'strict');
    expect(kept.steps.find((s) => s.command.kind === 'acquire' && s.command.client === 1)!.outcome).toEqual({ kind: 'denied', reason: 'held' });
  });
});
