/**
 * How fast a history is judged: generated histories (the simulated world of
 * test/fixtures/historySim.ts: a lease lock, a strictly fenced register,
 * 8 processes, 4 resources) of growing size, with and without lost replies;
 * for each, the time to parse the JSONL, to run the interval checks
 * (MUTEX-1, FENCE-1, STORE-1, FENCE-2) and to run the linearizability search.
 * Then stress-sized histories with many lost replies, searched with the
 * models' relevance bounds on unknown outcomes and without them (every
 * unknown operation a candidate to the end), side by side.
 *
 *   npx tsx bench/historyCheck.ts [--seconds N]   (N: budget of each linearizability search, default 3)
 */
import type { History } from '../conformance/history/event.ts';
import { holdIntervals, overlappingHolds } from '../conformance/history/holds.ts';
import { operations as operationsOf } from '../conformance/history/operations.ts';
import { lostUpdates, staleWrites } from '../conformance/history/store.ts';
import { tokenOrder } from '../conformance/history/tokens.ts';
import { formatHistory } from '../conformance/history/format.ts';
import { linearizabilityChecks } from '../conformance/history/linearizable.ts';
import { HistoryFormatError, parseHistory } from '../conformance/history/parse.ts';
import { checkLinearizability, DEFAULT_MAX_MEMORY_BYTES, etcdRegister, leaseLock, lockHistories, registerHistories, type Model } from '../conformance/history/linearizability/index.ts';
import { simulate } from '../test/fixtures/historySim.ts';
import { fmtRate, log, out, parseSeconds } from './common.ts';

const budgetMs = parseSeconds('bench/historyCheck.ts', process.argv.slice(2), '; the linearizability budget') * 1000;

/** MUTEX-1, FENCE-1, STORE-1 and FENCE-2 as checkHistory runs them, without the linearizability search. */
function intervalChecks(history: History): { counts: { operations: number } } {
  const ops = operationsOf(history);
  overlappingHolds(holdIntervals(history), 20);
  tokenOrder(ops, 20, history);
  lostUpdates(ops, 20);
  staleWrites(ops, 'strict', 20);
  return { counts: { operations: ops.length } };
}

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
    // The interval checks alone (checkHistory's budget now bounds them too: a budget of 0 would cut them short).
    const [report, checkMs] = timed(() => intervalChecks(history));
    const [lin, linMs] = timed(() => linearizabilityChecks(history, { timeoutMs: budgetMs, maxMemoryBytes: DEFAULT_MAX_MEMORY_BYTES }, 20));
    const n = report.counts.operations;
    out(`| ${fmtRate(n)} | ${lossRate * 100}% | ${fmtRate(history.length)} | ${parseMs.toFixed(0)} | ${checkMs.toFixed(0)} | ${fmtRate(n / ((parseMs + checkMs) / 1000))} | ${linMs.toFixed(0)} | ${lin.lock.verdict} / ${lin.register.verdict} |`);
  }
}

/** Every lock and register of the history: the total search time and how many objects were decided. */
function searchAll(history: Parameters<typeof lockHistories>[0], bounded: boolean): { ms: number; decided: number; objects: number; verdicts: Set<string> } {
  const strip = <S, I, O>(m: Model<S, I, O>): Model<S, I, O> => (bounded ? m : { ...m, relevance: undefined });
  const start = performance.now();
  const deadline = start + budgetMs;
  const left = () => ({ timeoutMs: Math.max(0, deadline - performance.now()) });
  const results = [
    ...lockHistories(history).map((h) => checkLinearizability(strip(leaseLock()), h.operations, left())),
    ...registerHistories(history).map((h) => checkLinearizability(strip(etcdRegister()), h.operations, left())),
  ];
  return { ms: performance.now() - start, decided: results.filter((r) => r.verdict !== 'unknown').length, objects: results.length, verdicts: new Set(results.map((r) => r.verdict)) };
}

out();
out(`Unknown outcomes (lost replies): the search with the models' relevance bounds and without them (budget ${budgetMs / 1000} s per history).`);
out();
out('| processes | resources | operations | lost replies | unknown outcomes | bounded ms | bounded decided | unbounded ms | unbounded decided | ratio |');
out('|---:|---:|---:|---:|---:|---:|---|---:|---|---:|');
for (const [processes, resources, operations, lossRate] of [
  [10, 1, 1_000, 0.1],
  [10, 4, 10_000, 0.1],
  [10, 1, 10_000, 0.1],
  [10, 4, 10_000, 0.3],
] as const) {
  log(`generating ${operations} operations, ${processes} processes, ${resources} resources, loss ${lossRate}...`);
  const history = parseHistory(formatHistory(simulate({ seed: 1, processes, resources, operations, lossRate })));
  if (history instanceof HistoryFormatError) throw history;
  const unknown = operationsOf(history).filter((o) => o.outcome === 'info' || o.outcome === 'pending').length;
  const b = searchAll(history, true);
  const u = searchAll(history, false);
  const show = (r: typeof b) => `${r.decided}/${r.objects} (${[...r.verdicts].join(', ')})`;
  out(`| ${processes} | ${resources} | ${fmtRate(operations)} | ${lossRate * 100}% | ${fmtRate(unknown)} | ${b.ms.toFixed(0)} | ${show(b)} | ${u.ms.toFixed(0)} | ${show(u)} | ${(u.ms / b.ms).toFixed(1)}${u.decided < u.objects ? ' (at least)' : ''} |`);
}
