/**
 * Building blocks for adapters (docs/adapter.md): the servers lockcheck
 * starts (or the user's, from --redis / --pg) with their faults, lockcheck's
 * own Redis and PostgreSQL environments, and the in-process parts (virtual
 * time, a simulated network and store) for backends that run in the test's
 * process.
 */
export { EnvironmentError } from './env/faketime.ts';
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
export { VirtualTime, TimingError, flush } from './sim/time.ts';
export type { VirtualTimeOptions } from './sim/time.ts';
export { SimNetwork } from './sim/network.ts';
export type { Endpoint, Server } from './sim/network.ts';
export { SimStore, storeOver } from './sim/store.ts';
// For an adapter's concurrent client (BackendUnderTest.concurrent): an ioredis connection with bounded commands.
export { concurrentRedis, COMMAND_TIMEOUT_MS } from './stress/client.ts';
