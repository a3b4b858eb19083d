/**
 * One real redis-server process under the test environment's control: start
 * on a free loopback port in its own temporary directory, optionally under a
 * libfaketime clock, then crash, restart, pause, resume and stop it.
 *
 * Every server is registered until stop(); a process 'exit' handler (and
 * SIGINT/SIGTERM/SIGHUP handlers) SIGKILL whatever is still running and remove
 * the temporary directories, so a crashed test leaves nothing behind.
 *
 * Faked servers are stopped with SIGKILL: with the monotonic clock faked,
 * serverCron (and so a SIGTERM shutdown) waits for the clock file to move.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { redisConfigArgument } from './configText.ts';
import { builtIn } from './tempDir.ts';
import type { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EnvironmentError, type FakeClockFile, ensureMallocShim, removeFaketimeSharedMemory, requireLibfaketime } from './faketime.ts';
import { LiveServers } from './liveServers.ts';
import { onFreePort, onSamePort } from './processes.ts';
import { type RespValue, sendCommand } from './resp.ts';
import { Guard } from './watchdog.ts';
import { checkObject, knownOptions, refuse } from '../../impl/options.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { registerSecret } from './redact.ts';
import { StoppedWhileStarting } from './stoppedWhileStarting.ts';

export { EnvironmentError } from './faketime.ts';
export { StoppedWhileStarting } from './stoppedWhileStarting.ts';

/** Whether a server's keys survive a crash: 'none' (lost) or 'aof-always' (AOF, fsync on every write). */
export type RedisPersistence = 'none' | 'aof-always';

/** How RedisServer.start starts a server. */
export interface RedisServerOptions {
  /** 'none': a crash loses every key. 'aof-always': AOF with fsync on every write, keys survive a crash. */
  persistence: RedisPersistence;
  /** Run under libfaketime with this file as the server's clock (set it before start). */
  clockFile?: FakeClockFile;
  /** Bound on start-up (spawn to first PONG), port retries included, plus one last PING of up to 1 s made after it. Default 10000. */
  startTimeoutMs?: number;
  /** The requirepass (any non-empty text; quoted in redis.conf). Default: random. A primary, its replica and their sentinel's auth-pass share one. */
  password?: string;
  /** Further redis.conf lines (replicaof, masterauth, sentinel directives), written to the 0600 config file. */
  config?: readonly string[];
  /** Run as Redis Sentinel (redis-sentinel) instead of a data server. */
  sentinel?: boolean;
  /**
   * With a clockFile: fake the wall clock only, and let timers run on the real monotonic clock
   * (replication and Sentinel's checks need the server's cron to run while the wall clock is held).
   */
  realMonotonic?: boolean;
}

const checkKeys = knownOptions('RedisServer options', ['persistence', 'clockFile', 'startTimeoutMs', 'password', 'config', 'sentinel', 'realMonotonic']);

/** Each option's value, before any process or directory is made: a wrong one is refused by name, not met later as a TypeError. */
function checkOptions(options: RedisServerOptions): void {
  checkKeys(checkObject(options, 'RedisServer options'));
  const o = options as unknown as Readonly<Record<string, unknown>>;
  if (o.persistence !== 'none' && o.persistence !== 'aof-always') refuse('persistence', "'none' or 'aof-always'", o.persistence);
  if (o.clockFile !== undefined && (typeof o.clockFile !== 'object' || o.clockFile === null || typeof (o.clockFile as { path?: unknown }).path !== 'string')) refuse('clockFile', 'a FakeClockFile', o.clockFile);
  const t = o.startTimeoutMs;
  if (t !== undefined && (typeof t !== 'number' || !Number.isFinite(t) || t <= 0)) refuse('startTimeoutMs', 'a positive number of ms', t);
  // An empty requirepass is no password at all: the server would take every local user.
  if (o.password !== undefined && (typeof o.password !== 'string' || o.password === '')) refuse('password', 'a non-empty string', o.password);
  if (o.config !== undefined && (!Array.isArray(o.config) || !o.config.every((l) => typeof l === 'string' && !/[\r\n]/.test(l)))) refuse('config', 'an array of redis.conf lines (strings without line breaks)', o.config);
  for (const name of ['sentinel', 'realMonotonic'] as const) if (o[name] !== undefined && typeof o[name] !== 'boolean') refuse(name, 'a boolean', o[name]);
}

