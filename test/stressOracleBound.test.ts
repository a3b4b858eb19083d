import { afterEach, describe, expect, it } from 'vitest';
import { BUILT_INS, MEASURED_FAULT_CLASSES } from '../cli/backends.ts';
import { StressOracle } from '../cli/stressOracle.ts';

// A cell's concurrent line is bounded in real time: one that overruns is reported as not observed
// and its session stopped, so no stress run can stall the matrix (an npm start sat for more than
// ten minutes in one). Real servers and client processes; the bound is made too short for them to start.
describe("the matrix's concurrent line is bounded", () => {
  let oracle: StressOracle | undefined;
  afterEach(async () => {
    await oracle?.stop();
  });

  it('a run that overruns its seconds plus the slack is not observed, with the reason', async () => {
    oracle = new StressOracle(0.2, 7, () => undefined, 1);
    const row = BUILT_INS.find((r) => r.name === 'redis-single/unfenced');
    const col = MEASURED_FAULT_CLASSES.find((c) => c.id === 'client-pause');
    expect(row).toBeDefined();
    expect(col).toBeDefined();
    const seen = await oracle.observe(row!, col!);
    expect(seen).toEqual({ notObserved: expect.stringMatching(/had not finished after 0 s of real time/) as unknown });
  }, 60_000);
});
