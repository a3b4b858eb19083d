// The watchdog of one lockcheck process (see watchdog.ts). Plain JavaScript so
// that bare node runs it: argv = parent pid, parent start time, registry dir.
// It polls the parent; once the parent is gone (or its pid belongs to another
// process) it SIGKILLs every server the registry names that is still the same
// process (pid and start time), removes their directories and exits.
import { readFileSync, readdirSync, rmSync } from 'node:fs';
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

/** The live descendants of `root`, found through each process's parent in /proc. */
function descendants(root) {
  const childrenOf = new Map();
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
      if (fields[0] === 'Z' || fields[0] === 'X') continue;
      const ppid = Number(fields[1]);
      childrenOf.set(ppid, [...(childrenOf.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone while listed
    }
  }
  const out = [];
  for (const queue = [root]; queue.length > 0; ) {
    for (const child of childrenOf.get(queue.shift()) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

/**
 * SIGKILLs the process, its group when it leads one, and every descendant.
 * The descendants are listed while it is stopped (it forks no more) and
 * before it dies (they would then belong to init): a PostgreSQL backend
 * makes itself a process group of its own (setsid), so the group kill
 * missed it, and one stopped by a test's pause() never saw its postmaster
 * die and stayed, stopped, for ever.
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
  const tree = descendants(pid);
  for (const target of group ? [-pid, pid] : [pid]) signal(target, 'SIGKILL');
  for (const child of tree) signal(child, 'SIGKILL');
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

function cleanUp() {
  let names = [];
  try {
    names = readdirSync(registry).filter((name) => name.endsWith('.json'));
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
  for (const dir of dirs) remove(dir, { recursive: true, force: true, maxRetries: 3 });
  remove(registry, { recursive: true, force: true });
  process.exit(0);
}

setInterval(() => {
  if (startOf(parentPid) !== parentStart) cleanUp();
}, POLL_MS);
