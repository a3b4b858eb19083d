/**
 * The floor of a Node client for the session lock's pair: the same two
 * prepared statements (TRY_LOCK_AND_MINT, pg_advisory_unlock) as bytes
 * encoded once, written from the socket's read callback as soon as a reply
 * ends in ReadyForQuery: no parsing, no promise, no timer, no lock. Against
 * it, interleaved in rotated order: lockcheck's bare wire client, the session
 * lock, and pgbench -M prepared on the same SQL (libpq). What the floor costs
 * is Node's own price for two round trips; what the wire client and the lock
 * add above it is all a change to them could win.
 *
 *   npx tsx bench/postgresFloor.ts [--seconds N] [--rounds N]
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import { join } from 'node:path';
import { PostgresServer, stopAllPostgresServers } from '../conformance/env/postgresServer.ts';
import { systemClock } from '../impl/clock.ts';
import { advisoryKey } from '../impl/postgres/keys.ts';
import { SCHEMA, TRY_LOCK_AND_MINT } from '../impl/postgres/schema.ts';
import { PostgresSessionLock } from '../impl/postgres/sessionLock.ts';
import { Scram } from '../impl/postgres/wire/auth.ts';
import { callMessage, MessageReader, parseMessages, passwordMessage, saslInitialResponse, startupMessage, TERMINATE } from '../impl/postgres/wire/codec.ts';
import { EncodedCall, PreparedStatement, WireConnection } from '../impl/postgres/wire/connection.ts';
import { runPgbench } from './pgbench.ts';
import { log, median, out, parseSeconds } from './common.ts';

const TIMEOUT_MS = 5_000;
const UNLOCK_SQL = 'SELECT pg_advisory_unlock($1::bigint)';
const args = process.argv.slice(2);
const roundsAt = args.indexOf('--rounds');
const ROUNDS = roundsAt >= 0 ? Number(args.splice(roundsAt, 2)[1]) : 8;
const seconds = parseSeconds('bench/postgresFloor.ts', args);
const DURATION_MS = Math.round(seconds * 1000);
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8', timeout: 5_000 }).trim()) || 100;

const LOCK_AND_MINT = new PreparedStatement('floor_lock_and_mint', TRY_LOCK_AND_MINT);
const UNLOCK = new PreparedStatement('floor_unlock', UNLOCK_SQL);
const TOKEN = new PreparedStatement('floor_token', 'SELECT token::text FROM lockcheck_tokens WHERE resource = $1');

interface Result {
  readonly wallUs: number;
  readonly clientUs: number;
}

/**
 * A raw authenticated connection (SCRAM, as the test server asks) with the
 * two statements parsed; then `run(ms)` ping-pongs the pair from the read
 * callback. Every wait bounded by TIMEOUT_MS.
 */
class Floor {
  #socket!: net.Socket;
  #mode: 'setup' | 'run' = 'setup';
  #reader!: MessageReader;
  #setupStep: ((type: number, body: Buffer) => void) | null = null;
  #pairs = 0;
  /** Pairs over every run: the floor reads no reply, so the token row checks afterwards that each pair minted. */
  total = 0;
  #second = false;
  #until = 0;
  #done: (() => void) | null = null;
  #lock!: Buffer;
  #unlock!: Buffer;

