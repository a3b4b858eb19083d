import { createHash } from 'node:crypto';
import { Command, type Redis } from 'ioredis';
import { ACQUIRE, EXTEND, FENCED_WRITE, RAISE, RELEASE } from './scripts.ts';

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
 * and the connection's next call sends EVAL (`forgetScripts`). A reconnect is
 * a new socket, so the first call after a server restart sends EVAL anyway.
 */
export class LuaScript {
  readonly sha: string;
  /** The sockets this script went out on as EVAL: their server has it. */
  readonly loadedOn = new WeakSet<object>();

  constructor(
    readonly lua: string,
    readonly numberOfKeys: number,
  ) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }

  /** Runs the script with `keysAndArgs` (the keys first); replies come as strings. */
  run(redis: Redis, keysAndArgs: readonly (string | number)[]): Promise<unknown> {
    const command = new ScriptCommand(this, keysAndArgs, redis.options.keyPrefix);
    void redis.sendCommand(command);
    return command.promise;
  }
}

const UTF8 = { replyEncoding: 'utf8' } as const;

class ScriptCommand extends Command {
  readonly #script: LuaScript;

  constructor(script: LuaScript, keysAndArgs: readonly (string | number)[], keyPrefix: string | undefined) {
    super('evalsha', [script.sha, script.numberOfKeys, ...keysAndArgs], keyPrefix ? { ...UTF8, keyPrefix } : UTF8);
    this.#script = script;
  }

  /** Called with the socket the command is written to, also when ioredis resends it after a reconnect. */
  override toWritable(socket: object): string | Buffer {
    const script = this.#script;
    if (!script.loadedOn.has(socket)) {
      script.loadedOn.add(socket);
      this.name = 'eval';
      this.args[0] = script.lua;
    }
    return super.toWritable(socket);
  }
}

export const acquireScript = new LuaScript(ACQUIRE, 2);
export const releaseScript = new LuaScript(RELEASE, 1);
export const extendScript = new LuaScript(EXTEND, 1);
export const raiseScript = new LuaScript(RAISE, 1);
export const fencedWriteScript = new LuaScript(FENCED_WRITE, 1);

const ALL = [acquireScript, releaseScript, extendScript, raiseScript, fencedWriteScript];

/** After a NOSCRIPT reply: the connection's next call of each script sends EVAL again. */
export function forgetScripts(redis: Redis, error: unknown): void {
  if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) return;
  const socket = redis.stream as object | undefined;
  if (socket !== undefined) for (const script of ALL) script.loadedOn.delete(socket);
}
