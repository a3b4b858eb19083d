// The watchdog of one lockcheck process (see watchdog.ts). Plain JavaScript so
// that bare node runs it: argv = parent pid, parent start time, registry dir.
// It polls the parent; once the parent is gone (or its pid belongs to another
// process) it SIGKILLs every server the registry names that is still the same
// process (pid and start time), removes their directories and exits.
import { spawnSync } from 'node:child_process';
import { lstatSync, readFileSync, readdirSync, readlinkSync, rmdirSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';

const [parentPid, parentStart, registry] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const POLL_MS = 100;

/** Start time (field 22 of /proc/<pid>/stat) of a live, non-zombie process, else null. */
function startOf(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' || fields[0] === 'X' ? null : fields[19];
  } catch {
    return null;
  }
}

/** Every live process now, with its parent and process group (fields 4 and 5 of /proc/<pid>/stat): one pass over /proc. */
function liveProcesses() {
  const out = [];
  let entries = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
      if (fields[0] !== 'Z' && fields[0] !== 'X') out.push({ pid: Number(entry), ppid: Number(fields[1]), pgid: Number(fields[2]) });
    } catch {
      // gone while listed
    }
  }
  return out;
}

/** The live descendants of `root` among `processes`, found through each process's parent. */
function descendants(root, processes) {
  const childrenOf = new Map();
  for (const { pid, ppid } of processes) childrenOf.set(ppid, [...(childrenOf.get(ppid) ?? []), pid]);
  const out = [];
  for (const queue = [root]; queue.length > 0; ) {
    for (const child of childrenOf.get(queue.shift()) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}


const POSTGRES_SEGMENT = /^PostgreSQL\.\d+$/;

/**
 * The PostgreSQL POSIX shared-memory segments (/dev/shm/PostgreSQL.<handle>)
 * that `pids` have mapped or open, path -> inode (as postgresServer.ts's
 * postgresSegmentsOf): only the processes of the server that made one map it.
 */
function postgresSegmentsOf(pids) {
  const found = new Map();
  for (const pid of pids) {
    let maps = '';
    try {
      maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch {
      // gone
    }
    for (const line of maps.split('\n')) {
      const m = /^\S+\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\/dev\/shm\/(\S+)$/.exec(line);
      if (m !== null && POSTGRES_SEGMENT.test(m[2])) found.set(`/dev/shm/${m[2]}`, Number(m[1]));
    }
    let fds = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      // gone
    }
    for (const fd of fds) {
      try {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith('/dev/shm/') && POSTGRES_SEGMENT.test(target.slice('/dev/shm/'.length))) found.set(target, statSync(`/proc/${pid}/fd/${fd}`).ino);
      } catch {
        // closed meanwhile
      }
    }
  }
  return found;
}

/**
 * SIGKILLs the process, its group when it leads one, and every descendant.
 * The descendants are listed while it is stopped (it forks no more) and
 * before it dies (they would then belong to init): a PostgreSQL backend
 * makes itself a process group of its own (setsid), so the group kill
 * missed it, and one stopped by a test's pause() never saw its postmaster
 * die and stayed, stopped, for ever. All are stopped before they are
 * killed, and the PostgreSQL segments they had are unlinked: initdb's
 * `postgres --boot/--single` uses POSIX shared memory, and a SIGKILLed one
 * never unlinks its segments.
 */
function kill(pid, group) {
  const signal = (target, name) => {
    try {
      process.kill(target, name);
    } catch {
      // gone already
    }
  };
  signal(pid, 'SIGSTOP');
  if (group) signal(-pid, 'SIGSTOP');
  const processes = liveProcesses();
  const tree = [...new Set([...descendants(pid, processes), ...(group ? processes.filter((p) => p.pgid === pid).map((p) => p.pid) : [])])];
  for (const child of tree) signal(child, 'SIGSTOP');
  const segments = postgresSegmentsOf([pid, ...tree]);
  for (const target of group ? [-pid, pid] : [pid]) signal(target, 'SIGKILL');
  for (const child of tree) signal(child, 'SIGKILL');
  for (const [path, inode] of segments) {
    try {
      if (lstatSync(path).ino === inode) unlinkSync(path);
    } catch {
      // removed already
    }
  }
}

/** Only an absolute path is removed: a relative one would be read from the watchdog's own working directory. */
const removable = (path) => typeof path === 'string' && isAbsolute(path);

function remove(path, options) {
  try {
    rmSync(path, options);
  } catch {
    // one that cannot be removed must not keep the others (or the registry) from going
  }
}

/**
 * Removes a directory and what is in it, as tempDir.ts's removeTree: run as
 * root, root walks only directories it owns whose entries no one else can
 * swap (none may write in them, or they are sticky);
 * one another user owns (a PostgreSQL cluster's, run as OS user postgres) is
 * emptied as that user, by find -delete: its owner could swap a link to /etc
 * in while root's recursive removal lists it.
 */
function removeTree(dir) {
  let stat;
  try {
    stat = lstatSync(dir);
  } catch {
    return;
  }
  if (process.getuid?.() !== 0) return remove(dir, { recursive: true, force: true, maxRetries: 3 });
  // Root's own, open to others' writes and not sticky: its entries could be swapped as it is walked; only an empty one goes.
  if (!stat.isDirectory() || (stat.uid === 0 && (stat.mode & 0o022) !== 0 && (stat.mode & 0o1000) === 0)) return removeEntry(dir);
  if (stat.uid === 0) {
    let names = [];
    try {
      names = readdirSync(dir);
    } catch {
      // gone meanwhile
    }
    for (const name of names) removeTree(join(dir, name));
  } else {
    // Run in it: the directory around it may be closed to its owner. Then the emptied directory, by root (rmdir follows no link).
    spawnSync('find', ['.', '-xdev', '-mindepth', '1', '-delete'], { cwd: dir, uid: stat.uid, gid: stat.gid, stdio: 'ignore', timeout: 60_000, env: { PATH: '/usr/bin:/bin' } });
  }
  removeEntry(dir);
}

/** A file, a link or an empty directory: never followed. */
function removeEntry(path) {
  try {
    if (lstatSync(path).isDirectory()) rmdirSync(path);
    else unlinkSync(path);
  } catch {
    // not emptied (what its owner keeps), or gone
  }
}

/**
 * `path` is this user's: a real directory or file (lstat: not a link) it owns. The registry sits in the shared temp dir, and what
 * it names is killed and removed: one another user made, or an entry file of
 * theirs, is never read (watchdog.ts's sweep hands over only this user's, too).
 */
function ours(path, kind) {
  const uid = process.getuid?.();
  if (uid === undefined) return true;
  try {
    const stat = lstatSync(path);
    return (kind === 'dir' ? stat.isDirectory() : stat.isFile()) && stat.uid === uid;
  } catch {
    return false;
  }
}

function cleanUp() {
  // Not ours (or gone at the parent's clean exit): nothing of it is read, nothing removed.
  if (!ours(registry, 'dir')) process.exit(0);
  let names = [];
  try {
    names = readdirSync(registry).filter((name) => name.endsWith('.json') && ours(join(registry, name), 'file'));
  } catch {
    // the parent removed the registry at a clean exit
  }
  const dirs = [];
  for (const name of names) {
    let entry;
    try {
      entry = JSON.parse(readFileSync(join(registry, name), 'utf8'));
    } catch {
      continue;
    }
    const processes = Array.isArray(entry?.processes) ? entry.processes : [];
    for (const p of processes) {
      if (Number.isInteger(p?.pid) && p.pid > 1 && startOf(p.pid) === p.start) kill(p.pid, p.group === true);
      for (const file of Array.isArray(p?.files) ? p.files : []) if (removable(file)) remove(file, { force: true });
    }
    if (Array.isArray(entry?.dirs)) dirs.push(...entry.dirs.filter(removable));
  }
  for (const dir of dirs) removeTree(dir);
  remove(registry, { recursive: true, force: true });
  process.exit(0);
}

setInterval(() => {
  if (startOf(parentPid) !== parentStart) cleanUp();
}, POLL_MS);
