import { randomInt } from 'node:crypto';
import { chmodSync, closeSync, constants, fstatSync, lstatSync, mkdtempSync, openSync, readdirSync, readFileSync, readSync, renameSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { finishWithin } from '../realTimeLimit.ts';
import { pauseWithin } from './deadline.ts';

/**
 * What every server process the environment starts needs: a free loopback
 * port, and a synchronous clean-up at process exit or on a fatal signal, so
 * that nothing is left running even when a test run dies.
 */

/** Asks the kernel for a free loopback port: listen on port 0, read it, close. */
export async function freeLoopbackPort(host = '127.0.0.1'): Promise<number> {
  const port = await probe(0, host);
  if (port === null) throw new Error(`could not listen on ${host} to find a free port`);
  return port;
}

/** Listens on `port` (0: one the kernel picks) and closes again: the port it listened on, or null when it could not. */
function probe(port: number, host: string): Promise<number | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(null));
    server.listen(port, host, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(bound > 0 ? bound : null));
    });
  });
}

/**
 * Starts a server on a free loopback port it keeps across restarts, and
 * returns it with the port's release (call it once the server is stopped for
 * good). The probe and the server's bind race with every other process on
 * the machine, so while `start` reports the port taken it tries a fresh one,
 * until `deadlineMs` (then `tooLate()`).
 *
 * A server that is killed and restarted on its port leaves the port free in
 * between, and its clients reconnect to whatever listens there then. A port
 * the kernel hands out (listen on 0) may be handed to anyone in that gap: a
 * Redis Sentinel another test started answered the lock client's script with
 * `ERR unknown command 'eval'` (a ServerRefusedError), and a plain Redis
 * without a password would have granted. So the port comes from below the
 * kernel's ephemeral range (restartPorts()), which no other process's listen
 * on 0 and no outgoing connection's local port is ever given, and among
 * lockcheck processes it is claimed by a file (PORT_CLAIMS/<port>, holding
 * the claimant's pid; a dead claimant's claim is taken over).
 */
export async function onFreePort<T>(deadlineMs: number, start: (port: number) => Promise<T | 'address-in-use'>, tooLate: () => Error): Promise<{ readonly value: T; readonly release: () => void }> {
  for (;;) {
    const claim = await claimPort();
    let result: T | 'address-in-use';
    try {
      result = await start(claim.port);
    } catch (e) {
      claim.release();
      throw e;
    }
    if (result !== 'address-in-use') return { value: result, release: claim.release };
    claim.release();
    if (Date.now() >= deadlineMs) throw tooLate();
  }
}

/**
 * A restart on the port the server already has (its claim is kept across
 * restarts): `start` again, 50 ms apart, while the port is still held, until
 * `deadlineMs`; then `stayedInUse()` is thrown. `start` is true when the
 * server came up.
 */
export async function onSamePort(deadlineMs: number, start: () => Promise<boolean>, stayedInUse: () => Error): Promise<void> {
  for (;;) {
    if (await start()) return;
    if (Date.now() >= deadlineMs) throw stayedInUse();
    // Cut to what is left: a whole pause would run past the deadline, and one more start after it.
    await sleep(pauseWithin(50, deadlineMs));
  }
}

/** Where lockcheck processes claim the ports of their servers (one file per port, holding the claimant's pid): shared by every user of the machine. */
export const PORT_CLAIMS = join(tmpdir(), 'lockcheck-ports');

/** Where this user's claims go when PORT_CLAIMS cannot be trusted: private (0700), so they coordinate only this user's runs. */
export function privateClaims(): string {
  return join(tmpdir(), `lockcheck-ports-${process.getuid?.() ?? 'user'}`);
}

