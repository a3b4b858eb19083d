import { randomBytes } from 'node:crypto';
import { accessSync, closeSync, constants, fchmodSync, fstatSync, lstatSync, mkdirSync, openSync, readlinkSync, renameSync, rmdirSync, rmSync, type Stats, statSync, unlinkSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { redactSecrets, visibleControls } from './redact.ts';
import { redactMarkup } from './redactMarkup.ts';
import { holdEntry, MAX_LINKS, O_PATH, pinDir, type PinnedDir, PINNED, PinRefused } from './pinnedDir.ts';
import { messageText } from '../../impl/errorText.ts';

/** Why an output could not be written. */
export type OutputFileProblem =
  | 'missing-directory' // the directory it goes in does not exist
  | 'is-directory' // a file was asked for where a directory is
  | 'not-a-directory' // a directory was asked for where a file is, or a part of the path is a file
  | 'permission' // the user may not write there
  | 'foreign-link' // a symbolic link another user made, at the path or on the way, or any link in a directory another user may change
  | 'foreign-directory' // a directory another user made on the way while lockcheck was making it
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
  // In the directory held open: swapped for another user's link in between, the removal would take a file of the same name there.
  const held = pinOutputDir(parent, what, path);
  try {
    const probe = held.at(basename(target));
    try {
      closeSync(openSync(probe, 'wx'));
    } catch (error) {
      if ((error as { code?: unknown }).code === 'EEXIST') return; // made meanwhile: the write replaces it
      const f = failed(error, what, path);
      throw f.problem === 'missing-directory' ? new OutputFileError('permission', path, `cannot write ${what} ${path}: no file can be made in ${parent}`, { cause: error }) : f;
    }
    rmSync(probe, { force: true });
  } finally {
    held.close();
  }
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
  // In its parent held open: swapped for another user's link in between, the removal would take an empty directory of the same name there.
  const parent = pinOutputDir(dirname(first), what, path);
  try {
    mkdirSync(parent.at(basename(first)));
    rmdirSync(parent.at(basename(first)));
  } catch (error) {
    const f = failed(error, what, path);
    throw f.problem === 'missing-directory' ? new OutputFileError('permission', path, `cannot write ${what} ${path}: no directory can be made in ${dirname(first)}`, { cause: error }) : f;
  } finally {
    parent.close();
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
export function removeStaleOutput(path: string, what: string, tree = false): void {
  const target = resolve(path);
  let dir: PinnedDir;
  try {
    dir = pinOutputDir(dirname(target), what, path);
  } catch (error) {
    if (error instanceof OutputFileError && error.problem === 'missing-directory') return; // nothing there to remove
    throw staleFailure(error, what, path);
  }
  try {
    const entry = dir.at(basename(target));
    const stat = lstatSync(entry, { throwIfNoEntry: false });
    const uid = process.getuid?.();
    if (stat?.isSymbolicLink() === true && uid !== undefined && stat.uid !== uid && stat.uid !== 0) {
      throw new OutputFileError('foreign-link', path, `refusing to remove the stale ${what} ${path}: it is a symbolic link made by another user (uid ${stat.uid})`);
    }
    rmSync(entry, { force: true, recursive: tree });
  } catch (error) {
    throw staleFailure(error, what, path);
  } finally {
    dir.close();
  }
}

function staleFailure(error: unknown, what: string, path: string): OutputFileError {
  const f = failed(error, what, path);
  return new OutputFileError(f.problem, path, f.message.replace(/^cannot write /, 'cannot remove the stale '), { cause: error });
}

/**
 * Directory `dir` held open, every later step reached through it
 * (pinnedDir.ts): a directory on the way swapped for a link after this look
 * changes nothing of where lockcheck writes. A link another user made on the
 * way is refused, and so is the user's own link in a directory another user
 * may change; with `make`, missing directories are made (0775 at most) and
 * one another user makes there meanwhile is refused. Close it when done.
 */
export function pinOutputDir(dir: string, what: string, path = dir, make = false): PinnedDir {
  if (!PINNED) {
    refuseForeignLinks(dir, what);
    if (make) makeByPath(dir, what);
  }
  try {
    return pinDir(dir, make);
  } catch (error) {
    if (!(error instanceof PinRefused)) throw failed(error, what, path);
    const r = error.refusal;
    const says = {
      'foreign-link': () => `refusing to write ${what} ${path}: ${r.at} is a symbolic link made by another user (uid ${'uid' in r ? r.uid : '?'}), which would choose where lockcheck writes`,
      'movable-link': () => `refusing to write ${what} ${path}: ${r.at} is a symbolic link in a directory another user may change, who could swap it for one of theirs between its reading and its use`,
      'foreign-directory': () => `refusing to write ${what} ${path}: ${r.at} was made by another user (uid ${'uid' in r ? r.uid : '?'}) while lockcheck was making it, and what goes in it would be theirs to change`,
      'not-a-directory': () => `cannot write ${what} ${path}: a part of the path is not a directory`,
      'cannot-make': () => `cannot write ${what} ${path}: no directory can be made in ${r.at}`,
      'too-many-links': () => `cannot write ${what} ${path}: too many symbolic links on the way (${r.at})`,
    }[r.kind]();
    const problem = r.kind === 'movable-link' ? 'foreign-link' : r.kind === 'too-many-links' ? 'io' : r.kind === 'cannot-make' ? 'permission' : r.kind;
    throw new OutputFileError(problem, path, says, { cause: error });
  }
}

/** Makes output directory `dir` (and those on the way, 0775 at most); a failure is an OutputFileError. */
export function makeOutputDir(dir: string, what = 'into'): void {
  pinOutputDir(dir, what, dir, true).close();
}

/** makeOutputDir where no directory can be held (not Linux): by path, checked before. */
function makeByPath(dir: string, what: string): void {
  // One level at a time: Node's recursive mkdirSync spins forever, deaf to signals, where mkdir says ENOENT under a directory that is there (/proc).
  for (const d of missingDirs(dir)) {
    try {
      mkdirSync(d, { mode: 0o775 });
    } catch (error) {
      if ((error as { code?: unknown }).code === 'EEXIST' && statSync(d, { throwIfNoEntry: false })?.isDirectory() === true) continue; // made meanwhile
      const f = failed(error, what, dir);
      throw f.problem === 'missing-directory' ? new OutputFileError('permission', dir, `cannot write ${what} ${dir}: no directory can be made in ${dirname(d)}`, { cause: error }) : f;
    }
  }
}

/**
 * Writes a report, counterexample or timeline file with its secrets
 * redacted. A regular file (or none yet) is written whole beside it and
 * renamed over it, so a write cut short (no space left, a size limit, the
 * process killed) leaves the file as it was, never half of the new one; a
 * link planted at the path after the check is replaced, not followed. A
 * symbolic link another user made, at the path or on the way to it (an output
 * in a shared directory), is refused: it would choose where lockcheck writes.
 * The directory is held open from the look to the rename (pinOutputDir), so a
 * directory on the way swapped for such a link in between changes nothing.
 * The user's own links and the system's (`/dev/stdout`) are followed where no
 * other user can swap them, and devices and pipes are written as they are.
 * `format` 'markup' (HTML, XML; the default for .html, .htm, .xml, .svg)
 * redacts as the page reads and inserts escaped text (redactMarkup): a raw
 * <redacted> was an unknown tag the browser hid.
 * Throws OutputFileError naming the path and why when it cannot be written.
 */
export function writeRedacted(path: string, text: string, what = 'the file', format: OutputFormat = formatOf(path)): void {
  // Control characters shown as the terminal shows them (a bidirectional override in a name reverses what follows); lossless in JSON.
  const bytes = Buffer.from(visibleControls(format === 'markup' ? redactMarkup(text) : redactSecrets(text)), 'utf8');
  writeAt(resolve(path), bytes, what, path, 0);
}

/**
 * Writes `bytes` at `target` (reached from `path`, the name in messages),
 * `hops` links followed so far. Its directory is held open (pinOutputDir), and
 * what is at the path is judged and then written in that very directory.
 */
function writeAt(target: string, bytes: Buffer, what: string, path: string, hops: number): void {
  const dir = pinOutputDir(dirname(target), what, path);
  try {
    const name = basename(target);
    const entry = dir.at(name);
    let stat;
    try {
      stat = lstatSync(entry);
    } catch {
      stat = null; // not there yet: created by the rename
    }
    if (stat === null || stat.isFile()) {
      replaceWhole(dir, name, bytes, keptMode(stat), what, path);
      return;
    }
    if (!stat.isSymbolicLink()) {
      writeThrough(dir, name, bytes, false, what, path);
      return;
    }
    const uid = process.getuid?.();
    if (uid !== undefined && stat.uid !== uid && stat.uid !== 0) {
      throw new OutputFileError('foreign-link', path, `refusing to write ${what} ${path}: ${target} is a symbolic link made by another user (uid ${stat.uid}), which would choose where lockcheck writes`);
    }
    if (!dir.keptFromOthers()) throw new OutputFileError('foreign-link', path, `refusing to write ${what} ${path}: ${target} is a symbolic link in a directory another user may change, who could swap it for one of theirs between its reading and its use`);
    if (hops >= MAX_LINKS) throw new OutputFileError('io', path, `cannot write ${what} ${path}: too many symbolic links on the way (${target})`);
    // The kernel's own links (/dev/stdout is /proc/self/fd/1: a pipe's is 'pipe:[…]', no path to follow): opened as they lead.
    if (dir.fd !== null && dir.realPath().startsWith('/proc/')) writeThrough(dir, name, bytes, true, what, path);
    else writeAt(resolve(dir.realPath(), readlinkSync(entry)), bytes, what, path, hops + 1);
  } catch (error) {
    throw failed(error, what, path);
  } finally {
    dir.close();
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

/** Writes `bytes` to a new file in `dir` (with `mode`, keptMode's, when given), then renames it over `name` there. */
function replaceWhole(dir: PinnedDir, name: string, bytes: Buffer, mode: number | undefined, what: string, path: string): void {
  const temp = dir.at(`.${name}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
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
    renameSync(temp, dir.at(name));
  } catch (error) {
    removeQuietly(temp);
    throw failed(error, what, path);
  }
}

/**
 * A device or pipe (`follow`: or what a kernel link in /proc leads to), written
 * as it is. Held first without opening it (O_PATH), judged, then that very
 * file opened through /proc/self/fd: another user's FIFO put there meanwhile
 * is never waited on, and a regular file put there is replaced whole, as any
 * file is.
 */
function writeThrough(dir: PinnedDir, name: string, bytes: Buffer, follow: boolean, what: string, path: string): void {
  if (dir.fd === null) {
    const target = dir.at(name);
    refuseForeignSpecial(statOrNull(target) ?? lstatSync(target), path, what);
    writeAndClose(openSync(target, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | (follow ? 0 : constants.O_NOFOLLOW), 0o644), bytes, what, path);
    return;
  }
  const held = follow ? openSync(dir.at(name), O_PATH) : holdEntry(dir.at(name));
  if (held === null) throw Object.assign(new Error('removed while it was written'), { code: 'ENOENT' });
  let stat;
  try {
    stat = fstatSync(held);
    if (!follow && (stat.isFile() || stat.isSymbolicLink())) {
      replaceWhole(dir, name, bytes, undefined, what, path);
      return;
    }
    // What a kernel link leads to, too: the user's own link to another user's FIFO would wait as long.
    refuseForeignSpecial(stat, path, what);
    writeAndClose(openSync(`/proc/self/fd/${held}`, constants.O_WRONLY | constants.O_TRUNC), bytes, what, path);
  } finally {
    closeSync(held);
  }
}

/** Writes `bytes` to `fd`, then closes it. */
function writeAndClose(fd: number, bytes: Buffer, what: string, path: string): void {
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
