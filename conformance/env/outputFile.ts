import { randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants, fchmodSync, lstatSync, mkdirSync, openSync, renameSync, rmdirSync, rmSync, type Stats, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { redactSecrets, visibleControls } from './redact.ts';
import { redactMarkup } from './redactMarkup.ts';
import { messageText } from '../../impl/errorText.ts';

/** Why an output could not be written. */
export type OutputFileProblem =
  | 'missing-directory' // the directory it goes in does not exist
  | 'is-directory' // a file was asked for where a directory is
  | 'not-a-directory' // a directory was asked for where a file is, or a part of the path is a file
  | 'permission' // the user may not write there
  | 'foreign-link' // a symbolic link another user made, at the path or on the way
  | 'foreign-file' // a FIFO, socket or device another user made at the path
  | 'io'; // anything else the system refused (no space, read-only file system...)

/**
 * A report, counterexample, timeline or history file (or their directory)
 * that cannot be written, naming the path and why. The CLI checks every
 * output it was given before it starts work and prints this as a bad
 * argument (exit 2); a library caller gets it from the write itself.
 */
export class OutputFileError extends Error {
  override readonly name = 'OutputFileError';
  constructor(
    readonly problem: OutputFileProblem,
    readonly path: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(messageText(message), options);
  }
}

const REASONS: Readonly<Record<string, { problem: OutputFileProblem; says: string }>> = {
  ENOENT: { problem: 'missing-directory', says: 'its directory does not exist' },
  EISDIR: { problem: 'is-directory', says: 'it is a directory' },
  ENOTDIR: { problem: 'not-a-directory', says: 'a part of the path is not a directory' },
  EEXIST: { problem: 'not-a-directory', says: 'a file is there, not a directory' },
  EACCES: { problem: 'permission', says: 'permission denied' },
  EPERM: { problem: 'permission', says: 'permission denied' },
  EROFS: { problem: 'permission', says: 'the file system is read-only' },
  ENOSPC: { problem: 'io', says: 'no space left on the device' },
  EFBIG: { problem: 'io', says: 'the file is larger than this process may write (ulimit -f)' },
  EDQUOT: { problem: 'io', says: 'the disk quota is exhausted' },
  ELOOP: { problem: 'foreign-link', says: 'it is a symbolic link created after it was checked' },
};

/** A file-system error met while writing `what` at `path`, as an OutputFileError. */
function failed(error: unknown, what: string, path: string): OutputFileError {
  if (error instanceof OutputFileError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  const reason = typeof code === 'string' ? REASONS[code] : undefined;
  const says = reason?.says ?? (error instanceof Error ? error.message : String(error));
  return new OutputFileError(reason?.problem ?? 'io', path, `cannot write ${what} ${path}: ${says}`, { cause: error });
}

/**
 * Throws when `path` or a directory on the way to it is a symbolic link another
 * user made (not this user, not root): an output in a shared place
 * (lockcheck-stress/, lockcheck-timelines/ under a shared working directory)
 * replaced by a link would have lockcheck write wherever that user chose.
 * The user's own links, and the system's (root's), are followed as usual.
 */
export function refuseForeignLinks(path: string, what = 'under'): void {
  const uid = process.getuid?.();
  if (uid === undefined) return;
  for (let at = resolve(path); ; at = dirname(at)) {
    let stat;
    try {
      stat = lstatSync(at);
    } catch {
      stat = null; // not there (yet): nothing to follow
    }
    if (stat !== null && stat.isSymbolicLink() && stat.uid !== uid && stat.uid !== 0) {
      throw new OutputFileError('foreign-link', path, `refusing to write ${what} ${path}: ${at} is a symbolic link made by another user (uid ${stat.uid}), which would choose where lockcheck writes`);
    }
    if (dirname(at) === at) return;
  }
}

/** What a special file is called in a message. */
function kindOf(stat: Stats): string {
  return stat.isFIFO() ? 'a FIFO' : stat.isSocket() ? 'a socket' : stat.isCharacterDevice() || stat.isBlockDevice() ? 'a device' : 'a special file';
}

/**
 * Throws when `stat` (what is at the output path, links followed) is a FIFO,
 * socket or device another user made (not this user, not root): opened for
 * writing, a FIFO waits for its reader, which that user controls (lockcheck
 * hung at the end of its run), and a device writes where they chose. The
 * user's own and the system's (/dev/stdout, /dev/null) are written through.
 */
function refuseForeignSpecial(stat: Stats, path: string, what: string): void {
  const uid = process.getuid?.();
  if (uid === undefined || stat.isFile() || stat.isDirectory() || stat.uid === uid || stat.uid === 0) return;
  throw new OutputFileError('foreign-file', path, `refusing to write ${what} ${path}: it is ${kindOf(stat)} made by another user (uid ${stat.uid}), who would decide when and where lockcheck's write goes`);
}

/** The nearest part of `path` that exists (the path itself, or a directory on the way). */
function nearestExisting(path: string): { at: string; isDirectory: boolean } {
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      return { at, isDirectory: statSync(at).isDirectory() };
    } catch {
      if (dirname(at) === at) return { at, isDirectory: true };
    }
  }
}

