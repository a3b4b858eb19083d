/**
 * lockcheck's reference model: the specification (spec/SPEC.md) made
 * executable. Pure: no I/O, no real time, no hidden randomness.
 */
export * from './clock.ts';
export * from './command.ts';
export * from './outcome.ts';
export * from './design.ts';
export * from './errors.ts';
export * from './store.ts';
export * from './state.ts';
export * from './event.ts';
export { step } from './world.ts';
export type { Branch } from './world.ts';
export * from './properties.ts';
export * from './run.ts';
export * from './explore.ts';
export * from './faultClass.ts';
export * from './scenarios.ts';
export * from './describe.ts';
export { canonicalKey } from './canonical.ts';
export * from './matrix.ts';
export * from './exploreLevels.ts';
export * from './exploreReplay.ts';
export { DEFAULT_MAX_STATES } from './exploreInput.ts';
// The checked faces of functions the model calls per step (api.ts): these names shadow the star exports above.
export {
  rulesOf,
  leaseTerms,
  nodeCount,
  hasTtl,
  isSessionBound,
  isReentrant,
  persists,
  expiresByWallClock,
  restartDelayMs,
  refreshExtendMs,
  driftFactor,
  replyTimeoutMs,
  clockMarginMs,
  lateReplyEnds,
  replication,
  quorum,
  driftMarginMs,
  storeFits,
  read,
  trueTimeOf,
  setDrift,
  isOperation,
  sameOwner,
  ghostOf,
  inFlightKey,
  cellOf,
  emptyStore,
  writeStore,
  passes,
  holdsValid,
  liveBoundMs,
  checkEvents,
  checkProperties,
  firstBranch,
  explore,
  startExploration,
  nodeSymmetric,
  fingerprintOptionsFor,
} from './api.ts';
