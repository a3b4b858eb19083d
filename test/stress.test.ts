import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectOneStrikeAfterAnotherWrite, expectStaleWriteRejected, expectUpdateLost, judgedStress, pauseHolder, SEED } from './pauseHolderStress.ts';

/**
 * lockcheck stress on real servers and real client processes. Each test
 * asserts what its fault makes certain, not what timing might bring: the
 * targeted nemesis pauses a client that holds a lease, between its read and
 * its write, until its lease has expired and another client has written the
 * register (it records that it saw that write before resuming it). The run
 * stops after that one strike (maxFaults), bounded by `seconds`.
 */
const base = pauseHolder('redis-single', 200, 300);

describe('lockcheck stress (real redis-server, real client processes)', () => {
  it('redis-single, unfenced: a holder paused between its read and its write past its ttl loses another client\'s update (STORE-1)', async () => {
    const run = await judgedStress(base);
    expectOneStrikeAfterAnotherWrite(run);
    expectUpdateLost(run);
  }, 90_000);

  it('redis-single, strict fenced store: the same pause writes nothing stale (FENCE-2): the store rejects the write', async () => {
    const run = await judgedStress({ ...base, store: 'strict' });
    expectOneStrikeAfterAnotherWrite(run);
    expectStaleWriteRejected(run);
  }, 90_000);

  it('strike after strike, the nemesis leaves no wait behind: no MaxListenersExceededWarning on its stop signal', async () => {
    // Each strike used to leave its fault window's sleep pending (a timer and a listener on the stop signal) for up to 5 ttls + 10 s: 11 at once warned.
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(`${w.name}: ${w.message}`);
    process.on('warning', onWarning);
    try {
      // The run ends at its 14th strike (about 12 s under load); its 80 s leave a loaded machine room for the 12 asked.
      const { result, strikes, replay } = await judgedStress({ ...base, clients: 4, resources: 2, seconds: 80, maxFaults: 14 });
      expect(result.clientErrors, replay).toEqual([]);
      expect(strikes.length, replay).toBeGreaterThanOrEqual(12);
    } finally {
      process.off('warning', onWarning);
    }
    expect(warnings.filter((w) => w.startsWith('MaxListenersExceededWarning'))).toEqual([]);
  }, 180_000);

  it('with no faults the concurrent history is safe', async () => {
    const { result, report, replay } = await judgedStress({ ...base, nemesis: [], seconds: 2, maxFaults: undefined, resources: 2, ttlMinMs: 2_000, ttlMaxMs: 5_000 });
    expect(result.clientErrors, replay).toEqual([]);
    expect(report.counts.operations, replay).toBeGreaterThan(0);
    expect(report.findings, replay).toEqual([]);
    expect(report.verdict, replay).toBe('safe');
  }, 90_000);
});

describe('lockcheck stress: bad usage', () => {
  const cli = (args: string[]) => spawnSync(process.execPath, ['cli/lockcheck.mjs', 'stress', ...args], { encoding: 'utf8', timeout: 60_000 });
  it('interrupted (Ctrl-C) mid-run: the history so far is saved beside (not over) an earlier complete one, marked interrupted, and check judges it; it ends by the signal', async () => {
    const out = mkdtempSync(join(tmpdir(), 'lockcheck-stress-int-'));
    try {
      // An earlier complete run's files: an interrupt replaced them (history.jsonl overwritten, history.html removed), found by an audit.
      const earlier = { jsonl: '{"type":"meta","store":"unfenced"}\n', html: '<p>the earlier run</p>\n' };
      writeFileSync(join(out, 'history.jsonl'), earlier.jsonl);
      writeFileSync(join(out, 'history.html'), earlier.html);
      // Interrupted once the progress line shows events recorded (it comes every 5 s): a signal mid-run, not at its start.
      const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'stress', '--backend', 'redis-single', '--clients', '2', '--seconds', '120', '--seed', String(SEED), '--out', out, '--json'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 150_000 });
      let stderr = '';
      let stdout = '';
      let sent = false;
      child.stderr.setEncoding('utf8').on('data', (d: string) => {
        stderr += d;
        if (!sent && /: \d+ s, [1-9]\d* events, /.test(stderr)) {
          sent = true;
          child.kill('SIGINT');
        }
      });
      child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
      const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on('close', (_code, s) => resolve(s)));
      expect(signal, stderr).toBe('SIGINT');
      expect({ jsonl: readFileSync(join(out, 'history.jsonl'), 'utf8'), html: readFileSync(join(out, 'history.html'), 'utf8') }).toEqual(earlier);
      const file = join(out, 'history.partial.jsonl');
      expect(stderr).toMatch(new RegExp(`the history so far \\((\\d+) events\\) is in ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
      expect(existsSync(file)).toBe(true);
      // --json: stdout says the run was stopped, with no verdict, and where its history is (it printed nothing).
      expect(JSON.parse(stdout)).toMatchObject({ interrupted: 'SIGINT', verdict: null, historyFile: file, events: expect.any(Number) as number });
      const lines = readFileSync(file, 'utf8').trim().split('\n');
      expect(JSON.parse(lines[0]!)).toMatchObject({ type: 'meta', store: 'unfenced', description: expect.stringMatching(/--backend redis-single .*\(interrupted\)$/) as string });
      expect(lines.length).toBeGreaterThan(1);
      const judged = spawnSync(process.execPath, ['cli/lockcheck.mjs', 'check', file], { encoding: 'utf8', timeout: 60_000 });
      expect([0, 1], judged.stderr).toContain(judged.status);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 180_000);

  it('exits 2 with a message naming the problem, before starting anything', () => {
    const unknown = cli(['--backend', 'nope']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toMatch(/unknown stress backend 'nope' \(--backend takes one of redis-single/);
    const wrongFault = cli(['--backend', 'pg-session', '--nemesis', 'clock-step']);
    expect(wrongFault.status).toBe(2);
    expect(wrongFault.stderr).toMatch(/advisory locks have no expiry/);
  }, 90_000);
});