/**
 * The claims directory to use, made if missing. PORT_CLAIMS is in the shared
 * temp dir, so any local user may have made it, or planted something in its
 * place: it is used only when it is a real directory (not a symlink into
 * somewhere claims would be written and swept) that every user may add to
 * and none may empty (mode 1777). Otherwise this user's private directory,
 * checked the same way; null when neither can be trusted (the kernel's ports
 * then).
 *
 * The private directory is made only when the shared one is there and
 * untrusted, never because it was missing for a moment: the last claimant's
 * release removes the shared directory (dropClaim), so another process may
 * find it gone between making it and looking at it. That used to send a
 * claim to the private directory, and leave it there empty for good (a CI
 * run's /tmp/lockcheck-ports-0).
 */
function claimsDir(): string | null {
  if (ensureClaimsDir(PORT_CLAIMS)) return PORT_CLAIMS;
  const own = privateClaims();
  return ensureClaimsDir(own) ? own : null;
}

/** How often a claims directory that keeps vanishing (other processes' last releases) is made again before giving up on it. */
const MAKE_ATTEMPTS = 16;

/** `dir` (PORT_CLAIMS or privateClaims()) is there, made if missing, and trusted (see claimsDir). */
function ensureClaimsDir(dir: string): boolean {
  const mode = dir === PORT_CLAIMS ? 0o1777 : 0o700;
  for (let attempt = 0; attempt < MAKE_ATTEMPTS; attempt++) {
    makeDir(dir, mode);
    const verdict = judgeDir(dir, mode);
    if (verdict !== 'absent') return verdict === 'trusted';
    // Removed by another process's last release since makeDir: make it again.
  }
  return false;
}

/**
 * Makes `dir` with exactly `mode`, in one step as other processes see it: a
 * staging directory beside it is given the mode, then renamed into place. A
 * mkdir then chmod would show the umask's mode (1755) in between, which
 * another user's process would rightly not trust. Nothing when `dir` is
 * there already (or cannot be made: judgeDir says what it is).
 */
function makeDir(dir: string, mode: number): void {
  try {
    lstatSync(dir);
    return;
  } catch {
    // missing: made below
  }
  let staging: string;
  try {
    staging = mkdtempSync(`${dir}.making-`);
  } catch {
    return;
  }
  try {
    chmodSync(staging, mode);
    // Replaces only a missing or empty directory: a claim made in one another process just made stays (ENOTEMPTY then).
    renameSync(staging, dir);
  } catch {
    rmSync(staging, { recursive: true, force: true });
  }
}

/** `dir` is a directory (not a symlink) with exactly `mode` ('trusted'; one this user owns is set to it), gone ('absent'), or anything else ('untrusted'). */
function judgeDir(dir: string, mode: number): 'trusted' | 'absent' | 'untrusted' {
  let stat;
  try {
    stat = lstatSync(dir);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : 'untrusted';
  }
  if (!stat.isDirectory()) return 'untrusted';
  if ((stat.mode & 0o7777) === mode && (mode === 0o1777 || stat.uid === process.getuid?.())) return 'trusted';
  if (stat.uid !== process.getuid?.()) return 'untrusted';
  try {
    chmodSync(dir, mode);
    return 'trusted';
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'ENOENT' ? 'absent' : 'untrusted';
  }
}

/** The ports servers that restart on their port are given: from 20000 to just below the kernel's ephemeral range (null: no room there, use the kernel's). */
export function restartPorts(range = readEphemeralRange()): { readonly from: number; readonly to: number } | null {
  const from = 20_000;
  const to = range === null ? 32_767 : range.from - 1;
  return to - from >= 1_000 ? { from, to } : null;
}

function readEphemeralRange(): { readonly from: number } | null {
  try {
    const [from] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return from !== undefined && Number.isInteger(from) ? { from } : null;
  } catch {
    return null;
  }
}

/** A port of restartPorts() nobody has claimed and nothing listens on, claimed; the kernel's choice where that range has no room. */
export async function claimPort(): Promise<{ readonly port: number; readonly release: () => void }> {
  const range = restartPorts();
  const dir = range === null ? null : claimsDir();
  if (range === null || dir === null) return { port: await freeLoopbackPort(), release: () => undefined };
  sweepDeadClaims(dir);
  for (let tries = 0; ; tries++) {
    const port = range.from + randomInt(range.to - range.from + 1);
    const file = join(dir, String(port));
    if (!takeClaim(file)) {
      if (tries > 10_000) throw new Error(`no unclaimed port in ${range.from}-${range.to} (${dir})`);
      continue;
    }
    if ((await probe(port, '127.0.0.1')) !== null) {
      let released = false;
      return {
        port,
        release: () => {
          if (released) return;
          released = true;
          dropClaim(file);
        },
      };
    }
    dropClaim(file);
  }
}

