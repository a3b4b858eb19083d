import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { checkHistory } from '../conformance/history/check.ts';
import type { History } from '../conformance/history/event.ts';
import { REDIS_SEMAPHORE_MUTEX_CONCURRENT } from '../conformance/adapters/redisSemaphore.ts';
import { concurrentOf } from '../conformance/stress/adapterRef.ts';
import { layoutOf, runStress, StressSession } from '../conformance/stress/runner.ts';
import { concurrent as crashing } from './fixtures/crashingAdapter.ts';
import { concurrent as malformed } from './fixtures/malformedConcurrent.ts';
import { concurrent as plain } from './fixtures/concurrentAdapter.ts';
import { concurrent as spawning } from './fixtures/spawningConcurrent.ts';
import { AdapterBreach, checkedAcquire } from '../conformance/stress/adapterBreach.ts';
import { checkStressOptions } from '../conformance/stress/runner.ts';
import { stressExit } from '../cli/stress.ts';
import { faultsNotStruck, judgeRecording, unobserved } from '../conformance/stress/observed.ts';
import { LeaseHandle } from '../impl/index.ts';
import { systemClock } from '../impl/clock.ts';

/**
 * Concurrent clients of adapters (BackendUnderTest.concurrent): a library
 * audit's client and a user's adapter module, each in real client processes
 * on real servers, recorded and judged like the built-in backends.
 */
const SEED = Number(process.env['LOCKCHECK_SEED'] ?? 20161010);

