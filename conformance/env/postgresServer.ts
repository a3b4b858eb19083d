/**
 * One throwaway PostgreSQL 15 cluster under the test environment's control:
 * initdb into its own temporary directory, start on a free loopback port,
 * then crash, restart, pause, resume and stop it. That directory (`dir`) is
 * `c` inside one made for it (lockcheck-pg-…), which stays ours, 0711,
 * when we are root: the cluster's, OS user postgres's, cannot be renamed away
 * and replaced by a link that root's paths into it would follow.
 *
 * How it runs (and why not pg_ctl):
 * - initdb and the postmaster are spawned directly by this process, as the
 *   `postgres` user when we are root (node's spawn uid/gid: initdb and postgres
 *   refuse to run as root). The postmaster is our own child, so this process
 *   reaps it the moment it dies. `pg_ctl start` would daemonize it instead, and
 *   on this machine pid 1 reaps orphans only about once a second: a SIGKILLed
 *   postmaster would stay a zombie long enough for the next start to see its
 *   pid "alive" in postmaster.pid and refuse ("lock file already exists").
 * - stop() and restart() shut down like `pg_ctl stop -m immediate`: SIGQUIT to
 *   the postmaster, which kills its children, reaps them and exits. The next
 *   start runs crash recovery.
 * - crash() is a power cut of the whole cluster: SIGSTOP the postmaster (so it
 *   forks and reacts to nothing), SIGKILL every child, SIGKILL the postmaster.
 *   postmaster.pid, the WAL and the data files stay as they were.
 * - Access: only the invoking user. initdb sets scram-sha-256 for every
 *   connection (TCP and Unix socket) with a random password made for this
 *   cluster (handed to initdb in a 0600 file inside the 0700 temporary
 *   directory, removed right after); `url` and `connection` carry it. Trust
 *   authentication would let any local user connect as superuser and run
 *   programs as the cluster's OS user (COPY ... FROM PROGRAM).
 * - Settings: listen only on 127.0.0.1, Unix socket in the temporary directory,
 *   dynamic_shared_memory_type=mmap (segments live in the data directory, so a
 *   killed cluster leaks nothing into /dev/shm). With `fsync: false` (the
 *   default) also fsync=off and full_page_writes=off: that only gives up safety
 *   against an operating-system crash. synchronous_commit stays on on purpose:
 *   with it off a commit returns before its WAL leaves shared memory, and
 *   crash() (which kills the processes, not the OS) loses commits that clients
 *   saw succeed.
 * - initdb's own `postgres --boot` and `postgres --single` use POSIX shared
 *   memory (/dev/shm/PostgreSQL.<handle>; PostgreSQL 15's initdb takes no
 *   settings for them), and one that is SIGKILLed never unlinks it. So a stop
 *   during initdb interrupts it first (SIGINT to its group: initdb and its
 *   postgres end cleanly and remove what they made, within
 *   TOOL_INTERRUPT_WAIT_MS), and only then SIGKILLs it; every kill of initdb
 *   (that one, the exit handler's, the start bound's, the watchdog's) first
 *   stops its processes, notes the PostgreSQL segments they have mapped or
 *   open, and unlinks exactly those (the same file, by inode, and not one
 *   that existed before initdb started) once they are killed. No other
 *   segment in /dev/shm is ever touched: another server's (a concurrent
 *   test's) is mapped by none of our processes.
 * - The small System V shared-memory segment a killed postmaster leaves behind
 *   is removed by the next start, or by stop() / the exit handler (ipcrm, only
 *   when the segment is the one postmaster.pid names, was created by our
 *   postmaster and has no process attached).
 *
 * Every cluster is registered until stop(); a process 'exit' handler (and
 * SIGINT/SIGTERM/SIGHUP handlers) SIGKILL whatever still runs and remove the
 * temporary directories, so a crashed test leaves nothing behind.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readFileSync, readdirSync, readlinkSync, statSync, unlinkSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, open, rm } from 'node:fs/promises';
import { postgresListItem } from './configText.ts';
import { builtIn, removeTree, removeTreeSync } from './tempDir.ts';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { EnvironmentError } from './faketime.ts';
import { StoppedWhileStarting } from './stoppedWhileStarting.ts';
import { LiveServers } from './liveServers.ts';
import { onFreePort, onSamePort } from './processes.ts';
import { leftWithin, pauseWithin } from './deadline.ts';
import { Guard } from './watchdog.ts';
import { finishWithin } from '../realTimeLimit.ts';
import { checkObject, knownOptions, refuse } from '../../impl/options.ts';
import { shownField } from '../../model/shownText.ts';
import { InvalidInputError } from '../../model/errors.ts';
import { registerSecret } from './redact.ts';

export { EnvironmentError } from './faketime.ts';
export { StoppedWhileStarting } from './stoppedWhileStarting.ts';

export const POSTGRES_BIN_DIR = '/usr/lib/postgresql/15/bin';

/** How PostgresServer.start creates and starts a cluster. */
export interface PostgresServerOptions {
  /**
   * Bound on start(): initdb plus start-up to accepting connections, port
   * retries included. Also the bound on each restart(). Default 90000: initdb alone
   * took over 30 s on a 2-core machine at load 15-20 (docs/ci.md); a bound, not a pace.
   */
  startTimeoutMs?: number;
  /** fsync=on and full_page_writes=on when true. Default false (both off; see the module comment). */
  fsync?: boolean;
  /** Extra server settings, passed as `-c name=value` after the built-in ones (so they win). */
  settings?: Readonly<Record<string, string | number | boolean>>;
  /**
   * Where the temporary directory is created. Default os.tmpdir(). A tmpfs
   * such as /dev/shm makes initdb 2-3x faster here (about 40 MB of RAM per
   * cluster). When we are root, the `postgres` user must be able to reach it.
   * The cluster's Unix socket is made 37 bytes below it and must fit in
   * 107: a longer one is refused (InvalidInputError 'invalid-config').
   */
  parentDir?: string;
}