  static async open(c: PostgresServer['connection'], resource: string): Promise<Floor> {
    const f = new Floor();
    const key = advisoryKey(resource).toString();
    f.#lock = callMessage(LOCK_AND_MINT.nameBytes, [key, resource, '0']);
    f.#unlock = callMessage(UNLOCK.nameBytes, [key]);
    f.#reader = new MessageReader((type, buf, start, end) => f.#setupStep?.(type, Buffer.from(buf.subarray(start, end))));
    const tail = Buffer.from([0x5a, 0, 0, 0, 5, 0x49]);
    f.#socket = net.connect({
      host: c.host,
      port: c.port,
      onread: {
        buffer: Buffer.allocUnsafe(16 * 1024),
        callback: (n: number, buf: Uint8Array): boolean => {
          if (f.#mode === 'setup') f.#reader.push(Buffer.from(buf.buffer, buf.byteOffset, n));
          // A reply is complete when the read ends in ReadyForQuery (idle): one per call.
          else if (n >= 6 && Buffer.compare(tail, buf.subarray(n - 6, n)) === 0) f.#next();
          return true;
        },
      },
    });
    f.#socket.setNoDelay(true);
    await bounded(new Promise<void>((resolve, reject) => {
      f.#socket.once('error', reject);
      f.#socket.once('connect', () => {
        const scram = new Scram(c.password);
        f.#setupStep = (type, body) => {
          if (type === 0x45) reject(new Error(`server error in setup: ${body.toString('latin1')}`));
          else if (type === 0x5a) resolve();
          else if (type === 0x52) {
            const kind = body.readInt32BE(0);
            if (kind === 10) f.#socket.write(saslInitialResponse('SCRAM-SHA-256', scram.first()));
            else if (kind === 11) scram.final(body.toString('utf8', 4)).then((m) => f.#socket.write(passwordMessage(m, false)), reject);
            else if (kind === 12) scram.verify(body.toString('utf8', 4));
            else if (kind !== 0) reject(new Error(`authentication ${kind} not handled by the floor`));
          }
        };
        f.#socket.write(startupMessage({ user: c.user, database: c.database, client_encoding: 'UTF8' }));
      });
    }), 'start-up');
    await bounded(new Promise<void>((resolve, reject) => {
      f.#setupStep = (type, body) => {
        if (type === 0x45) reject(new Error(`server error in Parse: ${body.toString('latin1')}`));
        else if (type === 0x5a) resolve();
      };
      f.#socket.write(parseMessages([LOCK_AND_MINT, UNLOCK]));
    }), 'Parse');
    f.#mode = 'run';
    return f;
  }

  #next(): void {
    if (this.#second) {
      this.#pairs++;
      this.total++;
    }
    this.#second = !this.#second;
    if (!this.#second && performance.now() >= this.#until) return this.#done?.();
    this.#socket.write(this.#second ? this.#unlock : this.#lock);
  }

  /** Pairs completed in `ms` (the last one finished after it). */
  async run(ms: number): Promise<number> {
    this.#pairs = 0;
    this.#second = false;
    this.#until = performance.now() + ms;
    await bounded(new Promise<void>((resolve) => {
      this.#done = resolve;
      this.#socket.write(this.#lock);
    }), 'run', ms + TIMEOUT_MS);
    return this.#pairs;
  }

  close(): void {
    this.#socket.end(TERMINATE);
    this.#socket.destroy();
  }
}

