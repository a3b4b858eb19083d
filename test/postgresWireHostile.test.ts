import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { ConnectionConfigError, InvalidInputError, TimeoutError } from '../impl/errors.ts';
import { MAX_SCRAM_ITERATIONS } from '../impl/postgres/wire/auth.ts';
import type { WireConnectOptions } from '../impl/postgres/wire/connection.ts';
import { EncodedCall, PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { NODE_POSTGRES_ONLY_DEFAULTS, NODE_POSTGRES_ONLY_ENV, wireEndpoint } from '../impl/postgres/wire/endpoint.ts';
import { WireConnectionError, WireProtocolError } from '../impl/postgres/wire/errors.ts';
import { AUTH_OK, fakeServer, message, READY } from './impl/fakePostgres.ts';
import { until } from './probes.ts';
import { ManualClock } from './impl/servers.ts';

/**
 * The wire client read as an attacker would: fake servers on loopback
 * sockets send every backend message in every connection state, lengths
 * that disagree with their content, a SCRAM exchange bent every way, and
 * the client is handed strings that would smuggle protocol bytes. Each case
 * is a typed error that fails the calls in flight and drops the connection
 * (never a hang, never a reply handed to another caller), or is handled.
 * The clock is a ManualClock that never moves: nothing here may wait for a
 * timeout to end.
 */

const bytes = (...xs: number[]): Buffer => Buffer.from(xs);
const int32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const cstr = (s: string): Buffer => Buffer.from(`${s}\0`);
const auth = (kind: number, rest: Buffer = Buffer.alloc(0)): Buffer => message('R', Buffer.concat([int32(kind), rest]));
const status = (name: string, value: string): Buffer => message('S', Buffer.concat([cstr(name), cstr(value)]));
const STARTUP_REPLY = Buffer.concat([AUTH_OK, message('K', Buffer.alloc(8, 1)), READY]);
const ROW = message('D', Buffer.concat([bytes(0, 1), int32(1), Buffer.from('7')]));
const STATEMENT = new PreparedStatement('t', 'SELECT 1');
const PASSWORD = 'secret-Pässword';
const SALT16 = Buffer.from('sixteen-byte-slt').toString('base64');

const connectTo = (port: number, over: Partial<WireConnectOptions> = {}): Promise<WireConnection> => WireConnection.connect({ host: '127.0.0.1', port, user: 'u', timeoutMs: 30_000, clock: new ManualClock(), ...over });

/** The first byte of every chunk the client sent (its message types; 'p' is a password or SASL message). */
const sentTypes = (chunks: readonly Buffer[]): string => chunks.map((c) => String.fromCharCode(c[0]!)).join('');

describe('wire client: every backend message in every state', () => {
  it.each([
    ['an authentication request after AuthenticationOk (fishing for the password)', Buffer.concat([AUTH_OK, auth(3), READY])],
    ['a ReadyForQuery with a transaction open', Buffer.concat([AUTH_OK, message('Z', Buffer.from('T'))])],
    ['client_encoding other than UTF8', Buffer.concat([AUTH_OK, status('client_encoding', 'LATIN1'), READY])],
    ['NegotiateProtocolVersion', message('v', Buffer.concat([int32(0), int32(0)]))],
    ['CopyInResponse', Buffer.concat([AUTH_OK, message('G', bytes(0, 0, 0))])],
  ])('start-up: %s fails the connect typed, nothing sent after the start-up', async (_what, reply) => {
    const fake = await fakeServer((_chunk, socket) => socket.write(reply));
    try {
      const e = await connectTo(fake.port, { password: PASSWORD }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(WireProtocolError);
      expect(sentTypes(fake.received)).toBe('\0');
    } finally {
      await fake.close();
    }
  });

  it.each([
    ['CopyInResponse (a statement the server turned into COPY)', message('G', bytes(0, 0, 0))],
    ['CopyOutResponse', message('H', bytes(0, 0, 0))],
    ['CopyBothResponse', message('W', bytes(0, 0, 0))],
    ['CopyData', message('d', Buffer.from('x'))],
    ['CopyDone', message('c')],
    ['PortalSuspended', message('s')],
    ['ParameterDescription', message('t', bytes(0, 0))],
    ['CloseComplete', message('3')],
    ['FunctionCallResponse', message('V', int32(-1))],
    ['NegotiateProtocolVersion', message('v', Buffer.concat([int32(0), int32(0)]))],
    ['an authentication request', auth(3)],
    ['BackendKeyData', message('K', Buffer.alloc(8))],
    ["ReadyForQuery 'T' (a transaction left open)", message('Z', Buffer.from('T'))],
    ["ReadyForQuery 'E' (a failed transaction)", message('Z', Buffer.from('E'))],
    ['ReadyForQuery with an unknown status', message('Z', Buffer.from('X'))],
    ['ReadyForQuery of two bytes', message('Z', Buffer.from('II'))],
    ['a DataRow column of length -2', message('D', Buffer.concat([bytes(0, 1), int32(-2)]))],
    ['a DataRow with a byte after its columns', message('D', Buffer.concat([bytes(0, 1), int32(1), Buffer.from('7x')]))],
    ['a DataRow of -1 columns', message('D', bytes(0xff, 0xff))],
    ['a DataRow column running past its end', message('D', Buffer.concat([bytes(0, 1), int32(9), Buffer.from('7')]))],
    ['an ErrorResponse without its final zero', message('E', Buffer.concat([Buffer.from('C'), cstr('22012'), Buffer.from('M'), cstr('x')]))],
    ['an ErrorResponse field running past its end', message('E', Buffer.from('Mabc'))],
    ['client_encoding set to SQL_ASCII', status('client_encoding', 'SQL_ASCII')],
    ['a ParameterStatus without its value', message('S', cstr('client_encoding'))],
  ])('call in flight: %s fails that call with WireProtocolError and the call behind it too, never with its reply', async (_what, bad) => {
    // The first call's reply is the bad message then a ReadyForQuery; the second call's is a good row: a lax client would hand it on.
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(STARTUP_REPLY);
      else if (n === 1) socket.write(Buffer.concat([bad, READY, ROW, READY]));
    });
    try {
      const c = await connectTo(fake.port);
      const lost = new Promise<Error>((resolve) => c.onLost(resolve));
      const [first, second] = await Promise.allSettled([c.call(STATEMENT, ['1']), c.call(STATEMENT, ['2'])]);
      expect(first).toMatchObject({ status: 'rejected', reason: expect.any(WireProtocolError) });
      expect(second.status).toBe('rejected');
      const reason = (second as PromiseRejectedResult).reason as unknown;
      expect(reason instanceof WireProtocolError || reason instanceof WireConnectionError).toBe(true);
      expect(await lost).toBeInstanceOf(WireProtocolError);
      await expect(c.call(STATEMENT, [])).rejects.toBeInstanceOf(WireConnectionError);
    } finally {
      await fake.close();
    }
  });

  it('call in flight: notices, notifications and harmless parameter changes are read past; each caller gets its own rows', async () => {
    const noise = Buffer.concat([message('N', Buffer.concat([Buffer.from('S'), cstr('NOTICE'), Buffer.from('M'), cstr('n'), bytes(0)])), message('A', Buffer.concat([int32(1), cstr('ch'), cstr('p')])), status('standard_conforming_strings', 'off'), status('integer_datetimes', 'off'), status('client_encoding', 'UTF8')]);
    const two = message('D', Buffer.concat([bytes(0, 1), int32(1), Buffer.from('2')]));
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(STARTUP_REPLY);
      else if (n === 1) socket.write(Buffer.concat([noise, ROW, noise, READY, noise, two, READY, noise]));
    });
    try {
      const c = await connectTo(fake.port);
      expect(await Promise.all([c.call(STATEMENT, ['1']), c.call(STATEMENT, ['2'])])).toEqual([[['7']], [['2']]]);
      expect(c.lostWith).toBeNull();
      c.destroy();
    } finally {
      await fake.close();
    }
  });

  it.each([
    ['a DataRow', ROW],
    ['a CommandComplete', message('C', cstr('SELECT 1'))],
    ['a ReadyForQuery', READY],
    ['a non-fatal ErrorResponse', message('E', Buffer.concat([Buffer.from('S'), cstr('ERROR'), Buffer.from('C'), cstr('22012'), bytes(0)]))],
    ['an authentication request', auth(3)],
    ['a CopyInResponse', message('G', bytes(0, 0, 0))],
  ])('idle: %s with no call in flight drops the connection with WireProtocolError', async (_what, bad) => {
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(Buffer.concat([STARTUP_REPLY, bad]));
    });
    try {
      const c = await connectTo(fake.port, { password: PASSWORD });
      const lost = c.lostWith ?? (await new Promise<Error>((resolve) => c.onLost(resolve)));
      expect(lost).toBeInstanceOf(WireProtocolError);
      expect(sentTypes(fake.received)).toBe('\0');
    } finally {
      await fake.close();
    }
  });

  it('after end(): a call fails at once, typed, and the Terminate is the last thing sent', async () => {
    const fake = await fakeServer((chunk, socket, n) => {
      if (n === 0) socket.write(STARTUP_REPLY);
      else if (chunk[0] === 0x58) socket.end();
    });
    try {
      const c = await connectTo(fake.port);
      const ending = c.end();
      await expect(c.call(STATEMENT, [])).rejects.toThrow(/closing/);
      await ending;
      // The client is gone once its Terminate is written; the server reads it a moment later.
      expect(await until(() => sentTypes(fake.received) === '\0X', 5000)).toBe(true);
      await expect(c.call(STATEMENT, [])).rejects.toBeInstanceOf(WireConnectionError);
    } finally {
      await fake.close();
    }
  });

  it("end() waits for the server's close a bounded real time: a server that never closes (a cut link) still lets it finish, with the clock standing still", async () => {
    // The server reads the Terminate and keeps its side open for good (half-open: our FIN does not close it).
    const fake = await fakeServer(
      (_chunk, socket, n) => {
        if (n === 0) socket.write(STARTUP_REPLY);
      },
      { halfOpen: true },
    );
    try {
      const clock = new ManualClock();
      const c = await connectTo(fake.port, { clock });
      // Nothing moves the lock's clock here (as in a lockstep run's teardown): the close must not need it.
      await c.end();
      expect(clock.armed).toBe(0);
      expect(await until(() => sentTypes(fake.received) === '\0X', 5000)).toBe(true);
    } finally {
      await fake.close();
    }
  });
});