/** What start() took, in ms. */
export interface PostgresStartTimings {
  readonly initdbMs: number;
  /** Spawn of the postmaster to accepting TCP connections (the successful attempt). */
  readonly startMs: number;
}

const checkKeys = knownOptions('PostgresServer options', ['startTimeoutMs', 'fsync', 'settings', 'parentDir']);

/** Each option's value, before initdb: a wrong one is refused by name, not met later as a TypeError. */
function checkOptions(options: PostgresServerOptions): void {
  checkKeys(checkObject(options, 'PostgresServer options'));
  const o = options as unknown as Readonly<Record<string, unknown>>;
  const t = o.startTimeoutMs;
  if (t !== undefined && (typeof t !== 'number' || !Number.isFinite(t) || t <= 0)) refuse('startTimeoutMs', 'a positive number of ms', t);
  if (o.fsync !== undefined && typeof o.fsync !== 'boolean') refuse('fsync', 'a boolean', o.fsync);
  if (o.parentDir !== undefined && (typeof o.parentDir !== 'string' || o.parentDir === '')) refuse('parentDir', 'a directory path', o.parentDir);
  if (o.settings === undefined) return;
  checkObject(o.settings, 'settings', 'an object of setting names and values');
  for (const [name, value] of Object.entries(o.settings as object)) {
    if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(name)) throw new InvalidInputError('invalid-config', `PostgresServer: bad setting name ${shownField(name.slice(0, 60))}`);
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') refuse(`settings.${name}`, 'a string, number or boolean', value);
    void settingValue(name, value);
  }
}

/** The longest path a Unix socket may have (sun_path: 108 bytes with its NUL). */
const MAX_SOCKET_PATH_BYTES = 107;

/** The cluster's socket (dir/.s.PGSQL.<port>) fits under `parentDir` whatever the port, or InvalidInputError before anything is made. */
function requireSocketPathFits(parentDir: string): void {
  const longest = join(parentDir, 'lockcheck-pg-XXXXXX', CLUSTER_DIR, '.s.PGSQL.65535');
  if (Buffer.byteLength(longest) > MAX_SOCKET_PATH_BYTES) {
    throw new InvalidInputError('invalid-config', `PostgresServer: parentDir ${shownField(parentDir.slice(0, 120))} is too long: the cluster's Unix socket (${Buffer.byteLength(longest)} bytes) must fit in ${MAX_SOCKET_PATH_BYTES}`);
  }
}

/** Only start() makes a server (a cluster directory and a process behind it): `new` from outside is refused. */
const STARTING: unique symbol = Symbol('PostgresServer.start');

const HOST = '127.0.0.1';
/**
 * The cluster's directory (`dir`), inside the temporary directory made for it, which stays root's when we are root.
 * One letter: the Unix socket's path (dir/.s.PGSQL.<port>) must fit in 107 bytes, under a caller's parentDir too.
 */
const CLUSTER_DIR = 'c';
const USER = 'postgres';
const DATABASE = 'postgres';
const OS_USER = 'postgres';
/** The caller's variables a server run as OS_USER is given: where its programs and libraries are. */
const SERVER_ENV: ReadonlySet<string> = new Set(['PATH', 'LD_LIBRARY_PATH']);
const DEFAULT_START_TIMEOUT_MS = 90_000;
const SHUTDOWN_TIMEOUT_MS = 10_000;
const KILL_WAIT_MS = 5_000;
const TOOL_TIMEOUT_MS = 5_000;
/** How long a stop during initdb waits for it to end by SIGINT (cleanly, its segments removed) before it SIGKILLs it. */
const TOOL_INTERRUPT_WAIT_MS = 2_000;
const POLL_INTERVAL_MS = 10;
const LOG_TAIL_BYTES = 4 * 1024;
const INSTALL_POSTGRES = 'apt-get update && apt-get install -y --no-install-recommends postgresql';

const live = new LiveServers<PostgresServer>();

interface OsUser {
  uid: number;
  gid: number;
}

/**
 * A throwaway PostgreSQL 15 cluster lockcheck started (see the module
 * comment): made by PostgresServer.start, with crash, restart, pause, resume
 * and stop; stop() removes it, and the exit handlers and a watchdog do
 * should this process end first.
 */
export class PostgresServer {
  /** Always 127.0.0.1. */
  readonly host = HOST;
  /** The superuser it is reached as ('postgres'). */
  readonly user = USER;
  /** The database it is reached in ('postgres'). */
  readonly database = DATABASE;
  /** Where initdb and postgres are taken from. */
  readonly binDir = POSTGRES_BIN_DIR;
  /** fsync and full_page_writes are on (PostgresServerOptions.fsync). */
  readonly fsync: boolean;
  /** Bound on start() and on each restart(), in ms (PostgresServerOptions.startTimeoutMs). */
  readonly startTimeoutMs: number;
  /** The superuser's password, random per cluster (scram-sha-256 on every connection). */
  readonly password = randomBytes(24).toString('base64url');
  readonly #settings: ReadonlyArray<readonly [string, string]>;
  readonly #dir: string;
  /** Run initdb and postgres as this user (we are root), or as ourselves (null). */
  readonly #runAs: OsUser | null;
  #port = 0;
  #child: ChildProcess | null = null;
  #exited: Promise<void> = Promise.resolve();
  #pid = -1;
  #paused = false;
  #stopping: Promise<void> | null = null;
  /** initdb while it runs: stop() and the exit handlers kill it (it runs detached, so no Ctrl-C reaches it). */
  #tool: RunningTool | null = null;
  #timings: PostgresStartTimings = { initdbMs: 0, startMs: 0 };
  /** The watchdog's record of this cluster: killed and removed should this process die without cleaning up. */
  readonly #guard: Guard;
  /** Gives the server's port back (processes.ts onFreePort): only once it is stopped for good, never at a restart. */
  #releasePort: () => void = () => undefined;