function bounded<T>(p: Promise<T>, what: string, ms = TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`floor: ${what} took over ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

async function measureNode(loop: (ms: number) => Promise<number>): Promise<Result> {
  await loop(Math.min(200, DURATION_MS / 4));
  const cpu = process.cpuUsage();
  const start = performance.now();
  const n = await loop(DURATION_MS);
  const elapsed = performance.now() - start;
  const used = process.cpuUsage(cpu);
  return { wallUs: (elapsed * 1000) / n, clientUs: (used.user + used.system) / n };
}

function childrenCpuUs(): number {
  const text = readFileSync('/proc/self/stat', 'utf8');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[13]) + Number(f[14])) * 1e6) / CLK_TCK;
}

async function measurePgbench(server: PostgresServer, script: string): Promise<Result> {
  const c0 = childrenCpuUs();
  const { tps, processed } = await runPgbench(server, { script, seconds: Math.max(1, Math.round(seconds)), clients: 1 });
  return { wallUs: 1e6 / tps, clientUs: (childrenCpuUs() - c0) / processed };
}

const closers: (() => Promise<void> | void)[] = [];
let tmp: string | null = null;
try {
  log(`Node floor for the session pair: ${ROUNDS} rounds of ${seconds} s · load average ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  const server = await PostgresServer.start({ parentDir: '/dev/shm' });
  const c = server.connection;
  // The schema, once, for every side.
  const setup = await WireConnection.connect({ ...c, timeoutMs: TIMEOUT_MS, clock: systemClock });
  await setup.simpleQuery(SCHEMA);
  await setup.end();
  const floor = await Floor.open(c, 'floor-raw');
  closers.push(() => floor.close());
  const wire = await WireConnection.connect({ ...c, timeoutMs: TIMEOUT_MS, clock: systemClock, parameters: { statement_timeout: String(TIMEOUT_MS) } });
  closers.push(() => wire.end());
  await wire.prepare([LOCK_AND_MINT, UNLOCK, TOKEN]);
  const wireKey = advisoryKey('floor-wire').toString();
  // The pair's two calls encoded once, as the session lock keeps them per resource.
  const wireMint = new EncodedCall(LOCK_AND_MINT, [wireKey, 'floor-wire', '0']);
  const wireUnlock = new EncodedCall(UNLOCK, [wireKey]);
  const lock = new PostgresSessionLock({ connection: c, statementTimeoutMs: TIMEOUT_MS });
  closers.push(() => lock.close());
  tmp = await mkdtemp(join(os.tmpdir(), 'lockcheck-floor-'));
  const script = join(tmp, 'same.sql');
  const sub = (s: string, names: string[]): string => s.trim().replace(/\$(\d+)/g, (_, n: string) => `:${names[Number(n) - 1]}`);
  await writeFile(script, `\\set key 7600000\n\\set resource 7600000\n\\set base 0\n${sub(TRY_LOCK_AND_MINT, ['key', 'resource', 'base'])};\n${sub(UNLOCK_SQL, ['key'])};\n`);
  const until = async (ms: number, pair: () => Promise<boolean>): Promise<number> => {
    let n = 0;
    for (const deadline = performance.now() + ms; performance.now() < deadline; ) if (await pair()) n++;
    return n;
  };
  const sides: { id: string; label: string; measure: () => Promise<Result> }[] = [
    { id: 'floor', label: 'Node floor: the two calls as bytes, written from the read callback', measure: () => measureNode((ms) => floor.run(ms)) },
    {
      id: 'wire',
      label: 'lockcheck bare wire client, the same two statements (encoded once, send)',
      measure: () => measureNode((ms) => until(ms, async () => (await wire.send(wireMint)).length === 1 && (await wire.send(wireUnlock))[0]?.[0] === 't')),
    },
    {
      id: 'session',
      label: 'lockcheck PostgresSessionLock',
      measure: () =>
        measureNode((ms) =>
          until(ms, async () => {
            const r = await lock.acquire('floor-session');
            if (r.kind !== 'granted') return false;
            await lock.release(r.lease);
            return true;
          }),
        ),
    },
    { id: 'pgbench', label: 'pgbench -M prepared, the same SQL (libpq)', measure: () => measurePgbench(server, script) },
  ];
  const results = new Map<string, Result[]>(sides.map((s) => [s.id, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < sides.length; k++) {
      const s = sides[(k + round) % sides.length]!;
      const r = await s.measure();
      results.get(s.id)!.push(r);
      log(`  round ${round + 1}/${ROUNDS} ${s.id}: wall ${r.wallUs.toFixed(1)} µs, client ${r.clientUs.toFixed(1)} µs per pair · load ${os.loadavg()[0]!.toFixed(2)}`);
    }
  }
  // Each of the floor's pairs must have been a grant (it mints) and not an error.
  const minted = Number((await wire.call(TOKEN, ['floor-raw']))[0]?.[0]);
  if (minted !== floor.total) throw new Error(`the floor ran ${floor.total} pairs but minted ${minted} tokens: its calls did not all succeed`);
  const med = (id: string, f: (r: Result) => number): number => median(results.get(id)!.map(f));
  out(`| per acquire + release pair, 1 client (${new Date().toISOString()}, ${ROUNDS} interleaved rounds of ${seconds} s, medians, and the quietest round; load at end ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}) | pairs/s | wall µs | client CPU µs | quietest round: wall, client CPU µs |`);
  out('|---|---:|---:|---:|---:|');
  for (const s of sides) {
    const wall = med(s.id, (r) => r.wallUs);
    // On a shared machine a round can run 2 to 5 times slower than the next: the quietest shows what each costs undisturbed.
    const best = results.get(s.id)!.reduce((a, b) => (b.wallUs < a.wallUs ? b : a));
    out(`| ${s.label} | ${Math.round(1e6 / wall).toLocaleString('en-US')} | ${wall.toFixed(1)} | ${med(s.id, (r) => r.clientUs).toFixed(1)} | ${best.wallUs.toFixed(1)}, ${best.clientUs.toFixed(1)} |`);
  }
} finally {
  for (const close of closers) await Promise.resolve(close()).catch(() => undefined);
  await stopAllPostgresServers();
  if (tmp !== null) await rm(tmp, { recursive: true, force: true });
}
