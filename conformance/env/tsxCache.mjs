// Plain JavaScript: it runs before tsx is loaded (cli/lockcheck.mjs, the stress client's worker.mjs, userModule.ts's
// loading of a TypeScript adapter), and as a script (scripts/setup.sh). The build copies it into dist/.
import { lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { devNull, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

/**
 * tsx keeps the code it compiles in <temp dir>/tsx-<euid>, a name anyone can
 * foresee, and runs what it finds there. Made first by another local user, it
 * was theirs: they replaced a cached module (cli/main.ts's) and the next
 * `lockcheck` ran their code with the caller's rights, root's included. So
 * the directory is made here, 0700, before tsx loads. Returns it, or why it
 * is not to be trusted: not a real directory of this user's that no one else
 * may write.
 */
export function tsxCacheDir() {
  const uid = process.geteuid?.();
  if (uid === undefined) return { dir: null, problem: null };
  const dir = join(tmpdir(), `tsx-${uid}`);
  try {
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    if (error.code !== 'EEXIST') return { dir, problem: `cannot be made (${error.code})` };
  }
  try {
    const stat = lstatSync(dir);
    if (!stat.isDirectory()) return { dir, problem: stat.isSymbolicLink() ? 'is a symbolic link' : 'is not a directory' };
    if (stat.uid !== uid) return { dir, problem: `belongs to another user (uid ${stat.uid})` };
    // Group write is others' write, but for this user's own group (umask 002 with a group per user, Ubuntu's default).
    if ((stat.mode & 0o002) !== 0 || ((stat.mode & 0o020) !== 0 && stat.gid !== process.getegid?.())) return { dir, problem: `may be written by others (mode ${(stat.mode & 0o7777).toString(8)})` };
  } catch (error) {
    return { dir, problem: `cannot be read (${error.code})` };
  }
  return { dir, problem: null };
}

/**
 * The bin's guard: a cache not to be trusted turns tsx's cache off
 * (TSX_DISABLE_CACHE, read as tsx loads: start-up is only slower), said on
 * stderr.
 */
export function guardTsxCache(env = process.env) {
  if (env.TSX_DISABLE_CACHE) return;
  const { dir, problem } = tsxCacheDir();
  if (problem === null) return;
  env.TSX_DISABLE_CACHE = '1';
  process.stderr.write(`lockcheck: tsx's cache of compiled code ${dir} ${problem}: not used (start-up is slower)\n`);
}

/**
 * tsx reads the tsconfig.json of the working directory, or else of the
 * nearest directory above it, and follows its "paths": one another local user
 * put in a shared place (/tmp/tsconfig.json serves every working directory
 * under /tmp) mapped `ts-pattern` to a file of theirs, and the next
 * `lockcheck` run there ran it with the caller's rights. So the tsconfig is
 * named before tsx loads (TSX_TSCONFIG_PATH, which child processes inherit):
 * `file` when it is there, else none (the null device: no options). One the
 * user named is kept.
 */
export function pinTsconfig(file, env = process.env) {
  if (env.TSX_TSCONFIG_PATH) return;
  env.TSX_TSCONFIG_PATH = file !== null && lstatSync(file, { throwIfNoEntry: false })?.isFile() === true ? file : devNull;
}

/**
 * The tsconfig.json of a user's TypeScript adapter at `path`: the nearest in
 * its directory or above, as TypeScript looks, but only through directories
 * no other user may write, and only one of this user's or root's that no
 * other user may write (else null: none). A shared directory (/tmp) ends the
 * search: a tsconfig there is anyone's.
 */
export function adapterTsconfig(path) {
  const uid = process.geteuid?.();
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const stat = lstatSync(dir, { throwIfNoEntry: false });
    if (stat === undefined || (uid !== undefined && (stat.mode & 0o002) !== 0)) return null;
    const file = join(dir, 'tsconfig.json');
    const found = lstatSync(file, { throwIfNoEntry: false });
    if (found !== undefined) return uid === undefined || ((found.uid === uid || found.uid === 0) && (found.mode & 0o022) === 0 && found.isFile()) ? file : null;
    if (dirname(dir) === dir) return null;
  }
}

// As a script (scripts/setup.sh, which npm test, npm start and the npm scripts that run tsx run first): nothing here
// can turn tsx's cache off for the commands after it, so a cache not to be trusted fails the command.
if (invokedAsScript() && !process.env.TSX_DISABLE_CACHE) {
  const { dir, problem } = tsxCacheDir();
  if (problem !== null) {
    process.stderr.write(`lockcheck setup: tsx's cache of compiled code ${dir} ${problem}, and tsx would run the code in it: remove it, or set TSX_DISABLE_CACHE=1\n`);
    process.exitCode = 1;
  }
}

/** This file is the script node was started with (not imported): compared as real paths, so a link to it counts. */
function invokedAsScript() {
  try {
    return process.argv[1] !== undefined && import.meta.url === pathToFileURL(realpathSync(process.argv[1])).href;
  } catch {
    return false; // no such file (node -e, a name node resolved itself): not this one
  }
}
