/**
 * lockcheck's linearizability checker against Porcupine's Go checker, on the
 * same machine in one run: every history of ../shared/corpora (Porcupine's
 * and Knossos's test histories), each verdict beside the expected one, and
 * the check times (parsing excluded on both sides).
 *
 *   npm run bench:linearizability [-- --reps N]
 *
 * lockcheck: the median of N checks per history (default 5) after one warm-up
 * pass. Porcupine: `go test -bench` over its own Benchmark functions (upstream
 * parsers and models, ns/op = the mean of 3 CheckEvents calls), in a copy of
 * its folder with Go's caches in temp dirs and GOPROXY=off. The ratio covers
 * the histories both check: Porcupine's 102 etcd logs and 6 kv logs.
 * golang-go is installed with apt-get when missing (as root).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findCorpora, loadCorpora, type PreparedCase } from '../conformance/history/linearizability/corpora/catalog.ts';
import { log, median, out } from './common.ts';

function parseReps(argv: readonly string[]): number {
  let reps = 5;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--reps') reps = Number(argv[++i]);
    else if (arg.startsWith('--reps=')) reps = Number(arg.slice('--reps='.length));
    else if (arg === '--help' || arg === '-h') {
      process.stderr.write('usage: tsx bench/linearizability.ts [--reps N]   (N: checks per history, median taken; default 5)\n');
      process.exit(0);
    } else throw new Error(`unknown argument '${arg}' (usage: tsx bench/linearizability.ts [--reps N])`);
  }
  if (!Number.isInteger(reps) || reps < 1 || reps > 100) throw new Error(`--reps must be an integer in [1, 100], got ${String(reps)}`);
  return reps;
}

type Verdict = 'linearizable' | 'not-linearizable' | 'unknown';
const expectedVerdict = (c: PreparedCase): Verdict | undefined => (c.expected === undefined ? undefined : c.expected ? 'linearizable' : 'not-linearizable');

/** Times lockcheck's checker: one warm-up pass, then `reps` checks per history; the median. */
function timeLockcheck(cases: readonly PreparedCase[], reps: number): Map<PreparedCase, { verdict: Verdict; ms: number }> {
  for (const c of cases) c.check({ timeoutMs: 120_000 });
  const results = new Map<PreparedCase, { verdict: Verdict; ms: number }>();
  for (const c of cases) {
    const times: number[] = [];
    let verdict: Verdict = 'unknown';
    for (let r = 0; r < reps; r++) {
      const start = performance.now();
      verdict = c.check({ timeoutMs: 120_000 }).verdict;
      times.push(performance.now() - start);
    }
    results.set(c, { verdict, ms: median(times) });
  }
  return results;
}

/** Installs golang-go when `go` is missing (root only, like scripts/setup.sh does for its packages). */
function ensureGo(): boolean {
  if (spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0) return true;
  if (process.getuid?.() !== 0) {
    log('bench: Go is missing; run as root: apt-get update && apt-get install -y golang-go');
    return false;
  }
  log('bench: installing golang-go (apt-get update, apt-get install)');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  for (const args of [['update'], ['install', '-y', '--no-install-recommends', 'golang-go']]) {
    const r = spawnSync('apt-get', args, { stdio: ['ignore', 'inherit', 'inherit'], env, timeout: 600_000 });
    if (r.status !== 0) {
      log(`bench: apt-get ${args.join(' ')} failed (exit ${String(r.status)})`);
      return false;
    }
  }
  return spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0;
}

/** Porcupine's benchmark name for a corpus file. */
function benchmarkName(file: string): string | undefined {
  const etcd = /etcd_(\d{3})\.log$/.exec(file);
  if (etcd) return `BenchmarkEtcdJepsen${etcd[1]}`;
  const kv = /kv\/c(\d\d)-(ok|bad)\.txt$/.exec(file);
  if (!kv) return undefined;
  const clients = Number(kv[1]);
  return `BenchmarkKv${clients}${clients === 1 ? 'Client' : 'Clients'}${kv[2] === 'ok' ? 'Ok' : 'Bad'}`;
}