  private constructor(starting: typeof STARTING, options: PostgresServerOptions, dir: string, runAs: OsUser | null) {
    // Hidden wherever it is printed, not only inside its URL.
    registerSecret(this.password);
    if (starting !== STARTING) throw new InvalidInputError('invalid-config', 'a PostgresServer is made by PostgresServer.start(options), not by new PostgresServer()');
    // Made only now: a refused `new` starts no watchdog.
    this.#guard = new Guard();
    this.fsync = options.fsync ?? false;
    this.startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    this.#settings = Object.entries(options.settings ?? {}).map(([name, value]) => [name, settingValue(name, value)] as const);
    this.#dir = dir;
    this.#runAs = runAs;
    this.#guard.set({ processes: [], dirs: [dirname(dir)] });
  }

  /**
   * Creates a cluster in a new temporary directory, starts it and resolves
   * once it accepts TCP connections. Rejects with
   * InvalidInputError('invalid-config') for bad options and EnvironmentError
   * when PostgreSQL 15 is not installed or the cluster does not come up
   * within startTimeoutMs (its log tail attached); StoppedWhileStarting (an
   * EnvironmentError) when stop() or stopAllPostgresServers() came first.
   * Nothing is left behind.
   */
  static async start(options: PostgresServerOptions = {}): Promise<PostgresServer> {
    checkOptions(options);
    const timeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    requirePostgresBinaries();
    const parentDir = options.parentDir ?? tmpdir();
    requireSocketPathFits(parentDir);
    const pending = live.starting();
    let server: PostgresServer;
    let runAs: OsUser | null;
    try {
      runAs = isRoot() ? await lookUpOsUser(OS_USER) : null;
      live.killAtExit();
      // The cluster's directory sits in one of root's own (CLUSTER_DIR): its owner, OS user postgres when we are root,
      // could otherwise rename it away in the shared temp dir and put a link in its place, which every path root then
      // opens (the log, the password file) would follow.
      server = await builtIn(await mkdtemp(join(parentDir, 'lockcheck-pg-')), async (wrapper) => {
        const dir = join(wrapper, CLUSTER_DIR);
        await mkdir(dir, { mode: 0o700 });
        return new PostgresServer(STARTING, options, dir, runAs);
      });
    } catch (error) {
      pending.abandoned();
      throw error;
    }
    const dir = server.#dir;
    // Stopped here already should a stopAll() have come while the directory was made.
    pending.arrived(server);
    try {
      server.#assertStillStarting('its directory was handed over');
      if (runAs !== null) {
        // Traversable, not listable nor writable: postgres reaches its directory, and can neither rename nor replace it.
        await chmod(dirname(dir), 0o711);
        await chown(dir, runAs.uid, runAs.gid);
      }
      const initdbStarted = Date.now();
      server.#assertStillStarting('initdb');
      await server.#initdb(deadline);
      const initdbMs = Date.now() - initdbStarted;
      const started = await onFreePort(
        deadline,
        async (port) => {
          // A stop() during initdb or the port's claim removed the directory: nothing more is spawned.
          server.#assertStillStarting('the postmaster');
          server.#port = port;
          const result = await server.#spawnAndWait(deadline);
          if (result.outcome !== 'ready') return 'address-in-use';
          server.#timings = { initdbMs, startMs: result.ms };
          return server;
        },
        () => server.#startError('no free port could be bound'),
      );
      // A stop() as the postmaster came up killed it, and gave back no port (it had none yet).
      if (server.#stopping !== null) {
        started.release();
        server.#assertStillStarting('start() returned');
      }
      server.#releasePort = started.release;
      return started.value;
    } catch (error) {
      // What failed after a stop() is the stop's doing (a killed initdb, a missing directory), not the environment's.
      const stoppedWhileStarting = server.#stopping !== null;
      await server.stop();
      if (stoppedWhileStarting && !(error instanceof StoppedWhileStarting)) throw new StoppedWhileStarting(`PostgresServer (dir ${dir}): stop() came while it was starting`, { cause: error });
      throw error;
    }
  }

  /** Throws StoppedWhileStarting once stop() was called: `next` (what start() was about to run) is not run. */
  #assertStillStarting(next: string): void {
    if (this.#stopping !== null) throw new StoppedWhileStarting(`PostgresServer (dir ${this.#dir}): stop() came while it was starting, before ${next}`);
  }

  /** The TCP port it listens on (the same across restarts). */
  get port(): number {
    return this.#port;
  }

  /** The cluster's directory: data/ (the cluster), log, and the Unix socket; in a temporary directory made for it, removed with it. */
  get dir(): string {
    return this.#dir;
  }

