import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, renameSync, rmdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { atExit } from '../conformance/env/processes.ts';
import { makeOutputDir, OutputFileError, pinOutputDir, writeRedacted } from '../conformance/env/outputFile.ts';

/** Text as HTML character data and attribute values. */
const escapeHtml = (s: string): string => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');

/**
 * The matrix run's counterexample timelines. They are written into a
 * directory of their own inside the report's (`matrix/.run.PID.RAND`) and
 * moved into place only when the report is written: a run interrupted, or
 * ended by an error, leaves the previous report and every timeline it links
 * to as they were, and the staging directory is removed (on Ctrl-C too, as
 * the last thing before the process ends).
 */
export class StagedTimelines {
  readonly #dir: string;
  readonly #staging: string;
  readonly #unregister: () => void;
  /** The outermost directory this run made (null: none): an interrupted first run leaves no empty ones behind. */
  readonly #made: string | null = null;

  constructor(dir: string) {
    this.#dir = resolve(dir);
    for (let d = this.#dir; !existsSync(d) && d !== dirname(d); d = dirname(d)) this.#made = d;
    // Checked before any work: never under a link another user made (makeOutputDir refuses one).
    makeOutputDir(dir, 'the matrix timelines into');
    this.#staging = join(dir, `.run.${process.pid}.${randomBytes(4).toString('hex')}`);
    makeOutputDir(this.#staging, 'the matrix timelines into');
    // At exit, and last when a signal ends the run (cells still running then may write here).
    this.#unregister = atExit(() => this.drop());
  }

  /** Where this run writes the timeline of a cell (`name` without extension; its `.txt`, and a failure's `.json`, go beside it). */
  path(name: string): string {
    return join(this.#staging, `${name}.html`);
  }

  /**
   * Ends a cell's staged timeline (its page and its text) with the command
   * that replays its saved counterexample: the report, not only the run's
   * stderr, says how to reproduce the finding.
   */
  noteReplay(name: string, command: string): void {
    const page = this.path(name);
    const text = page.replace(/\.html$/, '.txt');
    const line = 'replay on real servers: ';
    if (existsSync(text)) writeRedacted(text, `${readFileSync(text, 'utf8').trimEnd()}\n\n${line}${command}\n`, 'the timeline');
    if (existsSync(page)) {
      const html = readFileSync(page, 'utf8');
      const note = `<p class="replay">${line}<code>${escapeHtml(command)}</code></p>`;
      const at = html.lastIndexOf('</body>');
      writeRedacted(page, at < 0 ? html + note : html.slice(0, at) + note + html.slice(at), 'the timeline', 'markup');
    }
  }

  /**
   * Moves the timelines of the cells this run measured into place: each
   * cell's earlier timeline is removed (it must not outlive its cell) and
   * this run's, if the cell has one, takes its name. Cells not measured in
   * this run keep theirs.
   */
  publish(names: readonly string[]): void {
    this.publishInto(this.#dir, names);
  }

  /** The same into another directory (made if missing): a partial report's own (cli/matrix.ts reportPlace). */
  publishInto(dir: string, names: readonly string[]): void {
    makeOutputDir(dir, 'the matrix timelines into');
    // Both held open while the files move: a directory swapped for another user's link meanwhile changes nothing of where they go.
    const into = pinOutputDir(dir, 'the matrix timelines into');
    try {
      const from = pinOutputDir(this.#staging, 'the matrix timelines into');
      try {
        for (const name of names) {
          for (const file of [`${name}.html`, `${name}.txt`, `${name}.json`]) {
            const target = join(dir, file);
            try {
              if (existsSync(from.at(file))) renameSync(from.at(file), into.at(file));
              else rmSync(into.at(file), { force: true });
            } catch (error) {
              throw new OutputFileError('io', target, `cannot move the timeline into ${target}: ${(error as { code?: string }).code ?? (error as Error).message}`, { cause: error });
            }
          }
        }
      } finally {
        from.close();
      }
    } finally {
      into.close();
    }
  }

  /** Removes the staging directory and whatever is left in it. Never throws. */
  drop(): void {
    this.#unregister();
    try {
      rmSync(this.#staging, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // Best effort: a hidden directory of this run's own files, nothing the report links to.
    }
    for (let d = this.#dir; this.#made !== null; d = dirname(d)) {
      try {
        rmdirSync(d);
      } catch {
        break; // not empty: the report is in it
      }
      if (d === this.#made) break;
    }
  }
}