/** Only start() makes a server (a directory and a process behind it): `new` from outside is refused. */
const STARTING: unique symbol = Symbol('RedisServer.start');

const HOST = '127.0.0.1';
const DEFAULT_START_TIMEOUT_MS = 10_000;
const PING_ATTEMPT_TIMEOUT_MS = 250;
/** The attempt made once the start's deadline has passed (so a start may take startTimeoutMs plus this). */
const LAST_PING_TIMEOUT_MS = 1000;
const POLL_INTERVAL_MS = 10;
const OUTPUT_RING_BYTES = 16 * 1024;
const LOG_TAIL_BYTES = 4 * 1024;
const INSTALL_REDIS = 'apt-get update && apt-get install -y --no-install-recommends redis-server';

const live = new LiveServers<RedisServer>();

/**
 * A redis-server process lockcheck started on 127.0.0.1 (a free port, a
 * temporary directory, a random password), with the faults a run needs on
 * it: crash (SIGKILL) and restart, pause (SIGSTOP) and resume, and its wall
 * clock under libfaketime. Made by RedisServer.start; stop() removes it, and
 * a watchdog does should this process die first.
 */
export class RedisServer {
  /** Always 127.0.0.1. */
  readonly host = HOST;
  /** Whether its keys survive a crash (RedisServerOptions.persistence). */
  readonly persistence: RedisPersistence;
  /** The libfaketime clock file the server runs on, or null for the real clock. */
  readonly clockFile: FakeClockFile | null;
  /** Bound on start-up and on each restart, in ms (RedisServerOptions.startTimeoutMs). */
  readonly startTimeoutMs: number;
  /** Random per server unless given (requirepass); `url` carries it. Never print it (redactUrl). */
  readonly password: string;
  readonly #config: readonly string[];
  readonly #sentinel: boolean;
  readonly #realMonotonic: boolean;
  #port: number;
  readonly #dir: string;
  readonly #preload: string | null;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #pid = -1;
  #paused = false;
  #stopping: Promise<void> | null = null;
  #output = '';
  /** The watchdog's record of this server: killed and removed should this process die without cleaning up. */
  readonly #guard: Guard;
  /** Gives the server's port back (processes.ts onFreePort): only once it is stopped for good, never at a restart. */
  #releasePort: () => void = () => undefined;

  private constructor(starting: typeof STARTING, options: RedisServerOptions, dir: string, preload: string | null) {
    if (starting !== STARTING) throw new InvalidInputError('invalid-config', 'a RedisServer is made by RedisServer.start(options), not by new RedisServer()');
    // Made only now: a refused `new` starts no watchdog.
    this.#guard = new Guard();
    this.persistence = options.persistence;
    this.clockFile = options.clockFile ?? null;
    this.#realMonotonic = options.realMonotonic ?? false;
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.password = options.password ?? randomBytes(24).toString('base64url');
    // Hidden wherever it is printed, not only inside its URL.
    registerSecret(this.password);
    this.#config = options.config ?? [];
    this.#sentinel = options.sentinel ?? false;
    this.#dir = dir;
    this.#preload = preload;
    this.#port = 0;
    this.#guard.set({ processes: [], dirs: [dir] });
  }