/** Runs Porcupine's own benchmarks; ms per CheckEvents call by benchmark name. */
function timePorcupine(porcupineDir: string): Map<string, number> | string {
  const work = mkdtempSync(join(tmpdir(), 'lockcheck-porcupine-'));
  try {
    const src = join(work, 'porcupine');
    cpSync(porcupineDir, src, { recursive: true });
    spawnSync('chmod', ['-R', 'u+w', src]);
    const env = {
      ...process.env,
      GOFLAGS: '-mod=mod',
      GOPROXY: 'off',
      GOTOOLCHAIN: 'local',
      GOPATH: join(work, 'gopath'),
      GOCACHE: join(work, 'gocache'),
      GOTMPDIR: '',
    };
    const r = spawnSync('go', ['test', '-count=1', '-run', '^$', '-bench', '^(BenchmarkEtcdJepsen[0-9]+|BenchmarkKv(1Client|10Clients|50Clients)(Ok|Bad))$', '-benchtime', '3x', '.'], {
      cwd: src,
      env,
      encoding: 'utf8',
      timeout: 900_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    if (r.status !== 0) return `go test -bench failed (exit ${String(r.status)}${r.error ? `, ${r.error.message}` : ''}): ${(r.stdout + r.stderr).slice(-2000)}`;
    const times = new Map<string, number>();
    for (const line of r.stdout.split('\n')) {
      const m = /^(Benchmark\w+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns\/op/.exec(line);
      if (m) times.set(m[1]!, Number(m[2]) / 1e6);
    }
    return times;
  } finally {
    // Go makes its module cache read-only; give write access back so it can be removed.
    try {
      spawnSync('chmod', ['-R', 'u+w', work]);
      chmodSync(work, 0o700);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  }
}

const fmtMs = (ms: number | undefined): string => (ms === undefined || !Number.isFinite(ms) ? '-' : ms < 10 ? ms.toFixed(3) : ms.toFixed(1));

function main(): void {
  const reps = parseReps(process.argv.slice(2));
  const root = findCorpora(process.cwd());
  if (root === undefined) throw new Error('no shared/corpora (with porcupine/expected.tsv) above the working directory: set LOCKCHECK_CORPORA');
  log(`bench: corpora in ${root}; parsing`);
  const cases = loadCorpora(root);
  log(`bench: timing lockcheck on ${cases.length} histories (${reps} checks each, median)`);
  const mine = timeLockcheck(cases, reps);
  let go: Map<string, number> | string = 'Go not available';
  if (ensureGo()) {
    log('bench: timing Porcupine (go test -bench, 3 checks each)');
    go = timePorcupine(join(root, 'porcupine'));
  }
  if (typeof go === 'string') log(`bench: Porcupine not measured: ${go}`);

  out('history\tmodel\tops\texpected\tlockcheck\tporcupine\tlockcheck_ms\tporcupine_ms');
  let agree = 0;
  let disagree = 0;
  let lockcheckBoth = 0;
  let porcupineBoth = 0;
  let both = 0;
  const slowest: [number, string][] = [];
  for (const c of cases) {
    const r = mine.get(c)!;
    const expected = expectedVerdict(c);
    const name = c.model === 'etcd' || c.model === 'kv-partitioned' ? benchmarkName(c.file) : undefined;
    const goMs = typeof go === 'string' || name === undefined ? undefined : go.get(name);
    // Porcupine's benchmark stops with b.Fatalf on a wrong verdict, so a time means the expected verdict.
    const goVerdict = goMs === undefined ? '-' : (expected ?? '-');
    if (expected !== undefined) {
      if (r.verdict === expected) agree++;
      else disagree++;
    }
    if (name !== undefined) {
      both++;
      lockcheckBoth += r.ms;
      porcupineBoth += goMs ?? Number.NaN;
    }
    slowest.push([r.ms, `${c.corpus}/${c.file} (${c.model})`]);
    out(`${c.corpus}/${c.file}\t${c.model}\t${c.operations}\t${expected ?? '(none)'}\t${r.verdict}\t${goVerdict}\t${fmtMs(r.ms)}\t${fmtMs(goMs)}`);
  }
  const knossosMs = cases.filter((c) => c.corpus === 'knossos').reduce((s, c) => s + mine.get(c)!.ms, 0);
  slowest.sort((a, b) => b[0] - a[0]);
  out();
  out(`slowest for lockcheck: ${slowest
    .slice(0, 6)
    .map(([ms, n]) => `${n} ${fmtMs(ms)} ms`)
    .join('; ')}`);
  out(`lockcheck on the ${cases.filter((c) => c.corpus === 'knossos').length} Knossos histories (Porcupine has no parser for them): ${knossosMs.toFixed(1)} ms`);
  if (both > 0 && Number.isFinite(porcupineBoth))
    out(
      `lockcheck_ms and porcupine_ms: the ${both} histories both check (Porcupine's etcd and kv logs); ratio lockcheck/porcupine = ${(lockcheckBoth / porcupineBoth).toFixed(2)}`,
    );
  out(`corpora: agree=${agree} disagree=${disagree} lockcheck_ms=${lockcheckBoth.toFixed(1)} porcupine_ms=${Number.isFinite(porcupineBoth) ? porcupineBoth.toFixed(1) : 'n/a'}`);
}

main();
