#!/usr/bin/env node
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';
import type { FaultKind } from '../conformance/adapter.ts';
import { AdapterApiError } from '../conformance/backendApi.ts';
import { AdapterError, onSlowAdapterCall } from '../conformance/adapterCall.ts';
import { describeFaultKind, FAULT_KINDS, FaultNotOfferedError, isFaultKind, ownServersOnly } from '../conformance/faults.ts';
import { EnvironmentError } from '../conformance/env/faketime.ts';
import type { ServerChoice } from './backends.ts';
import { BUILT_INS, didYouMean, LIBRARY_AUDITS, MEASURED_FAULT_CLASSES } from './rows.ts';
import { importLeftRunning } from './importsLeftRunning.ts';
import { parsePostgresUrl, parseRedisUrl, ServerUrlError } from '../conformance/env/serverUrls.ts';
import type { StorePolicy } from '../conformance/history/event.ts';
import { MalformedRecordingError } from './malformedRecording.ts';
import { NEMESIS_FAULTS, type NemesisFault, unsupported } from '../conformance/stress/nemesis.ts';
import { STRESS_BACKENDS } from '../conformance/stress/backendNames.ts';
import { COMMAND_OPTIONS, OPTIONS } from './options.ts';
import { UsageError } from './usage.ts';
import { lockcheckVersion } from './version.ts';
import { fstatSync, statSync } from 'node:fs';
import { join, resolve as resolvePath, sep } from 'node:path';
import { hideCommandLineSecrets, redactSecrets, redactTerminalOutput } from '../conformance/env/redact.ts';
import { escapedText } from '../model/shownText.ts';
import { checkOutputFile, checkOutputFilesIn, OutputFileError } from '../conformance/env/outputFile.ts';

/**
 * The lockcheck command. Exit codes: 0 ok (findings the spec predicts are
 * fine); 1 a conformance failure, or a finding the model did not predict, or
 * (check) a violation in the history; 2 bad arguments or a malformed
 * history; 3 the environment is missing something (the message says how to
 * install it); 4 nothing decided: (check, stress) a check could not decide, (run, replay) no
 * run was judged to its end, or (every command) an unexpected error stopped it; 130/143/129 ended by
 * SIGINT/SIGTERM/SIGHUP (docs/getting-started.md#exit-codes).
 */

