/**
 * lockcheck's conformance engine: the adapter API a lock backend implements,
 * the lockstep runner, schedule generation, checks with shrinking, timelines,
 * and the vitest suite.
 */
export type * from './adapter.ts';
export type * from './verdict.ts';
export { describeStoppedEarly, INCONCLUSIVE_CAUSES, verdictProperties } from './verdict.ts';
export { runLockstep, sameOutcome } from './lockstep.ts';
export type { LockstepOptions } from './lockstep.ts';
export { scheduleArb, tokenBaseArb, TOKEN_BASES } from './generate.ts';
export type { ScheduleOptions } from './generate.ts';
export { MAX_ATTEMPTS, checkConformance } from './check.ts';
export { checkMisconfigurations } from './configuration.ts';
export type { Misconfiguration } from './configuration.ts';
export type { CheckFailure, CheckOptions, CheckResult } from './check.ts';
export { MINIMISE_BUDGET } from './minimise.ts';
export type { MinimiseBudget, Schedule } from './minimise.ts';
export { htmlTimeline, textTimeline } from './timeline.ts';
export { simLeaseBackend } from './sim/backend.ts';
export { FAULT_KINDS, faultKindsOf, isFaultKind, describeFaultKind, FaultNotOfferedError } from './faults.ts';
export { AdapterApiError, checkBackendApi, offeredFaults } from './backendApi.ts';
export { AdapterError, CLOSE_LIMIT_MS, ENVIRONMENT_LIMIT_MS, START_LIMIT_MS } from './adapterCall.ts';
export { OutputFileError } from './env/outputFile.ts';
export type { OutputFileProblem } from './env/outputFile.ts';
export type { LockParts, SimParts } from './sim/backend.ts';