function writable(dir: string, what: string, path: string): void {
  try {
    accessSync(dir, constants.W_OK);
  } catch (error) {
    throw failed(error, what, path);
  }
}

/**
 * Checks, before any work starts, that a file can be written at `path` (named
 * `what` in the message: "the JUnit report"): its directory exists and may be
 * written, it is not a directory, no foreign link leads there. A long run must
 * not end by failing to save what it found.
 */
export function checkOutputFile(path: string, what: string): void {
  refuseForeignLinks(path, what);
  const target = resolve(path);
  let existing;
  try {
    existing = statSync(target);
  } catch {
    existing = null;
  }
  if (existing?.isDirectory() === true) throw new OutputFileError('is-directory', path, `cannot write ${what} ${path}: it is a directory`);
  if (existing !== null) {
    if (existing.isFile()) writable(target, what, path);
    refuseForeignSpecial(existing, path, what);
    return; // a device or pipe (/dev/stdout): opened as it is
  }
  const parent = dirname(target);
  let dir;
  try {
    dir = statSync(parent);
  } catch (error) {
    throw failed(error, what, path);
  }
  if (!dir.isDirectory()) throw new OutputFileError('not-a-directory', path, `cannot write ${what} ${path}: ${parent} is not a directory`);
  writable(parent, what, path);
  // Made once and removed: where access() says yes and no file can be made (/proc, to root) the run would learn it only at its end.
  try {
    closeSync(openSync(target, 'wx'));
  } catch (error) {
    if ((error as { code?: unknown }).code === 'EEXIST') return; // made meanwhile: the write replaces it
    const f = failed(error, what, path);
    throw f.problem === 'missing-directory' ? new OutputFileError('permission', path, `cannot write ${what} ${path}: no file can be made in ${parent}`, { cause: error }) : f;
  }
  rmSync(target, { force: true });
}

/** Checks, before any work starts, that directory `path` exists or can be made, and may be written. */
export function checkOutputDir(path: string, what: string): void {
  refuseForeignLinks(path, what);
  const near = nearestExisting(path);
  if (!near.isDirectory) throw new OutputFileError('not-a-directory', path, `cannot write ${what} ${path}: ${near.at} is not a directory`);
  writable(near.at, what, path);
  // A directory to be made is made once and removed: where none can be (/proc, /sys: mkdir says ENOENT under a
  // directory that is there) the run would learn it only at its end.
  const first = missingDirs(path)[0];
  if (first === undefined) return;
  try {
    mkdirSync(first);
    rmdirSync(first);
  } catch (error) {
    const f = failed(error, what, path);
    throw f.problem === 'missing-directory' ? new OutputFileError('permission', path, `cannot write ${what} ${path}: no directory can be made in ${dirname(first)}`, { cause: error }) : f;
  }
}