export const USAGE = `usage: lockcheck <command> [options]

commands:
  matrix    every built-in backend x fault class on real servers it starts itself;
            writes <out>/matrix.md and <out>/matrix/index.html (cells link to timelines)
  run       one backend against its model: --backend <built-in name | path to an adapter module>
  replay    re-run a saved counterexample: lockcheck replay <counterexample.json> [--backend <module>]
            (a counterexample of an adapter module needs its --backend again: a file never names code to load)
  explore   the model alone: scenario catalogue and bounded exhaustive exploration
  failover  redis-replicated on a primary, a replica and Sentinel it starts itself: the double grant after a
            failover without WAIT, and WAIT 1 (spec 7.9); exit 0 when it agrees with the model
  check     judge a concurrent history recorded anywhere: lockcheck check <history.jsonl | -> (format: docs/histories.md);
            exit 0 safe, 1 violation, 2 malformed history (the message names the line) or none to judge, 4 unknown
  stress    concurrent client processes race on real servers under a nemesis; the history is checked
            (docs/stress.md): --backend ${STRESS_BACKENDS.join('|')}|lib:…|./adapter.ts (a library audit, or an
            adapter module whose backend has a \`concurrent\` client) --clients N --seconds S
            --nemesis a,b (${NEMESIS_FAULTS.join(', ')}; default none)
            [--store unfenced|monotonic|strict] [--resources N] [--ttl MIN-MAX] [--seed S] [--json] [--out DIR]
            (defaults: 5 clients, 10 s, unfenced, 3 resources, ttl 500-2000 ms, which also paces the nemesis, out
            lockcheck-stress); writes DIR/history.jsonl and DIR/history.html (interrupted: DIR/history.partial.jsonl); exit 0 safe, 1 violation found, 4 unknown

options (a command refuses an option it does not take, exit 2; each is given once, --redis alone repeats;
numbers are decimal digits, a negative one as --seed=-5):
  --runs N          schedules per backend or cell (matrix default 30, run default 100); the first
                    are the model's shortest counterexamples for the design, then generated ones
  --seed S          fast-check seed (default 20161010)
  --path P          with --seed (run): replay one exact case
  --faults a,b      matrix: fault classes (${MEASURED_FAULT_CLASSES.map((f) => f.id).join(', ')})
                    run: fault kinds (${FAULT_KINDS.join(', ')})
  --backend NAME    run: a built-in backend or an adapter module path; matrix: comma list to restrict rows;
                    replay: the adapter module the counterexample was found on
  --out DIR         matrix: where matrix.md and matrix/ go (default docs)
  --counterexample F  run: where a failure is saved for replay (default lockcheck-counterexample.json)
  --redis URLS      use these Redis servers instead of starting local ones: comma list (or repeat the flag) of
                    redis://[user:password@]host:port[/db]; the first also holds the store; Redlock rows use
                    them all (at least 3; the library audits 5). Nothing is flushed: each run works under a
                    key prefix of its own and deletes its keys. Runs are paced to the servers' real clocks.
  --pg URL          use this PostgreSQL database (14 or newer) instead of starting a local server:
                    postgres://[user[:password]@]host[:port]/database. lockcheck creates its two tables there
                    if missing, ends only its own sessions and deletes only its own rows.
                    On --redis and --pg servers every fault between the clients and the servers is injected
                    (pause, partition, delay, latency, slow-node, kill-connection where the backend takes them;
                    a pg-session partition through a TCP proxy per client, so not over TLS); not offered there:
${FAULT_KINDS.flatMap((k) => (ownServersOnly(k) === null ? [] : [`                      ${k}: ${ownServersOnly(k)}`])).join('\n')}
  --stress-seconds N  matrix: seconds of the concurrent stress run per cell, the second oracle (default 2; 0 skips it)
  --json            machine-readable output on stdout
  --version         print lockcheck's version (its package.json's) and exit
  --junit FILE      also write a JUnit XML report
  check only: --report DIR (writes DIR/history.html, the timeline), --store-policy unfenced|monotonic|strict|transactional
            (the store the writes went to; overrides the history's meta line), --timeout-ms N (the check's time budget,
            every phase and the search, default 10000; 0: a small history is still judged whole, a larger one says
            unknown for what it reaches), --memory-mib M (the linearizability search's memory bound per object, default 1024)
  explore only: --depth N (default 6), --max-states N distinct states a cell (default 5000000),
                    --seconds S (stop a cell after S s; it says the last depth it completed), --jobs N (worker
                    threads, default one per core, at most 4), --design KIND, --fault CLASS
                    --budget S: the whole run gets S s, every cell explored level by level (all cells complete
                    depth d before any starts d+1, each keeping its frontier and visited states); prints the
                    deepest depth each cell completed ("exhausted": its whole reachable space) and the depth
                    every cell reached. --depth then bounds the levels (default none), --max-states a cell's
                    states (default 500000000), --memory-mib M the heap all threads together may hold before
                    no level starts (default 3072); --json: the report as one JSON object (each counterexample with
                    its replay command). Ctrl-C ends the explorations at their last complete level and prints the
                    report of what was completed (exit 130).
                    --replay WORD: replay one counterexample on the model, step and branch as explored (the word
                    explore prints after it: lockcheck explore --replay '...'); exit 1 while it still breaks its property

fault kinds (run --faults; a backend takes those its environment's \`faults\` provides, docs/adapter.md):
${FAULT_KINDS.map((k) => `  ${k.padEnd(17)}${describeFaultKind(k)}`).join('\n')}

built-in backends: ${BUILT_INS.map((b) => b.name).join(', ')}`;

const STORE_POLICIES: readonly StorePolicy[] = ['unfenced', 'monotonic', 'strict', 'transactional'];

/** A value as a message shows it: quoted, secrets redacted, and cut short (a value may be a whole file pasted by mistake). */
function shownValue(raw: string): string {
  // Redacted before it is cut: a URL cut in its middle would no longer be recognised as one, password and all.
  const text = redactSecrets(raw);
  // Control characters, separators and bidirectional controls escaped: the message may be printed where no filter runs (a library caller's log).
  return `'${escapedText(text.length > 40 ? `${text.slice(0, 37)}...` : text)}'`;
}

/**
 * A number option: decimal digits only. Number() alone took '' as 0, ' 5' as
 * 5, '0x10' as 16, '1e3' as 1000 and '1.0' as 1, so a typo ran with a value
 * the user never wrote.
 */
function int(raw: string | undefined, name: string, fallback: number, min: number, max: number): number {
  if (raw === undefined) return fallback;
  const n = /^-?\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min || n > max) throw new UsageError(`--${name} must be an integer in [${min}, ${max}] in decimal digits, got ${shownValue(raw)}`);
  return n;
}

