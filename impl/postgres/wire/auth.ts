import { createHash, createHmac, pbkdf2, randomBytes, timingSafeEqual } from 'node:crypto';
import { ConnectionConfigError } from '../../errors.ts';
import { WireProtocolError } from './errors.ts';

/**
 * Password authentication of the start-up: cleartext, MD5 and SCRAM-SHA-256
 * (RFC 5802/7677, no channel binding), all through node:crypto. The password
 * is used as given (no SASLprep): the same bytes the server stored for an
 * ASCII password, and PostgreSQL itself falls back to the raw bytes for a
 * password SASLprep rejects.
 */

/** AuthenticationMD5Password: "md5" + md5(md5(password + user) + salt), hex. */
export function md5Password(user: string, password: string, salt: Buffer): string {
  const inner = createHash('md5').update(password).update(user).digest('hex');
  return `md5${createHash('md5').update(inner).update(salt).digest('hex')}`;
}

/** One SCRAM-SHA-256 exchange: first() → the server's first → final() → the server's final → verify(). */
export class Scram {
  readonly #nonce = randomBytes(18).toString('base64');
  readonly #password: string;
  #serverSignature: Buffer | null = null;
  #verified = false;

  constructor(password: string) {
    this.#password = password;
  }

  /** The client-first-message (no channel binding; the user name is the start-up's, so '*'). */
  first(): string {
    return `n,,${this.#bare()}`;
  }

  /** The client-final-message for the server-first-message. */
  async final(serverFirst: string): Promise<string> {
    const attrs = scramAttributes(serverFirst);
    const nonce = attrs.get('r');
    const salt = attrs.get('s');
    const iterations = Number(attrs.get('i'));
    if (nonce === undefined || !nonce.startsWith(this.#nonce) || nonce.length === this.#nonce.length) throw new WireProtocolError('SCRAM: the server nonce does not extend the client nonce');
    if (salt === undefined || !Number.isInteger(iterations) || iterations < 1) throw new WireProtocolError('SCRAM: a server-first-message without salt or iteration count');
    const salted = await new Promise<Buffer>((resolve, reject) =>
      pbkdf2(this.#password, Buffer.from(salt, 'base64'), iterations, 32, 'sha256', (e, key) => (e ? reject(e) : resolve(key))),
    );
    const clientKey = hmac(salted, 'Client Key');
    const storedKey = createHash('sha256').update(clientKey).digest();
    const withoutProof = `c=biws,r=${nonce}`;
    const authMessage = `${this.#bare()},${serverFirst},${withoutProof}`;
    const signature = hmac(storedKey, authMessage);
    const proof = Buffer.alloc(clientKey.length);
    for (let i = 0; i < proof.length; i++) proof[i] = clientKey[i]! ^ signature[i]!;
    this.#serverSignature = hmac(hmac(salted, 'Server Key'), authMessage);
    return `${withoutProof},p=${proof.toString('base64')}`;
  }

  /** Checks the server-final-message: the server proves it knows the password too. */
  verify(serverFinal: string): void {
    const v = scramAttributes(serverFinal).get('v');
    const expected = this.#serverSignature;
    const got = v === undefined ? null : Buffer.from(v, 'base64');
    if (expected === null || got === null || got.length !== expected.length || !timingSafeEqual(got, expected)) throw new ConnectionConfigError('authentication', 'SCRAM: the server signature does not match (the server does not know the password)');
    this.#verified = true;
  }

  /** True once the server's signature checked out: only then may the server say AuthenticationOk. */
  get verified(): boolean {
    return this.#verified;
  }

  #bare(): string {
    return `n=*,r=${this.#nonce}`;
  }
}

function hmac(key: Buffer, text: string): Buffer {
  return createHmac('sha256', key).update(text).digest();
}

function scramAttributes(message: string): Map<string, string> {
  const attrs = new Map<string, string>();
  for (const part of message.split(',')) {
    const eq = part.indexOf('=');
    if (eq === 1) attrs.set(part[0]!, part.slice(2));
  }
  return attrs;
}
