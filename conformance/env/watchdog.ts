/**
 * Servers die with the process that started them, even when it is SIGKILLed
 * (exit handlers never run then). The first guard() starts one small detached
 * node process per lockcheck process, the watchdog (watchdog.mjs), that polls
 * this process every 100 ms. Each guarded server is described in a file of a
 * private (0700) registry directory: its process (pid plus start time, so a
 * reused pid is never killed), its process group, files and directories. When
 * this process is gone the watchdog SIGKILLs what is still the same process
 * (with its group and every process it forked: a PostgreSQL backend leads a
 * group of its own, and one left stopped by a pause never exits on its own),
 * unlinks the PostgreSQL shared-memory segments those processes had mapped
 * (initdb's SIGKILLed `postgres --boot/--single` never unlinks its own),
 * removes the directories and the registry, and exits; after a clean exit it
 * finds nothing left to do.
 *
 * A process killed together with its watchdog (a process tree killed at
 * once: Stryker ends its test runners so, as does a job runner's timeout)
 * leaves the registry and whatever it names. The registry's name carries
 * its process (pid and start time), so the next lockcheck process that
 * guards a server hands each such orphan to a watchdog of its own, which
 * finds the owner gone and cleans up as for a SIGKILL.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface GuardedProcess {
  readonly pid: number;
  /** SIGKILL its whole process group (it was spawned detached, so the group is its own). */
  readonly group?: boolean;
  /** Files to remove once it is killed (libfaketime's /dev/shm segments). */
  readonly files?: readonly string[];
}

export interface Guarded {
  readonly processes: readonly GuardedProcess[];
  readonly dirs: readonly string[];
}

const SCRIPT = fileURLToPath(new URL('./watchdog.mjs', import.meta.url));

let registry: string | null = null;
let counter = 0;

/** Start time of a live process (field 22 of /proc/<pid>/stat), or null. */
export function processStartTime(pid: number): string | null {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' || fields[0] === 'X' ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

/** A watchdog for the registry `dir` of process `pid` started at `start`: it cleans up once that process is gone. */
function startWatchdog(pid: number, start: string, dir: string): void {
  const child = spawn(process.execPath, [SCRIPT, String(pid), start, dir], {
    detached: true, // its own session: a Ctrl-C to our group does not take it down before us
    stdio: 'ignore',
    env: {},
  });
  child.unref();
}

const REGISTRY = /^lockcheck-watch-(\d+)-(\d+)-[^/]+$/;
/** At most this many orphans a sweep (a node process each): a /tmp full of them is emptied over the next runs, not all at once. */
const SWEPT_AT_MOST = 8;

/**
 * A registry this user made: a real directory (not a link) it owns (the
 * watchdog reads only the entry files this user owns in it). The temp dir is shared, and a watchdog
 * kills the processes and removes the directories its registry names: one
 * another user planted there (`{"dirs": ["/home/you"]}`) had this user's run
 * remove that directory, and a run as root remove anything.
 */
function ownRegistry(path: string): boolean {
  const uid = process.getuid?.();
  if (uid === undefined) return true;
  try {
    const stat = lstatSync(path);
    return stat.isDirectory() && stat.uid === uid;
  } catch {
    return false;
  }
}

/**
 * Hands the registries in `parent` that this user made (ownRegistry) and whose process is gone (its name's pid no
 * longer that process), up to SWEPT_AT_MOST, to watchdogs, which clean them
 * up at their first poll. Returns how many it handed over.
 */
export function sweepOrphanedRegistries(parent = tmpdir()): number {
  let names: string[];
  try {
    names = readdirSync(parent);
  } catch {
    return 0;
  }
  let orphans = 0;
  for (const name of names) {
    const m = REGISTRY.exec(name);
    if (m === null || processStartTime(Number(m[1])) === m[2] || !ownRegistry(join(parent, name))) continue;
    startWatchdog(Number(m[1]), m[2]!, join(parent, name));
    if (++orphans === SWEPT_AT_MOST) break;
  }
  return orphans;
}

function ensureWatchdog(): string {
  if (registry !== null) return registry;
  // Spawned with stdio ignored, a missing script would fail unseen and leave every server to outlive a killed run.
  if (!existsSync(SCRIPT)) throw new Error(`lockcheck is installed incompletely: its watchdog script ${SCRIPT} is missing (reinstall lockcheck; from a clone, run npm run build)`);
  sweepOrphanedRegistries();
  const start = processStartTime(process.pid) ?? '0';
  const dir = mkdtempSync(join(tmpdir(), `lockcheck-watch-${process.pid}-${start}-`));
  startWatchdog(process.pid, start, dir);
  // A clean exit removes the registry; the watchdog then exits on its next poll.
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  registry = dir;
  return dir;
}

/**
 * Registers (or, with the same handle, updates) what the watchdog must kill
 * and remove should this process die. Returns the handle for update/release.
 */
export class Guard {
  readonly #file: string;

  constructor() {
    this.#file = join(ensureWatchdog(), `${process.pid}-${counter++}.json`);
  }

  /** Records the current processes and directories (replaces the previous record, atomically). */
  set(guarded: Guarded): void {
    // The watchdog removes only absolute paths; anything else here is a bug upstream, caught where it is made.
    const bad = [...guarded.dirs, ...guarded.processes.flatMap((p) => p.files ?? [])].find((path) => typeof path !== 'string' || !isAbsolute(path));
    if (bad !== undefined) throw new Error(`watchdog: a guarded path must be absolute, got ${typeof bad === 'string' ? JSON.stringify(bad) : typeof bad}`);
    const entry = {
      processes: guarded.processes.flatMap((p) => {
        const start = processStartTime(p.pid);
        return start === null ? [] : [{ pid: p.pid, start, group: p.group ?? false, files: p.files ?? [] }];
      }),
      dirs: guarded.dirs,
    };
    const temp = `${this.#file}.tmp`;
    writeFileSync(temp, JSON.stringify(entry), { mode: 0o600 });
    renameSync(temp, this.#file);
  }

  /** Nothing of this server is left to clean up. */
  release(): void {
    rmSync(this.#file, { force: true });
  }
}