/** The directories on the way to `dir` (itself included) that are not there, outermost first. */
function missingDirs(dir: string): string[] {
  const missing: string[] = [];
  for (let at = resolve(dir); dirname(at) !== at; at = dirname(at)) {
    try {
      statSync(at);
      break;
    } catch {
      missing.unshift(at);
    }
  }
  return missing;
}

/**
 * Checks, before any work starts, directory `dir` (as checkOutputDir) and
 * each file a command writes into it (`files`: a path under `dir`, and what
 * it is): a directory already where one of them goes, or a file where a
 * directory on the way goes, would fail only when the work is done.
 */
export function checkOutputFilesIn(dir: string, what: string, files: ReadonlyArray<readonly [name: string, what: string]>): void {
  checkOutputDir(dir, what);
  for (const [name, fileWhat] of files) {
    const path = join(dir, name);
    checkOutputDir(dirname(path), fileWhat);
    let parent;
    try {
      parent = statSync(dirname(path));
    } catch {
      parent = null; // made with the output: nothing in it yet
    }
    if (parent?.isDirectory() === true) checkOutputFile(path, fileWhat);
  }
}

/**
 * Runs each write of a command's outputs, every one tried even when one
 * before it failed (one file that cannot be written must not lose the
 * others), then throws the first failure (an OutputFileError names the path
 * and why).
 */