describe('wire client: strings that would smuggle protocol bytes', () => {
  it('a NUL in a start-up parameter, user, database or password is InvalidInputError before a socket opens', async () => {
    const fake = await fakeServer((_chunk, socket) => socket.write(Buffer.concat([auth(3), STARTUP_REPLY])));
    try {
      for (const over of [{ parameters: { application_name: 'x\0user\0postgres' } }, { user: 'u\0database\0other' }, { database: 'd\0' }, { password: 'pre\0fix' }]) {
        const e = await connectTo(fake.port, over).catch((x: unknown) => x);
        expect(e, JSON.stringify(over)).toBeInstanceOf(InvalidInputError);
        expect((e as Error).message).not.toContain('fix');
      }
      expect(fake.connections).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it('a NUL in a statement name or text is InvalidInputError (a rejection, nothing sent)', async () => {
    expect(() => new PreparedStatement('a\0b', 'SELECT 1')).toThrow(InvalidInputError);
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(STARTUP_REPLY);
    });
    try {
      const c = await connectTo(fake.port);
      await expect(c.prepare([new PreparedStatement('s', 'SELECT 1;\0')])).rejects.toBeInstanceOf(InvalidInputError);
      await expect(c.simpleQuery('SELECT 1\0')).rejects.toBeInstanceOf(InvalidInputError);
      expect(c.lostWith).toBeNull();
      expect(sentTypes(fake.received)).toBe('\0');
      c.destroy();
    } finally {
      await fake.close();
    }
  });
});

describe('wire client: a SCRAM-SHA-256 exchange bent every way', () => {
  const SALT = Buffer.from('salt-of-sixteen!').toString('base64');
  it.each([
    ['an iteration count of 2^31-1 (a frozen client)', (nonce: string) => [auth(11, Buffer.from(`r=${nonce}s,s=${SALT},i=2147483647`))], ConnectionConfigError, /^authentication: SCRAM: the server asks for 2147483647 iterations/],
    ['an iteration count that is not a plain integer', (nonce: string) => [auth(11, Buffer.from(`r=${nonce}s,s=${SALT},i=1e3`))], WireProtocolError, /^SCRAM: a server-first-message without an iteration count$/],
    ['a salt that is not base64', (nonce: string) => [auth(11, Buffer.from(`r=${nonce}s,s=!!not base64!!,i=4096`))], WireProtocolError, /^SCRAM: a server-first-message without a base64 salt$/],
    // Node's base64 decoder skips what is not base64: the salt would still decode to the right bytes.
    ['a salt with a space in it', (nonce: string) => [auth(11, Buffer.from(`r=${nonce}s,s=${SALT.slice(0, 8)} ${SALT.slice(8)},i=4096`))], WireProtocolError, /^SCRAM: a server-first-message without a base64 salt$/],
    ['a nonce that does not extend the client nonce', () => [auth(11, Buffer.from(`r=other,s=${SALT},i=4096`))], WireProtocolError, /^SCRAM: the server nonce does not extend the client nonce$/],
    ['a mandatory extension', (nonce: string) => [auth(11, Buffer.from(`m=ext,r=${nonce}s,s=${SALT},i=4096`))], WireProtocolError, /^SCRAM: a server-first-message that does not begin with the nonce, or with a mandatory extension$/],
    ['a second server-first-message', (nonce: string) => [auth(11, Buffer.from(`r=${nonce}s,s=${SALT},i=16`)), auth(11, Buffer.from(`r=${nonce}t,s=${SALT},i=16`))], WireProtocolError, /^SCRAM: a second server-first-message$/],
    ['a SASLFinal before any server-first-message', () => [auth(12, Buffer.from('v=AAAA'))], ConnectionConfigError, /^authentication: SCRAM: the server signature does not match/],
  ])('%s: a typed error, the password never in it, no proof sent', async (_what, serverFirst, type, text) => {
    const fake = await fakeServer((chunk, socket, n) => {
      if (n === 0) socket.write(auth(10, Buffer.from('SCRAM-SHA-256\0\0')));
      // The SASLInitialResponse: 'p', length, mechanism, length, then n,,n=*,r=<client nonce>.
      else if (n === 1) socket.write(Buffer.concat(serverFirst(chunk.toString('utf8').split('r=')[1]!)));
      // A proof came (the client took what it should have refused): the server hangs up, so the test fails at once, not at its timeout.
      else socket.destroy();
    });
    try {
      const e = await connectTo(fake.port, { password: PASSWORD }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(type);
      expect((e as Error).message).toMatch(text);
      expect((e as Error).message).not.toContain(PASSWORD);
      expect(sentTypes(fake.received)).toBe('\0p');
    } finally {
      await fake.close();
    }
  });

  it("a server-final-message with e= is the server's refusal, as authentication", async () => {
    const fake = await fakeServer((chunk, socket, n) => {
      if (n === 0) socket.write(auth(10, Buffer.from('SCRAM-SHA-256\0\0')));
      else if (n === 1) socket.write(auth(11, Buffer.from(`r=${chunk.toString('utf8').split('r=')[1]!}s,s=c2FsdA==,i=16`)));
      else socket.write(auth(12, Buffer.from('e=invalid-proof')));
    });
    try {
      const e = await connectTo(fake.port, { password: PASSWORD }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ConnectionConfigError);
      expect(e).toMatchObject({ code: 'authentication', message: 'authentication: SCRAM: the server refused: invalid-proof' });
    } finally {
      await fake.close();
    }
  });
});

/**
 * A SCRAM-SHA-256 server on a fake socket that knows PASSWORD: it checks the
 * client's proof as PostgreSQL does (RFC 5802: StoredKey = H(ClientKey),
 * ClientKey = proof XOR HMAC(StoredKey, AuthMessage)) and answers with what
 * `final` makes of its own server signature. `serverFirst` bends the
 * server-first-message (the client's nonce given); by default it is a plain
 * one of 16 iterations. The proof it saw, and whether it was right, are kept.
 */
async function scramFake(options: { readonly serverFirst?: (clientNonce: string) => string; readonly final?: (signature: Buffer) => Buffer } = {}) {
  const seen = { proofChecked: false, proofRight: false };
  let clientFirstBare = '';
  let serverFirst = '';
  const fake = await fakeServer((chunk, socket, n) => {
    if (n === 0) return void socket.write(auth(10, Buffer.from('SCRAM-SHA-256\0\0')));
    if (n === 1) {
      // SASLInitialResponse: 'p', length, the mechanism's C string, the length of the client-first-message, then it.
      const text = chunk.toString('utf8', chunk.indexOf(0, 5) + 5);
      clientFirstBare = text.slice(3);
      const clientNonce = clientFirstBare.split('r=')[1]!;
      serverFirst = options.serverFirst?.(clientNonce) ?? `r=${clientNonce}srv,s=${SALT16},i=16`;
      return void socket.write(auth(11, Buffer.from(serverFirst)));
    }
    if (n === 2) {
      const clientFinal = chunk.toString('utf8', 5);
      const withoutProof = clientFinal.slice(0, clientFinal.lastIndexOf(',p='));
      const proof = Buffer.from(clientFinal.slice(clientFinal.lastIndexOf(',p=') + 3), 'base64');
      const attrs = new Map(serverFirst.split(',').flatMap((part) => (part[1] === '=' ? [[part[0]!, part.slice(2)] as const] : [])));
      const salted = pbkdf2Sync(PASSWORD, Buffer.from(attrs.get('s')!, 'base64'), Number(attrs.get('i')), 32, 'sha256');
      const authMessage = `${clientFirstBare},${serverFirst},${withoutProof}`;
      const storedKey = createHash('sha256').update(createHmac('sha256', salted).update('Client Key').digest()).digest();
      const clientSignature = createHmac('sha256', storedKey).update(authMessage).digest();
      const clientKey = Buffer.from(proof.map((b, i) => b ^ clientSignature[i]!));
      seen.proofChecked = true;
      // As PostgreSQL: no channel binding (c=biws, base64 of 'n,,') and the nonce the server sent, then the proof.
      seen.proofRight = withoutProof === `c=biws,r=${attrs.get('r')!}` && proof.length === 32 && createHash('sha256').update(clientKey).digest().equals(storedKey);
      const signature = createHmac('sha256', createHmac('sha256', salted).update('Server Key').digest()).update(authMessage).digest();
      return void socket.write(Buffer.concat([options.final?.(signature) ?? auth(12, Buffer.from(`v=${signature.toString('base64')}`)), STARTUP_REPLY]));
    }
    socket.end();
  });
  return { fake, seen };
}

describe('wire client: a SCRAM-SHA-256 server must prove it knows the password', () => {
  it.each([
    ['a plain server-first-message', undefined],
    // i:1 would be read as i=1 by a reader that took any part's first letter: the proof then does not match the server's.
    ['the iteration bound itself, and a part that is no attribute (no "=" second), which is not read as one', (nonce: string) => `r=${nonce}s,s=${SALT16},i=${MAX_SCRAM_ITERATIONS},i:1`],
  ])('a server that does (%s): the proof the client sent is the right one, and the connection opens', async (_what, serverFirst) => {
    const { fake, seen } = await scramFake(serverFirst === undefined ? {} : { serverFirst });
    try {
      const c = await connectTo(fake.port, { password: PASSWORD });
      expect(seen).toEqual({ proofChecked: true, proofRight: true });
      c.destroy();
    } finally {
      await fake.close();
    }
  });

  const flipped = (signature: Buffer): Buffer => Buffer.from(signature.map((b, i) => (i === 31 ? b ^ 1 : b)));
  const NO_MATCH = 'authentication: SCRAM: the server signature does not match (the server does not know the password)';
  it.each([
    ['a signature one bit off', (sig: Buffer) => auth(12, Buffer.from(`v=${flipped(sig).toString('base64')}`)), NO_MATCH],
    ['no signature', () => auth(12, Buffer.from('x=1')), NO_MATCH],
    ['a signature that is not base64', (sig: Buffer) => auth(12, Buffer.from(`v=${sig.toString('base64').slice(0, 20)}!!!`)), NO_MATCH],
    // The right bytes to Node's lenient decoder, which skips the space: not what RFC 5802 allows.
    ['the right signature with a space in its base64', (sig: Buffer) => auth(12, Buffer.from(`v=${sig.toString('base64').slice(0, 12)} ${sig.toString('base64').slice(12)}`)), NO_MATCH],
    ['a signature of 31 bytes', (sig: Buffer) => auth(12, Buffer.from(`v=${sig.subarray(0, 31).toString('base64')}`)), NO_MATCH],
    ['a signature of 33 bytes', (sig: Buffer) => auth(12, Buffer.from(`v=${Buffer.concat([sig, bytes(0)]).toString('base64')}`)), NO_MATCH],
    ['AuthenticationOk without a SASLFinal', () => Buffer.alloc(0), 'authentication: the server left SCRAM-SHA-256 unfinished (AuthenticationOk without its signature): not trusted'],
    ['a cleartext password request instead of the SASLFinal (a downgrade)', () => auth(3), 'authentication: the server left SCRAM-SHA-256 unfinished (authentication request 3): not trusted'],
  ])('one that does not (%s): ConnectionConfigError, the connection never opens', async (_what, final, text) => {
    const { fake, seen } = await scramFake({ final });
    try {
      const e = await connectTo(fake.port, { password: PASSWORD }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ConnectionConfigError);
      expect(e).toMatchObject({ code: 'authentication', message: text });
      expect((e as Error).message).not.toContain(PASSWORD);
      expect(seen.proofRight).toBe(true);
      // Nothing after the proof: the cleartext request got no password.
      expect(sentTypes(fake.received)).toBe('\0pp');
    } finally {
      await fake.close();
    }
  });

  it.each([
    ['the nonce not first', (nonce: string) => `s=${SALT16},r=${nonce}s,i=16`, /does not begin with the nonce/],
    ['a mandatory extension after the nonce', (nonce: string) => `r=${nonce}s,m=ext,s=${SALT16},i=16`, /mandatory extension/],
    ["the client's nonce alone (no server part)", (nonce: string) => `r=${nonce},s=${SALT16},i=16`, /does not extend the client nonce/],
    ['a server part with a character outside printable ASCII', (nonce: string) => `r=${nonce}s x,s=${SALT16},i=16`, /does not extend the client nonce/],
    ['no salt', (nonce: string) => `r=${nonce}s,i=16`, /without a base64 salt/],
    ['an empty salt', (nonce: string) => `r=${nonce}s,s=,i=16`, /without a base64 salt/],
    ['no iteration count', (nonce: string) => `r=${nonce}s,s=${SALT16}`, /without an iteration count/],
    ['an iteration count of 0', (nonce: string) => `r=${nonce}s,s=${SALT16},i=0`, /without an iteration count/],
    ['an iteration count with a leading zero', (nonce: string) => `r=${nonce}s,s=${SALT16},i=016`, /without an iteration count/],
    ['an iteration count of eleven digits', (nonce: string) => `r=${nonce}s,s=${SALT16},i=10000000000`, /without an iteration count/],
    ['one iteration more than the bound', (nonce: string) => `r=${nonce}s,s=${SALT16},i=${MAX_SCRAM_ITERATIONS + 1}`, /asks for 1000001 iterations, more than this client computes \(1000000\)/],
  ])('a server-first-message with %s: a typed error naming it, no proof sent', async (_what, serverFirst, message) => {
    const { fake, seen } = await scramFake({ serverFirst });
    try {
      const e = await connectTo(fake.port, { password: PASSWORD }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(Error);
      expect((e as Error).message).toMatch(message);
      expect((e as Error).message).toMatch(/(^|^authentication: )SCRAM: /);
      expect(seen.proofChecked).toBe(false);
      expect(sentTypes(fake.received)).toBe('\0p');
    } finally {
      await fake.close();
    }
  });

});

describe('wire client: every timer and socket released on every path', () => {
  it('a server that closes during the start-up, a connect that times out during SCRAM, an idle connection the server closes, end() and destroy()', async () => {
    let sentServerFirst: () => void = () => undefined;
    const serverFirstSent = new Promise<void>((resolve) => (sentServerFirst = resolve));
    const fake = await fakeServer((chunk, socket, n) => {
      const text = chunk.toString('utf8');
      if (n === 0 && text.includes('close-at-once')) return void socket.destroy();
      if (n === 0 && text.includes('scram')) return void socket.write(auth(10, Buffer.from('SCRAM-SHA-256\0\0')));
      // A long PBKDF2 (within the bound): the connect times out while it runs.
      if (n === 1 && text.includes('SCRAM-SHA-256')) return void socket.write(auth(11, Buffer.from(`r=${text.split('r=')[1]!}s,s=c2FsdA==,i=200000`)), () => sentServerFirst());
      if (n === 0) socket.write(STARTUP_REPLY);
      else if (chunk[0] === 0x58) socket.end();
      else socket.write(Buffer.concat([ROW, READY]));
    });
    try {
      const clock = new ManualClock();
      await expect(connectTo(fake.port, { clock, user: 'close-at-once' })).rejects.toBeInstanceOf(WireConnectionError);
      expect(clock.armed).toBe(0);

      // Its failure caught as it is made: one before the server's first message would otherwise be unhandled while serverFirstSent is awaited.
      const scram = connectTo(fake.port, { clock, user: 'scram', password: PASSWORD }).then(
        (c) => (c.destroy(), null),
        (e: unknown) => e,
      );
      await Promise.race([serverFirstSent, scram]);
      clock.advance(30_000);
      expect(await scram).toBeInstanceOf(TimeoutError);
      expect(clock.armed).toBe(0);

      const idle = await connectTo(fake.port, { clock });
      expect(await idle.call(STATEMENT, [])).toEqual([['7']]);
      const lost = new Promise<Error>((resolve) => idle.onLost(resolve));
      await fake.closeClients();
      expect(await lost).toBeInstanceOf(WireConnectionError);
      expect(clock.armed).toBe(0);

      const ended = await connectTo(fake.port, { clock });
      expect(await ended.call(STATEMENT, [])).toEqual([['7']]);
      await ended.end();
      expect(clock.armed).toBe(0);

      const destroyed = await connectTo(fake.port, { clock });
      const inFlight = destroyed.call(STATEMENT, []);
      destroyed.destroy();
      await expect(inFlight).rejects.toBeInstanceOf(WireConnectionError);
      expect(clock.armed).toBe(0);
      await fake.allClosed();
    } finally {
      await fake.close();
    }
  });
});

describe('wire client: each authentication request it cannot answer, refused by name before anything is sent', () => {
  it.each([
    ['an Authentication message without its kind', message('R', bytes(0, 0)), WireProtocolError, 'an Authentication message without its kind', PASSWORD],
    ['a cleartext request with no password given', auth(3), ConnectionConfigError, 'authentication: the server asks for a password and none was given', undefined],
    ['an MD5 request with no password given', auth(5, bytes(1, 2, 3, 4)), ConnectionConfigError, 'authentication: the server asks for a password and none was given', undefined],
    ['an MD5 request without its salt', auth(5, bytes(1, 2, 3)), WireProtocolError, 'AuthenticationMD5Password without its salt', PASSWORD],
    ['an MD5 request with a salt too long', auth(5, bytes(1, 2, 3, 4, 5)), WireProtocolError, 'AuthenticationMD5Password without its salt', PASSWORD],
    ['SASL without SCRAM-SHA-256', auth(10, Buffer.from('SCRAM-SHA-1\0OTHER\0\0')), ConnectionConfigError, 'authentication: no supported SASL mechanism offered (SCRAM-SHA-1, OTHER)', PASSWORD],
    ['SASL with no password given', auth(10, Buffer.from('SCRAM-SHA-256\0\0')), ConnectionConfigError, 'authentication: the server asks for a password and none was given', undefined],
    ['a SASLContinue before SASL', auth(11, Buffer.from('r=x,s=c2FsdA==,i=16')), WireProtocolError, 'SASLContinue before SASL', PASSWORD],
    ['a SASLFinal before SASL', auth(12, Buffer.from('v=AAAA')), WireProtocolError, 'SASLFinal before SASL', PASSWORD],
    ['GSSAPI', auth(7), ConnectionConfigError, 'authentication: unsupported authentication method 7 (this client speaks trust, password, md5 and scram-sha-256)', PASSWORD],
  ])('%s', async (_what, request, type, text, password) => {
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(request);
    });
    try {
      const e = await connectTo(fake.port, password === undefined ? {} : { password }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(type);
      expect((e as Error).message).toBe(text);
      expect(sentTypes(fake.received)).toBe('\0');
    } finally {
      await fake.close();
    }
  });

  it('an MD5 request answered as PostgreSQL checks it: "md5" + md5(md5(password + user) + salt), a C string', async () => {
    const salt = bytes(9, 8, 7, 6);
    const fake = await fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(auth(5, salt));
      else socket.write(STARTUP_REPLY);
    });
    try {
      const c = await connectTo(fake.port, { user: 'md5user', password: PASSWORD });
      const inner = createHash('md5').update(PASSWORD).update('md5user').digest('hex');
      const want = `md5${createHash('md5').update(inner).update(salt).digest('hex')}\0`;
      const sent = fake.received[1]!;
      expect(sent[0]).toBe(0x70);
      expect(sent.readInt32BE(1)).toBe(4 + want.length);
      expect(sent.toString('latin1', 5)).toBe(want);
      c.destroy();
    } finally {
      await fake.close();
    }
  });
});

