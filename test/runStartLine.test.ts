/**
 * `run` and `replay` on servers of their own say so at once, as stress and
 * failover do ("[0.0 s] ...: starting servers"): starting PostgreSQL or
 * ZooKeeper and the first run took 5-11 s with nothing printed, which reads
 * as a hang (found by an audit). The line comes first, before the first
 * run's progress; a backend that names nothing gets its refusal alone.
 */
import { describe, expect, it } from 'vitest';
import { lockcheckAsync } from './lockcheckProcess.ts';

describe('run: the start-up line', () => {
  it('is the first line on stderr, before the first run\'s progress', async () => {
    const r = await lockcheckAsync(['run', '--backend', 'redis-single/unfenced', '--runs', '1']);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stderr.split('\n');
    expect(lines[0]).toBe('[0.0 s] redis-single/unfenced: starting servers');
    expect(lines[1]).toMatch(/^redis-single\/unfenced: run 1\/1/);
  }, 120_000);

  it('is not printed for a backend that names nothing: its refusal comes alone', async () => {
    const r = await lockcheckAsync(['run', '--backend', 'redis-singel/strict']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^lockcheck: unknown backend 'redis-singel\/strict'/);
  }, 120_000);
});