/** A comma list option: undefined when not given; given, it must name something (`--faults ''` ran with no fault at all), each item once. */
function list(raw: string | undefined, name: string): string[] | undefined {
  if (raw === undefined) return undefined;
  const items = raw.split(',').map((x) => x.trim()).filter((x) => x !== '');
  if (items.length === 0) throw new UsageError(`--${name} names nothing, got ${shownValue(raw)}`);
  const twice = items.find((x, i) => items.indexOf(x) !== i);
  if (twice !== undefined) throw new UsageError(`--${name} lists ${shownValue(twice)} twice, got ${shownValue(raw)}`);
  return items;
}

/**
 * What parseArgs lets through: an option given twice (parseArgs keeps the
 * last, silently: `--runs 5 ... --runs 50` ran 50), and an empty value
 * (`--out ''`, `--backend=`), which every option would read as something it
 * did not mean. --redis alone may repeat: it is a list.
 */
function rejectRepeatsAndEmpties(tokens: ReadonlyArray<{ kind: string; name?: string; value?: string | undefined }>): void {
  const seen = new Map<string, string | undefined>();
  for (const t of tokens) {
    if (t.kind !== 'option' || t.name === undefined) continue;
    if (t.value !== undefined && t.value.trim() === '') throw new UsageError(`--${t.name} needs a value, got ${shownValue(t.value)}`);
    if (t.name === 'redis') continue;
    if (seen.has(t.name)) {
      const [a, b] = [seen.get(t.name), t.value];
      throw new UsageError(`--${t.name} is given twice${a !== undefined && b !== undefined ? ` (${shownValue(a)} and ${shownValue(b)})` : ''}: give it once`);
    }
    seen.set(t.name, t.value);
  }
}

/**
 * Two outputs of one command at one path: the second written silently
 * replaced the first (`run --junit c.json --counterexample c.json` kept the
 * JUnit report and lost the counterexample). `under` is a directory the
 * command writes into (matrix --out): a file output inside it is refused too.
 */
function distinctOutputs(outputs: ReadonlyArray<readonly [option: string, path: string | undefined]>, under?: readonly [option: string, dir: string]): void {
  const seen = new Map<string, string>();
  for (const [option, path] of outputs) {
    if (path === undefined) continue;
    const full = resolvePath(path);
    const earlier = seen.get(full);
    if (earlier !== undefined) throw new UsageError(`${option} and ${earlier} name one file, '${path}': each output needs a path of its own`);
    if (under !== undefined && (full + sep).startsWith(resolvePath(under[1]) + sep)) throw new UsageError(`${option} '${path}' is inside ${under[0]} '${under[1]}', which the command writes: give it a path outside`);
    seen.set(full, option);
  }
}

/** The file at `path` (followed through links), '-' being stdin, as device and inode; null when there is none. */
function fileIdentity(path: string): { dev: number; ino: number } | null {
  try {
    const stat = path === '-' ? fstatSync(0) : statSync(path);
    return stat.isFile() ? { dev: stat.dev, ino: stat.ino } : null;
  } catch {
    return null;
  }
}

/**
 * An output at one of the command's inputs: writing it destroyed the input
 * (`check same/history.html --report same` replaced the recording it judged
 * with its report). One file by device and inode, so a symbolic link, a hard
 * link or another spelling of the path (`./x`, `../dir/x`, `/dev/stdout`
 * redirected to it, stdin read from it) is one too. Refused before any work.
 */
function outputsSpareInputs(outputs: ReadonlyArray<readonly [option: string, path: string | undefined]>, inputs: ReadonlyArray<readonly [what: string, path: string | undefined]>): void {
  for (const [inputWhat, inputPath] of inputs) {
    const input = inputPath === undefined ? null : fileIdentity(inputPath);
    if (input === null) continue;
    for (const [option, path] of outputs) {
      const output = path === undefined ? null : fileIdentity(path);
      if (output === null || output.dev !== input.dev || output.ino !== input.ino) continue;
      // Whole (a path is at most MAX_ARGUMENT_LENGTH), redacted and escaped: cut short, two long paths would read alike.
      const shownPath = (p: string): string => `'${escapedText(redactSecrets(p))}'`;
      throw new UsageError(`${option} ${shownPath(path!)} is the ${inputWhat} ${inputPath === '-' ? 'stdin' : shownPath(inputPath!)}: writing it would destroy the input; give the output another path`);
    }
  }
}