/** Removes a claim, and the claims' directory once it is empty: nothing of lockcheck stays in the temp dir when no server runs. */
function dropClaim(file: string): void {
  ownClaims.delete(file);
  try {
    rmSync(file, { force: true });
  } catch {
    // Another user's, in the shared (sticky) directory: not ours to remove; its port stays taken.
    return;
  }
  try {
    rmdirSync(dirname(file));
  } catch {
    // Another process's claims are in it (ENOTEMPTY), or it is gone already.
  }
}

/** How long a claim file may stay empty before it counts as its maker's, killed between making and writing it. */
const EMPTY_CLAIM_MS = 10_000;

/** This process's claims: dropped at exit and on SIGINT, SIGTERM and SIGHUP too, for servers stopped by a kill at exit rather than by stop(). */
const ownClaims = new Set<string>();

function dropOwnClaims(): void {
  for (const file of [...ownClaims]) {
    // Only while the claim is still this process's (a claim is taken over only from a dead claimant, but never remove another's).
    const holder = readClaim(file);
    if (holder === String(process.pid)) dropClaim(file);
    else ownClaims.delete(file);
  }
}

/** Removes the claims of processes that are gone (killed, so their exit handler never ran), then the directory if that empties it. */
function sweepDeadClaims(dir: string): void {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    const file = join(dir, name);
    if (!claimantAlive(file)) dropClaim(file);
  }
}

/** Creates the claim file; takes over one whose claimant is gone. */
function takeClaim(file: string): boolean {
  for (let attempt = 0; attempt < 4; attempt++) {
    try {
      // The directory goes with its last claim (dropClaim): made again here, and checked again, should another process remove it in between (only this one: never the private one because the shared one was gone a moment).
      if (!ensureClaimsDir(dirname(file))) return false;
      // Never writable by others (umask 0): in the shared directory another user could put their pid in it, and keep or free this port.
      writeFileSync(file, String(process.pid), { flag: 'wx', mode: 0o644 });
      ownClaims.add(file);
      if (ownClaims.size === 1) onExitKill(dropOwnClaims);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') continue;
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      if (claimantAlive(file)) return false;
      try {
        rmSync(file, { force: true });
      } catch {
        return false; // another user's dead claim in the sticky directory: only they may remove it
      }
    }
  }
  return false;
}

/** The longest claim lockcheck writes (a pid), with room to spare. */
const CLAIM_MAX_BYTES = 32;

/**
 * A claim's text, or null when it is not a regular file of a few bytes. The
 * shared directory is anyone's: what another user put there (a FIFO, a
 * symlink to /dev/zero or to a large file) must not hang or exhaust this
 * process, so it is opened without following a link or blocking, and read
 * only when it is a regular file, at most CLAIM_MAX_BYTES.
 */
