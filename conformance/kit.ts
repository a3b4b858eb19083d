/**
 * The adapter kit (docs/adapter.md): for a lock library over Redis,
 * redisLibraryBackend (over PostgreSQL, postgresLibraryBackend) gives servers (lockcheck's own, or the user's from
 * --redis), every fault on them, a key prefix per run on shared servers, a
 * close hook, and the library's Date.now() and timers on the runner's clock.
 * Below it, the building blocks: the servers lockcheck
 * starts (or the user's, from --redis / --pg) with their faults, lockcheck's
 * own Redis and PostgreSQL environments, and the in-process parts (virtual
 * time, a simulated network and store) for backends that run in the test's
 * process.
 */
export { EnvironmentError } from './env/faketime.ts';
export { StoppedWhileStarting } from './env/stoppedWhileStarting.ts';
export { RedisServer, stopAllRedisServers } from './env/redisServer.ts';
export type { RedisPersistence, RedisServerOptions } from './env/redisServer.ts';
export { PostgresServer, stopAllPostgresServers } from './env/postgresServer.ts';
export type { PostgresServerOptions } from './env/postgresServer.ts';
export { startRedisCluster, startRedisRun, realRedisBackend, toleranceOn, REAL_TIME_TOLERANCE_MS, USER_SERVER_CLOCK_MARGIN_MS } from './env/redisBackend.ts';
export type { RedisCluster, RedisRun, RedisRunOptions, RedisTarget } from './env/redisBackend.ts';
export { connectRedisCluster, parseRedisUrl, ServerUrlError } from './env/userRedis.ts';
export type { UserRedisCluster } from './env/userRedis.ts';
export { realPostgresBackend, targetOf, underOwnNames } from './env/postgresBackend.ts';
export type { PostgresTarget } from './env/postgresBackend.ts';
export { connectPostgres, parsePostgresUrl } from './env/userPostgres.ts';
export { VirtualTime, TimingError, VirtualTimeLimitError, flush } from './sim/time.ts';
export type { VirtualTimeOptions } from './sim/time.ts';
export { SimNetwork } from './sim/network.ts';
export type { Endpoint, Server } from './sim/network.ts';
export { SimStore, storeOver } from './sim/store.ts';
// The input checks a LockClient owes its caller (InvalidInputError naming the input, before anything is sent).
export { checkAcquireInput } from './input.ts';
// For an adapter's concurrent client (BackendUnderTest.concurrent): an ioredis connection with bounded commands.
export { concurrentRedis, COMMAND_TIMEOUT_MS } from './stress/client.ts';
export { redisLibraryBackend } from './redisLibrary.ts';
export { postgresLibraryBackend } from './postgresLibrary.ts';
export type { PostgresClientParts, PostgresLibraryAdapter, PostgresServerChoice } from './postgresLibrary.ts';
export type { LockCalls, RedisClientParts, RedisLibraryAdapter, RedisServerChoice } from './redisLibrary.ts';
export { installLibraryClock, WALL_EPOCH_MS } from './libraryClock.ts';
export { onClientClock, offClientClock } from './kitInput.ts';
export { FAULT_KINDS, faultKindsOf, onlyFaults } from './faults.ts';
export type { FaultInjectors, FaultKind } from './faults.ts';
