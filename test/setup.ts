import fc from 'fast-check';

/**
 * Every property test runs from a fixed seed so CI is deterministic; set
 * LOCKCHECK_SEED to explore other seeds. A failure prints fast-check's seed
 * and path: pass them as { seed, path } to replay that exact case.
 */
const seed = Number(process.env.LOCKCHECK_SEED ?? 20161010);
const numRuns = Number(process.env.LOCKCHECK_RUNS ?? 100);
fc.configureGlobal({ seed, numRuns });