describe('wire client: every entry point on a connection gone, closing, or silent', () => {
  const ENCODED = new EncodedCall(STATEMENT, []);
  /** Each way to start a call, settled as a promise (sendWith's callback included). */
  const entries = (c: WireConnection): Record<string, () => Promise<unknown>> => ({
    simpleQuery: () => c.simpleQuery('SELECT 1'),
    prepare: () => c.prepare([STATEMENT]),
    call: () => c.call(STATEMENT, []),
    send: () => c.send(ENCODED),
    sendWith: () => new Promise((resolve, reject) => c.sendWith(ENCODED, (e, rows) => (e === null ? resolve(rows) : reject(e)))),
  });
  /** A server that takes the start-up and then answers nothing, keeping what it was sent. */
  const silent = () =>
    fakeServer((_chunk, socket, n) => {
      if (n === 0) socket.write(STARTUP_REPLY);
    });

  it('destroyed: each fails at once naming why the connection went, nothing sent; end() resolves at once', async () => {
    const fake = await silent();
    try {
      const c = await connectTo(fake.port);
      c.destroy(new WireConnectionError('gone for the test'));
      for (const [name, start] of Object.entries(entries(c))) {
        const e = await start().catch((x: unknown) => x);
        expect(e, name).toBeInstanceOf(WireConnectionError);
        expect((e as Error).message, name).toBe('the connection is gone: gone for the test');
      }
      // end() on a connection whose socket has closed already: at once, not waiting for a close that came and went.
      await until(() => fake.open === 0, 5000);
      await new Promise((resolve) => setImmediate(resolve));
      let guard: NodeJS.Timeout | undefined;
      const ended = await Promise.race([c.end().then(() => 'ended'), new Promise((resolve) => (guard = setTimeout(() => resolve('still waiting after 5 s'), 5000)))]);
      clearTimeout(guard);
      expect(ended).toBe('ended');
      expect(sentTypes(fake.received)).toBe('\0');
      const plain = await connectTo(fake.port);
      plain.destroy();
      expect(plain.lostWith).toMatchObject({ name: 'WireConnectionError', message: 'connection destroyed' });
    } finally {
      await fake.close();
    }
  });

  it('ending: each fails at once as closing, and nothing but the Terminate goes out', async () => {
    // Half-open: the server keeps its side open after the Terminate until the test has tried every entry point.
    const fake = await fakeServer(
      (_chunk, socket, n) => {
        if (n === 0) socket.write(STARTUP_REPLY);
      },
      { halfOpen: true },
    );
    try {
      const c = await connectTo(fake.port);
      const ending = c.end();
      for (const [name, start] of Object.entries(entries(c))) {
        const e = await start().catch((x: unknown) => x);
        expect(e, name).toBeInstanceOf(WireConnectionError);
        expect((e as Error).message, name).toBe('the connection is closing (end() was called)');
      }
      await fake.closeClients();
      await ending;
      expect(await until(() => sentTypes(fake.received) === '\0X', 5000)).toBe(true);
    } finally {
      await fake.close();
    }
  });

  it.each(['simpleQuery', 'prepare', 'call', 'send', 'sendWith'])('silent: %s times out on the clock (TimeoutError naming the statement), the connection dropped, one timer for the calls in flight', async (name) => {
    const fake = await silent();
    try {
      const clock = new ManualClock();
      const c = await connectTo(fake.port, { clock, timeoutMs: 1_000 });
      const first = entries(c)[name]!().catch((x: unknown) => x);
      clock.advance(400);
      // A second and third call behind it: still one timer, armed at the oldest call's deadline.
      const behind = [c.call(STATEMENT, []).catch((x: unknown) => x), c.call(STATEMENT, []).catch((x: unknown) => x)];
      expect(clock.armed).toBe(1);
      clock.advance(599);
      expect(c.lostWith).toBeNull();
      clock.advance(1);
      const e = await first;
      expect(e).toBeInstanceOf(TimeoutError);
      expect((e as Error).message).toBe('statement timed out after 1000 ms');
      for (const b of await Promise.all(behind)) expect(b).toMatchObject({ name: 'WireConnectionError', message: 'a call got no reply within 1000 ms' });
      expect(clock.armed).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it('a refused connect is WireConnectionError saying so, with the socket error\'s code', async () => {
    const fake = await silent();
    const port = fake.port;
    await fake.close();
    const e = await connectTo(port).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(WireConnectionError);
    expect(e).toMatchObject({ code: 'ECONNREFUSED' });
    expect((e as Error).message).toMatch(/^connection failed: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
    expect((e as Error).cause).toMatchObject({ code: 'ECONNREFUSED' });
  });

  it('a connect that runs out: TimeoutError naming the connect, on the connect bound', async () => {
    const fake = await fakeServer(() => undefined);
    try {
      const clock = new ManualClock();
      const connecting = connectTo(fake.port, { clock, timeoutMs: 60_000, connectTimeoutMs: 700 }).catch((x: unknown) => x);
      await until(() => fake.connections === 1, 5000);
      clock.advance(699);
      clock.advance(1);
      const e = await connecting;
      expect(e).toBeInstanceOf(TimeoutError);
      expect((e as Error).message).toBe('connect timed out after 700 ms');
      expect(clock.armed).toBe(0);
    } finally {
      await fake.close();
    }
  });

  it("a connect's signal: aborted before or during the connect, it fails with the signal's reason (or says it was abandoned); aborted after, the connection stays", async () => {
    const fake = await fakeServer((chunk, socket, n) => {
      // 'hold' in the start-up: never answered, so the connect is still running when the signal fires.
      if (n === 0 && !chunk.includes('hold')) socket.write(STARTUP_REPLY);
    });
    try {
      const clock = new ManualClock();
      const before = new AbortController();
      before.abort(new Error('aborted before'));
      await expect(connectTo(fake.port, { clock, signal: before.signal })).rejects.toThrow('aborted before');

      const during = new AbortController();
      const connecting = connectTo(fake.port, { clock, user: 'hold', signal: during.signal }).catch((x: unknown) => x);
      await until(() => fake.received.some((c) => c.includes('hold')), 5000);
      during.abort('not an Error');
      const e = await connecting;
      expect(e).toMatchObject({ name: 'WireConnectionError', message: 'the connect was abandoned' });
      expect(clock.armed).toBe(0);

      const after = new AbortController();
      const c = await connectTo(fake.port, { clock, signal: after.signal });
      after.abort(new Error('aborted after'));
      expect(c.lostWith).toBeNull();
      c.destroy();
    } finally {
      await fake.close();
    }
  });

  it('a NUL or a lone surrogate in the password or a start-up parameter is refused before a socket opens, naming what, never showing the password', async () => {
    const fake = await silent();
    try {
      for (const password of ['a\0b', 'secret-pw\uD800', '\uDFFFsecret-pw']) {
        await expect(connectTo(fake.port, { password })).rejects.toThrow(new InvalidInputError('invalid-config', 'the password must be well-formed Unicode without NUL characters (not shown: it is a secret)'));
      }
      await expect(connectTo(fake.port, { user: 'u\uD800' })).rejects.toThrow(/^invalid-config: the start-up parameter "user" must be well-formed Unicode without NUL characters, got /);
      await expect(connectTo(fake.port, { database: 'd\0b' })).rejects.toThrow(/^invalid-config: the start-up parameter "database" must be well-formed Unicode/);
      expect(fake.connections).toBe(0);
    } finally {
      await fake.close();
    }
  });
});

describe('wire endpoint: what node-postgres honours and the wire client does not sends the lock to node-postgres', () => {
  const plain = { host: '127.0.0.1', port: 5432, user: 'u', password: 'p' };

  it('every environment variable node-postgres reads is honoured or listed (read from the installed pg)', () => {
    const source = readFileSync(createRequire(import.meta.url).resolve('pg/lib/connection-parameters.js'), 'utf8');
    const read = new Set<string>();
    for (const m of source.matchAll(/val\('(\w+)', config(?:, (false|'(\w+)'))?\)/g)) if (m[2] !== 'false') read.add(m[3] ?? `PG${m[1]!.toUpperCase()}`);
    for (const m of source.matchAll(/process\.env\.(\w+)/g)) read.add(m[1]!);
    // Read by the wire client the same way; PGCONNECT_TIMEOUT is only for pg-native's libpq string.
    const honoured = ['PGUSER', 'PGDATABASE', 'PGPORT', 'PGHOST', 'PGPASSWORD', 'PGAPPNAME', 'PGOPTIONS', 'PGCONNECT_TIMEOUT'];
    expect([...read].filter((v) => !honoured.includes(v) && !(NODE_POSTGRES_ONLY_ENV as readonly string[]).includes(v))).toEqual([]);
    for (const name of NODE_POSTGRES_ONLY_ENV) {
      expect(wireEndpoint(plain, { [name]: 'require' }), name).toEqual({ unsupported: `${name}=require` });
    }
    expect('unsupported' in wireEndpoint(plain, { PGSSLMODE: 'disable' })).toBe(false);
    expect(wireEndpoint(plain, { PGAPPNAME: 'app', PGOPTIONS: '-c search_path=x' })).toMatchObject({ parameters: { application_name: 'app', options: '-c search_path=x' } });
  });

  it('every pg.defaults key is read, irrelevant to the lock, or listed; a changed listed one is node-postgres', () => {
    const defaults = pg.defaults as unknown as Record<string, unknown>;
    const read = ['host', 'port', 'user', 'password', 'database', 'application_name', 'options', 'statement_timeout', 'lock_timeout', 'idle_in_transaction_session_timeout'];
    // Pool settings, Date parameters and int8 parsing (the lock binds strings and reads text only).
    const irrelevant = ['max', 'idleTimeoutMillis', 'parseInputDatesAsUTC', 'parseInt8'];
    expect(Object.keys(defaults).filter((k) => !read.includes(k) && !irrelevant.includes(k) && !(k in NODE_POSTGRES_ONLY_DEFAULTS))).toEqual([]);
    for (const [k, stock] of Object.entries(NODE_POSTGRES_ONLY_DEFAULTS)) {
      defaults[k] = k === 'ssl' ? true : 'changed';
      try {
        expect(wireEndpoint(plain, {}), k).toEqual({ unsupported: `pg.defaults.${k} changed` });
      } finally {
        defaults[k] = stock;
      }
    }
    const saved = { application_name: defaults.application_name, host: defaults.host };
    defaults.application_name = 'from-defaults';
    defaults.host = '10.0.0.9';
    try {
      expect(wireEndpoint({ user: 'u' }, {})).toMatchObject({ host: '10.0.0.9', parameters: { application_name: 'from-defaults' } });
    } finally {
      Object.assign(defaults, saved);
    }
    expect(wireEndpoint(plain, {})).toMatchObject({ host: '127.0.0.1', parameters: {} });
  });

});
