import { describe, expect, it } from 'vitest';
import { KNOWN_COUNTEREXAMPLES, knownVerdict } from '../cli/explore.ts';
import { exploreCell, MATRIX_ROWS } from '../model/index.ts';
import { lockcheckSync } from './lockcheckProcess.ts';

/**
 * A known counterexample the depth explored cannot reach is no disagreement with the spec; one reachable and
 * missed, or found with another length, is. (`explore --depth 4` said "3 disagreement(s)" and exited 1 for the
 * three published counterexamples of 5 and 6 steps.)
 */
const failover = KNOWN_COUNTEREXAMPLES.find((k) => k.row === 'redis-replicated(async)')!;
const row = MATRIX_ROWS.find((r) => r.label === failover.row)!;
const explore = (depth: number) => exploreCell(row, failover.store, failover.fault, { maxDepth: depth, maxStates: 1_000_000 });

describe('known counterexamples against the depth explored', () => {
  it('the failover double grant: 4 steps, so not reached at depth 3 and found at depth 4', () => {
    expect(failover.steps).toBe(4);
    const shallow = knownVerdict(explore(3), failover);
    expect(shallow).toEqual({ agrees: true, text: expect.stringMatching(/^not reached: its shortest schedule has 4 steps, this run completed depth 3/) });
    expect(knownVerdict(explore(4), failover)).toEqual({ agrees: true, text: 'found, 4 steps (MUTEX-1)' });
  });

  it('a different shortest length, or a reachable one missed, is a mismatch', () => {
    const cell = explore(4);
    expect(knownVerdict(cell, { ...failover, steps: 3 })).toEqual({ agrees: false, text: expect.stringMatching(/found with 4 steps, MISMATCH: its shortest schedule has 3/) });
    expect(knownVerdict(cell, { ...failover, property: 'LIVE-1' })).toEqual({ agrees: false, text: expect.stringMatching(/NOT FOUND to depth 4, MISMATCH/) });
  });

  it('lockcheck explore --depth 4 exits 0 and says which known counterexamples lie deeper', () => {
    const r = lockcheckSync(['explore', '--depth', '4', '--design', 'redlock'], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Redlock double grant under a clock jump on one node: not reached: its shortest schedule has 5 steps, this run completed depth 4/);
    expect(r.stdout).toMatch(/all scenarios agree with the spec; 2 of \d+ known counterexamples in scope beyond the depth explored/);
    expect(r.stdout).not.toMatch(/disagreement/);
  });

  it('lockcheck explore of cells no known counterexample is in says none was in scope, not that all were found', () => {
    const r = lockcheckSync(['explore', '--depth', '2', '--design', 'redis-single', '--fault', 'none'], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/none of the \d+ known counterexamples is in the cells explored/);
    expect(r.stdout).toMatch(/all scenarios agree with the spec; no known counterexample was in scope \(--design, --fault\), so none was looked for/);
    expect(r.stdout).not.toMatch(/all known counterexamples found/);
  });
});

describe('lockcheck explore reports a cell cut short as cut, and names a wrong design or fault class safely', () => {
  it('a cell --max-states stopped says "(cut)" in the table itself, not only "holds to k" (read as a search to --depth that found nothing)', () => {
    const r = lockcheckSync(['explore', '--depth', '6', '--max-states', '300', '--design', 'redis-single', '--fault', 'delay'], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.split('\n').filter((l) => l.startsWith('| redis-single('));
    expect(rows).toHaveLength(4);
    for (const row of rows) expect(row).toMatch(/\| holds to [0-5] \(cut\) \|$/);
    expect(r.stdout).toMatch(/"\(cut\)": --max-states, --seconds or the heap \(half its limit\) stopped the cell before depth 6/);
    // A cell explored to its depth has no mark.
    const whole = lockcheckSync(['explore', '--depth', '3', '--design', 'redis-single', '--fault', 'delay'], { timeoutMs: 120_000 });
    expect(whole.stdout).toMatch(/\| redis-single\(none\) \| unfenced \| holds to 3 \|/);
    expect(whole.stdout).not.toMatch(/\(cut\) \|/);
  });

  it('an unknown --design or --fault is shown escaped and cut short, with the name nearest it (a newline in it forged a line; a pasted file was echoed whole)', () => {
    const design = lockcheckSync(['explore', '--design', 'redlok\nlockcheck: all good'], { timeoutMs: 60_000 });
    expect(design.code).toBe(2);
    expect(design.stderr).toMatch(/no design 'redlok\\nlockcheck: all good' \(have redis-single, redlock/);
    expect(design.stderr).not.toMatch(/^lockcheck: all good/m);
    expect(lockcheckSync(['explore', '--design', 'redlok'], { timeoutMs: 60_000 }).stderr).toMatch(/no design 'redlok'; did you mean 'redlock'\?/);
    const fault = lockcheckSync(['explore', '--fault', `clock-stp${'x'.repeat(2000)}`], { timeoutMs: 60_000 });
    expect(fault.code).toBe(2);
    expect(fault.stderr).toMatch(/no fault class 'clock-stpx{28}\.\.\.'/);
    expect(fault.stderr.length).toBeLessThan(600);
    expect(lockcheckSync(['explore', '--fault', 'clock-stp'], { timeoutMs: 60_000 }).stderr).toMatch(/no fault class 'clock-stp'; did you mean 'clock-step'\?/);
  });
});