  /** The cluster's data directory (PGDATA). */
  get dataDir(): string {
    return join(this.#dir, 'data');
  }

  /** Where the Unix socket lives (libpq `host=<socketDir>`). */
  get socketDir(): string {
    return this.#dir;
  }

  /** The server's log file. */
  get logFile(): string {
    return join(this.#dir, 'log');
  }

  /** postgres://postgres:PASSWORD@127.0.0.1:PORT/postgres. Holds the password: never print it (redactUrl). */
  get url(): string {
    return `postgres://${USER}:${encodeURIComponent(this.password)}@${HOST}:${this.#port}/${DATABASE}`;
  }

  /** The fields a pg.Client needs (TCP, password included). */
  get connection(): { host: string; port: number; user: string; password: string; database: string } {
    return { host: HOST, port: this.#port, user: USER, password: this.password, database: DATABASE };
  }

  /** Pid of the current (or, after a crash or stop, the last) postmaster. */
  get pid(): number {
    return this.#pid;
  }

  /** The postmaster exists (it may be paused). */
  get running(): boolean {
    return this.#child !== null && childAlive(this.#child);
  }

  /** Stopped by pause() and not yet resumed. */
  get paused(): boolean {
    return this.#paused;
  }

  /** stop() was called: the cluster is gone for good. */
  get stopped(): boolean {
    return this.#stopping !== null;
  }

  /** What start() took (initdb, then start-up), in ms. */
  get timings(): PostgresStartTimings {
    return this.#timings;
  }

  /** The postmaster and all its live descendants (backends, checkpointer, walwriter, ...). Empty when not running. */
  pids(): number[] {
    if (!this.running) return [];
    return [this.#pid, ...descendants(this.#pid)].filter(pidAlive);
  }

  /**
   * Power cut: SIGSTOP the postmaster, SIGKILL all its children, SIGKILL it,
   * and wait until every process is gone and the port refuses connections.
   * Clients see their connections drop. The directory stays; restart()
   * recovers from the WAL. No-op when not running.
   */
  async crash(): Promise<void> {
    const child = this.#child;
    if (child === null) return;
    if (childAlive(child)) {
      const postmaster = this.#pid;
      signalPid(postmaster, 'SIGSTOP');
      const children = descendants(postmaster);
      for (const pid of children) signalPid(pid, 'SIGSTOP');
      // None by default (dynamic_shared_memory_type=mmap); a power cut empties a tmpfs too.
      const segments = postgresSegmentsOf([postmaster, ...children]);
      for (const pid of children) signalPid(pid, 'SIGKILL');
      signalPid(postmaster, 'SIGKILL');
      removeSegments(segments, new Set());
      await this.#waitExit(KILL_WAIT_MS);
      await waitUntil(() => children.every((pid) => !pidAlive(pid)), KILL_WAIT_MS, `PostgresServer: children of postmaster ${postmaster} survived SIGKILL`);
      await waitUntil(async () => !(await portAccepts(this.#port)), KILL_WAIT_MS, `PostgresServer: port ${this.#port} still accepts connections after the crash`);
    }
    this.#child = null;
    this.#paused = false;
  }

  /**
   * Immediate shutdown (as `pg_ctl stop -m immediate`) when running, then
   * start again on the same port and directory and wait until it accepts
   * connections, crash recovery included. After crash() it simply starts.
   * The port is retried for up to startTimeoutMs should it still be held.
   */
  async restart(): Promise<void> {
    this.#assertNotStopped('restart');
    await this.#shutdownImmediate();
    const deadline = Date.now() + this.startTimeoutMs;
    await onSamePort(deadline, async () => (await this.#spawnAndWait(deadline)).outcome === 'ready', () => this.#startError(`port ${this.#port} stayed in use`));
  }

  /**
   * SIGSTOP the postmaster and then every child (backends, checkpointer,
   * walwriter, autovacuum, ...): the kernel still completes TCP connects
   * (listen backlog), but nothing answers; open sessions hang mid-query and
   * no lock is granted or released until resume().
   */
  pause(): void {
    const postmaster = this.#requireRunning('pause');
    signalPid(postmaster, 'SIGSTOP');
    // The postmaster is stopped, so no new children appear after this scan.
    for (const pid of descendants(postmaster)) signalPid(pid, 'SIGSTOP');
    this.#paused = true;
  }

  /** SIGCONT the children, then the postmaster. */
  resume(): void {
    const postmaster = this.#requireRunning('resume');
    for (const pid of descendants(postmaster)) signalPid(pid, 'SIGCONT');
    signalPid(postmaster, 'SIGCONT');
    this.#paused = false;
  }

  /**
   * Immediate shutdown (SIGKILL of everything left after SHUTDOWN_TIMEOUT_MS),
   * removal of a leftover System V segment, removal of the directory. Idempotent.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      try {
        await this.#killTool();
        await this.#shutdownImmediate();
      } finally {
        removeStaleShmem(this.dataDir, this.#pid);
        await removeTree(dirname(this.#dir));
        this.#guard.release();
        this.#releasePort();
        live.delete(this);
      }
    })();
    return this.#stopping;
  }

  /** The end of the server log (postmaster stderr), for error messages. */
  logTail(): string {
    try {
      return readPlain(this.logFile).toString('utf8').slice(-LOG_TAIL_BYTES);
    } catch {
      return '(no log)';
    }
  }

  /** Synchronous last-resort cleanup for the exit handler: SIGKILL everything, remove the directory. */
  killSync(): void {
    const tool = this.#tool;
    if (tool?.child.pid !== undefined) removeSegments(killGroupSync(tool.child.pid), tool.shmBefore);
    const child = this.#child;
    if (child !== null && childAlive(child)) {
      const postmaster = this.#pid;
      signalPid(postmaster, 'SIGSTOP');
      const all = [postmaster, ...descendants(postmaster)];
      for (const pid of all) signalPid(pid, 'SIGSTOP');
      // None by default (dynamic_shared_memory_type=mmap), but a user's settings may choose posix.
      const segments = postgresSegmentsOf(all);
      for (const pid of all) signalPid(pid, 'SIGKILL');
      removeSegments(segments, new Set());
      // Wait (briefly, synchronously) so the shared-memory segment has no attachments left.
      const until = Date.now() + 2_000;
      while (Date.now() < until && all.some(pidAlive)) sleepSync(10);
    }
    removeStaleShmem(this.dataDir, this.#pid);
    try {
      removeTreeSync(dirname(this.#dir));
    } catch {
      // best effort at exit
    }
    this.#guard.release();
    this.#releasePort();
    live.delete(this);
  }

  #serverArgs(): string[] {
    const settings: Array<readonly [string, string]> = [
      ['listen_addresses', HOST],
      // A list: a comma in the path (parentDir, TMPDIR) split it, and the socket and its lock went to a directory outside ours.
      ['unix_socket_directories', postgresListItem(this.#dir)],
      ['dynamic_shared_memory_type', 'mmap'],
    ];
    if (!this.fsync) settings.push(['fsync', 'off'], ['full_page_writes', 'off']);
    settings.push(...this.#settings);
    const args = ['-D', this.dataDir, '-p', String(this.#port)];
    for (const [name, value] of settings) args.push('-c', `${name}=${value}`);
    return args;
  }

  #env(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const [key, value] of Object.entries(process.env)) {
      // Run as another OS user (lockcheck as root), the server's environment is readable by every process of that user
      // (/proc/<pid>/environ): it gets only what it needs to run, none of the caller's variables (REDISCLI_AUTH, tokens).
      if (this.#runAs !== null ? !SERVER_ENV.has(key) : key.startsWith('PG') || key.startsWith('FAKETIME') || key === 'LD_PRELOAD') continue;
      // PGDATA, PGPORT, PGOPTIONS ... must not leak into our cluster; LD_PRELOAD (libfaketime) neither.
      env[key] = value;
    }
    env['TZ'] = 'UTC';
    env['LC_ALL'] = 'C';
    if (this.#runAs !== null) {
      env['HOME'] = this.#dir;
      env['USER'] = OS_USER;
      env['LOGNAME'] = OS_USER;
    }
    return env;
  }

  #spawnOptions(): { cwd: string; env: NodeJS.ProcessEnv; uid?: number; gid?: number } {
    const options: { cwd: string; env: NodeJS.ProcessEnv; uid?: number; gid?: number } = { cwd: this.#dir, env: this.#env() };
    if (this.#runAs !== null) {
      options.uid = this.#runAs.uid;
      options.gid = this.#runAs.gid;
    }
    return options;
  }

  async #initdb(deadline: number): Promise<void> {
    const pwfile = join(this.#dir, 'pwfile');
    // Given to its owner through the open file: a chown by path followed a link OS user postgres, who owns the directory, could swap in meanwhile.
    const file = await open(pwfile, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    try {
      await file.writeFile(`${this.password}\n`);
      if (this.#runAs !== null) await file.chown(this.#runAs.uid, this.#runAs.gid);
    } finally {
      await file.close();
    }
    try {
      await this.#runInitdb(deadline, pwfile);
    } finally {
      await rm(pwfile, { force: true });
    }
  }

  async #runInitdb(deadline: number, pwfile: string): Promise<void> {
    const args = [
      '-D', this.dataDir,
      '-U', USER,
      '--auth=scram-sha-256',
      `--pwfile=${pwfile}`,
      '--no-sync',
      '--encoding=UTF8',
      '--locale=C',
      '--no-instructions',
    ];
    const result = await runTool(join(POSTGRES_BIN_DIR, 'initdb'), args, this.#spawnOptions(), Math.max(1, deadline - Date.now()), (tool) => {
      this.#tool = tool;
      if (tool.child.pid !== undefined) this.#guard.set({ processes: [{ pid: tool.child.pid, group: true }], dirs: [dirname(this.#dir)] });
    }).finally(() => {
      this.#tool = null;
    });
    if (result.timedOut || result.code !== 0) {
      const why = result.timedOut
        ? `did not finish within the ${this.startTimeoutMs} ms start bound`
        : `exited with ${result.signal ?? `code ${String(result.code)}`}` +
          (this.#runAs !== null ? ` (it runs as ${OS_USER}, who must be able to reach ${this.#dir})` : '');
      throw new EnvironmentError(`PostgresServer: initdb in ${this.dataDir} ${why}\n--- initdb output ---\n${result.output.slice(-LOG_TAIL_BYTES)}`);
    }
  }

  /**
   * Spawns the postmaster and waits until postmaster.pid says "ready" and the
   * port accepts a TCP connection, or `deadline`. Throws EnvironmentError
   * unless the port was taken.
   */
  async #spawnAndWait(deadline: number): Promise<{ outcome: 'ready'; ms: number } | { outcome: 'address-in-use' }> {
    const started = Date.now();
    const logOffset = fileSize(this.logFile);
    let logFd: number;
    try {
      logFd = openPlain(this.logFile, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o600);
    } catch (error) {
      throw new EnvironmentError(`PostgresServer (dir ${this.#dir}): cannot open its log ${this.logFile}: ${(error as Error).message}`);
    }
    let child: ChildProcess;
    try {
      child = spawn(join(POSTGRES_BIN_DIR, 'postgres'), this.#serverArgs(), {
        ...this.#spawnOptions(),
        stdio: ['ignore', logFd, logFd],
        // Own process group: a terminal's Ctrl-C goes to us, and we decide what the cluster sees.
        detached: true,
      });
    } finally {
      closeSync(logFd);
    }
    let spawnError: NodeJS.ErrnoException | null = null;
    let exited = false;
    this.#child = child;
    this.#paused = false;
    this.#exited = new Promise<void>((resolve) => {
      child.once('exit', () => {
        exited = true;
        resolve();
      });
      child.once('error', (error: NodeJS.ErrnoException) => {
        spawnError = error;
        exited = true;
        resolve();
      });
    });
    // A forgotten cluster must not keep the test process alive: the exit handler kills it.
    child.unref();
    if (child.pid !== undefined) {
      this.#pid = child.pid;
      // detached: the postmaster leads its own process group, its children are in it.
      this.#guard.set({ processes: [{ pid: child.pid, group: true }], dirs: [dirname(this.#dir)] });
    }

    while (Date.now() < deadline && !exited) {
      if (readPidFileStatus(this.dataDir, this.#pid) === 'ready' && (await portAccepts(this.#port, leftWithin(PORT_PROBE_MS, deadline)))) {
        return { outcome: 'ready', ms: Date.now() - started };
      }
      await sleep(pauseWithin(POLL_INTERVAL_MS, deadline));
    }

    const failed = spawnError as NodeJS.ErrnoException | null;
    if (failed !== null && failed.code === 'ENOENT') {
      this.#child = null;
      throw new EnvironmentError(`PostgreSQL 15 is not installed (${join(POSTGRES_BIN_DIR, 'postgres')} is missing)`, INSTALL_POSTGRES);
    }
    const exitedByItself = exited;
    await this.crash();
    const newLog = readFrom(this.logFile, logOffset);
    if (exitedByItself && /could not bind IPv4 address.*Address already in use|could not create any TCP\/IP sockets/is.test(newLog)) {
      return { outcome: 'address-in-use' };
    }
    throw this.#startError(
      exitedByItself
        ? `postgres exited during start-up${failed ? ` (${failed.message})` : ''}`
        : `not accepting connections within the ${this.startTimeoutMs} ms bound`,
    );
  }

  /**
   * Ends initdb, should it be running, and waits for it to close: SIGINT to
   * its process group first (initdb and its `postgres --boot/--single` end
   * cleanly, their shared-memory segments unlinked), SIGKILL after
   * TOOL_INTERRUPT_WAIT_MS; the segments its processes had are removed
   * either way (see the module comment).
   */
  async #killTool(): Promise<void> {
    const tool = this.#tool;
    if (tool === null) return;
    const pid = tool.child.pid;
    if (pid !== undefined) {
      // Seen while it runs: a clean end unlinks them, and then nothing is left to remove.
      const segments = postgresSegmentsOf(groupAndDescendants(pid));
      signalPid(-pid, 'SIGINT');
      if (!(await finishWithin(tool.closed, TOOL_INTERRUPT_WAIT_MS))) {
        for (const [path, inode] of killGroupSync(pid)) segments.set(path, inode);
      }
      removeSegments(segments, tool.shmBefore);
    }
    if (!(await finishWithin(tool.closed, KILL_WAIT_MS))) throw new Error(`PostgresServer: initdb ${pid} did not exit within ${KILL_WAIT_MS} ms of SIGKILL`);
  }

  /** SIGQUIT (immediate shutdown) and wait; SIGKILL everything after SHUTDOWN_TIMEOUT_MS. No-op when not running. */
  async #shutdownImmediate(): Promise<void> {
    const child = this.#child;
    if (child === null) return;
    if (childAlive(child)) {
      const postmaster = this.#pid;
      const children = descendants(postmaster);
      if (this.#paused) {
        for (const pid of children) signalPid(pid, 'SIGCONT');
        signalPid(postmaster, 'SIGCONT');
      }
      signalPid(postmaster, 'SIGQUIT');
      child.ref(); // keep the event loop alive while we wait for the exit
      const exitedInTime = await finishWithin(this.#exited, SHUTDOWN_TIMEOUT_MS);
      if (!exitedInTime) {
        await this.crash();
        return;
      }
      // The postmaster reaps its children before it exits; SIGKILL any that did not go.
      const left = children.filter(pidAlive);
      for (const pid of left) signalPid(pid, 'SIGKILL');
      await waitUntil(() => left.every((pid) => !pidAlive(pid)), KILL_WAIT_MS, `PostgresServer: children of postmaster ${postmaster} survived SIGKILL`);
    }
    this.#child = null;
    this.#paused = false;
  }

  async #waitExit(timeoutMs: number): Promise<void> {
    this.#child?.ref();
    if (!(await finishWithin(this.#exited, timeoutMs))) throw new Error(`PostgresServer: postmaster ${this.#pid} did not exit within ${timeoutMs} ms of SIGKILL`);
  }

  #startError(reason: string): EnvironmentError {
    return new EnvironmentError(
      `PostgresServer on ${HOST}:${this.#port} (dir ${this.#dir}) failed to start: ${reason}\n--- log tail ---\n${this.logTail()}`,
    );
  }

  #requireRunning(what: string): number {
    this.#assertNotStopped(what);
    const child = this.#child;
    if (child === null || !childAlive(child)) throw new InvalidInputError('precondition', `PostgresServer: cannot ${what}, the server is not running`);
    return this.#pid;
  }

  #assertNotStopped(what: string): void {
    if (this.#stopping !== null) throw new InvalidInputError('precondition', `PostgresServer: cannot ${what} a stopped server`);
  }
}

/** Stops every cluster started in this process and not yet stopped (one still starting too: its start() rejects with StoppedWhileStarting). */
export async function stopAllPostgresServers(): Promise<void> {
  await live.stopAll();
}

/** Throws EnvironmentError unless the PostgreSQL 15 server binaries are installed. */
export function requirePostgresBinaries(): void {
  for (const name of ['initdb', 'postgres']) {
    const path = join(POSTGRES_BIN_DIR, name);
    if (!existsSync(path)) throw new EnvironmentError(`PostgreSQL 15 is not installed (${path} is missing)`, INSTALL_POSTGRES);
  }
}

/** A setting as postgresql.conf takes it; one with a NUL or newline is refused, shown as shown() shows it (a secret-named one by kind). */
function settingValue(name: string, value: string | number | boolean): string {
  const text = typeof value === 'boolean' ? (value ? 'on' : 'off') : String(value);
  if (/[\0\n]/.test(text)) refuse(`settings.${name}`, 'a value without a NUL or newline', text);
  return text;
}

function isRoot(): boolean {
  return typeof process.getuid === 'function' && process.getuid() === 0;
}

let osUserPromise: Promise<OsUser> | null = null;

/** uid and gid of the `postgres` account (created by the Debian package). */
function lookUpOsUser(name: string): Promise<OsUser> {
  osUserPromise ??= (async () => {
    const id = async (flag: string): Promise<number> => {
      const result = await runTool('id', [flag, name], {}, TOOL_TIMEOUT_MS);
      const value = Number(result.output.trim());
      if (result.code !== 0 || !Number.isInteger(value) || value <= 0) {
        throw new EnvironmentError(`PostgresServer: there is no '${name}' user to run PostgreSQL as (we are root; initdb refuses root)`, INSTALL_POSTGRES);
      }
      return value;
    };
    return { uid: await id('-u'), gid: await id('-g') };
  })().catch((error: unknown) => {
    osUserPromise = null;
    throw error;
  });
  return osUserPromise;
}

interface ToolResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  output: string;
  timedOut: boolean;
}

/** A tool runTool started: its process, its close, and the PostgreSQL segments in /dev/shm before it was spawned (never its own). */
interface RunningTool {
  readonly child: ChildProcess;
  readonly closed: Promise<void>;
  readonly shmBefore: ReadonlySet<string>;
}

/**
 * Runs a short-lived tool in its own process group with a hard bound; stdout
 * and stderr are merged. A tool over its bound is SIGKILLed with its group,
 * and the PostgreSQL segments its processes had are removed (killGroupSync).
 */
function runTool(
  file: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; uid?: number; gid?: number },
  timeoutMs: number,
  /** Told the child and its close as soon as it is spawned. */
  onSpawn: (tool: RunningTool) => void = () => undefined,
): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const shmBefore = postgresSegmentNames();
    const child = spawn(file, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    onSpawn({
      child,
      closed: new Promise<void>((done) => {
        child.once('close', () => done());
        child.once('error', () => done());
      }),
      shmBefore,
    });
    let output = '';
    let timedOut = false;
    const capture = (chunk: Buffer): void => {
      output = (output + chunk.toString('utf8')).slice(-64 * 1024);
    };
    child.stdout?.on('data', capture);
    child.stderr?.on('data', capture);
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) removeSegments(killGroupSync(child.pid), shmBefore);
    }, timeoutMs);
    child.once('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      if (error.code === 'ENOENT') reject(new EnvironmentError(`PostgresServer: ${file} not found`, INSTALL_POSTGRES));
      else reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, output, timedOut });
    });
  });
}

function childAlive(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

/** The process exists and is not a zombie (pid 1 here reaps orphans only about once a second). */
function pidAlive(pid: number): boolean {
  const state = procState(pid);
  return state !== null && state !== 'Z' && state !== 'X';
}

/** /proc/<pid>/stat: "pid (comm) S ppid pgrp ..."; comm may hold spaces and parentheses. */
function readProcStat(pid: number): { state: string; ppid: number; pgid: number } | null {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const state = fields[0];
  const ppid = Number(fields[1]);
  const pgid = Number(fields[2]);
  return state === undefined || !Number.isInteger(ppid) || !Number.isInteger(pgid) ? null : { state, ppid, pgid };
}

function procState(pid: number): string | null {
  return readProcStat(pid)?.state ?? null;
}

/** Every live process now, with its parent and process group: one pass over /proc. */
function liveProcesses(): Array<{ readonly pid: number; readonly ppid: number; readonly pgid: number }> {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const out: Array<{ pid: number; ppid: number; pgid: number }> = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    const stat = readProcStat(pid);
    if (stat !== null && stat.state !== 'Z' && stat.state !== 'X') out.push({ pid, ppid: stat.ppid, pgid: stat.pgid });
  }
  return out;
}

/** All live descendants of `root` (postgres children are direct, but be general), among `processes`. */
function descendants(root: number, processes = liveProcesses()): number[] {
  const childrenOf = new Map<number, number[]>();
  for (const { pid, ppid } of processes) {
    const list = childrenOf.get(ppid);
    if (list === undefined) childrenOf.set(ppid, [pid]);
    else list.push(pid);
  }
  const out: number[] = [];
  const queue = [root];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    for (const child of childrenOf.get(next) ?? []) {
      out.push(child);
      queue.push(child);
    }
  }
  return out;
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** The live processes of the group `leader` leads, and its descendants outside it (one pass over /proc). */
function groupAndDescendants(leader: number): number[] {
  const processes = liveProcesses();
  const members = processes.filter((p) => p.pgid === leader).map((p) => p.pid);
  return [...new Set([leader, ...members, ...descendants(leader, processes)])].filter(pidAlive);
}

/**
 * SIGSTOPs the process group `leader` leads and its descendants (none
 * forks, maps or unlinks anything more), notes the PostgreSQL segments they
 * have, SIGKILLs them all. Returns the segments, for removeSegments: a
 * SIGKILLed postgres never unlinks its own.
 */
function killGroupSync(leader: number): Map<string, number> {
  signalPid(-leader, 'SIGSTOP');
  const all = groupAndDescendants(leader);
  for (const pid of all) signalPid(pid, 'SIGSTOP');
  const segments = postgresSegmentsOf(all);
  signalPid(-leader, 'SIGKILL');
  for (const pid of all) signalPid(pid, 'SIGKILL');
  return segments;
}

const SHM_DIR = '/dev/shm';
/** A PostgreSQL POSIX shared-memory segment (dsm_impl_posix: "/PostgreSQL.<handle>"). */
const POSTGRES_SEGMENT = /^PostgreSQL\.\d+$/;

/** The names of the PostgreSQL segments in /dev/shm now. */
function postgresSegmentNames(): Set<string> {
  try {
    return new Set(readdirSync(SHM_DIR).filter((name) => POSTGRES_SEGMENT.test(name)));
  } catch {
    return new Set();
  }
}

/**
 * The PostgreSQL segments (/dev/shm/PostgreSQL.<handle>) that `pids` have
 * mapped, or open (made, not yet mapped), each with its inode: path -> inode.
 * Such a segment is only ever mapped by the processes of the one server
 * that made it.
 */
function postgresSegmentsOf(pids: Iterable<number>): Map<string, number> {
  const found = new Map<string, number>();
  for (const pid of pids) {
    let maps = '';
    try {
      maps = readFileSync(`/proc/${pid}/maps`, 'utf8');
    } catch {
      // gone
    }
    for (const line of maps.split('\n')) {
      // address perms offset dev inode path
      const m = /^\S+\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\/dev\/shm\/(\S+)$/.exec(line);
      if (m !== null && POSTGRES_SEGMENT.test(m[2]!)) found.set(join(SHM_DIR, m[2]!), Number(m[1]));
    }
    let fds: string[] = [];
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      // gone
    }
    for (const fd of fds) {
      try {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        if (target.startsWith(`${SHM_DIR}/`) && POSTGRES_SEGMENT.test(target.slice(SHM_DIR.length + 1))) found.set(target, statSync(`/proc/${pid}/fd/${fd}`).ino);
      } catch {
        // closed meanwhile
      }
    }
  }
  return found;
}

