import { describe, expect, it } from 'vitest';
import type { BackendUnderTest, LockClient } from '../conformance/adapter.ts';
import { runLockstep } from '../conformance/index.ts';
import { simLeaseBackend } from '../conformance/sim/backend.ts';
import type { Lease } from '../impl/lease.ts';
import type { Command } from '../model/index.ts';
import { designs } from '../model/index.ts';

/**
 * Tokens compared by order (Capabilities.tokensComparedBy 'order', the etcd
 * row: a cluster revision moves at events the model does not count): any
 * order-preserving renaming of the tokens agrees with the model, store
 * replies included; a token that does not exceed the earlier ones fails.
 */
function retokened(backend: BackendUnderTest, rename: (token: bigint) => bigint): BackendUnderTest {
  return {
    ...backend,
    name: `${backend.name} (tokens renamed)`,
    capabilities: { ...backend.capabilities, tokensComparedBy: 'order' },
    start: async (o) => {
      const instance = await backend.start(o);
      const clients = instance.clients.map((c): LockClient => {
        const original = new Map<Lease, Lease>();
        const wrap = (l: Lease): Lease => {
          const w: Lease = {
            resource: l.resource,
            owner: l.owner,
            token: rename(l.token),
            get validUntilMs() {
              return l.validUntilMs;
            },
            get signal() {
              return l.signal;
            },
          };
          original.set(w, l);
          return w;
        };
        const extend = c.extend?.bind(c);
        return {
          acquire: async (resource, options) => {
            const r = await c.acquire(resource, options);
            return r.kind === 'granted' ? { kind: 'granted', lease: wrap(r.lease) } : r;
          },
          ...(extend !== undefined ? { extend: (l: Lease, ttlMs: number) => extend(original.get(l) ?? l, ttlMs) } : {}),
          release: (l) => c.release(original.get(l) ?? l),
          store: c.store,
          clock: c.clock,
        };
      });
      return { clients, env: instance.env, close: () => instance.close() };
    },
  };
}

const r = 'r0';
const schedule: Command[] = [
  { kind: 'acquire', client: 0, resource: r, ttlMs: 50 },
  { kind: 'write', client: 0, resource: r, value: 'a' },
  { kind: 'release', client: 0, resource: r },
  { kind: 'acquire', client: 1, resource: r, ttlMs: 50 },
  { kind: 'write', client: 1, resource: r, value: 'b' },
  { kind: 'write', client: 0, resource: r, value: 'stale' },
  { kind: 'read', client: 1, resource: r },
];

describe('tokens compared by order', () => {
  const base = simLeaseBackend(designs.redisSingle(), 'strict');
  it('an order-preserving renaming (revision-like gaps) agrees with the model, the store\'s replies renamed back', async () => {
    const report = await runLockstep(retokened(base, (t) => t * 10n + 7n), schedule, { clients: 2, tokenBase: 100n });
    expect(report.verdict).toEqual({ kind: 'pass' });
    expect(report.steps.at(-1)?.actual).toEqual({ kind: 'value', value: 'b', token: 102n });
  });

  it('a grant whose token does not exceed the earlier ones fails FENCE-1', async () => {
    const report = await runLockstep(retokened(base, () => 5n), schedule, { clients: 2, tokenBase: 100n });
    expect(report.verdict.kind).toBe('conformance-failure');
    expect(report.verdict.kind === 'conformance-failure' ? report.verdict.property : null).toBe('FENCE-1');
  });
});
