/**
 * A tiny raw RESP2 client for environment checks: one connection per command,
 * every wait bounded. Not a general client (no pipelining, no pub/sub); the
 * backends use their own libraries, this exists so the environment layer can
 * probe a server without depending on them.
 */
import { connect } from 'node:net';

export class RespError {
  constructor(readonly message: string) {}
}

export type RespValue = string | number | null | RespError | RespValue[];

/** A command gave no complete reply within its bound (paused server, black hole). */
export class RespTimeoutError extends Error {
  override readonly name = 'RespTimeoutError';
}

/** The server refused the password. */
export class RespAuthError extends Error {
  override readonly name = 'RespAuthError';
}

export function encodeCommand(args: readonly string[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.from(arg, 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** Parses one reply from `buf` at `pos`: the value and the position after it, or null when incomplete. */
export function parseReply(buf: Buffer, pos = 0): { value: RespValue; end: number } | null {
  const lineEnd = buf.indexOf('\r\n', pos);
  if (lineEnd < 0) return null;
  const kind = String.fromCharCode(buf[pos] ?? 0);
  const line = buf.toString('utf8', pos + 1, lineEnd);
  const next = lineEnd + 2;
  switch (kind) {
    case '+':
      return { value: line, end: next };
    case '-':
      return { value: new RespError(line), end: next };
    case ':':
      return { value: Number(line), end: next };
    case '$': {
      const length = Number(line);
      if (length < 0) return { value: null, end: next };
      if (buf.length < next + length + 2) return null;
      return { value: buf.toString('utf8', next, next + length), end: next + length + 2 };
    }
    case '*': {
      const count = Number(line);
      if (count < 0) return { value: null, end: next };
      const items: RespValue[] = [];
      let at = next;
      for (let i = 0; i < count; i++) {
        const item = parseReply(buf, at);
        if (item === null) return null;
        items.push(item.value);
        at = item.end;
      }
      return { value: items, end: at };
    }
    default:
      throw new Error(`RESP: unexpected reply type byte ${JSON.stringify(kind)}`);
  }
}

/**
 * Opens a connection, sends one command (after AUTH when `password` is
 * given), resolves with its reply and closes. Rejects with RespTimeoutError
 * when no complete reply arrives within `timeoutMs` (connect included), with
 * RespAuthError when AUTH is refused, or with the socket error.
 */
export function sendCommand(host: string, port: number, args: readonly string[], timeoutMs = 1000, password?: string): Promise<RespValue> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port });
    let data = Buffer.alloc(0);
    let settled = false;
    let authPending = password !== undefined;
    const finish = (error: Error | null, value?: RespValue): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (error) reject(error);
      else resolve(value ?? null);
    };
    const timer = setTimeout(
      () => finish(new RespTimeoutError(`no reply to ${args[0] ?? '?'} from ${host}:${port} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.once('connect', () => socket.write(password === undefined ? encodeCommand(args) : Buffer.concat([encodeCommand(['AUTH', password]), encodeCommand(args)])));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      try {
        for (let reply = parseReply(data); reply !== null; reply = parseReply(data)) {
          data = data.subarray(reply.end);
          if (!authPending) return finish(null, reply.value);
          authPending = false;
          if (reply.value instanceof RespError) return finish(new RespAuthError(`${host}:${port} refused AUTH: ${reply.value.message}`));
        }
      } catch (error) {
        finish(error as Error);
      }
    });
    socket.once('error', (error) => finish(error));
    socket.once('close', () => finish(new Error(`connection to ${host}:${port} closed before a reply to ${args[0] ?? '?'}`)));
  });
}