/** --ttl MS or MIN-MAX (ms), each in [10, 600000], MIN not above MAX. */
function ttlRange(raw: string | undefined): { ttlMinMs: number; ttlMaxMs: number } {
  if (raw === undefined) return { ttlMinMs: 500, ttlMaxMs: 2000 };
  const m = /^([^-]*)-([^-]*)$/.exec(raw);
  const [min, max] = m === null ? [raw, raw] : [m[1]!, m[2]!];
  if (min === '' || max === '') throw new UsageError(`--ttl must be MS or MIN-MAX in ms, got ${shownValue(raw)}`);
  const ttlMinMs = int(min, 'ttl', 0, 10, 600_000);
  const ttlMaxMs = int(max, 'ttl', 0, 10, 600_000);
  if (ttlMinMs > ttlMaxMs) throw new UsageError(`--ttl MIN-MAX: MIN ${ttlMinMs} is above MAX ${ttlMaxMs}, got ${shownValue(raw)}`);
  return { ttlMinMs, ttlMaxMs };
}

/** --redis and --pg, checked for form here (reachability is checked when a command starts). */
function serverChoice(redis: readonly string[] | undefined, pg: string | undefined): ServerChoice {
  const urls = redis?.flatMap((r) => list(r, 'redis') ?? []);
  if (urls !== undefined && urls.length === 0) throw new UsageError('--redis needs at least one URL');
  if (urls !== undefined && urls.length > 15) throw new UsageError(`--redis takes at most 15 URLs, got ${urls.length}`);
  for (const u of urls ?? []) parseRedisUrl(u);
  if (pg !== undefined) parsePostgresUrl(pg);
  return { ...(urls !== undefined ? { redis: urls } : {}), ...(pg !== undefined ? { pg } : {}) };
}

function rejectForeignOptions(command: string, values: Record<string, unknown>): void {
  const takes = COMMAND_OPTIONS[command];
  if (takes === undefined) return; // an unknown command: the switch says so
  for (const [option, value] of Object.entries(values)) {
    if (value === undefined || option === 'help' || option === 'redis' || option === 'pg' || takes.includes(option)) continue;
    throw new UsageError(`${command} does not take --${option} (it takes ${takes.map((o) => `--${o}`).join(', ')})`);
  }
}

/** The commands that start servers or load adapters: their clean-up on a signal takes up to 5 s, so they say what it is doing. */
const CLEANING_COMMANDS = new Set(['matrix', 'run', 'replay', 'failover', 'stress']);

/**
 * Ctrl-C (SIGINT), SIGTERM or SIGHUP: what a server command prints while its
 * clean-up runs (conformance/env/processes.ts stops the servers, deletes the
 * run's keys and rows, then re-raises the signal: exit 130, 143, 129). A
 * second signal meanwhile ends it at once, after the synchronous part of
 * the clean-up (processes.ts says so on stderr).
 * check installs its own (cli/check.ts): the check runs on a worker thread
 * and stops where it is, and the report of what it decided is printed. explore
 * installs its own (cli/explore.ts): its explorations run on worker threads
 * and stop at their last complete level, and the report of what was done is printed.
 */
function sayWhenInterrupted(): void {
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      process.stderr.write(`\nlockcheck: ${signal}: stopping: the servers it started are stopped and what it made is deleted (within 5 s)\n`);
      // Nothing started yet, so no clean-up handler: end as the signal would have.
      if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
    });
  }
}


const COMMANDS = Object.keys(COMMAND_OPTIONS);

/** parseArgs, with the option a typo was near named (`--run` -> did you mean '--runs'?). */
function parseWithSuggestions(argv: readonly string[]) {
  try {
    return parseArgs({ args: [...argv], allowPositionals: true, tokens: true, options: OPTIONS });
  } catch (e) {
    const unknown = e instanceof Error && (e as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? /^Unknown option '--([^'=]+)'/.exec(e.message)?.[1] : undefined;
    const near = unknown === undefined ? '' : didYouMean(unknown, Object.keys(OPTIONS));
    if (near === '') throw e;
    throw new UsageError(`unknown option '--${escapedText(unknown ?? '')}'${near.replace(/'([^']+)'\?$/, "'--$1'?")}`);
  }
}

/**
 * The exit code of a command that an error no handler below foresaw stopped (a bug, an uncaught exception, an unhandled
 * rejection, a command that ended unfinished): 4, nothing decided, in every command. Never 1: that is a verdict (check and
 * stress: a violation; run and replay: a conformance failure), and a CI job must not read a crash as one.
 */
const UNEXPECTED_ERROR_EXIT = 4;
/** What the stopped command leaves undecided, for its message. */
let undecided = 'its verdict is unknown';

