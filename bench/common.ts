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
