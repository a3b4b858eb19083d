/**
 * Driving a server's wall clock with libfaketime (see docs/redis.md, "Real servers under test", and spec/SPEC.md 7.8).
 *
 * - FakeClockFile: the file named by FAKETIME_TIMESTAMP_FILE. It holds an
 *   absolute timestamp, so the server's clock is frozen and moves only when
 *   the file is rewritten (with FAKETIME_NO_CACHE=1 every time call rereads it).
 * - ensureMallocShim: Debian's redis-server links jemalloc, which deadlocks at
 *   start-up when libfaketime is preloaded alone. A tiny shared object,
 *   preloaded before libfaketime, routes the malloc family to glibc's own
 *   allocator so jemalloc never serves an allocation made while libfaketime
 *   initialises.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { type Stats, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { chmod, lstat, mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { asText, messageText } from '../../impl/errorText.ts';
import { guardedTempDir } from './tempDir.ts';

/** Debian's multiarch directory for this machine (libfaketime lives under it): x86_64-linux-gnu, aarch64-linux-gnu, ... */
export function multiarchOf(arch: string): string {
  return `${arch === 'x64' ? 'x86_64' : arch === 'arm64' ? 'aarch64' : arch === 'ia32' ? 'i386' : arch}-linux-gnu`;
}

export const LIBFAKETIME_PATH = `/usr/lib/${multiarchOf(process.arch)}/faketime/libfaketime.so.1`;

/**
 * The machine lacks something a real-server test needs. `fix` is the command
 * that installs it (scripts/setup.sh runs the same installs).
 */
export class EnvironmentError extends Error {
  override readonly name = 'EnvironmentError';
  constructor(
    message: string,
    readonly fix: string | null = null,
    /** What failed underneath (a bind, a socket's error), when something did. */
    options?: { readonly cause?: unknown },
  ) {
    super(fix === null ? messageText(message) : `${asText(message)}\n  fix: ${asText(fix)}`);
    if (options?.cause !== undefined) this.cause = options.cause;
  }
}

const INSTALL = 'apt-get update && apt-get install -y --no-install-recommends';

/** Throws EnvironmentError unless libfaketime is installed. */
export function requireLibfaketime(): string {
  if (!existsSync(LIBFAKETIME_PATH)) {
    throw new EnvironmentError(`libfaketime is not installed (${LIBFAKETIME_PATH} is missing)`, `${INSTALL} libfaketime`);
  }
  return LIBFAKETIME_PATH;
}

const SHIM_SOURCE = `/* lockcheck malloc shim: route the malloc family to glibc, bypassing jemalloc. */
#define _GNU_SOURCE
#include <stddef.h>
#include <errno.h>
#include <dlfcn.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

void *malloc(size_t size) { return __libc_malloc(size); }
void free(void *ptr) { __libc_free(ptr); }
void *calloc(size_t count, size_t size) { return __libc_calloc(count, size); }
void *realloc(void *ptr, size_t size) { return __libc_realloc(ptr, size); }
void *memalign(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { return __libc_memalign(alignment, size); }
void *valloc(size_t size) { return __libc_valloc(size); }
void *pvalloc(size_t size) { return __libc_pvalloc(size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
  if (alignment == 0 || alignment % sizeof(void *) != 0 || (alignment & (alignment - 1)) != 0) return EINVAL;
  void *ptr = __libc_memalign(alignment, size);
  if (ptr == NULL) return ENOMEM;
  *out = ptr;
  return 0;
}

/* glibc has no __libc_malloc_usable_size: look up libc's own symbol, not the
   next one in search order (which would be jemalloc's). */
size_t malloc_usable_size(void *ptr) {
  static size_t (*libc_usable)(void *) = NULL;
  size_t (*fn)(void *) = __atomic_load_n(&libc_usable, __ATOMIC_ACQUIRE);
  if (fn == NULL) {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (libc != NULL) fn = (size_t (*)(void *))dlsym(libc, "malloc_usable_size");
    if (fn == NULL) return 0;
    __atomic_store_n(&libc_usable, fn, __ATOMIC_RELEASE);
  }
  return ptr == NULL ? 0 : fn(ptr);
}
`;

const GCC_FLAGS = ['-shared', '-fPIC', '-O2', '-Wall'];
const GCC_LIBS = ['-ldl'];

/** The cache directory's name: one per source version and build flags. */
export const MALLOC_SHIM_DIR = `lockcheck-shim-${createHash('sha256').update(SHIM_SOURCE).update(JSON.stringify([GCC_FLAGS, GCC_LIBS])).digest('hex').slice(0, 16)}`;

let shimPromise: Promise<string> | null = null;

