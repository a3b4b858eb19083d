/**
 * A bare RESP2 connection for benchmarks only: one socket, commands written
 * as they come, replies matched in order, no reconnect, no typed error;
 * a closed socket fails every call waiting on it, and a call waits at most
 * REPLY_TIMEOUT_MS. It answers one question: what a sequential Redlock pair costs
 * when no client library stands between the lock's scripts and the socket
 * (bench/redisSequential.ts, the five-node floor). Never a product path.
 */
import net from 'node:net';

export type RespReply = string | number | null | Error | RespReply[];

/** No benchmark call waits longer: a server that stops answering ends the run with an error instead of a hang. */
const REPLY_TIMEOUT_MS = 10_000;

const bulk = (s: string): string => `$${Buffer.byteLength(s)}\r\n${s}\r\n`;

/** A command's wire form: an array of bulk strings. */
export function respCommand(args: readonly string[]): string {
  let out = `*${args.length}\r\n`;
  for (const a of args) out += bulk(a);
  return out;
}

/** One reply starting at `pos`, or null when the buffer holds only part of it. */
function parse(b: Buffer, pos: number): { value: RespReply; next: number } | null {
  if (pos >= b.length) return null;
  const eol = b.indexOf(13, pos);
  if (eol < 0 || eol + 1 >= b.length) return null;
  const line = b.toString('latin1', pos + 1, eol);
  const after = eol + 2;
  switch (b[pos]) {
    case 43: // +
      return { value: line, next: after };
    case 45: // -
      return { value: new Error(line), next: after };
    case 58: // :
      return { value: Number(line), next: after };
    case 36: {
      // $
      const n = Number(line);
      if (n < 0) return { value: null, next: after };
      if (after + n + 2 > b.length) return null;
      return { value: b.toString('utf8', after, after + n), next: after + n + 2 };
    }
    case 42: {
      // *
      const n = Number(line);
      if (n < 0) return { value: null, next: after };
      const items: RespReply[] = [];
      let p = after;
      for (let i = 0; i < n; i++) {
        const r = parse(b, p);
        if (r === null) return null;
        items.push(r.value);
        p = r.next;
      }
      return { value: items, next: p };
    }
    default:
      throw new Error(`not a RESP2 reply: byte ${b[pos]}`);
  }
}

export class BareResp {
  readonly #socket: net.Socket;
  readonly #waiting: Array<{ resolve: (reply: RespReply) => void; reject: (error: Error) => void }> = [];
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
      throw new Error(`AUTH failed: ${String(ok)}`);
    }
    return conn;
  }

  /** Writes a command made by respCommand; its reply (an Error for a RESP error). */
  send(wire: string): Promise<RespReply> {
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
      const r = parse(b, pos);
      if (r === null) break;
      pos = r.next;
      this.#lastReply = performance.now();
      this.#waiting.shift()?.resolve(r.value);
    }
    this.#rest = pos < b.length ? b.subarray(pos) : null;
  }
}
