let lastTenth = -1;

/** "run 7/30", or once the runs are done and a failure is being shrunk, "shrinking (run 35)". */
export function runText(run: number, runs: number): string {
  return run <= runs ? `run ${run}/${runs}` : `shrinking the counterexample (run ${run})`;
}

/**
 * One status line on stderr with the time left estimated from the work done:
 * rewritten in place on a terminal, otherwise printed at each tenth of the work.
 */
export function progressLine(what: string, startedMs: number, doneSoFar: number, total: number): void {
  const done = Math.min(doneSoFar, total); // shrinking re-runs a failure past the planned runs
  const elapsedS = (performance.now() - startedMs) / 1000;
  const leftS = done > 0 ? (elapsedS / done) * (total - done) : NaN;
  const line = `${what} | ${fmt(elapsedS)} elapsed${Number.isFinite(leftS) ? `, about ${fmt(leftS)} left` : ''}`;
  if (process.stderr.isTTY) {
    const width = (process.stderr.columns ?? 120) - 1;
    process.stderr.write(`\r${line.slice(0, width).padEnd(width)}`);
    return;
  }
  const tenth = Math.floor((done / total) * 10);
  if (tenth !== lastTenth) {
    lastTenth = tenth;
    process.stderr.write(`${line}\n`);
  }
}

/**
 * A line that stays, after progress lines: on a terminal it first blanks the
 * status line in place (its whole width, as progressLine drew it); in a log
 * (CI, a file) there is nothing to blank, so it is only the line.
 */
export function progressDone(line: string): void {
  if (process.stderr.isTTY) {
    const width = (process.stderr.columns ?? 120) - 1;
    process.stderr.write(`\r${' '.repeat(width)}\r${line}\n`);
    return;
  }
  process.stderr.write(`${line}\n`);
}

function fmt(s: number): string {
  return s >= 60 ? `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, '0')}s` : `${Math.round(s)}s`;
}

/**
 * The first line of a command that starts servers (run, replay), printed at
 * once, as stress and failover print theirs: starting them and the first run
 * take seconds (5-11 s for PostgreSQL, ZooKeeper), and a silence that long
 * reads as a hang. `onGiven`: the user's --redis/--pg servers, none started.
 */
export function startingLine(what: string, onGiven: boolean): void {
  process.stderr.write(`[0.0 s] ${what}: ${onGiven ? 'connecting to the given servers' : 'starting servers'}\n`);
}