/** The longest argument taken: a path's limit on Linux (PATH_MAX). Longer text is refused, not echoed back in full in a message. */
const MAX_ARGUMENT_LENGTH = 4096;

async function main(argv: readonly string[]): Promise<number> {
  const long = argv.findIndex((a) => a.length > MAX_ARGUMENT_LENGTH);
  if (long >= 0) throw new UsageError(`argument ${long + 1} is ${argv[long]!.length} characters long; lockcheck takes at most ${MAX_ARGUMENT_LENGTH} (the longest path)`);
  const { values, positionals, tokens } = parseWithSuggestions(argv);
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.version) {
    // Alone: `--version --json` printed plain text and exit 0, as if the JSON it asked for had been given.
    const other = tokens.find((t) => t.kind === 'positional' || (t.kind === 'option' && t.name !== 'version'));
    if (other !== undefined) throw new UsageError(`--version takes no command or other option, got ${other.kind === 'option' ? `--${other.name}` : shownValue(other.value ?? '')}`);
    console.log(lockcheckVersion());
    return 0;
  }
  const [command, ...rest] = positionals;
  if (command !== undefined && !COMMANDS.includes(command)) throw new UsageError(`unknown command ${shownValue(command)}${didYouMean(command, COMMANDS)}`);
  // Before the values are judged: `run --out ''` is an option run does not take, whatever its value.
  rejectForeignOptions(command ?? 'explore', values);
  rejectRepeatsAndEmpties(tokens);
  if (command !== undefined && CLEANING_COMMANDS.has(command)) {
    sayWhenInterrupted();
    // An adapter call that takes long (a start() that never settles waits START_LIMIT_MS) is said, not waited on in silence.
    onSlowAdapterCall((backend, call, waitedMs, limitMs) =>
      process.stderr.write(`lockcheck: still waiting on adapter ${redactSecrets(backend)}: ${call} has not settled after ${Math.round(waitedMs / 1000)} s (given up on after ${Math.round(limitMs / 1000)} s)\n`),
    );
  }
  const seed = int(values.seed, 'seed', 20161010, -(2 ** 31), 2 ** 31 - 1);
  const servers = serverChoice(values.redis, values.pg);
  switch (command) {
    case 'matrix': {
      if (rest.length) throw new UsageError(`matrix takes no arguments, got ${shownValue(rest.join(' '))}`);
      const faults = list(values.faults, 'faults');
      for (const f of faults ?? []) if (!MEASURED_FAULT_CLASSES.some((c) => c.id === f)) throw new UsageError(`unknown fault class ${shownValue(f)} (known: ${MEASURED_FAULT_CLASSES.map((c) => c.id).join(', ')})`);
      // Each name: one mistyped among several was dropped silently, and its row was missing from the table.
      const rows = [...BUILT_INS, ...LIBRARY_AUDITS].map((b) => b.name);
      const backends = list(values.backend, 'backend');
      for (const b of backends ?? []) if (!rows.includes(b)) throw new UsageError(`unknown backend ${shownValue(b)} in --backend${didYouMean(b, rows)} (known: ${rows.join(', ')})`);
      const runs = int(values.runs, 'runs', 30, 1, 100_000);
      const stressSeconds = int(values['stress-seconds'], 'stress-seconds', 2, 0, 600);
      // Every output checked before the run: a run of many minutes must not end by failing to save what it found.
      distinctOutputs([['--junit', values.junit]], ['--out', values.out ?? 'docs']);
      checkOutputFilesIn(values.out ?? 'docs', 'the matrix into (--out)', [
        ['matrix.md', 'the matrix (--out)'],
        [join('matrix', 'index.html'), 'the matrix page (--out)'],
        // Under the default out, a run that does not finish reports beside the committed report (cli/matrix.ts reportPlace).
        ...(values.out === undefined ? ([['matrix.partial.md', 'the partial matrix (--out)']] as const) : []),
      ]);
      if (values.junit !== undefined) checkOutputFile(values.junit, 'the JUnit report (--junit)');
      const { matrixCommand } = await import('./matrix.ts');
      return matrixCommand({
        runs,
        seed,
        out: values.out,
        json: values.json ?? false,
        junit: values.junit,
        backends,
        faults,
        servers,
        stressSeconds,
      });
    }
    case 'run': {
      if (rest.length) throw new UsageError(`run takes no arguments, got ${shownValue(rest.join(' '))}`);
      if (values.backend === undefined) throw new UsageError('run needs --backend <built-in name | adapter module path>');
      const faults = list(values.faults, 'faults');
      for (const f of faults ?? []) if (!isFaultKind(f)) throw new UsageError(`unknown fault kind ${shownValue(f)} (known: ${FAULT_KINDS.join(', ')})`);
      if (values.path !== undefined && values.seed === undefined) throw new UsageError('--path needs the --seed it was found with');
      if (values.path !== undefined && !/^\d{1,9}(:\d{1,9})*$/.test(values.path)) throw new UsageError(`--path must be a replay path like 12:0:3 (as a failure prints it), got ${shownValue(values.path)}`);
      const runs = int(values.runs, 'runs', 100, 1, 1_000_000);
      // The counterexample's timeline goes beside it (.html, .txt).
      const counterexample = values.counterexample ?? 'lockcheck-counterexample.json';
      const timeline = counterexample.replace(/\.json$/, '');
      distinctOutputs([['--counterexample', counterexample], ['--counterexample\'s timeline', `${timeline}.html`], ['--counterexample\'s timeline', `${timeline}.txt`], ['--junit', values.junit]]);
      outputsSpareInputs([['--counterexample', counterexample], ['--counterexample\'s timeline', `${timeline}.html`], ['--counterexample\'s timeline', `${timeline}.txt`], ['--junit', values.junit]], [['adapter module (--backend)', values.backend]]);
      if (values.junit !== undefined) checkOutputFile(values.junit, 'the JUnit report (--junit)');
      checkOutputFile(counterexample, 'a counterexample (--counterexample)');
      // Its timeline is written beside it as the failure is found: a directory there lost the counterexample.
      checkOutputFile(`${timeline}.html`, 'the counterexample\'s timeline (--counterexample)');
      checkOutputFile(`${timeline}.txt`, 'the counterexample\'s timeline (--counterexample)');
      const { runCommand } = await import('./run.ts');
      return runCommand({
        backend: values.backend,
        faults: faults as FaultKind[] | undefined,
        runs,
        seed,
        path: values.path,
        json: values.json ?? false,
        junit: values.junit,
        counterexample: values.counterexample ?? 'lockcheck-counterexample.json',
        servers,
      });
    }
    case 'replay': {
      undecided = 'whether the counterexample still fails is unknown';
      if (rest.length !== 1) throw new UsageError('replay needs exactly one counterexample file');
      const { replayCommand } = await import('./run.ts');
      return replayCommand(rest[0]!, servers, values.backend);
    }
    case 'check': {
      if (rest.length !== 1) throw new UsageError('check needs exactly one history file (or - for stdin)');
      if (servers.redis !== undefined || servers.pg !== undefined) throw new UsageError('check judges a recorded history: it takes no --redis or --pg');
      const policy = values['store-policy'];
      if (policy !== undefined && !STORE_POLICIES.includes(policy as StorePolicy)) throw new UsageError(`unknown store policy ${shownValue(policy)} (known: ${STORE_POLICIES.join(', ')})`);
      if (values.report !== undefined) {
        outputsSpareInputs([['--report\'s history.html', join(values.report, 'history.html')]], [['history being checked', rest[0]]]);
        checkOutputFilesIn(values.report, 'the history report into (--report)', [['history.html', 'the history report (--report)']]);
      }
      const { checkCommand } = await import('./check.ts');
      return checkCommand({
        file: rest[0]!,
        json: values.json ?? false,
        report: values.report,
        storePolicy: policy as StorePolicy | undefined,
        // 0 as in checkHistory: only the work judged whole whatever the budget (a small history), the rest unknown.
        timeoutMs: values['timeout-ms'] === undefined ? undefined : int(values['timeout-ms'], 'timeout-ms', 10_000, 0, 86_400_000),
        maxMemoryBytes: values['memory-mib'] === undefined ? undefined : int(values['memory-mib'], 'memory-mib', 1024, 1, 1 << 20) * 2 ** 20,
      });
    }
    case 'failover': {
      if (rest.length) throw new UsageError(`failover takes no arguments, got ${shownValue(rest.join(' '))}`);
      if (servers.redis !== undefined || servers.pg !== undefined) throw new UsageError('failover starts its own primary, replica and Sentinel: it takes no --redis or --pg');
      const { failoverCommand } = await import('./failover.ts');
      return failoverCommand({ json: values.json ?? false });
    }
    case 'stress': {
      if (rest.length) throw new UsageError(`stress takes no arguments, got ${shownValue(rest.join(' '))}`);
      if (servers.redis !== undefined || servers.pg !== undefined) throw new UsageError('stress starts its own servers (its faults kill and pause them): it takes no --redis or --pg');
      if (values.backend === undefined) throw new UsageError(`stress needs --backend, one of ${STRESS_BACKENDS.join(', ')}, a library audit (lib:…) or the path of an adapter module`);
      const nemesis = (list(values.nemesis, 'nemesis') ?? []).filter((f) => f !== 'none');
      for (const f of nemesis) if (!NEMESIS_FAULTS.includes(f as NemesisFault)) throw new UsageError(`unknown nemesis fault ${shownValue(f)} (known: ${NEMESIS_FAULTS.join(', ')})`);
      const stressOut = values.out ?? 'lockcheck-stress';
      // Before the module is loaded: loading it is work, and an adapter's top-level code may start servers.
      outputsSpareInputs(
        ['history.jsonl', 'history.html', 'history.partial.jsonl'].map((name) => [`--out's ${name}`, join(stressOut, name)] as const),
        [['adapter module (--backend)', values.backend]],
      );
      const { resolveStressTarget } = await import('./backends.ts');
      const { backend, adapter } = await resolveStressTarget(values.backend);
      for (const f of nemesis) {
        const why = unsupported(f as NemesisFault, backend);
        if (why !== null) throw new UsageError(adapter === undefined ? why : `${why} (${adapter.name} runs on ${backend} servers)`);
      }
      const store = values.store ?? 'unfenced';
      if (!['unfenced', 'monotonic', 'strict'].includes(store)) throw new UsageError(`--store must be unfenced, monotonic or strict, got ${shownValue(store)}`);
      if (backend === 'pg-xact' && values.store !== undefined) throw new UsageError('pg-xact writes in the lock\'s own transaction: it takes no --store');
      if (adapter?.client.tokens === false && store !== 'unfenced') throw new UsageError(`${adapter.name} hands out no fencing tokens: its register's store must be unfenced, not ${store}`);
      const { ttlMinMs, ttlMaxMs } = ttlRange(values.ttl);
      const clients = int(values.clients, 'clients', 5, 1, 64);
      const seconds = int(values.seconds, 'seconds', 10, 1, 86_400);
      const resources = int(values.resources, 'resources', 3, 1, 10_000);
      checkOutputFilesIn(stressOut, 'the stress history into (--out)', [
        ['history.jsonl', 'the stress history (--out)'],
        ['history.html', 'the stress history report (--out)'],
        ['history.partial.jsonl', 'the interrupted stress history (--out, cli/stress.ts PARTIAL_HISTORY)'],
      ]);
      const { stressCommand } = await import('./stress.ts');
      return stressCommand({
        backend,
        ...(adapter !== undefined ? { adapter } : {}),
        clients,
        seconds,
        nemesis: nemesis as NemesisFault[],
        seed,
        store: store as 'unfenced' | 'monotonic' | 'strict',
        resources,
        ttlMinMs,
        ttlMaxMs,
        json: values.json ?? false,
        out: values.out ?? 'lockcheck-stress',
      });
    }
    case 'explore':
    case undefined: {
      if (rest.length) throw new UsageError(`explore takes no arguments, got ${shownValue(rest.join(' '))}`);
      if (servers.redis !== undefined || servers.pg !== undefined) throw new UsageError('explore runs the model alone: it takes no --redis or --pg');
      if (values.replay !== undefined) {
        // One counterexample replayed: the exploration's options would be read as bounding something they do not.
        const other = ['depth', 'max-states', 'design', 'fault', 'seconds', 'budget', 'memory-mib', 'jobs'].find((o) => values[o as keyof typeof values] !== undefined);
        if (other !== undefined) throw new UsageError(`--replay replays one counterexample, which names its cell: it takes no --${other} (only --json)`);
        const { exploreReplayCommand } = await import('./exploreReplay.ts');
        return exploreReplayCommand(values.replay, values.json ?? false);
      }
      if (values['memory-mib'] !== undefined && values.budget === undefined) throw new UsageError('--memory-mib bounds a --budget run: give --budget S too');
      if (values.seconds !== undefined && values.budget !== undefined) throw new UsageError('--seconds (a bound per cell) and --budget (one for the whole run) do not go together: give one');
      const { exploreCommand, DEFAULT_JOBS } = await import('./explore.ts');
      return exploreCommand({
        // Under --budget the depth is a bound the time usually reaches first; without one, none.
        depth: values.budget === undefined ? int(values.depth, 'depth', 6, 1, 10) : int(values.depth, 'depth', 1000, 1, 1000),
        maxStates: int(values['max-states'], 'max-states', values.budget === undefined ? 5_000_000 : 500_000_000, 1, 500_000_000),
        design: values.design,
        fault: values.fault,
        seconds: values.seconds === undefined ? undefined : int(values.seconds, 'seconds', 0, 1, 86_400),
        budget: values.budget === undefined ? undefined : int(values.budget, 'budget', 0, 1, 86_400),
        memoryMib: int(values['memory-mib'], 'memory-mib', 3072, 64, 1 << 20),
        jobs: int(values.jobs, 'jobs', DEFAULT_JOBS, 1, Math.max(1, availableParallelism())),
        json: values.json ?? false,
      });
    }
    default:
      throw new UsageError(`unknown command ${shownValue(command)}`);
  }
}

