import { createHash } from 'node:crypto';
import { Command } from 'ioredis';
import { InvalidInputError, UnavailableError } from '../errors.ts';
import type { RedisConnection } from './connection.ts';
import { ACQUIRE, EXTEND, FENCED_WRITE, RAISE, RELEASE } from './scripts.ts';

/** What a call's reply becomes (run inside the command, before its promise resolves). */
export type Reply<T> = (reply: unknown) => T;
/** What a call's failure becomes, given the call's context (a lock call's resource). */
export type Failure = (error: unknown, context: string) => unknown;

const asIs: Reply<unknown> = (reply) => reply;
const unchanged: Failure = (error) => error;

/**
 * A Lua script sent as one ioredis Command: EVAL the first time it goes out
 * on a connection's socket (the server caches it then), EVALSHA after.
 *
 * Not ioredis's defineCommand, for two reasons. Per call it adds a promise (a
 * catch for NOSCRIPT), a closure and two copies of the arguments: with one
 * script call per node per acquire and per release, that was about 1 µs of
 * client CPU per pair on one node and 10 to 24 µs on five (docs/redis.md,
 * client speed). And on a NOSCRIPT reply it resends the script as EVAL
 * behind whatever the connection sent meanwhile, so a release sent after an
 * unanswered acquire could run before it (the order a LeaseNode promises,
 * impl/leaseNode.ts). Here a NOSCRIPT reply (the server lost its script cache
 * under a live connection: SCRIPT FLUSH) fails that one call, a vote against,
 * and the next call on that socket sends EVAL. A reconnect is a new socket,
 * so the first call after a server restart sends EVAL anyway.
 *
 * A call is ioredis's one promise: the reply and the failure are converted
 * inside the command (`reply`, `failure`), not by a `.then` on top, and the
 * command's wire form starts with a header made once per script.
 */
export class LuaScript {
  readonly sha: string;
  /** The sockets this script went out on as EVAL: their server has it. */
  readonly loadedOn = new WeakSet<object>();
  /** The start of the command on the wire, after the argument count: EVALSHA and the hash, or EVAL and the script; then the key count. */
  readonly #evalsha: string;
  readonly #eval: string;
  readonly #keyCount: string;