/** Unlinks each segment that is still the same file (inode) and was not there before (`before`, by name). */
function removeSegments(segments: ReadonlyMap<string, number>, before: ReadonlySet<string>): void {
  for (const [path, inode] of segments) {
    if (before.has(path.slice(SHM_DIR.length + 1))) continue;
    try {
      if (lstatSync(path).ino === inode) unlinkSync(path);
    } catch {
      // removed already (the process's own clean end)
    }
  }
}

/** Status line (8th) of postmaster.pid, when the file names `pid`: 'starting', 'ready', 'stopping', 'standby'. */
function readPidFileStatus(dataDir: string, pid: number): string | null {
  const lines = readPidFile(dataDir);
  if (lines === null || Number(lines[0]) !== pid) return null;
  return lines[7]?.trim() ?? null;
}

function readPidFile(dataDir: string): string[] | null {
  try {
    return readPlain(join(dataDir, 'postmaster.pid')).toString('utf8').split('\n');
  } catch {
    return null;
  }
}

/**
 * Removes the System V segment a killed postmaster left, if it is exactly the
 * one postmaster.pid names, was created by `postmaster` and nobody is attached.
 */
function removeStaleShmem(dataDir: string, postmaster: number): void {
  const lines = readPidFile(dataDir);
  if (lines === null || Number(lines[0]) !== postmaster) return;
  const [key, shmid] = (lines[6] ?? '').trim().split(/\s+/).map(Number);
  if (key === undefined || shmid === undefined || !Number.isInteger(shmid) || shmid < 0) return;
  let table: string;
  try {
    table = readFileSync('/proc/sysvipc/shm', 'utf8');
  } catch {
    return;
  }
  for (const row of table.split('\n').slice(1)) {
    // key shmid perms size cpid lpid nattch ...
    const cols = row.trim().split(/\s+/).map(Number);
    if (cols[0] === key && cols[1] === shmid && cols[4] === postmaster && cols[6] === 0) {
      try {
        execFileSync('ipcrm', ['-m', String(shmid)], { stdio: 'ignore', timeout: TOOL_TIMEOUT_MS });
      } catch {
        // best effort
      }
      return;
    }
  }
}

