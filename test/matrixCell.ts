import type { MatrixCell } from '../cli/matrix.ts';

/** A measured matrix cell for tests of its texts: one run, nothing found, nothing flagged, but for `overrides`. */
export function matrixCell(overrides: Partial<MatrixCell>): MatrixCell {
  return {
    backend: 'redis-single/strict',
    audit: false,
    faultClass: 'client-pause',
    runs: 1,
    conformanceFailure: null,
    measured: [],
    predicted: [],
    predictedDepth: 8,
    unexpected: [],
    unseen: [],
    outOfReach: [],
    timeline: null,
    elapsedMs: 1,
    notMeasured: null,
    stoppedEarly: 0,
    stoppedEarlyBy: {},
    worst: null,
    deviations: null,
    observed: null,
    observedUnpredicted: [],
    ...overrides,
  };
}