  constructor(
    readonly lua: string,
    readonly numberOfKeys: number,
  ) {
    ALL.add(this);
    this.sha = createHash('sha1').update(lua).digest('hex');
    this.#keyCount = String(numberOfKeys);
    const keys = bulk(this.#keyCount);
    this.#evalsha = `${bulk('evalsha')}${bulk(this.sha)}${keys}`;
    this.#eval = `${bulk('eval')}${bulk(lua)}${keys}`;
  }

  /**
   * Runs the script with `keysAndArgs` (the keys first, then the arguments,
   * all strings, else it throws InvalidInputError before anything is queued;
   * the connection's keyPrefix is put before the keys).
   * Replies come as strings or integers, through `reply`; a failure through
   * `failure`, with `context`.
   */
  run<T = unknown>(redis: RedisConnection, keysAndArgs: readonly string[], reply: Reply<T> = asIs as Reply<T>, failure: Failure = unchanged, context = ''): Promise<T> {
    // The arguments as ioredis would keep them (its key tracking reads them: getKeys), built once, with no copy or conversion by ioredis.
    const args = new Array<string>(keysAndArgs.length + 2);
    args[0] = this.sha;
    args[1] = this.#keyCount;
    const prefix = redis.options.keyPrefix ?? '';
    for (let i = 0; i < keysAndArgs.length; i++) {
      const arg = keysAndArgs[i];
      // Encoded later, when the command is written, maybe inside ioredis (a connection still opening flushes its queue there): a non-string threw a TypeError no caller could catch.
      if (typeof arg !== 'string') throw new InvalidInputError('invalid-config', `script argument ${i} must be a string, got ${typeof arg}`);
      args[i + 2] = i < this.numberOfKeys ? prefix + arg : arg;
    }
    const command = new (scriptCommandFor(redis))(this, args, reply, failure, context);
    void redis.sendCommand(command);
    return command.promise as Promise<T>;
  }

  /**
   * The command on the wire, for `socket` (EVAL there the first time); `args` as the command keeps them: the hash, the key
   * count, the keys (prefixed), the arguments. One string, or, for a command longer than JOINED_MAX characters, a Buffer:
   * joined into one string, a value near V8's longest string (a Redis store's value may be up to 512 MiB) threw a
   * RangeError, inside ioredis's connect handler for a queued command, which ended the process.
   */
  writable(socket: object, args: readonly string[]): string | Buffer {
    let head = this.#evalsha;
    if (!this.loadedOn.has(socket)) {
      this.loadedOn.add(socket);
      head = this.#eval;
    }
    let length = head.length;
    for (let i = 2; i < args.length; i++) length += args[i]!.length;
    if (length > JOINED_MAX) {
      const parts = [Buffer.from(`*${args.length + 1}\r\n${head}`)];
      for (let i = 2; i < args.length; i++) {
        const arg = Buffer.from(args[i]!);
        parts.push(Buffer.from(`$${arg.length}\r\n`), arg, CRLF);
      }
      return Buffer.concat(parts);
    }
    let out = `*${args.length + 1}\r\n${head}`;
    for (let i = 2; i < args.length; i++) out += bulk(args[i]!);
    return out;
  }
}

/** A RESP bulk string. */
const bulk = (s: string): string => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;
const CRLF = Buffer.from('\r\n');

/** The longest command (in characters of its arguments) written as one string; a longer one goes out as a Buffer. */
export const JOINED_MAX = 2 ** 24;

/** Every script: a NOSCRIPT reply means the server's whole script cache is gone. */
const ALL = new Set<LuaScript>();

const UTF8 = { replyEncoding: 'utf8' } as const;
/** What a call that must not be resent writes instead: one command, one reply, no effect. */
const PING = '*1\r\n$4\r\nPING\r\n';
const NO_ARGS: string[] = [];

/** An ioredis Command class, typed as lockcheck's own copy's: the script command uses only what those of ioredis 5 and 6 both have. */
type CommandClass = typeof Command;
/** A script command: one class per ioredis Command class (below). */
type ScriptCommandClass = new <T>(script: LuaScript, args: string[], reply: Reply<T>, failure: Failure, context: string) => InstanceType<CommandClass>;

/** The script command class made for each ioredis Command class seen (two copies of ioredis in one process make two). */
const SCRIPT_COMMANDS = new WeakMap<CommandClass, ScriptCommandClass>();

/** Each connection's ioredis Command class, found once (commandClassOf). */
const COMMAND_CLASSES = new WeakMap<object, CommandClass>();

/**
 * The ioredis Command class of `redis`'s own ioredis, which may be another
 * copy than lockcheck's (a user's ioredis 6 beside lockcheck's 5). A
 * command must be of the connection's ioredis: ioredis 6's sendCommand calls
 * methods (setReplyContext) that a command of ioredis 5 does not have, and
 * every call failed with a TypeError. ioredis exports no way from a
 * connection to its Command class (its constructor's static Command is
 * hidden: an ioredis Redis's `constructor` reads as EventEmitter, mixed in),
 * so it is read from a command the connection's own ioredis makes: its PING
 * (the one its prototype has, not an instance's own) called on a stand-in
 * whose sendCommand keeps the command instead of sending it, nothing sent,
 * no auto-pipelining. A connection with no such PING (a wrapper object)
 * gets lockcheck's own copy's class. Found once per connection.
 */
function commandClassOf(redis: RedisConnection): CommandClass {
  let found = COMMAND_CLASSES.get(redis);
  if (found === undefined) COMMAND_CLASSES.set(redis, (found = (madeBy(redis) as CommandClass | undefined) ?? Command));
  return found;
}

/** The class of the command `redis`'s ioredis makes for a PING, or undefined if it makes none. */
function madeBy(redis: RedisConnection): unknown {
  const ping = (Object.getPrototypeOf(redis) as { ping?: unknown } | null)?.ping;
  if (typeof ping !== 'function') return undefined;
  let made: unknown;
  const standIn = Object.create(redis, {
    options: { value: { enableAutoPipelining: false } },
    sendCommand: { value: (command: unknown) => void (made = command) },
  }) as object;
  try {
    (ping as (this: object) => unknown).call(standIn);
  } catch {
    return undefined;
  }
  const command = made as { constructor?: unknown } | null | undefined;
  return typeof command === 'object' && command !== null && typeof command.constructor === 'function' ? command.constructor : undefined;
}

/**
 * Throws InvalidInputError unless the scripts can be sent on `redis`: its
 * ioredis Command class, when it has one, has what the script command
 * overrides and calls (toWritable, transformReply; ioredis 5 and 6 do).
 */
export function checkScriptable(redis: RedisConnection, name: string): void {
  const base = commandClassOf(redis) as unknown;
  const proto = typeof base === 'function' ? (base as { prototype?: Record<string, unknown> }).prototype : undefined;
  if (proto === undefined || typeof proto.toWritable !== 'function' || typeof proto.transformReply !== 'function') {
    throw new InvalidInputError('invalid-config', `${name}: its ioredis has no Command class lockcheck can extend (toWritable, transformReply): lockcheck supports ioredis >=5.0.0 <7 (tested with 5.11.1 and 6.1.0); connect with such an ioredis`);
  }
}

/** Each connection's script command class: one lookup per call. */
const BY_CONNECTION = new WeakMap<object, ScriptCommandClass>();

/** The script command class for `redis`'s ioredis, made once per Command class. */
function scriptCommandFor(redis: RedisConnection): ScriptCommandClass {
  let made = BY_CONNECTION.get(redis);
  if (made !== undefined) return made;
  const base = commandClassOf(redis);
  made = SCRIPT_COMMANDS.get(base);
  if (made === undefined) SCRIPT_COMMANDS.set(base, (made = scriptCommandClass(base)));
  BY_CONNECTION.set(redis, made);
  return made;
}

/** The script command over one ioredis Command class. */
function scriptCommandClass(Base: CommandClass): ScriptCommandClass {
  class ScriptCommand<T> extends Base {
    readonly #script: LuaScript;
    readonly #reply: Reply<T>;

    constructor(script: LuaScript, args: string[], reply: Reply<T>, failure: Failure, context: string) {
      // No arguments for ioredis to copy and convert (they are strings, the keys prefixed): the command writes its own (toWritable).
      super('evalsha', NO_ARGS, UTF8);
      this.args = args;
      this.#script = script;
      this.#reply = reply;
      const reject = this.reject;
      this.reject = (error: Error) => {
        // NOSCRIPT: the server behind this socket lost its script cache; the socket's next call of each script loads it again.
        if (error instanceof Error && error.message.startsWith('NOSCRIPT') && this.#socket !== null) for (const s of ALL) s.loadedOn.delete(this.#socket);
        reject(failure(error, context) as Error);
      };
    }

    #socket: object | null = null;
    /** Written once and left unanswered by a connection that closed: failed, and its resend made a PING. */
    #abandoned = false;

    /**
     * Called with the socket the command is written to, also when ioredis
     * resends it after a reconnect (autoResendUnfulfilledCommands, on by
     * default). A resend is a retry of a call whose outcome is unknown: the
     * first may have run, and run again a fenced write reads as rejected (its
     * own token is the highest now) and an acquire as held (by its own key,
     * left to its ttl). So the call fails instead, an UnavailableError (a vote
     * against; the store's caller learns the outcome is unknown), and what goes
     * out in its place is a PING, which keeps the connection's replies in step.
     */
    override toWritable(socket: object): string | Buffer {
      if (this.#socket !== null && this.#socket !== socket) {
        this.#abandoned = true;
        this.reject(new UnavailableError('the connection closed before the reply: the call may have run, so it is not sent again (its outcome is unknown)'));
        return PING;
      }
      this.#socket = socket;
      return this.#script.writable(socket, this.args as string[]);
    }

    /** The reply as the caller wants it (ioredis's type says a string or Buffer; the promise carries T). */
    override transformReply(result: Buffer | Buffer[]): string {
      if (this.#abandoned) return '';
      return this.#reply(super.transformReply(result)) as unknown as string;
    }
  }
  return ScriptCommand;
}

export const acquireScript = new LuaScript(ACQUIRE, 3);
export const releaseScript = new LuaScript(RELEASE, 1);
export const extendScript = new LuaScript(EXTEND, 1);
export const raiseScript = new LuaScript(RAISE, 1);
export const fencedWriteScript = new LuaScript(FENCED_WRITE, 1);
