/**
 * A bare RESP2 connection for benchmarks only: one socket, commands written
 * as they come, replies matched in order, no reconnect, no typed error;
 * a closed socket fails every call waiting on it, and a call waits at most
 * REPLY_TIMEOUT_MS. It answers one question: what a sequential Redlock pair costs
 * when no client library stands between the lock's scripts and the socket
 * (the five-node floor of bench/redisSequential.ts and bench/redis.ts).
 * Never a product path.
 */
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import { parseReply, RespError, type RespValue } from '../conformance/env/resp.ts';

/** No benchmark call waits longer: a server that stops answering ends the run with an error instead of a hang. */
const REPLY_TIMEOUT_MS = 10_000;

const bulk = (s: string): string => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

/** A command's wire form: an array of bulk strings, as one string (cheaper to build than conformance/env/resp.ts's Buffers, and the floor should cost the client as little as it can). */
export function respCommand(args: readonly string[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) out += bulk(a);
  return out;
}

export class BareResp {
  readonly #socket: net.Socket;
  readonly #waiting: Array<{ resolve: (reply: RespValue) => void; reject: (error: Error) => void }> = [];
  #rest: Buffer | null = null;
  #closed: Error | null = null;
  /** The last reply's time: the watchdog fails the calls when the oldest has waited too long. */
  #lastReply = performance.now();
  readonly #watchdog: NodeJS.Timeout;

  private constructor(socket: net.Socket) {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => {
      try {
        this.#read(chunk);
      } catch (error) {
        this.#fail(error as Error);
      }
    });
    socket.on('error', (error) => this.#fail(error));
    socket.on('close', () => this.#fail(new Error('the connection closed')));
    this.#watchdog = setInterval(() => {
      if (this.#waiting.length > 0 && performance.now() - this.#lastReply > REPLY_TIMEOUT_MS) this.#fail(new Error(`no reply within ${REPLY_TIMEOUT_MS} ms`));
    }, 1000);
    this.#watchdog.unref();
  }

  /** Connects and authenticates; rejects on a refused connection or a failed AUTH. */
  static async connect(port: number, password: string): Promise<BareResp> {
    const socket = net.connect({ port, host: '127.0.0.1', noDelay: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error(`no connection to 127.0.0.1:${port} within ${REPLY_TIMEOUT_MS} ms`));
      }, REPLY_TIMEOUT_MS);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
    const conn = new BareResp(socket);
    const ok = await conn.send(respCommand(['AUTH', password]));
    if (ok !== 'OK') {
      conn.close();
      throw new Error(`AUTH failed: ${replyText(ok)}`);
    }
    return conn;
  }

  /** Writes a command made by respCommand; its reply (a RespError for a RESP error). */
  send(wire: string): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      if (this.#closed !== null) return reject(this.#closed);
      if (this.#waiting.length === 0) this.#lastReply = performance.now();
      this.#waiting.push({ resolve, reject });
      this.#socket.write(wire);
    });
  }

  close(): void {
    this.#fail(new Error('closed'));
  }

  /** Ends the connection: every call waiting fails with `error`, and so does every later one. */
  #fail(error: Error): void {
    if (this.#closed !== null) return;
    this.#closed = error;
    clearInterval(this.#watchdog);
    this.#socket.destroy();
    for (const w of this.#waiting.splice(0)) w.reject(error);
  }

  #read(chunk: Buffer): void {
    const b = this.#rest === null ? chunk : Buffer.concat([this.#rest, chunk]);
    let pos = 0;
    for (;;) {
      const r = parseReply(b, pos);
      if (r === null) break;
      pos = r.end;
      this.#lastReply = performance.now();
      this.#waiting.shift()?.resolve(r.value);
    }
    this.#rest = pos < b.length ? b.subarray(pos) : null;
  }
}

/** A reply as text for an error message. */
export const replyText = (reply: RespValue): string => (reply instanceof RespError ? reply.message : JSON.stringify(reply));

/** Settles when `yes` holds for `quorum` of the replies (true), or when that can no longer happen (false); a failed call is a no. */
export function atQuorum<T>(calls: ReadonlyArray<Promise<T>>, quorum: number, yes: (reply: T) => boolean): Promise<boolean> {
  return new Promise((resolve) => {
    let granted = 0;
    let answered = 0;
    const count = (ok: boolean): void => {
      answered++;
      if (ok && ++granted === quorum) resolve(true);
      else if (answered === calls.length) resolve(granted >= quorum);
    };
    for (const call of calls) call.then((reply) => count(yes(reply)), () => count(false));
  });
}

/**
 * lockcheck's acquire and release scripts on one bare socket per server, each call resolved at a majority: the
 * cheapest client these scripts can have (no lease, no clock, no deadline, no library). `pair(key)` is one
 * acquire + release on `key`, true when both reached the majority.
 */
export interface BareScripts {
  pair(key: string): Promise<boolean>;
  close(): void;
}

/**
 * Which servers a pair goes to: `every` server (Redlock's protocol, and lockcheck's), or only a `quorum` of them,
 * a different majority each pair (what a client that contacted the rest only on a denial would send while all
 * grant): the floor of a protocol lockcheck does not use, measured to show what it would buy (docs/redis.md).
 */
export type SendTo = 'every' | 'quorum';

export async function bareScripts(servers: ReadonlyArray<{ readonly port: number; readonly password: string }>, acquireLua: string, releaseLua: string, ttlMs: number, sendTo: SendTo = 'every'): Promise<BareScripts> {
  const sockets = await Promise.all(servers.map((s) => BareResp.connect(s.port, s.password)));
  const close = (): void => {
    for (const s of sockets) s.close();
  };
  try {
    // Loaded first, so every call is an EVALSHA, as lockcheck's are after their first on a connection.
    const load = async (lua: string): Promise<string> => {
      const replies = await Promise.all(sockets.map((c) => c.send(respCommand(['SCRIPT', 'LOAD', lua]))));
      const sha = replies[0];
      if (typeof sha !== 'string' || replies.some((r) => r !== sha)) throw new Error(`SCRIPT LOAD: ${replies.map(replyText).join(', ')}`);
      return sha;
    };
    const acquireSha = await load(acquireLua);
    const releaseSha = await load(releaseLua);
    const quorum = Math.floor(sockets.length / 2) + 1;
    const ttl = String(ttlMs);
    let next = 0;
    const targets = (): readonly BareResp[] => {
      if (sendTo === 'every') return sockets;
      const first = next++ % sockets.length;
      return Array.from({ length: quorum }, (_, i) => sockets[(first + i) % sockets.length]!);
    };
    return {
      async pair(key) {
        const owner = randomUUID();
        const to = targets();
        const all = (wire: string): Array<Promise<RespValue>> => to.map((c) => c.send(wire));
        // The acquire script's keys and arguments as lockcheck's node sends them: lock, counter, minted; owner, ttl, token base 0, first token 1.
        const ok = await atQuorum(all(respCommand(['EVALSHA', acquireSha, '3', key, `${key}-t`, `${key}-m`, owner, ttl, '0', '1'])), quorum, (r) => typeof r === 'string');
        const released = await atQuorum(all(respCommand(['EVALSHA', releaseSha, '1', key, owner])), quorum, (r) => r === 1);
        return ok && released;
      },
      close,
    };
  } catch (error) {
    close();
    throw error;
  }
}