function readClaim(file: string): string | null {
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return null;
  }
  try {
    if (!fstatSync(fd).isFile()) return null;
    const buffer = Buffer.alloc(CLAIM_MAX_BYTES + 1);
    const n = readSync(fd, buffer, 0, buffer.length, 0);
    return n > CLAIM_MAX_BYTES ? null : buffer.subarray(0, n).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

function claimantAlive(file: string): boolean {
  let pid: number;
  try {
    const text = readClaim(file);
    // Unreadable: being written or removed right now, or not a claim lockcheck wrote: not ours to take.
    if (text === null) return true;
    // Empty: made and not yet written (takeClaim creates, then writes), unless it has been empty for long (its maker killed in between).
    if (text === '') return Date.now() - statSync(file).mtimeMs < EMPTY_CLAIM_MS;
    pid = Number(text);
  } catch {
    return true; // removed right now: not ours to take
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}


const cleanups = new Set<() => void>();
const interruptCleanups = new Set<() => Promise<void>>();
let handlersInstalled = false;

/** How long SIGINT/SIGTERM/SIGHUP wait for the async clean-ups (deleting a run's keys and rows on the user's servers). */
export const INTERRUPT_CLEANUP_MS = 5_000;

/** The synchronous clean-ups, each once: a second signal runs them, and the process must not run them again on its way out. */
function runCleanups(): void {
  for (const cleanup of [...cleanups]) {
    cleanups.delete(cleanup);
    cleanup();
  }
}

/** Waits for `work` to settle, at most `ms` of real time; never rejects. */
export async function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  await finishWithin(work.catch(() => undefined), ms);
}

/** The async clean-ups, together bounded by INTERRUPT_CLEANUP_MS; never rejects. */
function runInterruptCleanups(): Promise<void> {
  return settleWithin(Promise.allSettled([...interruptCleanups].map((cleanup) => cleanup())), INTERRUPT_CLEANUP_MS);
}

let endingSignal: NodeJS.Signals | null = null;

/**
 * The signal that is ending this process while its clean-ups run, or null.
 * Work still running then fails for want of the servers being stopped: a
 * command must not save what it made after that as if the run had ended.
 */
export function interruptedBy(): NodeJS.Signals | null {
  return endingSignal;
}

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
const signalHandlers = new Map<NodeJS.Signals, () => void>();

function installHandlers(): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  process.on('exit', runCleanups);
  for (const signal of SIGNALS) {
    const handler = () => onSignal(signal);
    signalHandlers.set(signal, handler);
    // Not once: a second signal must find a handler too, or it ends the process at once, clean-ups undone.
    process.on(signal, handler);
  }
}

/**
 * The first signal runs the async clean-ups (bounded), then the synchronous
 * ones, then ends the process by the signal. A second one (Ctrl-C again, a
 * SIGTERM after a SIGINT) does not wait for the first's async clean-ups: it
 * runs the synchronous ones at once (servers and client processes SIGKILLed,
 * temp dirs removed) and ends the process by itself. What only the async
 * clean-ups do (deleting a run's keys and rows on the user's own servers) is
 * left undone then; the keys carry a ttl.
 */
function onSignal(signal: NodeJS.Signals): void {
  if (endingSignal !== null) {
    process.stderr.write(`\nlockcheck: ${signal} again: ending now: the servers it started are killed and its temp dirs removed (a run's keys and rows on servers of yours may remain)\n`);
    end(signal);
    return;
  }
  endingSignal = signal;
  void runInterruptCleanups().then(() => end(signal));
}

let ended = false;

/** Runs the synchronous clean-ups and re-raises `signal` (the process ends by it) unless someone else handles it. */
function end(signal: NodeJS.Signals): void {
  if (ended) return;
  ended = true;
  runCleanups();
  for (const [s, handler] of signalHandlers) process.removeListener(s, handler);
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

/** Runs `killAllSync` at exit and on SIGINT, SIGTERM and SIGHUP (then re-raised when nobody else handles it). */
export function onExitKill(killAllSync: () => void): void {
  atExit(killAllSync);
}

/**
 * Runs `cleanup` (synchronous) at exit, and on SIGINT, SIGTERM and SIGHUP
 * after the async clean-ups, as the last thing before the process ends.
 * Returns the function that unregisters it.
 */
export function atExit(cleanup: () => void): () => void {
  cleanups.add(cleanup);
  installHandlers();
  return () => cleanups.delete(cleanup);
}

/**
 * Runs `cleanup` (bounded, see INTERRUPT_CLEANUP_MS) when SIGINT, SIGTERM or
 * SIGHUP arrives, before the process ends. Returns the function that
 * unregisters it (call it once the cleanup ran the normal way).
 */
export function onInterrupt(cleanup: () => Promise<void>): () => void {
  interruptCleanups.add(cleanup);
  installHandlers();
  return () => interruptCleanups.delete(cleanup);
}