  /**
   * Starts a server and resolves once it answers PING. Rejects with
   * InvalidInputError('invalid-config') for bad options and EnvironmentError
   * when redis-server (or libfaketime, with a clockFile) is missing or the
   * server does not come up within startTimeoutMs (its log tail attached);
   * StoppedWhileStarting (an EnvironmentError) when stop() or
   * stopAllRedisServers() came first (nothing of it is left running).
   */
  static async start(options: RedisServerOptions): Promise<RedisServer> {
    checkOptions(options);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    const pending = live.starting();
    let server: RedisServer;
    try {
      let preload: string | null = null;
      if (options.clockFile !== undefined) {
        const shim = await ensureMallocShim();
        preload = `${shim}:${requireLibfaketime()}`;
        if (!existsSync(options.clockFile.path)) {
          throw new Error(`RedisServer: clock file ${options.clockFile.path} does not exist; set() it before starting the server`);
        }
      }
      live.killAtExit();
      server = await builtIn(await mkdtemp(join(tmpdir(), 'lockcheck-redis-')), (dir) => new RedisServer(STARTING, options, dir, preload));
    } catch (error) {
      pending.abandoned();
      throw error;
    }
    const dir = server.#dir;
    // Stopped here already should a stopAll() have come while the directory was made.
    pending.arrived(server);
    const deadline = Date.now() + timeoutMs;
    try {
      if (server.#stopping !== null) throw new StoppedWhileStarting(`RedisServer (dir ${dir}): stop() came while it was starting, before its config was written`);
      // The password goes in a 0600 file in the 0700 directory: on the command line every local user could read it.
      // Sentinel rewrites its config file: it lives in the server's own directory.
      // Quoted: a space, quote or line break in a caller's password split the line, or made lines of its own.
      await writeFile(server.#configFile, [`requirepass ${redisConfigArgument(server.password)}`, ...server.#config].map((l) => `${l}\n`).join(''), { mode: 0o600, flag: 'wx' });
      const started = await onFreePort(
        deadline,
        async (port) => {
          server.#port = port;
          return (await server.#spawnAndWait(deadline)) === 'ready' ? server : 'address-in-use';
        },
        () => server.#startError('no free port could be bound'),
      );
      // A stop() in the last PING's reply killed the server it answered for, and gave back no port (it had none yet).
      if (server.#stopping !== null) {
        started.release();
        throw new StoppedWhileStarting(`RedisServer (dir ${dir}): stop() came while it was starting, as it answered`);
      }
      server.#releasePort = started.release;
      return started.value;
    } catch (error) {
      // What failed after a stop() is the stop's doing (a killed process, a removed directory), not the environment's.
      const stoppedWhileStarting = server.#stopping !== null;
      await server.stop();
      if (stoppedWhileStarting && !(error instanceof StoppedWhileStarting)) throw new StoppedWhileStarting(`RedisServer (dir ${dir}): stop() came while it was starting`, { cause: error });
      throw error;
    }
  }

  /** The TCP port it listens on (the same across restarts). */
  get port(): number {
    return this.#port;
  }

  /** Its temporary directory (config, log, AOF); removed by stop(). */
  get dir(): string {
    return this.#dir;
  }

  /** redis://:PASSWORD@127.0.0.1:PORT. Holds the password: never print it (redactUrl). */
  get url(): string {
    return `redis://:${this.password}@${HOST}:${this.#port}`;
  }

  /** The fields an ioredis client needs. */
  get connection(): { host: string; port: number; password: string } {
    return { host: HOST, port: this.#port, password: this.password };
  }

  /** Sends one command (after AUTH) on a fresh connection: for checks and tests. */
  command(args: readonly string[], timeoutMs = 1000): Promise<RespValue> {
    return sendCommand(HOST, this.#port, args, timeoutMs, this.password);
  }

  get #configFile(): string {
    return join(this.#dir, 'redis.conf');
  }

  /** Pid of the current (or, after a crash or stop, the last) redis-server process. */
  get pid(): number {
    return this.#pid;
  }

  /** The process exists (it may be paused). */
  get running(): boolean {
    return this.#child !== null && isAlive(this.#child);
  }

  /** Stopped by pause() (SIGSTOP) and not yet resumed. */
  get paused(): boolean {
    return this.#paused;
  }

  /** stop() was called: the server is gone for good (restart throws). */
  get stopped(): boolean {
    return this.#stopping !== null;
  }

  /** SIGKILL, then wait for the process to exit. The directory (and any AOF) stays. No-op when not running. */
  async crash(): Promise<void> {
    const child = this.#child;
    if (child === null) return;
    if (isAlive(child)) {
      child.ref();
      child.kill('SIGKILL');
    }
    await this.#exited;
    this.#child = null;
    this.#paused = false;
  }

  /**
   * Starts the server again with the same port, directory and arguments and
   * waits for PING (a running server is crashed first). The port is retried
   * for up to startTimeoutMs should it still be held. Rejects with
   * StoppedWhileStarting when stop() came meanwhile.
   */
  async restart(): Promise<void> {
    this.#assertNotStopped('restart');
    await this.crash();
    const deadline = Date.now() + this.startTimeoutMs;
    try {
      await onSamePort(deadline, async () => (await this.#spawnAndWait(deadline)) === 'ready', () => this.#startError(`port ${this.#port} stayed in use`));
    } catch (error) {
      if (this.#stopping !== null && !(error instanceof StoppedWhileStarting)) throw new StoppedWhileStarting(`RedisServer (dir ${this.#dir}): stop() came while it was restarting`, { cause: error });
      throw error;
    }
  }

  /** SIGSTOP: the server keeps accepting TCP connections (backlog) but answers nothing. */
  pause(): void {
    this.#signal('SIGSTOP', 'pause');
    this.#paused = true;
  }

  /** SIGCONT. */
  resume(): void {
    this.#signal('SIGCONT', 'resume');
    this.#paused = false;
  }

  /** SIGKILL, wait for exit, remove the directory. Idempotent. */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      try {
        await this.crash();
      } finally {
        await rm(this.#dir, { recursive: true, force: true, maxRetries: 3 });
        this.#guard.release();
        this.#releasePort();
        live.delete(this);
      }
    })();
    return this.#stopping;
  }

  /** The end of the server's log file and of its stdout/stderr, for error messages. */
  logTail(): string {
    let log = '';
    try {
      const text = readFileSync(join(this.#dir, 'redis.log'), 'utf8');
      log = text.slice(-LOG_TAIL_BYTES);
    } catch {
      log = '(no redis.log)';
    }
    const output = this.#output.trim();
    return output === '' ? log : `${log}\n--- stdout/stderr ---\n${output.slice(-LOG_TAIL_BYTES)}`;
  }

  #args(): string[] {
    const args = [
      this.#configFile,
      '--port', String(this.#port),
      '--bind', HOST,
      '--dir', this.#dir,
      '--save', '',
      '--daemonize', 'no',
      '--protected-mode', 'yes',
      '--logfile', join(this.#dir, 'redis.log'),
    ];
    if (this.#sentinel) return args;
    if (this.persistence === 'aof-always') args.push('--appendonly', 'yes', '--appendfsync', 'always');
    else args.push('--appendonly', 'no');
    return args;
  }

  #env(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) {
      // An inherited FAKETIME would override the timestamp file; a stray LD_PRELOAD has no business here.
      if (!key.startsWith('FAKETIME') && key !== 'LD_PRELOAD') env[key] = value;
    }
    env['TZ'] = 'UTC';
    if (this.clockFile !== null && this.#preload !== null) {
      env['LD_PRELOAD'] = this.#preload;
      env['FAKETIME_TIMESTAMP_FILE'] = this.clockFile.path;
      env['FAKETIME_NO_CACHE'] = '1';
      if (this.#realMonotonic) env['DONT_FAKE_MONOTONIC'] = '1';
    }
    return env;
  }

  /** Spawns the process and polls PING until `deadline`. Throws EnvironmentError unless the port was taken. */
  async #spawnAndWait(deadline: number): Promise<'ready' | 'address-in-use'> {
    // A stop() during start or restart (the config's write, the port's claim, an earlier try) already killed what ran: nothing more is spawned.
    if (this.#stopping !== null) throw new StoppedWhileStarting(`RedisServer (dir ${this.#dir}): stop() came while it was starting, before redis-server was spawned`);
    const child = spawn(this.#sentinel ? 'redis-sentinel' : 'redis-server', this.#args(), { env: this.#env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let spawnError: NodeJS.ErrnoException | null = null;
    this.#child = child;
    this.#paused = false;
    const faked = this.clockFile !== null && this.#preload !== null;
    this.#exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        if (faked && child.pid !== undefined) removeFaketimeSharedMemory(child.pid);
        resolve();
      });
      child.once('error', (error: NodeJS.ErrnoException) => {
        spawnError = error;
        resolve();
      });
    });
    const capture = (chunk: Buffer): void => {
      this.#output = (this.#output + chunk.toString('utf8')).slice(-OUTPUT_RING_BYTES);
    };
    child.stdout?.on('data', capture);
    child.stderr?.on('data', capture);
    // A forgotten server must not keep the test process alive: the exit handler kills it.
    child.unref();
    (child.stdout as Socket | null)?.unref();
    (child.stderr as Socket | null)?.unref();
    if (child.pid !== undefined) {
      this.#pid = child.pid;
      const files = faked ? [`/dev/shm/faketime_shm_${child.pid}`, `/dev/shm/sem.faketime_sem_${child.pid}`] : [];
      this.#guard.set({ processes: [{ pid: child.pid, files }], dirs: [this.#dir] });
    }

    let exited = false;
    void this.#exited.then(() => {
      exited = true;
    });
    // One attempt always starts after the deadline: on a starved machine this process can stall past it
    // while the server comes up (seen at load 29: three restart loops failed at once, each server then
    // answering PING in 2 ms), and an attempt cut short by the stall (its timer fires before the reply is
    // read) must not fail a server that was ready.
    while (!exited) {
      const remaining = deadline - Date.now();
      const last = remaining <= 0;
      try {
        const reply = await this.command(['PING'], last ? LAST_PING_TIMEOUT_MS : Math.min(PING_ATTEMPT_TIMEOUT_MS, remaining));
        if (reply === 'PONG') return 'ready';
      } catch {
        // not listening yet (ECONNREFUSED), LOADING, or slow: poll again
      }
      if (last) break;
      if (!exited) await sleep(POLL_INTERVAL_MS);
    }

    const failed = spawnError as NodeJS.ErrnoException | null;
    if (failed !== null && failed.code === 'ENOENT') {
      this.#child = null;
      throw new EnvironmentError('redis-server is not installed (not found on PATH)', INSTALL_REDIS);
    }
    const exitedByItself = exited;
    await this.crash();
    // Killed by stop(): not a start-up failure, and not a port to try again.
    if (this.#stopping !== null) throw new StoppedWhileStarting(`RedisServer (dir ${this.#dir}): stop() came while it was starting`);
    if (exitedByItself && /Address already in use/i.test(this.logTail())) return 'address-in-use';
    throw this.#startError(
      exitedByItself ? `redis-server exited during start-up${failed ? ` (${failed.message})` : ''}` : `no PONG within ${this.startTimeoutMs} ms`,
    );
  }

  #startError(reason: string): EnvironmentError {
    return new EnvironmentError(
      `RedisServer on ${HOST}:${this.#port} (dir ${this.#dir}${this.clockFile ? ', faked clock' : ''}) failed to start: ${reason}\n--- log tail ---\n${this.logTail()}`,
    );
  }

  #signal(signal: NodeJS.Signals, what: string): void {
    this.#assertNotStopped(what);
    const child = this.#child;
    if (child === null || !isAlive(child)) throw new InvalidInputError('precondition', `RedisServer: cannot ${what}, the server is not running`);
    child.kill(signal);
  }

  #assertNotStopped(what: string): void {
    if (this.#stopping !== null) throw new InvalidInputError('precondition', `RedisServer: cannot ${what} a stopped server`);
  }

  /** Synchronous last-resort cleanup for the exit handler. */
  killSync(): void {
    const child = this.#child;
    if (child !== null && isAlive(child)) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
    // At process exit there is no 'exit' event left to wait for.
    if (child?.pid !== undefined && this.clockFile !== null) removeFaketimeSharedMemory(child.pid);
    try {
      rmSync(this.#dir, { recursive: true, force: true, maxRetries: 3 });
    } catch {
      // best effort at exit
    }
    this.#guard.release();
    this.#releasePort();
    live.delete(this);
  }
}

/** Stops every server started in this process and not yet stopped (one still starting too: its start() rejects with StoppedWhileStarting). */
export async function stopAllRedisServers(): Promise<void> {
  await live.stopAll();
}

function isAlive(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}
