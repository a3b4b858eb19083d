/**
 * How fast a history is judged: generated histories (the simulated world of
 * test/fixtures/historySim.ts: a lease lock, a strictly fenced register,
 * 8 processes, 4 resources) of growing size, with and without lost replies;
 * for each, the time to parse the JSONL, to run the interval checks
 * (MUTEX-1, FENCE-1, STORE-1, FENCE-2) and to run the linearizability search.
 *
 *   npx tsx bench/historyCheck.ts [--seconds N]   (N: budget of each linearizability search, default 3)
 */
import { checkHistory } from '../conformance/history/check.ts';
import { formatHistory } from '../conformance/history/format.ts';
import { linearizabilityChecks } from '../conformance/history/linearizable.ts';
import { HistoryFormatError, parseHistory } from '../conformance/history/parse.ts';
import { simulate } from '../test/fixtures/historySim.ts';
import { fmtRate, log, out, parseSeconds } from './common.ts';

const budgetMs = parseSeconds('bench/historyCheck.ts', process.argv.slice(2), '; the linearizability budget') * 1000;

function timed<T>(f: () => T): [T, number] {
  const t = performance.now();
  const x = f();
  return [x, performance.now() - t];
}

out('| operations | lost replies | events | parse ms | interval checks ms | ops/s (parse + interval checks) | linearizability ms | LIN-1 lock / register |');
out('|---:|---:|---:|---:|---:|---:|---:|---|');
for (const operations of [1_000, 10_000, 100_000]) {
  for (const lossRate of [0, 0.05]) {
    log(`generating ${operations} operations, loss ${lossRate}...`);
    const text = formatHistory(simulate({ seed: 1, processes: 8, resources: 4, operations, lossRate }));
    const [history, parseMs] = timed(() => parseHistory(text));
    if (history instanceof HistoryFormatError) throw history;
    // timeoutMs 0: the search gets one slice per object, so this is (almost all) the interval checks.
    const [report, checkMs] = timed(() => checkHistory(history, { timeoutMs: 0 }));
    const [lin, linMs] = timed(() => linearizabilityChecks(history, budgetMs, 20));
    const n = report.counts.operations;
    out(`| ${fmtRate(n)} | ${lossRate * 100}% | ${fmtRate(history.length)} | ${parseMs.toFixed(0)} | ${checkMs.toFixed(0)} | ${fmtRate(n / ((parseMs + checkMs) / 1000))} | ${linMs.toFixed(0)} | ${lin.lock.verdict} / ${lin.register.verdict} |`);
  }
}
