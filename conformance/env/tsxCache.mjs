// Plain JavaScript: it runs before tsx is loaded (cli/lockcheck.mjs, the stress client's worker.mjs, userModule.ts's
// loading of a TypeScript adapter), and as a script (scripts/setup.sh). The build copies it into dist/.
import { lstatSync, mkdirSync, realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