describe('lockcheck stress with an adapter\'s concurrent client', () => {
  it('redis-semaphore Mutex (no deadline, no tokens): a holder paused past its lockTimeout keeps believing it holds, and its write loses another client\'s update', async () => {
    const client = REDIS_SEMAPHORE_MUTEX_CONCURRENT;
    const run = await runStress({
      backend: layoutOf(client),
      adapter: { name: 'lib:redis-semaphore@5.8.0/Mutex', ref: { kind: 'library', library: 'redis-semaphore-mutex' }, client },
      clients: 3,
      seconds: 15,
      nemesis: ['pause-holder'],
      maxFaults: 1,
      seed: SEED,
      store: 'unfenced',
      resources: 1,
      ttlMinMs: 200,
      ttlMaxMs: 300,
    });
    const replay = `LOCKCHECK_SEED=${SEED}`;
    expect(run.clientErrors, replay).toEqual([]);
    const history: History = [{ type: 'meta', store: 'unfenced' }, ...run.history];
    const report = checkHistory(history, { storePolicy: 'unfenced' });
    // Recorded: grants of the library's own keys, with no token and no deadline (the library gives its caller neither).
    const grants = run.history.filter((e) => e.type === 'ok' && 'op' in e && e.op === 'acquire');
    expect(grants.length, replay).toBeGreaterThan(1);
    expect(grants.every((g) => !('token' in g) && !('validUntil' in g)), replay).toBe(true);
    // The strike resumed the holder only after another client had written the register: its write overwrote that one.
    const strike = run.history.find((e) => e.process === 'nemesis' && e.type === 'ok' && 'fault' in e && e.fault === 'pause-client');
    expect(strike !== undefined && 'detail' in strike ? strike.detail : '', replay).toMatch(/another client wrote/);
    expect(report.counts.lostUpdates, replay).toBeGreaterThan(0);
    expect(report.counts.overlappingHolds, replay).toBeGreaterThan(0);
    expect(report.checks.find((c) => c.check === 'token-order')?.verdict, replay).toBe('skipped');
    expect(report.verdict, replay).toBe('violation');
  }, 90_000);

  it('an adapter module through the CLI: `lockcheck stress --backend ./module.ts` runs its concurrent client in client processes and judges the history', () => {
    const out = mkdtempSync(join(tmpdir(), 'lockcheck-stress-module-'));
    try {
      const r = spawnSync(
        process.execPath,
        ['cli/lockcheck.mjs', 'stress', '--backend', './test/fixtures/concurrentAdapter.ts', '--clients', '2', '--seconds', '2', '--resources', '2', '--ttl', '2000-3000', '--json', '--out', out],
        { encoding: 'utf8', timeout: 120_000 },
      );
      expect(r.status, r.stderr).toBe(0);
      const summary = JSON.parse(r.stdout) as { backend: string; verdict: string; operations: number; holds: number; clientErrors: string[] };
      expect(summary.backend).toBe('tiny-redis-lease');
      expect(summary.clientErrors).toEqual([]);
      expect(summary.holds).toBeGreaterThan(0);
      expect(summary.verdict).toBe('safe');
      expect(readFileSync(join(out, 'history.jsonl'), 'utf8')).toMatch(/"op":"acquire"/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 150_000);

  it('a client process the library crashes in one run is reported there and replaced before the next, which records its operations again', async () => {
    const session = await StressSession.start({ backend: 'redis-single', clients: 1, fakeClocks: false, proxied: false });
    try {
      const adapter = { name: 'crashing fixture', ref: { kind: 'module', path: fileURLToPath(new URL('./fixtures/crashingAdapter.ts', import.meta.url)) } as const, client: crashing };
      const options = { adapter, seconds: 1, nemesis: [], seed: SEED, store: 'unfenced', resources: 1, ttlMinMs: 200, ttlMaxMs: 300, maxCycles: 3 } as const;
      const first = await session.run(options);
      // Reported: a finding about the library (it crashes its process), with the process's own last word.
      expect(first.clientErrors).toHaveLength(1);
      expect(first.clientErrors[0]).toMatch(/^client 0: its process exited \(code 1\): Error: Connection terminated unexpectedly/);
      const second = await session.run(options);
      expect(second.clientErrors).toEqual([]);
      // The fresh process took part: it was granted the lock and released it.
      expect(second.history.filter((e) => e.type === 'ok' && 'op' in e && (e.op === 'acquire' || e.op === 'release') && e.process === 0).length).toBeGreaterThan(1);
    } finally {
      await session.stop();
    }
  }, 90_000);

  it('an answer of the wrong shape is the adapter\'s error: the run reports it apart from the library\'s failures, and the next run is clean', async () => {
    const session = await StressSession.start({ backend: 'redis-single', clients: 1, fakeClocks: false, proxied: false });
    try {
      const adapter = { name: 'malformed fixture', ref: { kind: 'module', path: fileURLToPath(new URL('./fixtures/malformedConcurrent.ts', import.meta.url)) } as const, client: malformed };
      const options = { adapter, seconds: 1, nemesis: [], seed: SEED, store: 'unfenced', resources: 1, ttlMinMs: 200, ttlMaxMs: 300, maxCycles: 3 } as const;
      const first = await session.run(options);
      expect(first.clientErrors).toEqual([]);
      expect(first.adapterErrors).toEqual(["client 0: acquire('s0-r0') resolved a grant without a lease: it must resolve { kind: 'granted', lease } | { kind: 'denied', reason } | { kind: 'timed-out' } (docs/adapter.md)"]);
      // The grant was never recorded: its invoke stays pending, nothing else of the client's.
      expect(first.history.filter((e) => e.process === 0).map((e) => e.type)).toEqual(['invoke']);
      const second = await session.run(options);
      expect([second.adapterErrors, second.clientErrors]).toEqual([[], []]);
    } finally {
      await session.stop();
    }
  }, 90_000);

  it('through the CLI, an adapter that broke its contract is exit 2 with the breach named, not SAFE and 0; the exit codes rank a violation first', () => {
    const out = mkdtempSync(join(tmpdir(), 'lockcheck-stress-malformed-'));
    try {
      const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'stress', '--backend', './test/fixtures/malformedConcurrent.ts', '--clients', '1', '--seconds', '1', '--resources', '1', '--ttl', '200-300', '--out', out], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(2);
      // No lease was granted: nothing observed either (UNKNOWN), and the breach named.
      expect(r.stdout).toMatch(/: UNKNOWN \(nothing observed: no client was granted a lease, so no hold was judged\) \(not a verdict on the library: the adapter broke its contract, below\)/);
      expect(r.stdout).toContain("adapter error: client 0: acquire('s0-r0') resolved a grant without a lease");
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    const summary = { verdict: 'safe', adapterErrors: [], clientErrors: [], operations: 5 } as const;
    expect(stressExit(summary)).toBe(0);
    expect(stressExit({ ...summary, adapterErrors: ['x'] })).toBe(2);
    expect(stressExit({ ...summary, verdict: 'violation', adapterErrors: ['x'] })).toBe(1);
    expect(stressExit({ ...summary, clientErrors: ['x'], operations: 0 })).toBe(3);
    expect(stressExit({ ...summary, clientErrors: ['x'] })).toBe(0);
  }, 150_000);

  it('a run that observed nothing is no SAFE: no client operation, no lease granted, or a nemesis that never struck, is UNKNOWN with the reason (exit 4)', () => {
    const out = mkdtempSync(join(tmpdir(), 'lockcheck-stress-denied-'));
    try {
      const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'stress', '--backend', './test/fixtures/denyingConcurrent.ts', '--clients', '1', '--seconds', '1', '--resources', '1', '--ttl', '200-300', '--nemesis', 'pause-holder', '--json', '--out', out], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(4);
      const s = JSON.parse(r.stdout) as { verdict: string; unobserved: string | null; holds: number; operations: number; faults: number };
      expect(s).toMatchObject({ verdict: 'unknown', unobserved: 'no client was granted a lease, so no hold was judged', holds: 0, faults: 0 });
      expect(s.operations).toBeGreaterThan(0);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
    // No client connected: no operation at all. The summary and the client errors, exit 3, not checkHistory's refusal thrown as a bug (exit 4 with a stack).
    const none = mkdtempSync(join(tmpdir(), 'lockcheck-stress-unconnectable-'));
    try {
      const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'stress', '--backend', './test/fixtures/unconnectableConcurrent.ts', '--clients', '1', '--seconds', '1', '--out', none], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(3);
      expect(r.stdout).toMatch(/: UNKNOWN \(nothing observed: no client operation was recorded\)/);
      expect(r.stdout).toContain('client error: client 0: connect ECONNREFUSED (unconnectable fixture)');
      expect(r.stderr).not.toMatch(/unexpected error/);
    } finally {
      rmSync(none, { recursive: true, force: true });
    }
    expect(judgeRecording([{ type: 'meta', store: 'unfenced' }], 'unfenced')).toMatchObject({ verdict: 'unknown', counts: { operations: 0, holds: 0 } });
    expect(unobserved({ operations: 0, holds: 0, nemesis: [], faultsStruck: [] })).toBe('no client operation was recorded');
    expect(unobserved({ operations: 9, holds: 3, nemesis: ['pause-holder', 'kill-server'], faultsStruck: [] })).toBe('the nemesis (pause-holder, kill-server) never struck: 0 faults injected');
    expect(unobserved({ operations: 9, holds: 3, nemesis: ['pause-holder', 'kill-server'], faultsStruck: ['kill-server'] })).toBeNull();
    expect(faultsNotStruck({ operations: 9, holds: 3, nemesis: ['pause-holder', 'kill-server'], faultsStruck: ['kill-server'] })).toEqual(['pause-holder']);
    expect(unobserved({ operations: 9, holds: 3, nemesis: [], faultsStruck: [] })).toBeNull();
  }, 150_000);

  it('an adapter whose close() never settles: the breach that stopped its client is reported, not a cycle never finished (the client was killed 30 s later and its reason lost)', () => {
    const out = mkdtempSync(join(tmpdir(), 'lockcheck-stress-hanging-close-'));
    try {
      const r = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'stress', '--backend', './test/fixtures/hangingCloseConcurrent.ts', '--clients', '1', '--seconds', '1', '--resources', '1', '--out', out], { encoding: 'utf8', timeout: 120_000 });
      expect(r.status, r.stderr).toBe(2);
      expect(r.stdout).toContain("adapter error: client 0: acquire('s0-r0') resolved a grant without a lease");
      expect(r.stdout).not.toMatch(/did not finish its cycle|client error/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 150_000);

  it('a process an adapter starts in a client ends with that client: nothing of the run is left running', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'lockcheck-stress-spawn-'));
    const pidFile = join(dir, 'pids');
    const before = process.env['LOCKCHECK_SPAWN_PIDS'];
    process.env['LOCKCHECK_SPAWN_PIDS'] = pidFile;
    // Running, not a zombie its new parent has yet to reap (this machine's init reaps late).
    const alive = (pid: number): boolean => {
      try {
        return !/^\d+ \(.*\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
      } catch {
        return false;
      }
    };
    let pids: number[] = [];
    try {
      const session = await StressSession.start({ backend: 'redis-single', clients: 2, fakeClocks: false, proxied: false });
      try {
        const adapter = { name: 'spawning fixture', ref: { kind: 'module', path: fileURLToPath(new URL('./fixtures/spawningConcurrent.ts', import.meta.url)) } as const, client: spawning };
        const run = await session.run({ adapter, seconds: 1, nemesis: [], seed: SEED, store: 'unfenced', resources: 1, ttlMinMs: 200, ttlMaxMs: 300, maxCycles: 2 });
        expect([run.clientErrors, run.adapterErrors]).toEqual([[], []]);
        pids = readFileSync(pidFile, 'utf8').trim().split('\n').map(Number);
        expect(pids).toHaveLength(2);
        expect(pids.every(alive)).toBe(true);
      } finally {
        await session.stop();
      }
      // SIGKILLed as their clients exited; the signal lands a moment later (bounded wait, checked every 20 ms).
      const deadline = Date.now() + 5_000;
      while (pids.some(alive) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(pids.filter(alive)).toEqual([]);
    } finally {
      for (const pid of pids.filter(alive)) process.kill(pid, 'SIGKILL');
      if (before === undefined) delete process.env['LOCKCHECK_SPAWN_PIDS'];
      else process.env['LOCKCHECK_SPAWN_PIDS'] = before;
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('checkedAcquire: every answer ConcurrentLock.acquire promises passes; every other shape is AdapterBreach naming it', () => {
    const lease = new LeaseHandle('r', 'o', 7n, 1000, systemClock);
    for (const good of [{ kind: 'granted', lease }, { kind: 'denied', reason: 'held' }, { kind: 'timed-out' }, { kind: 'granted', lease: new LeaseHandle('r', 'o', 0n, null, systemClock) }]) expect(checkedAcquire(good, 'r', true)).toBe(good);
    const bad: ReadonlyArray<readonly [unknown, RegExp]> = [
      [undefined, /resolved undefined/],
      [null, /resolved null/],
      ['granted', /resolved a string/],
      [{ kind: 'ok' }, /an unknown kind "ok"/],
      [{ kind: 'granted' }, /a grant without a lease/],
      [{ kind: 'denied' }, /a denial without a reason string/],
      [{ kind: 'granted', lease: new LeaseHandle('other', 'o', 7n, 1000, systemClock) }, /a lease for another resource \("other"\)/],
      [{ kind: 'granted', lease: { resource: 'r', owner: '', token: 7n, validUntilMs: 1, signal: lease.signal } }, /without an owner/],
      [{ kind: 'granted', lease: { resource: 'r', owner: 'o', token: 7, validUntilMs: 1, signal: lease.signal } }, /token is not a bigint in \[0, 2\^63-1\] \(got number/],
      [{ kind: 'granted', lease: { resource: 'r', owner: 'o', token: 2n ** 63n, validUntilMs: 1, signal: lease.signal } }, /got 9223372036854775808n/],
      [{ kind: 'granted', lease: { resource: 'r', owner: 'o', token: 7n, validUntilMs: Number.NaN, signal: lease.signal } }, /validUntilMs is neither/],
      [{ kind: 'granted', lease: { resource: 'r', owner: 'o', token: 7n, validUntilMs: 1 } }, /without an AbortSignal/],
    ];
    for (const [answer, message] of bad) {
      let thrown: unknown;
      try {
        checkedAcquire(answer, 'r', true);
      } catch (e) {
        thrown = e;
      }
      expect(thrown, String(message)).toBeInstanceOf(AdapterBreach);
      expect((thrown as Error).message).toMatch(message);
    }
    // Without tokens, the token is not read.
    expect(() => checkedAcquire({ kind: 'granted', lease: { resource: 'r', owner: 'o', token: undefined, validUntilMs: null, signal: lease.signal } }, 'r', false)).not.toThrow();
  });

  it('a concurrent declaration with a misspelt key is refused naming the nearest; clock-step-holder needs the adapter\'s lockKey', () => {
    expect(() => concurrentOf({ concurrent: { ...plain, token: false } }, './x.ts')).toThrow(`'./x.ts': concurrent: unknown option "token" (did you mean tokens?); known: servers, connect, lockKey, tokens`);
    expect(() => concurrentOf({ concurrent: { ...plain, servers: { kind: 'redis', nodes: 1, node: 2 } } }, './x.ts')).toThrow(/concurrent\.servers: unknown option "node" \(did you mean nodes\?\)/);
    const { lockKey: _lockKey, ...keyless } = plain;
    const adapter = { name: 'keyless', ref: { kind: 'module', path: '/x.ts' } as const, client: keyless };
    const run = { adapter, seconds: 1, seed: 1, store: 'unfenced', resources: 1, ttlMinMs: 200, ttlMaxMs: 300 } as const;
    expect(() => checkStressOptions('redis-single', { ...run, nemesis: ['clock-step-holder'] })).toThrow(/clock-step-holder: keyless's concurrent client declares no lockKey/);
    expect(() => checkStressOptions('redis-single', { ...run, nemesis: ['pause-holder'] })).not.toThrow();
  });

  it('a module without a concurrent client, or with a malformed one, is refused with what to add', () => {
    expect(() => concurrentOf({ default: { name: 'x' } }, './x.ts')).toThrow(/offers no concurrent client: give its backend a `concurrent` member/);
    expect(() => concurrentOf({ default: () => ({}) }, './x.ts')).toThrow(/exported by name \(`export const concurrent`\)/);
    expect(() => concurrentOf({ concurrent: { servers: { kind: 'redis', nodes: 3 }, connect: () => null } }, './x.ts')).toThrow(/nodes: 1 \| 5/);
    expect(concurrentOf({ concurrent: REDIS_SEMAPHORE_MUTEX_CONCURRENT }, './x.ts')).toBe(REDIS_SEMAPHORE_MUTEX_CONCURRENT);
  });
});
