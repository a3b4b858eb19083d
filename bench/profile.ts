/** What the profiling scripts share: a piece of work under the V8 sampling profiler, and the table of where its CPU went. */
import { Session } from 'node:inspector/promises';
import { out } from './common.ts';

interface ProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly hitCount?: number;
}

/** A profiled run: the operations `work` counted, the client CPU it used (user + system, µs), and the 25 functions with the most self time. */
export interface Profiled {
  readonly ops: number;
  readonly cpuUs: number;
  readonly top: ReadonlyArray<{ readonly fn: string; readonly selfPercent: number }>;
}

/** Runs `work` (resolving to the operations it did) under the V8 sampling profiler. */
export async function profiled(work: () => Promise<number>): Promise<Profiled> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  const cpu = process.cpuUsage();
  const ops = await work();
  const used = process.cpuUsage(cpu);
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  const nodes = profile.nodes as ProfileNode[];
  const total = nodes.reduce((a, n) => a + (n.hitCount ?? 0), 0);
  const self = new Map<string, number>();
  for (const n of nodes) {
    const f = n.callFrame;
    const where = f.url === '' ? '(native)' : `${f.url.replace(/^.*\/(node_modules\/|work\/[^/]+\/[^/]+\/)/, '')}:${f.lineNumber + 1}`;
    const key = `${f.functionName || '(anonymous)'} ${where}`;
    self.set(key, (self.get(key) ?? 0) + (n.hitCount ?? 0));
  }
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 25).map(([fn, v]) => ({ fn, selfPercent: (100 * v) / total }));
  return { ops, cpuUs: used.user + used.system, top };
}

/** The heading line (`### heading: N pairs in S s, client CPU … µs per pair`), then the self-time table. */
export function profileTable(heading: string, seconds: number, p: Profiled): void {
  out(`### ${heading}: ${p.ops} pairs in ${seconds} s, client CPU ${(p.cpuUs / p.ops).toFixed(1)} µs per pair`);
  out();
  out('| self % | function |');
  out('|---:|---|');
  for (const { fn, selfPercent } of p.top) out(`| ${selfPercent.toFixed(1)} | \`${fn}\` |`);
}