function fileSize(path: string): number {
  try {
    return readPlain(path).length;
  } catch {
    return 0;
  }
}

function readFrom(path: string, offset: number): string {
  try {
    return readPlain(path).subarray(offset).toString('utf8');
  } catch {
    return '';
  }
}

/**
 * Opens a file of the cluster's directory, which OS user postgres owns when
 * lockcheck runs as root: never through a link (one to /etc/shadow put its
 * tail in an error message; one for the log had root open any file for
 * postgres's processes to write), nor waiting on a FIFO. Throws unless it is
 * a regular file.
 */
function openPlain(path: string, flags: number, mode?: number): number {
  // Its directory too (data/ is postgres's to replace by a link): opened without following one, the file then
  // reached through that open directory (Linux's /proc/self/fd, as openat would), so no path is looked up twice.
  const dirFd = openSync(dirname(path), constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  let fd: number;
  try {
    fd = openSync(`/proc/self/fd/${dirFd}/${basename(path)}`, flags | constants.O_NOFOLLOW | constants.O_NONBLOCK, mode);
  } finally {
    closeSync(dirFd);
  }
  try {
    if (!fstatSync(fd).isFile()) throw new Error('not a regular file');
  } catch (error) {
    closeSync(fd);
    throw error;
  }
  return fd;
}

/** The bytes of a file of the cluster's directory, read as openPlain opens it. */
function readPlain(path: string): Buffer {
  const fd = openPlain(path, constants.O_RDONLY);
  try {
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** How long one look at the port waits for its connect. */
const PORT_PROBE_MS = 250;

function portAccepts(port: number, timeoutMs = PORT_PROBE_MS): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: HOST, port });
    const done = (result: boolean): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(result);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, message: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() >= deadline) throw new Error(`${message} (waited ${timeoutMs} ms)`);
    await sleep(pauseWithin(POLL_INTERVAL_MS, deadline));
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}