/**
 * Every command closes what it opened, so the process normally ends as soon as
 * main settles. Should anything still hold the event loop (a library's socket
 * or timer an adapter did not close), the process still ends, boundedly, and
 * says what held it: nothing may hang.
 */
function exitBounded(): void {
  // An adapter's top-level code given up on still runs, and holds the loop for as long as it likes: waiting on it would only name lockcheck's own pipes.
  if (importLeftRunning()) process.exit();
  setTimeout(() => {
    const held = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'Timeout');
    process.stderr.write(`lockcheck: exiting with ${held.length ? held.join(', ') : 'handles'} still open ${EXIT_GRACE_MS} ms after the command ended\n`);
    process.exit();
  }, EXIT_GRACE_MS).unref();
}
const EXIT_GRACE_MS = 10_000;

redactTerminalOutput(UNEXPECTED_ERROR_EXIT);
if (hideCommandLineSecrets()) {
  process.stderr.write('lockcheck: warning: a password on the command line can be read by every local user (ps) until lockcheck starts and hides it; give it in REDISCLI_AUTH (--redis) or PGPASSWORD (--pg) instead\n');
}
// A command whose work can never finish (an adapter's promise that never settles, with nothing left to run) would let Node end with exit code 0 as if all went well.
let ended = false;
// An adapter calling process.exit() ends the run unfinished too, but the message must say so, not blame a promise.
let exitCalled: string | null = null;
const exit = process.exit.bind(process);
process.exit = ((...args: [code?: number | string | null]) => {
  if (!ended && exitCalled === null) exitCalled = String(args[0] ?? process.exitCode ?? 0);
  // As given: process.exit() with no argument keeps process.exitCode, process.exit(undefined) would not.
  return exit(...args);
}) as typeof process.exit;
process.on('exit', () => {
  if (ended) return;
  process.stderr.write(
    exitCalled !== null
      ? `lockcheck: the command stopped unfinished: process.exit(${exitCalled}) was called before it ended (by an adapter module?)\n`
      : 'lockcheck: the command stopped unfinished: it waited on a promise that can never settle (nothing was left to run); an adapter call that never returns?\n',
  );
  process.exitCode = UNEXPECTED_ERROR_EXIT;
});
main(process.argv.slice(2)).then(
  (code) => {
    ended = true;
    process.exitCode = code;
  },
  (e: unknown) => {
    ended = true;
    if (e instanceof UsageError || e instanceof ServerUrlError || e instanceof AdapterApiError || e instanceof FaultNotOfferedError || (e instanceof Error && 'code' in e && String((e as { code: unknown }).code).startsWith('ERR_PARSE_ARGS'))) {
      console.error(`lockcheck: ${e.message}\n(lockcheck --help lists the commands and options)`);
      process.exitCode = 2;
    } else if (e instanceof MalformedRecordingError || e instanceof OutputFileError) {
      console.error(`lockcheck: ${e.message}`);
      process.exitCode = 2;
    } else if (e instanceof AdapterError) {
      // The adapter's own code failed: its message, and where in the adapter (the first frame of its error), not lockcheck's stack.
      const at = e.cause instanceof Error ? e.cause.stack?.split('\n').find((l) => /^\s+at /.test(l))?.trim() : undefined;
      console.error(redactSecrets(`lockcheck: ${e.message}${at === undefined ? '' : `\n  ${at}`}`));
      process.exitCode = 2;
    } else if (e instanceof EnvironmentError) {
      // The message already ends with the fix (EnvironmentError appends it).
      console.error(`lockcheck: ${e.message}`);
      process.exitCode = 3;
    } else {
      console.error(redactSecrets(e instanceof Error ? (e.stack ?? e.message) : String(e)));
      console.error(`lockcheck: the command stopped on an unexpected error (a bug in lockcheck: the stack above says where): ${undecided} (exit ${UNEXPECTED_ERROR_EXIT})`);
      process.exitCode = UNEXPECTED_ERROR_EXIT;
    }
  },
).finally(exitBounded);