export function writeEach(writes: ReadonlyArray<() => void>): void {
  let failure: { readonly error: unknown } | null = null;
  for (const write of writes) {
    try {
      write();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure !== null) throw failure.error;
}

/**
 * Removes an output an earlier run left that this one does not replace (it
 * would be read as this run's); none there is fine. A failure is an
 * OutputFileError naming the path.
 */
export function removeStaleOutput(path: string, what: string): void {
  refuseForeignLinks(path, what);
  try {
    rmSync(path, { force: true });
  } catch (error) {
    const f = failed(error, what, path);
    throw new OutputFileError(f.problem, path, f.message.replace(/^cannot write /, 'cannot remove the stale '), { cause: error });
  }
}

/** Makes output directory `dir` (and those on the way); a failure is an OutputFileError. */
export function makeOutputDir(dir: string, what = 'into'): void {
  refuseForeignLinks(dir, what);
  // One level at a time: Node's recursive mkdirSync spins forever, deaf to signals, where mkdir says ENOENT under a directory that is there (/proc).
  for (const d of missingDirs(dir)) {
    try {
      // Never writable by everyone, whatever the umask (0 in some containers): another user could swap what goes in it.
      mkdirSync(d, { mode: 0o775 });
    } catch (error) {
      if ((error as { code?: unknown }).code === 'EEXIST' && statSync(d, { throwIfNoEntry: false })?.isDirectory() === true) continue; // made meanwhile
      const f = failed(error, what, dir);
      throw f.problem === 'missing-directory' ? new OutputFileError('permission', dir, `cannot write ${what} ${dir}: no directory can be made in ${dirname(d)}`, { cause: error }) : f;
    }
  }
  if (statSync(dir, { throwIfNoEntry: false })?.isDirectory() !== true) throw new OutputFileError('not-a-directory', dir, `cannot write ${what} ${dir}: a file is there, not a directory`);
}

/**
 * Writes a report, counterexample or timeline file with its secrets
 * redacted. A regular file (or none yet) is written whole beside it and
 * renamed over it, so a write cut short (no space left, a size limit, the
 * process killed) leaves the file as it was, never half of the new one; a
 * link planted at the path after the check is replaced, not followed. A
 * symbolic link another user made, at the path or on the way to it (an output
 * in a shared directory), is refused: it would choose where lockcheck writes.
 * The user's own links and the system's (`/dev/stdout`), and devices and
 * pipes, are written through as they are.
 * `format` 'markup' (HTML, XML; the default for .html, .htm, .xml, .svg)
 * redacts as the page reads and inserts escaped text (redactMarkup): a raw
 * <redacted> was an unknown tag the browser hid.
 * Throws OutputFileError naming the path and why when it cannot be written.
 */
export function writeRedacted(path: string, text: string, what = 'the file', format: OutputFormat = formatOf(path)): void {
  const target = resolve(path);
  refuseForeignLinks(target, what);
  let stat;
  try {
    stat = lstatSync(target);
  } catch {
    stat = null; // not there yet: created by the rename
  }
  // Control characters shown as the terminal shows them (a bidirectional override in a name reverses what follows); lossless in JSON.
  const bytes = Buffer.from(visibleControls(format === 'markup' ? redactMarkup(text) : redactSecrets(text)), 'utf8');
  if (stat === null || stat.isFile()) replaceWhole(target, bytes, keptMode(stat), what, path);
  else {
    // What a link leads to, too: the user's own link to another user's FIFO would wait as long.
    refuseForeignSpecial(stat.isSymbolicLink() ? statOrNull(target) ?? stat : stat, path, what);
    writeThrough(target, bytes, stat.isSymbolicLink(), what, path);
  }
}

/** How writeRedacted redacts: as plain text, or as HTML or XML. */
export type OutputFormat = 'text' | 'markup';

/** The format a path's extension says; a JUnit report, whatever its name, is passed as 'markup'. */
function formatOf(path: string): OutputFormat {
  return /\.(?:html?|xml|svg)$/i.test(path) ? 'markup' : 'text';
}

/**
 * The mode the new file takes of the one it replaces: the permissions of the
 * user's own file (a 0600 counterexample stays private), never its set-id
 * bits nor write for everyone; another user's file gives none (the default).
 * Copied whole, another user's 04777 file in a shared directory became, by a
 * run as root, a root-owned report anyone could change.
 */
function keptMode(stat: Stats | null): number | undefined {
  if (stat === null || stat.uid !== process.getuid?.()) return undefined;
  return stat.mode & 0o775;
}

/** Writes `bytes` to a new file beside `target` (with `mode`, keptMode's, when given), then renames it over `target`. */
function replaceWhole(target: string, bytes: Buffer, mode: number | undefined, what: string, path: string): void {
  const temp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  let fd;
  try {
    fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
  } catch (error) {
    throw failed(error, what, path);
  }
  let written = false;
  try {
    if (mode !== undefined) fchmodSync(fd, mode);
    writeAll(fd, bytes);
    written = true;
  } catch (error) {
    throw failed(error, what, path);
  } finally {
    closeSync(fd);
    if (!written) removeQuietly(temp);
  }
  try {
    renameSync(temp, target);
  } catch (error) {
    removeQuietly(temp);
    throw failed(error, what, path);
  }
}

/** A link of the user's own or the system's, a device or a pipe: opened and written as it is. */
function writeThrough(target: string, bytes: Buffer, link: boolean, what: string, path: string): void {
  let fd;
  try {
    fd = openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | (link ? 0 : constants.O_NOFOLLOW), 0o644);
  } catch (error) {
    throw failed(error, what, path);
  }
  try {
    writeAll(fd, bytes);
  } catch (error) {
    throw failed(error, what, path);
  } finally {
    closeSync(fd);
  }
}

/** writeSync until every byte is written (it may write fewer than asked). */
function writeAll(fd: number, bytes: Buffer): void {
  for (let at = 0; at < bytes.length; ) at += writeSync(fd, bytes, at, bytes.length - at);
}

function statOrNull(path: string): Stats | null {
  try {
    return statSync(path);
  } catch {
    return null; // a dangling link: the open says why
  }
}

function removeQuietly(file: string): void {
  try {
    unlinkSync(file);
  } catch {
    // already gone: nothing to remove
  }
}
