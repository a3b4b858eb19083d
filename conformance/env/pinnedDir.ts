import { closeSync, constants, existsSync, fstatSync, mkdirSync, openSync, readlinkSync, type Stats } from 'node:fs';
import { join, resolve } from 'node:path';

/**
 * Linux's O_PATH (not in Node's fs.constants; the same on every architecture
 * Node runs on): an fd that names a directory, link or FIFO without opening it
 * for reading, so a directory only searchable is held too, and a FIFO never
 * waits for a reader.
 */
export const O_PATH = 0o10000000;

/**
 * Whether directories are held by an fd and reached through /proc/self/fd (as
 * openat would: Node has none). Elsewhere (macOS) outputs are reached by path,
 * checked before the write, with the window between the two.
 */
export const PINNED = process.platform === 'linux' && existsSync('/proc/self/fd');

/** Why a directory on the way to an output was refused. */
export type PinRefusal =
  | { readonly kind: 'foreign-link'; readonly at: string; readonly uid: number } // another user's link on the way
  | { readonly kind: 'movable-link'; readonly at: string } // a link in a directory another user may change
  | { readonly kind: 'foreign-directory'; readonly at: string; readonly uid: number } // made by another user where this one was making it
  | { readonly kind: 'not-a-directory'; readonly at: string }
  | { readonly kind: 'cannot-make'; readonly at: string } // mkdir says ENOENT in a directory that is there (/proc)
  | { readonly kind: 'too-many-links'; readonly at: string };

/** A path on the way to an output that is not to be used (outputFile.ts says it as an OutputFileError). */
export class PinRefused extends Error {
  constructor(readonly refusal: PinRefusal) {
    super(refusal.kind);
  }
}

/** Links followed in one path at most (Linux's MAXSYMLINKS). */
export const MAX_LINKS = 40;

/**
 * A directory held open: what is in it is reached through the fd, so another
 * user who swaps a directory on its path for a link after it was opened
 * changes nothing of where lockcheck writes.
 */
export class PinnedDir {
  constructor(
    readonly fd: number | null,
    /** The path it was reached by (messages; the fallback's access). */
    readonly path: string,
  ) {}

  /** `name` in this directory, as a path the system calls take. */
  at(name: string): string {
    return this.fd === null ? join(this.path, name) : `/proc/self/fd/${this.fd}/${name}`;
  }

  /** Where the directory really is (a link's target in it is read from here). */
  realPath(): string {
    return this.fd === null ? this.path : readlinkSync(`/proc/self/fd/${this.fd}`);
  }

  /**
   * Whether no other user can change what is in it: this user's or root's,
   * and written by no one else (the user's own group aside, umask 002's), or
   * sticky (then no one else can move an entry this user or root made). Only
   * there is a link followed: in a directory another user may change, the
   * link read and the link followed could be two different ones.
   */
  keptFromOthers(): boolean {
    if (this.fd === null) return true;
    return keptFromOthers(fstatSync(this.fd));
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
  }
}

function keptFromOthers(stat: Stats): boolean {
  const uid = process.getuid?.();
  if (stat.uid !== uid && stat.uid !== 0) return false;
  if ((stat.mode & 0o1000) !== 0) return true; // sticky
  return (stat.mode & 0o002) === 0 && ((stat.mode & 0o020) === 0 || stat.gid === process.getegid?.());
}

/** An fd of `entry` itself (a link not followed), or null when nothing is there. */
export function holdEntry(entry: string): number | null {
  try {
    return openSync(entry, O_PATH | constants.O_NOFOLLOW);
  } catch (error) {
    if ((error as { code?: unknown }).code === 'ENOENT') return null;
    throw error;
  }
}

/** fstat that closes `fd` when it throws. */
function statOf(fd: number): Stats {
  try {
    return fstatSync(fd);
  } catch (error) {
    closeSync(fd);
    throw error;
  }
}

/**
 * Opens directory `dir` one name at a time from /, each through the fd of the
 * one before it, never following a link the open itself met: a link is
 * followed here, after its owner is checked (another user's is refused), and
 * only where no other user can swap it. With `make`, a directory missing on
 * the way is made (0775 at most); one another user made there meanwhile is
 * refused. System errors (ENOENT, EACCES...) are thrown as they are.
 */
export function pinDir(dir: string, make: boolean): PinnedDir {
  const full = resolve(dir);
  if (!PINNED) return new PinnedDir(null, full);
  const uid = process.getuid?.();
  const pending = full.split('/').filter((part) => part !== '' && part !== '.');
  let fd = openSync('/', O_PATH | constants.O_DIRECTORY);
  let links = 0;
  try {
    while (pending.length > 0) {
      const name = pending.shift()!;
      const here = new PinnedDir(fd, '');
      const entry = here.at(name);
      let made = false;
      let child = holdEntry(entry);
      if (child === null) {
        if (!make) throw Object.assign(new Error(`ENOENT: no such file or directory, '${join(here.realPath(), name)}'`), { code: 'ENOENT' });
        try {
          // Never writable by everyone, whatever the umask (0 in some containers): another user could swap what goes in it.
          mkdirSync(entry, { mode: 0o775 });
        } catch (error) {
          const code = (error as { code?: unknown }).code;
          if (code === 'ENOENT') throw new PinRefused({ kind: 'cannot-make', at: here.realPath() });
          if (code !== 'EEXIST') throw error;
        }
        made = true;
        child = holdEntry(entry);
        if (child === null) throw Object.assign(new Error(`ENOENT: removed as it was made, '${join(here.realPath(), name)}'`), { code: 'ENOENT' });
      }
      const stat = statOf(child);
      if (stat.isSymbolicLink()) {
        closeSync(child);
        const at = join(here.realPath(), name);
        if (stat.uid !== uid && stat.uid !== 0) throw new PinRefused({ kind: 'foreign-link', at, uid: stat.uid });
        if (!here.keptFromOthers()) throw new PinRefused({ kind: 'movable-link', at });
        if (++links > MAX_LINKS) throw new PinRefused({ kind: 'too-many-links', at });
        const target = readlinkSync(entry);
        pending.unshift(...target.split('/').filter((part) => part !== '' && part !== '.'));
        if (target.startsWith('/')) {
          closeSync(fd);
          fd = openSync('/', O_PATH | constants.O_DIRECTORY);
        }
        continue;
      }
      if (!stat.isDirectory()) {
        closeSync(child);
        throw new PinRefused({ kind: 'not-a-directory', at: join(here.realPath(), name) });
      }
      // Missing a moment ago: made by another user meanwhile, it is theirs to change under lockcheck's outputs.
      if (made && stat.uid !== uid && stat.uid !== 0) {
        closeSync(child);
        throw new PinRefused({ kind: 'foreign-directory', at: join(here.realPath(), name), uid: stat.uid });
      }
      closeSync(fd);
      fd = child;
    }
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return new PinnedDir(fd, full);
}
