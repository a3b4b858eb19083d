import { describeAcquire, type FailoverRun, type FailoverVariant, runFailover } from '../conformance/failover.ts';

/** The rows `lockcheck failover` measures: the model's redis-replicated rows under the failover schedule (spec 7.9). */
const VARIANTS: ReadonlyArray<{ readonly row: string; readonly variant: FailoverVariant }> = [
  { row: 'redis-replicated(async), grant not yet replicated', variant: { wait: false, holdReplication: true } },
  { row: 'redis-replicated(WAIT 1), replica not acknowledging', variant: { wait: true, holdReplication: true } },
  { row: 'redis-replicated(WAIT 1), replication running', variant: { wait: true, holdReplication: false } },
];

/**
 * Runs the failover schedule (acquire, kill the primary so Sentinel promotes
 * the replica, acquire) on real servers it starts itself, once per variant,
 * and prints what each client got. Exit 0 when the measurement agrees with
 * the model (a double grant exactly without WAIT), 1 otherwise.
 */
export async function failoverCommand(options: { readonly json: boolean }): Promise<number> {
  const runs: Array<{ row: string; run: FailoverRun }> = [];
  const started = performance.now();
  // Each variant starts and stops its own servers (seconds each): said as it goes, on stderr.
  for (const [i, v] of VARIANTS.entries()) {
    runs.push({ row: v.row, run: await runFailover(v.variant, (step) => process.stderr.write(`[${((performance.now() - started) / 1000).toFixed(1)} s] failover ${i + 1}/${VARIANTS.length} (${v.row}): ${step}\n`)) });
  }
  const agrees = runs.every(({ run }) => run.doubleGrant === !run.variant.wait);
  if (options.json) {
    const plain = runs.map(({ row, run }) => ({
      row,
      first: describeAcquire(run.first),
      beforeRejoin: run.beforeRejoin === null ? null : describeAcquire(run.beforeRejoin),
      second: describeAcquire(run.second),
      doubleGrant: run.doubleGrant,
      failoverMs: run.failoverMs,
    }));
    console.log(JSON.stringify({ agreesWithModel: agrees, runs: plain }, null, 2));
  } else {
    console.log('# redis-replicated: failover on real servers (primary, replica, Sentinel)\n');
    console.log('| variant | client 0 acquires | failover (ms) | client 1 before the old primary rejoins | client 1 acquires | MUTEX-1 |');
    console.log('|---|---|---|---|---|---|');
    for (const { row, run } of runs) {
      const before = run.beforeRejoin === null ? '—' : describeAcquire(run.beforeRejoin);
      console.log(`| ${row} | ${describeAcquire(run.first)} | ${run.failoverMs} | ${before} | ${describeAcquire(run.second)} | ${run.doubleGrant ? 'broken: double grant' : 'holds'} |`);
    }
    console.log(`\n${agrees ? 'agrees with the model' : 'DISAGREES with the model'} (spec 7.9: a double grant without WAIT, none with WAIT 1 and one replica)`);
  }
  return agrees ? 0 : 1;
}