/**
 * Builds the malloc shim once and returns the path of the shared object.
 *
 * The .so is preloaded into every faked redis-server, so it must be one
 * nobody else could have written: it is built (once per source version) in
 * node_modules/.cache/lockcheck-shim-<hash> when that directory and its parent
 * belong to us (or root), are real directories (no symlinks) and are writable
 * by nobody else, and the .so in it is used only when it is a regular file of
 * ours that nobody else can write. Otherwise it is built into a private
 * mkdtemp directory for this process (removed at exit). Never a fixed shared
 * path: a .so planted under /tmp by another user must never be loaded.
 * Safe to call concurrently, in one process and across processes: each build
 * writes a private temporary file and renames it into place.
 */
export function ensureMallocShim(): Promise<string> {
  shimPromise ??= buildMallocShim(projectCacheRoot()).catch((error: unknown) => {
    shimPromise = null; // let a later call retry, e.g. after installing gcc
    throw error;
  });
  return shimPromise;
}

/** Builds (or reuses a trusted build of) the shim under `cacheRoot`, or in a private temp dir when `cacheRoot` is not private. */
export async function buildMallocShim(cacheRoot: string): Promise<string> {
  requireLibfaketime();
  const cached = PRELOAD_SPLITS.test(cacheRoot) ? null : await privateCacheDir(cacheRoot, MALLOC_SHIM_DIR);
  const dir = cached ?? (await privateTempDir());
  if (PRELOAD_SPLITS.test(dir)) throw new EnvironmentError(`malloc shim: ${dir} has a space or colon, which LD_PRELOAD cannot carry (ld.so splits at them); set TMPDIR to a directory without one`);
  const target = join(dir, 'malloc-shim.so');
  if (await trustedFile(target)) return target;
  const unique = `${process.pid}-${randomBytes(8).toString('hex')}`;
  const source = join(dir, `malloc-shim.${unique}.c`);
  const output = join(dir, `malloc-shim.${unique}.so.tmp`);
  try {
    await writeFile(source, SHIM_SOURCE, { flag: 'wx', mode: 0o600 });
    await runGcc([...GCC_FLAGS, '-o', output, source, ...GCC_LIBS]);
    await chmod(output, 0o755);
    await rename(output, target);
  } finally {
    await rm(source, { force: true });
    await rm(output, { force: true });
  }
  if (!(await trustedFile(target))) throw new EnvironmentError(`malloc shim: ${target} is not a private file of ours after building it`);
  return target;
}

/** Owner is us (or root), a real directory or file (lstat: no symlink), writable by nobody else. */
function privatelyOwned(stat: Stats, kind: 'dir' | 'file'): boolean {
  const uid = process.getuid?.() ?? -1;
  const isKind = kind === 'dir' ? stat.isDirectory() : stat.isFile();
  return isKind && !stat.isSymbolicLink() && (stat.uid === uid || stat.uid === 0) && (stat.mode & 0o022) === 0;
}

async function trustedFile(path: string): Promise<boolean> {
  try {
    const stat = await lstat(path);
    return privatelyOwned(stat, 'file') && stat.uid === (process.getuid?.() ?? -1);
  } catch {
    return false;
  }
}

/**
 * <root>/<name>, created 0700 if missing, when both it and root pass the
 * ownership checks; null when they do not (or cannot be created).
 */
export async function privateCacheDir(root: string, name: string): Promise<string | null> {
  const dir = join(root, name);
  try {
    await mkdir(root, { recursive: true, mode: 0o700 });
    await mkdir(dir, { mode: 0o700 }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw error;
    });
    const [rootStat, dirStat] = await Promise.all([lstat(root), lstat(dir)]);
    if (!privatelyOwned(rootStat, 'dir') || !privatelyOwned(dirStat, 'dir') || dirStat.uid !== (process.getuid?.() ?? -1)) return null;
    return dir;
  } catch {
    return null;
  }
}

/**
 * What ld.so splits LD_PRELOAD at (no quoting): a shim under a clone at
 * "/home/me/my project" was preloaded as '/home/me/my' and
 * 'project/node_modules/…', the second relative to the server's working
 * directory, and redis-server ran without it (libfaketime's recursion).
 */
const PRELOAD_SPLITS = /[\s:]/;

let tempShimDir: Promise<string> | null = null;

/** One mkdtemp directory (0700) per process, removed at exit (by the watchdog if killed); under /tmp when the temp dir's path is one LD_PRELOAD cannot carry. */
function privateTempDir(): Promise<string> {
  tempShimDir ??= Promise.resolve().then(() => guardedTempDir('lockcheck-shim-', PRELOAD_SPLITS.test(tmpdir()) ? '/tmp' : tmpdir()).dir);
  return tempShimDir;
}

