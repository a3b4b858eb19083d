import { expect } from 'vitest';
import { TimeoutError, UnavailableError } from '../../impl/errors.ts';
import type { Lease } from '../../impl/lease.ts';
import type { AcquireResult } from '../../impl/leaseLock.ts';
import { LockNotAcquiredError, type UsableLock, using } from '../../impl/using.ts';
import { activeResources, backToBaseline as backWithin, type Resources } from './resources.ts';

/**
 * Helpers of the black-hole tests (test/impl/blackhole.*.test.ts): a server
 * paused with SIGSTOP keeps its TCP connections open and answers nothing, and
 * every call of a lock client or fenced store must still settle within its
 * configured timeout, typed, and leave no handle behind once closed. The
 * bounds are generous (a loaded 2-core machine): the tests say "settles, with
 * the right type", never how fast.
 */

/** How one call settled: its value or its error, and the real time it took. */
export type Settled<T> = { readonly ok: true; readonly value: T; readonly ms: number } | { readonly ok: false; readonly error: unknown; readonly ms: number };

/** `p`'s outcome, failing the test if it has not settled within `boundMs` of real time (a hang). */
export async function settles<T>(what: string, p: Promise<T>, boundMs: number): Promise<Settled<T>> {
  const start = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: still unsettled after ${boundMs} ms (hangs)`)), boundMs);
  });
  try {
    return await Promise.race([
      p.then(
        (value): Settled<T> => ({ ok: true, value, ms: performance.now() - start }),
        (error: unknown): Settled<T> => ({ ok: false, error, ms: performance.now() - start }),
      ),
      hung,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** The error `p` rejects with within `boundMs` (fails the test if it resolves or hangs). */
export async function rejectsWithin(what: string, p: Promise<unknown>, boundMs: number): Promise<unknown> {
  const s = await settles(what, p, boundMs);
  if (s.ok) throw new Error(`${what}: expected a rejection, got ${JSON.stringify(s.value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}`);
  return s.error;
}

/** The value `p` resolves to within `boundMs` (fails the test if it rejects or hangs). */
export async function resolvesWithin<T>(what: string, p: Promise<T>, boundMs: number): Promise<T> {
  const s = await settles(what, p, boundMs);
  if (!s.ok) throw new Error(`${what}: expected a value, got ${String(s.error)}`, { cause: s.error });
  return s.value;
}

/**
 * The baseline to come back to: the active resources once they stop changing
 * (the same on 5 polls in a row, 20 ms apart; at most 2 s), so that a socket
 * of the setup still closing is not counted in it and a leak then hidden.
 */
export async function steadyResources(): Promise<Resources> {
  const deadline = performance.now() + 2000;
  const text = (m: Resources): string => JSON.stringify([...m].sort(([a], [b]) => a.localeCompare(b)));
  let last = activeResources();
  let same = 0;
  while (same < 5 && performance.now() < deadline) {
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
    const now = activeResources();
    same = text(now) === text(last) ? same + 1 : 0;
    last = now;
  }
  return last;
}

/**
 * resources.ts's backToBaseline with the black-hole tests' bound: whatever the
 * client opened (sockets, timers) is gone within `boundMs`, or the test fails
 * naming the kinds still above the baseline.
 */
export function backToBaseline(baseline: Resources, boundMs = 5000): Promise<void> {
  return backWithin(baseline, 'what the client opened', boundMs);
}

/** How long a test's setup may keep trying on the live server before its fault: a loaded machine, not the outage. */
export const SETUP_BOUND_MS = 30_000;

/**
 * A call that sets a test up on the live server, before its fault. The
 * clients under test carry the outage's short timeouts, which a loaded
 * machine can outlast against a healthy server (a connect, a TLS handshake,
 * a JVM's pause): such a call is made again while it answers what `wanted`
 * refuses or throws a TimeoutError or UnavailableError, for up to
 * SETUP_BOUND_MS, each time on a fresh name (`name`, `name-1`, ...: a reply
 * given up on may still have taken the last one, a key set or a token
 * accepted). Returns the value and the name it was made on; fails naming
 * every try. Any other error is the test's.
 */
export async function beforeTheFault<T>(what: string, name: string, call: (name: string) => Promise<T>, wanted: (value: T) => boolean): Promise<{ readonly value: T; readonly name: string }> {
  const deadline = performance.now() + SETUP_BOUND_MS;
  const tried: string[] = [];
  for (let n = 0; ; n++) {
    const at = n === 0 ? name : `${name}-${n}`;
    try {
      const value = await call(at);
      if (wanted(value)) return { value, name: at };
      tried.push(`${at}: ${JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v))}`);
    } catch (e) {
      if (!(e instanceof TimeoutError || e instanceof UnavailableError)) throw e;
      tried.push(`${at}: ${String(e)}`);
    }
    if (performance.now() >= deadline) expect.fail(`${what}: not done on the live server within ${SETUP_BOUND_MS} ms: ${tried.join('; ')}`);
  }
}

/** A grant before the fault (beforeTheFault): the lease, and the resource it holds. */
export async function grantedBeforeTheFault(what: string, resource: string, acquire: (resource: string) => Promise<AcquireResult>): Promise<{ readonly lease: Lease; readonly resource: string }> {
  const { value, name } = await beforeTheFault(what, resource, acquire, (r) => r.kind === 'granted');
  if (value.kind !== 'granted') throw new Error('unreachable: beforeTheFault returns a grant');
  return { lease: value.lease, resource: name };
}

/** A fenced write accepted before the fault (beforeTheFault), on `key` or a fresh one: the key it landed on. */
export async function acceptedBeforeTheFault(what: string, key: string, write: (key: string) => Promise<{ readonly kind: string }>): Promise<string> {
  return (await beforeTheFault(what, key, write, (r) => r.kind === 'accepted')).name;
}

/**
 * using() whose fn brings the fault: run again on a fresh resource (as
 * beforeTheFault) while its acquire, made on the live server before fn,
 * gave up (LockNotAcquiredError) and fn never ran. `run` is the whole call
 * on one resource; `ran` says whether fn started.
 */
export async function usingBeforeTheFault<T>(resource: string, run: (resource: string) => Promise<Settled<T>>, ran: () => boolean): Promise<Settled<T>> {
  const deadline = performance.now() + SETUP_BOUND_MS;
  for (let n = 0; ; n++) {
    const outcome = await run(n === 0 ? resource : `${resource}-${n}`);
    if (ran() || outcome.ok || !(outcome.error instanceof LockNotAcquiredError) || performance.now() >= deadline) return outcome;
  }
}

/**
 * using() whose fn brings the fault (`fault()`), then waits for the lease's
 * signal and returns its reason: the lease lost at its deadline once the
 * extensions fail. Made again on a fresh resource while the acquire before
 * fn gave up on the live server (usingBeforeTheFault); `ran` says whether fn
 * started (and so the fault came).
 */
export async function lostUnderUsing(lock: UsableLock, resource: string, ttlMs: number, fault: () => Promise<void> | void, boundMs: number): Promise<{ readonly outcome: Settled<unknown>; readonly ran: boolean }> {
  let ran = false;
  const outcome = await usingBeforeTheFault(
    resource,
    (r) =>
      settles(
        'using',
        using(lock, r, { ttlMs }, async (signal) => {
          ran = true;
          await fault();
          // Lost already (a loaded machine can spend the whole ttl before fn runs): an 'abort' listener added now never fires.
          if (!signal.aborted) await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
          return signal.reason as unknown;
        }),
        boundMs,
      ),
    () => ran,
  );
  return { outcome, ran };
}

/**
 * The bytes the server sends for a connect and a first call whose whole
 * answer came (granted, accepted), on `proxy` passing everything: `open()`
 * makes a client, closed after its call. Tried again on a fresh resource
 * while a loaded machine outlasts the short timeout (beforeTheFault).
 */
export async function uncutBytes(proxy: CutProxy, resource: string, open: () => { run(resource: string): Promise<unknown>; close(): Promise<void> | void }, boundMs: number): Promise<number> {
  proxy.cutAfter = Number.POSITIVE_INFINITY;
  const { value } = await beforeTheFault(
    'uncut',
    resource,
    async (r) => {
      proxy.served = 0;
      const whole = open();
      const first = await settles('uncut', whole.run(r), boundMs);
      await whole.close();
      proxy.dropAll();
      const kind = first.ok ? (first.value as { kind?: unknown }).kind : undefined;
      return kind === 'granted' || kind === 'accepted' ? proxy.served : 0;
    },
    (served) => served > 0,
  );
  return value;
}

/**
 * A waiter (an acquire or withLock waiting on a held lock) made on the live
 * server before the fault: polled until `inLine()` says it stands in line.
 * Its own connect and request are setup too, so one that settled first (a
 * loaded machine outlasting its short timeout) is replaced by `again()`, for
 * up to SETUP_BOUND_MS. Returns the waiter that stands in line, wrapped (an
 * async function's promise would adopt it, waiting for it to settle).
 */
export async function waiterInLine<T>(what: string, first: Promise<T>, inLine: () => Promise<boolean>, again: () => Promise<T>): Promise<{ readonly waiting: Promise<T> }> {
  const deadline = performance.now() + SETUP_BOUND_MS;
  for (let waiting = first; ; waiting = again()) {
    let over = false;
    waiting.then(
      () => (over = true),
      () => (over = true),
    );
    await until(what, async () => over || (await inLine()));
    if (!over) return { waiting };
    if (performance.now() >= deadline) expect.fail(`${what}: no waiter stood in line within ${SETUP_BOUND_MS} ms`);
  }
}

/** Waits (polled, bounded) until `check` holds. */
export async function until(what: string, check: () => boolean | Promise<boolean>, boundMs = 10_000): Promise<void> {
  const deadline = performance.now() + boundMs;
  while (!(await check())) {
    if (performance.now() > deadline) expect.fail(`${what}: not within ${boundMs} ms`);
    await new Promise<void>((resolve) => setTimeout(resolve, 20));
  }
}

/** Whether every thread of process `pid` is stopped (state T): kill() returns before a multi-threaded process has stopped. */
export async function allStopped(pid: number): Promise<boolean> {
  const { readdir, readFile } = await import('node:fs/promises');
  const tasks = await readdir(`/proc/${pid}/task`);
  const states = await Promise.all(tasks.map(async (t) => (await readFile(`/proc/${pid}/task/${t}/stat`, 'utf8')).replace(/^.*\) /s, '')[0]));
  return states.every((s) => s === 'T' || s === 't');
}

/**
 * A TCP proxy that black-holes each connection after the server has sent it
 * `cutAfter` bytes: the bytes past that point, and everything the client
 * sends from then on, are dropped, and both sockets stay open (no FIN, no
 * RST), so that a client meets a server gone silent at any chosen point of
 * its handshake or of a reply. `cutAfter` is read as each connection opens.
 */
export class CutProxy {
  cutAfter = Number.POSITIVE_INFINITY;
  /** Bytes the server sent on the connections so far, before any cut (to measure a handshake). */
  served = 0;
  readonly #server: import('node:net').Server;
  readonly #sockets = new Set<import('node:net').Socket>();
  private constructor(server: import('node:net').Server) {
    this.#server = server;
  }

  static async start(target: { readonly host: string; readonly port: number }): Promise<CutProxy> {
    const net = await import('node:net');
    const server = net.createServer();
    const proxy = new CutProxy(server);
    server.on('connection', (client) => {
      const upstream = net.connect(target.port, target.host);
      let left = proxy.cutAfter;
      let cut = left <= 0;
      for (const s of [client, upstream]) {
        proxy.#sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          proxy.#sockets.delete(s);
          // A side that closes before any cut closes the other, as a plain link does; after the cut, the server's close
          // does not reach the client (a black hole), but the client's still ends the server side (this process's own
          // socket to the server, which the tests count among the active resources).
          if (!cut || s === client) (s === client ? upstream : client).destroy();
        });
      }
      client.on('data', (chunk: Buffer) => {
        if (!cut) upstream.write(chunk);
      });
      upstream.on('data', (chunk: Buffer) => {
        if (cut) return;
        const passed = chunk.subarray(0, Math.max(0, Math.min(chunk.length, left)));
        proxy.served += chunk.length;
        left -= passed.length;
        if (passed.length > 0) client.write(passed);
        if (left <= 0) cut = true;
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.#server.address() as import('node:net').AddressInfo).port;
  }

  /** Destroys every connection it holds (the clients see them reset). */
  dropAll(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.dropAll();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }
}

/** Points to cut at in a stream of `total` bytes: every byte of the first `first`, then about `count` more spread to the end. */
export function cutPoints(total: number, first = 24, count = 16): number[] {
  const points = new Set<number>();
  for (let i = 0; i <= Math.min(total, first); i++) points.add(i);
  for (let i = 1; i <= count; i++) points.add(Math.round((total * i) / (count + 1)));
  points.add(Math.max(0, total - 1));
  return [...points].filter((n) => n < total).sort((a, b) => a - b);
}
