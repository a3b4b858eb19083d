/** What every benchmark shares: its one option, output, and the statistics of its rounds. */

/** Reads `--seconds N` (measured seconds per run, default 3, at most 120); `--help` prints the usage and exits. */
export function parseSeconds(script: string, argv: readonly string[], note = ''): number {
  const usage = `usage: tsx ${script} [--seconds N]   (N: measured seconds per run, default 3${note})`;
  let seconds = 3;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--seconds') seconds = Number(argv[++i]);
    else if (arg.startsWith('--seconds=')) seconds = Number(arg.slice('--seconds='.length));
    else if (arg === '--help' || arg === '-h') {
      process.stderr.write(`${usage}\n`);
      process.exit(0);
    } else throw new Error(`unknown argument '${arg}' (${usage})`);
  }
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 120) throw new Error(`--seconds must be a number in (0, 120], got ${String(seconds)}`);
  return seconds;
}

/** Progress goes to stderr, the tables to stdout. */
export const log = (line: string): void => void process.stderr.write(`${line}\n`);
export const out = (line = ''): void => void process.stdout.write(`${line}\n`);

/** The median of the finite values (NaN when there are none). */
export function median(xs: readonly number[]): number {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
}

export const fmtRate = (x: number): string => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : 'n/a');
export const fmtRatio = (x: number): string => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');

/** The ratio of the medians of `a`'s and `b`'s rates, and as text with the per-round ratios (paired: round i of each measured next to each other). */
export function pairedRatio(a: readonly number[], b: readonly number[]): { value: number; text: string } {
  const value = median(a) / median(b);
  const perRound = a.map((x, i) => fmtRatio(x / b[i]!)).join(', ');
  return { value, text: `**${fmtRatio(value)}** (rounds: ${perRound})` };
}

/** One line of a benchmark's target table: a measured ratio against the goal. */
export interface TargetRow {
  readonly target: string;
  /** Rate ratio (medians of interleaved rounds). */
  readonly ratio: number;
  /** The same comparison by CPU per operation (the peer's over lockcheck's): what a CPU-bound machine would show; less disturbed by load. */
  readonly cpuRatio?: number;
  /** Met when ratio >= goal ('at-least') or ratio <= goal ('at-most'); none: a ratio reported beside the targets. */
  readonly goal?: number;
  readonly kind?: 'at-least' | 'at-most';
}

/** The compact table the lead re-runs on a quiet machine: each target, its ratio, met or not, with the load average beside it. */
export function targetTable(rows: readonly TargetRow[], loadAverage: string): void {
  out(`### Targets (load average ${loadAverage})`);
  out();
  out('| target | ratio | goal | met | CPU-per-op ratio |');
  out('|---|---:|---:|---|---:|');
  for (const r of rows) {
    const atMost = r.kind === 'at-most';
    const cpu = r.cpuRatio === undefined ? '' : fmtRatio(r.cpuRatio);
    if (r.goal === undefined) {
      out(`| ${r.target} | ${fmtRatio(r.ratio)} | | reported | ${cpu} |`);
      continue;
    }
    const met = Number.isFinite(r.ratio) && (atMost ? r.ratio <= r.goal : r.ratio >= r.goal);
    out(`| ${r.target} | ${fmtRatio(r.ratio)} | ${atMost ? '≤' : '≥'} ${r.goal.toFixed(2)} | ${met ? 'met' : '**not met**'} | ${cpu} |`);
  }
  out();
}

/**
 * Pairs per second of `workers` loops for `seconds`: loop `w` gets its pair from `worker(w)` (its set-up counted
 * in the time) and repeats it until the time is up.
 */
export async function pairsPerSecond(workers: number, seconds: number, worker: (w: number) => Promise<() => Promise<void>>): Promise<number> {
  const until = performance.now() + seconds * 1000;
  let pairs = 0;
  const loop = async (w: number): Promise<void> => {
    const pair = await worker(w);
    while (performance.now() < until) {
      await pair();
      pairs++;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: workers }, (_v, w) => loop(w)));
  return pairs / ((performance.now() - started) / 1000);
}

/**
 * lockcheck against one peer (`kinds`: lockcheck's first), each with every worker count, `rounds` times
 * interleaved (the order of the two alternates by round), each run logged; then the markdown table of the medians
 * and their ratio, `columns` naming lockcheck's, the peer's and the ratio's.
 */
export async function lockcheckAgainstPeer<K extends string>(
  kinds: readonly [K, K],
  workerCounts: readonly number[],
  rounds: number,
  measure: (kind: K, workers: number, round: number) => Promise<number>,
  columns: readonly [string, string, string],
): Promise<void> {
  const rates = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const workers of workerCounts) {
      const order = round % 2 === 0 ? kinds : [...kinds].reverse();
      for (const kind of order) {
        const rate = await measure(kind, workers, round);
        log(`round ${round + 1}/${rounds}  ${kind.padEnd(9)} ${String(workers).padStart(2)} workers: ${fmtRate(rate)} pairs/s`);
        const key = `${kind}/${workers}`;
        rates.set(key, [...(rates.get(key) ?? []), rate]);
      }
    }
  }
  out(`| workers | ${columns.join(' | ')} |`);
  out(`|---:|---:|---:|---:|`);
  for (const workers of workerCounts) {
    const a = median(rates.get(`${kinds[0]}/${workers}`)!);
    const b = median(rates.get(`${kinds[1]}/${workers}`)!);
    out(`| ${workers} | ${fmtRate(a)} | ${fmtRate(b)} | ${fmtRatio(a / b)} |`);
  }
}