/**
 * libfaketime gives each process it runs in a POSIX semaphore and shared
 * memory segment named after its pid, and unlinks them only when the process
 * exits normally: a SIGKILL (a crash fault) leaves them in /dev/shm for good.
 * Call this once the process is gone (or is being killed).
 */
export function removeFaketimeSharedMemory(pid: number): void {
  for (const name of [`faketime_shm_${pid}`, `sem.faketime_sem_${pid}`]) {
    try {
      rmSync(join('/dev/shm', name), { force: true });
    } catch {
      // best effort: nothing else depends on it
    }
  }
}

/** node_modules/.cache of the nearest node_modules above this module: the repository's, or that of the project that installed lockcheck. */
function projectCacheRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'node_modules')) && dirname(dir) !== dir) dir = dirname(dir);
  return join(dir, 'node_modules', '.cache');
}

function runGcc(args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile('gcc', args, { timeout: 60_000 }, (error, _stdout, stderr) => {
      if (error === null) return resolve();
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new EnvironmentError('gcc is not installed (needed to build the malloc shim for libfaketime)', `${INSTALL} gcc libc6-dev`));
      } else {
        reject(new EnvironmentError(`gcc failed to build the malloc shim: ${error.message}\n${stderr}`, `${INSTALL} gcc libc6-dev`));
      }
    });
  });
}

/** The latest instant the timestamp format can hold: 9999-12-31T23:59:59.999Z. */
const MAX_EPOCH_MS = 253402300799999;

/**
 * Formats an epoch in libfaketime's absolute format, UTC, e.g.
 * `2030-01-01 00:00:05.2500000005` for 2030-01-01T00:00:05.250Z.
 *
 * The trailing `0000005` (half a nanosecond) is deliberate. libfaketime 0.9.10
 * parses the fraction as a double and truncates: `(x - floor(x)) * 1e9` with
 * x = atof("5.249") gives 248999999 ns, so the server would read .248999 s and
 * Redis (which works in ms from gettimeofday's µs) would be 1 ms early. That
 * happens for 3902 of the 10000 second-digit/millisecond combinations. Half a
 * nanosecond above the intended instant truncates to it exactly in all of them.
 */
export function formatFaketime(epochMs: number): string {
  if (!Number.isInteger(epochMs) || epochMs < 0 || epochMs > MAX_EPOCH_MS) {
    throw new RangeError(`fake clock: epochMs must be an integer in [0, ${MAX_EPOCH_MS}], got ${String(epochMs)}`);
  }
  // toISOString: 2030-01-01T00:00:05.250Z
  return `${new Date(epochMs).toISOString().replace('T', ' ').replace('Z', '')}0000005`;
}

let tempCounter = 0;

/**
 * The timestamp file of one faked clock. Processes started with
 * FAKETIME_TIMESTAMP_FILE=<path> and FAKETIME_NO_CACHE=1 see a wall clock
 * (and, by default, a monotonic clock) frozen at the last value set.
 * libfaketime parses the timestamp with mktime, i.e. as local time: run the
 * faked process with TZ=UTC (RedisServer does).
 */
export class FakeClockFile {
  readonly path: string;
  #epochMs: number | undefined;

  constructor(
    readonly dir: string,
    name = 'faketime.clock',
  ) {
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, name);
  }

  /** The last value set, or undefined before the first set(). */
  get epochMs(): number | undefined {
    return this.#epochMs;
  }

  /** Sets the clock to an absolute instant (ms since the epoch, UTC), atomically. */
  set(epochMs: number): void {
    this.#write(`${formatFaketime(epochMs)}\n`);
    this.#epochMs = epochMs;
  }

  #write(text: string): void {
    const temp = `${this.path}.${process.pid}.${tempCounter++}.tmp`;
    try {
      writeFileSync(temp, text);
      renameSync(temp, this.path);
    } catch (error) {
      rmSync(temp, { force: true });
      throw error;
    }
  }

  /**
   * Lets the clock run at real speed, `offsetMs` ahead of the machine's
   * (behind when negative): libfaketime's relative format, e.g. `+1.250`.
   * A clock set this way is stepped by setting another offset.
   */
  setOffset(offsetMs: number): void {
    if (!Number.isInteger(offsetMs) || Math.abs(offsetMs) > 10 * 365 * 86_400_000) throw new RangeError(`fake clock: offsetMs must be an integer within 10 years, got ${String(offsetMs)}`);
    this.#write(`${offsetMs < 0 ? '-' : '+'}${(Math.abs(offsetMs) / 1000).toFixed(3)}\n`);
    this.#epochMs = undefined;
  }

  /** Moves the clock by `deltaMs` (negative moves it back). */
  advance(deltaMs: number): void {
    if (this.#epochMs === undefined) throw new Error('fake clock: set() it before advance()');
    this.set(this.#epochMs + deltaMs);
  }
}
