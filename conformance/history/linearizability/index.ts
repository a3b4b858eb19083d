/**
 * Linearizability checking (spec/SPEC.md, "Linearizability checking";
 * docs/histories.md, "Linearizability"): a Wing–Gong–Lowe search with
 * memoised configurations, per-key partitioning and a deadline.
 */
export { checkLinearizability, DEFAULT_MAX_MEMORY_BYTES, InvalidOperationError } from './check.ts';
export type { CheckOptions, LinearizabilityResult, Linearizable, NotLinearizable, Undecided, SearchStats } from './check.ts';
export { illegal, hashString, hashValue, mix32 } from './model.ts';
export type { Illegal, Model, RegisterValue } from './model.ts';
export { isPending } from './operation.ts';
export type { Operation } from './operation.ts';
export { etcdRegister, casRegister, register } from './models/register.ts';
export type { RegisterInput, RegisterOutput, RegisterModel } from './models/register.ts';
export { multiRegister } from './models/multiRegister.ts';
export type { MicroOp, MultiRegisterInput, MultiRegisterOutput, MultiRegisterState } from './models/multiRegister.ts';
export { mutex } from './models/mutex.ts';
export type { MutexInput } from './models/mutex.ts';
export { kvStore, kvStoreUnpartitioned } from './models/kv.ts';
export type { KvInput, KvOutput } from './models/kv.ts';
export { leaseLock } from './models/leaseLock.ts';
export type { LeaseLockInput, LeaseLockState } from './models/leaseLock.ts';
export { checkHistoryLinearizability, lockHistories, registerHistories, HistoryShapeError } from './fromHistory.ts';
export type { ObjectHistory, ObjectVerdict } from './fromHistory.ts';
