/** The backends a stress run drives, each on servers the runner starts (servers.ts); by name alone, for the CLI's checks. */
export const STRESS_BACKENDS = ['redis-single', 'redis-single-aof', 'redlock', 'redlock-aof', 'redis-replicated', 'redis-replicated-wait', 'pg-session', 'pg-xact', 'etcd', 'zookeeper'] as const;
export type StressBackend = (typeof STRESS_BACKENDS)[number];
