import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { parseReplayWord, replayExplored, replayWord } from '../cli/exploreReplay.ts';
import { exploreCell, MATRIX_ROWS } from '../model/index.ts';
import { Links } from '../model/exploreLinks.ts';
import { lockcheckAsync, lockcheckSync } from './lockcheckProcess.ts';

/**
 * `lockcheck explore` as a user drives it: every counterexample it prints comes with the one command that replays it
 * on the model, step and branch as explored (it printed none: the commands alone replay each step's first branch,
 * which for the clock-step double grant is a denied acquire); --json carries the report whole; Ctrl-C leaves the
 * report of the cells completed.
 */
describe('lockcheck explore: replay, --json, interrupt', () => {
  it('every counterexample of a cell replays, from its replay word, to the same steps and the same violation', () => {
    // redlock(5 nodes, aof-always) under clock-drift is the none row's exploration, reported under its label (spec 8.4).
    const cells = [
      ['redis-single(none)', ['clock-step', 'crash-restart']],
      ['redis-replicated(async)', ['clock-step', 'crash-restart']],
      ['redlock(5 nodes, aof-always)', ['clock-drift']],
    ] as const;
    for (const [label, faults] of cells) {
      const row = MATRIX_ROWS.find((r) => r.label === label)!;
      for (const fault of faults) {
        const cell = exploreCell(row, 'unfenced', fault, { maxDepth: 5, maxStates: 100_000 });
        expect(cell.counterexamples.length).toBeGreaterThan(0);
        for (const ce of cell.counterexamples) {
          const path = ce.steps.map((s, i) => `${JSON.stringify(s.command)}#${ce.branches[i]}`);
          expect(ce.branches).toHaveLength(ce.steps.length);
          const word = replayWord(cell, ce);
          expect(word.startsWith(`${label}/unfenced/${fault}/${ce.property}/`)).toBe(true);
          const got = replayExplored(parseReplayWord(word));
          expect(got.steps.map((s) => s.outcome), path.join(' ')).toEqual(ce.steps.map((s) => s.outcome));
          expect(got.violation).toEqual({ property: ce.property, message: ce.violation.message });
        }
      }
    }
  });

  it('the links keep a branch index past 255 (they kept it in a byte: 300 read back as 44)', () => {
    const links = new Links();
    for (let i = 0; i < 5000; i++) links.push(i - 1, i % 7, i === 4500 ? 300 : i % 256);
    links.push(3, 1, 70_000);
    expect(links.branch[4500]).toBe(300);
    expect(links.branch[5000]).toBe(70_000);
    expect(links.branch[4499]).toBe(4499 % 256);
    expect(links.parent[4500]).toBe(4499);
  });

  it('explore --json gives each counterexample its replay command, which replays to the same violation (exit 1)', async () => {
    const r = lockcheckSync(['explore', '--design', 'redis-single', '--fault', 'clock-step', '--depth', '3', '--json'], { timeoutMs: 100_000 });
    expect(r.code, r.stderr).toBe(0);
    const report = JSON.parse(r.stdout) as { cells: Array<{ row: string; counterexamples: Array<{ property: string; violation: string; replay: string; replayWord: string; realServers: unknown }> }>; exitCode: number };
    expect(report.exitCode).toBe(0);
    const ce = report.cells.find((c) => c.row === 'redis-single(none)')!.counterexamples.find((c) => c.property === 'MUTEX-1')!;
    expect(ce.replay).toBe(`lockcheck explore --replay '${ce.replayWord}'`);
    // The built-in backend of the cell tries it first on real servers (a seed schedule), under the fault kinds it needs.
    expect(ce.realServers).toEqual({ backend: 'redis-single/unfenced', faults: ['clock-step'], command: 'lockcheck run --backend redis-single/unfenced --faults clock-step' });
    // A path this model cannot take is a usage error naming the step.
    const [replayed, bad] = await Promise.all([lockcheckAsync(['explore', '--replay', ce.replayWord]), lockcheckAsync(['explore', '--replay', ce.replayWord.replace(/\.\d+$/, '.9')])]);
    expect(replayed.code, replayed.stderr).toBe(1);
    expect(replayed.stdout).toContain(`violated: ${ce.violation}`);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--replay does not replay on this model .*path\[2\] branch must be an integer in \[0, 1\], got 9/);
  });

  it('Ctrl-C (SIGINT) ends the explorations at their last complete level and prints the report of the cells completed (exit 130)', async () => {
    const child = spawn(process.execPath, ['cli/lockcheck.mjs', 'explore', '--design', 'redlock', '--depth', '8', '--json'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 100_000 });
    let stdout = '';
    let stderr = '';
    let sent = false;
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      stderr += d;
      // The first cell reported: the interrupt comes with cells done and cells still to do.
      if (!sent && /\[\s*1\/54\]/.test(stderr)) {
        sent = true;
        child.kill('SIGINT');
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, stderr).toBe(130);
    const report = JSON.parse(stdout) as { interrupted: string; exitCode: number; cells: Array<{ explored: boolean; depthCompleted?: number }>; totals: { reported: number; cells: number } };
    expect(report.interrupted).toBe('SIGINT');
    expect(report.exitCode).toBe(130);
    expect(report.totals.cells).toBe(54);
    expect(report.totals.reported).toBeGreaterThanOrEqual(1);
    expect(report.totals.reported).toBeLessThan(54);
    expect(report.cells.filter((c) => c.explored)).toHaveLength(report.totals.reported);
    expect(report.cells[0]).toMatchObject({ explored: true, depthCompleted: 8 });
  });
});
